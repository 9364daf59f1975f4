/* pipeline/order.h - epoch order: a seeded bijective permutation of [0, n) per epoch (a Feistel network
 * with cycle-walking: O(1) memory, any producer computes any position), and splits as runs of it.
 * Pure functions; thread-safe. */
#ifndef SPW_PIPELINE_ORDER_H
#define SPW_PIPELINE_ORDER_H

#include <stdbool.h>
#include <stdint.h>

struct spw_order {
    int64_t n;
    bool shuffle;
    uint64_t seed;
    int half_bits;          /* the Feistel domain is 2^(2*half_bits) >= n */
};

void spw_order_init(struct spw_order *o, int64_t n, bool shuffle, uint64_t seed);
/* The sample index at position pos (0 <= pos < n) of epoch e. Identity when shuffle is off. */
int64_t spw_order_at(const struct spw_order *o, uint64_t epoch, int64_t pos);

#endif
