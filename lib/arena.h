/* lib/arena.h - accounting for one fixed region of memory (the GPU arena, reserved once at start):
 * allocations are offsets into it, best fit from the free blocks, neighbours merged on free. It never grows;
 * an allocation that does not fit fails and the caller takes another path (the CPU). The arena holds no
 * pointer into the region, so it is tested without a device. Not thread-safe: the owner locks. */
#ifndef SPW_LIB_ARENA_H
#define SPW_LIB_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define SPW_ARENA_ALIGN 256     /* every offset and size is a multiple (cudaMalloc's own alignment) */

struct spw_arena;

struct spw_arena_stats {
    size_t capacity;            /* bytes the arena was made with (rounded down to SPW_ARENA_ALIGN) */
    size_t used, peak;          /* bytes handed out now / at most so far */
    size_t largest_free;        /* the biggest allocation that would succeed now */
    int64_t allocs, failures;   /* allocations that succeeded / did not fit */
};

/* A new arena of capacity bytes. Returns 0 or -ENOMEM (host memory) / -EINVAL (capacity under one unit). */
int spw_arena_create(size_t capacity, struct spw_arena **out);
void spw_arena_destroy(struct spw_arena *a);
/* Reserve bytes (rounded up to SPW_ARENA_ALIGN, at least one unit) at *off. Returns 0, or -ENOSPC when no
 * free block is large enough (counted in failures), or -ENOMEM (host memory for the block list). */
int spw_arena_alloc(struct spw_arena *a, size_t bytes, size_t *off);
/* Give back the allocation at off. Returns 0, or -EINVAL for an offset the arena did not hand out (or gave
 * back already). */
int spw_arena_free(struct spw_arena *a, size_t off);
void spw_arena_stats(const struct spw_arena *a, struct spw_arena_stats *st);

/* The arena's size from a budget: "N" bytes (with an optional K/M/G/Ki/Mi/Gi suffix), or a fraction in
 * (0, 1] of free_bytes ("0.5"). Never more than free_bytes. Returns 0, or SPW_ESPEC with the reason in err
 * (malformed, zero, a fraction over 1, or more bytes than are free). */
int spw_arena_budget(const char *text, size_t free_bytes, size_t *out, char *err, size_t errlen);

#endif
