/* dispatcher/id_index.c - the state tables' id -> position map (dispatcher/id_index.h): linear probing over a
 * power-of-two table at most half full, Fibonacci hashing of the id. Pure; the caller's lock. */
#include "dispatcher/id_index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static size_t slot_of(const struct id_index *x, uint64_t id)
{
    return (size_t)((id * 0x9e3779b97f4a7c15ull) >> 17) & x->mask;
}

int id_index_init(struct id_index *x, int cap)
{
    size_t slots = 16;
    while (slots < 2 * (size_t)(cap > 0 ? cap : 1))
        slots *= 2;
    x->ids = calloc(slots, sizeof *x->ids);
    x->at = calloc(slots, sizeof *x->at);
    x->mask = slots - 1;
    if (!x->ids || !x->at) {
        id_index_free(x);
        return -ENOMEM;
    }
    return 0;
}

void id_index_free(struct id_index *x)
{
    free(x->ids);
    free(x->at);
    x->ids = NULL;
    x->at = NULL;
}

void id_index_rebuild(struct id_index *x, const void *table, size_t stride, size_t offset, int n)
{
    memset(x->ids, 0, (x->mask + 1) * sizeof *x->ids);
    for (int i = 0; i < n; i++) {
        uint64_t id;
        memcpy(&id, (const char *)table + (size_t)i * stride + offset, sizeof id);
        size_t k = slot_of(x, id);
        while (x->ids[k])
            k = (k + 1) & x->mask;
        x->ids[k] = id;
        x->at[k] = i;
    }
}

int id_index_find(const struct id_index *x, uint64_t id)
{
    if (!id)
        return -1;
    for (size_t k = slot_of(x, id);; k = (k + 1) & x->mask) {
        if (x->ids[k] == id)
            return x->at[k];
        if (!x->ids[k])
            return -1;
    }
}
