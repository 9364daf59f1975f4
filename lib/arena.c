/* lib/arena.c - best-fit accounting over a fixed region (see arena.h): a list of blocks sorted by offset,
 * each free or used, covering the region exactly. Not thread-safe: the owner locks. */
#include "lib/arena.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

struct block {
    size_t off, size;
    bool used;
};

struct spw_arena {
    struct block *b;
    int n, cap;
    struct spw_arena_stats st;
};

int spw_arena_create(size_t capacity, struct spw_arena **out)
{
    capacity -= capacity % SPW_ARENA_ALIGN;
    if (capacity == 0)
        return -EINVAL;
    struct spw_arena *a = calloc(1, sizeof *a);
    if (!a || !(a->b = malloc(sizeof *a->b * 16))) {
        free(a);
        return -ENOMEM;
    }
    a->cap = 16;
    a->n = 1;
    a->b[0] = (struct block){0, capacity, false};
    a->st.capacity = capacity;
    *out = a;
    return 0;
}

void spw_arena_destroy(struct spw_arena *a)
{
    if (a)
        free(a->b);
    free(a);
}

int spw_arena_alloc(struct spw_arena *a, size_t bytes, size_t *off)
{
    if (bytes > a->st.capacity) {
        a->st.failures++;
        return -ENOSPC;
    }
    const size_t units = bytes == 0 ? 1 : (bytes + SPW_ARENA_ALIGN - 1) / SPW_ARENA_ALIGN;
    const size_t need = units * SPW_ARENA_ALIGN;
    int best = -1;
    for (int i = 0; i < a->n; i++)
        if (!a->b[i].used && a->b[i].size >= need && (best < 0 || a->b[i].size < a->b[best].size))
            best = i;
    if (best < 0) {
        a->st.failures++;
        return -ENOSPC;
    }
    if (a->b[best].size > need) {           /* split: the rest stays free after it */
        if (a->n == a->cap) {
            struct block *nb = realloc(a->b, sizeof *nb * (size_t)a->cap * 2);
            if (!nb)
                return -ENOMEM;
            a->b = nb;
            a->cap *= 2;
        }
        memmove(&a->b[best + 2], &a->b[best + 1], sizeof *a->b * (size_t)(a->n - best - 1));
        a->b[best + 1] = (struct block){a->b[best].off + need, a->b[best].size - need, false};
        a->b[best].size = need;
        a->n++;
    }
    a->b[best].used = true;
    a->st.used += need;
    a->st.peak = a->st.used > a->st.peak ? a->st.used : a->st.peak;
    a->st.allocs++;
    *off = a->b[best].off;
    return 0;
}

static void remove_block(struct spw_arena *a, int i)
{
    memmove(&a->b[i], &a->b[i + 1], sizeof *a->b * (size_t)(a->n - i - 1));
    a->n--;
}

int spw_arena_free(struct spw_arena *a, size_t off)
{
    int lo = 0, hi = a->n - 1, i = -1;
    while (lo <= hi) {
        const int mid = (lo + hi) / 2;
        if (a->b[mid].off == off) {
            i = mid;
            break;
        }
        if (a->b[mid].off < off)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    if (i < 0 || !a->b[i].used)
        return -EINVAL;
    a->b[i].used = false;
    a->st.used -= a->b[i].size;
    if (i + 1 < a->n && !a->b[i + 1].used) {
        a->b[i].size += a->b[i + 1].size;
        remove_block(a, i + 1);
    }
    if (i > 0 && !a->b[i - 1].used) {
        a->b[i - 1].size += a->b[i].size;
        remove_block(a, i);
    }
    return 0;
}

void spw_arena_stats(const struct spw_arena *a, struct spw_arena_stats *st)
{
    *st = a->st;
    st->largest_free = 0;
    for (int i = 0; i < a->n; i++)
        if (!a->b[i].used && a->b[i].size > st->largest_free)
            st->largest_free = a->b[i].size;
}

int spw_arena_budget(const char *text, size_t free_bytes, size_t *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    const double v = text ? strtod(text, &end) : 0;
    if (!text || end == text || errno || !isfinite(v) || v <= 0)
        return spw_fail(err, errlen, SPW_ESPEC, "gpu_mem_budget \"%s\": not a positive size or fraction",
                        text ? text : "");
    const bool fraction = strchr(text, '.') && !*end;
    if (fraction) {
        if (v > 1)
            return spw_fail(err, errlen, SPW_ESPEC, "gpu_mem_budget %s: a fraction of free memory must be at "
                            "most 1 (bytes have no decimal point)", text);
        *out = (size_t)(v * (double)free_bytes);
        return 0;
    }
    double unit = 1;
    if (*end) {
        const char u = (char)toupper((unsigned char)*end);
        const bool binary = end[1] == 'i' || end[1] == 'I';
        const double base = binary ? 1024 : 1000;
        unit = u == 'K' ? base : u == 'M' ? base * base : u == 'G' ? base * base * base : 0;
        if (unit == 0 || end[1 + binary] != 0)
            return spw_fail(err, errlen, SPW_ESPEC, "gpu_mem_budget \"%s\": unknown unit (K, M, G, Ki, Mi, Gi)",
                            text);
    }
    const double bytes = v * unit;
    if (bytes > (double)free_bytes)
        return spw_fail(err, errlen, SPW_ESPEC, "gpu_mem_budget %s is more than the %.0f MiB free on the device",
                        text, (double)free_bytes / (1 << 20));
    *out = (size_t)bytes;
    return 0;
}
