/* dispatcher/id_index.h - an id -> array position map for the state's worker and job tables (open addressing,
 * twice their capacity), so that a heartbeat finds its worker and jobs in O(1) instead of scanning. The tables
 * move entries when one is removed, so the owner rebuilds the map after each insert or removal (rare next to
 * lookups). Pure data; the state's thread model (its caller's lock). */
#ifndef SPW_DISPATCHER_ID_INDEX_H
#define SPW_DISPATCHER_ID_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct id_index {
    uint64_t *ids;          /* 0: an empty slot (ids start at 1) */
    int *at;
    size_t mask;            /* slots - 1 (a power of two) */
};

/* Room for `cap` ids. Returns 0 or -ENOMEM. */
int id_index_init(struct id_index *x, int cap);
void id_index_free(struct id_index *x);
/* Empty it, then add id_of(table, i) -> i for i < n: `stride` bytes between entries, the id at `offset`. */
void id_index_rebuild(struct id_index *x, const void *table, size_t stride, size_t offset, int n);
/* The position of id, or -1. */
int id_index_find(const struct id_index *x, uint64_t id);

#endif
