/* pipeline/order.h - epoch order: a seeded bijective permutation of [0, n) per epoch (a Feistel network
 * with cycle-walking: O(1) memory, any producer computes any position), and splits as runs of it.
 * Pure functions; thread-safe. */
#ifndef SPW_PIPELINE_ORDER_H
#define SPW_PIPELINE_ORDER_H

#include <stdbool.h>
#include <stddef.h>
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

/* A data-parallel rank's share of every epoch (DESIGN §6): the order's positions are cut into splits of
 * `split` positions; rank r of `world` owns splits r, r + world, r + 2 world, ... and their positions, in
 * that order, are its epoch. Ranks own different numbers of positions when the splits do not divide evenly;
 * so that every rank gets as many batches, each rank's epoch is `len` positions: the largest share, the
 * short ranks repeating their first positions (pad, as DistributedSampler pads), or the smallest share,
 * the long ranks leaving their last positions out (drop). world 1: the whole order, unchanged. */
struct spw_rank_view {
    int64_t n, split;
    int rank, world;
    int64_t own;            /* positions this rank owns */
    int64_t len;            /* positions in this rank's epoch (with padding, or after dropping) */
};

#define SPW_DEFAULT_SPLIT 64   /* samples per split when nobody says (the dispatcher's default too) */

/* Returns 0, or -EINVAL for rank outside [0, world), world < 1, split < 1 or a rank owning nothing (more
 * ranks than splits). */
int spw_rank_view_init(struct spw_rank_view *v, int64_t n, int rank, int world, int64_t split, bool pad);
/* The order position of this rank's i-th position (0 <= i < len). */
int64_t spw_rank_view_pos(const struct spw_rank_view *v, int64_t i);
/* This rank's index (0 <= i < own) of order position pos, or -1 when another rank owns it. */
int64_t spw_rank_view_index(const struct spw_rank_view *v, int64_t pos);
/* Positions rank r of this view's world owns. */
int64_t spw_rank_view_owned(const struct spw_rank_view *v, int rank);

/* The rest of an epoch after a data-parallel run of `world` ranks stopped in it (a resume onto another world
 * size): the order positions no rank delivered. Rank r's views (n, r, world, split, pad) and its delivered
 * places: the bitmap delivered[r] over max(own, len) places (NULL: its first given[r] places). Writes
 * them ascending into out (n slots) and returns their count, or -EINVAL (a view that cannot be made, or a
 * bitmap of another length: bytes[r]) or -ENOMEM. */
int64_t spw_order_rest(int64_t n, int world, int64_t split, bool pad, const uint8_t *const *delivered,
                       const size_t *bytes, const int64_t *given, int64_t *out);

#endif
