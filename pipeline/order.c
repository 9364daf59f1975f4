/* pipeline/order.c - Feistel permutation with cycle-walking (Black & Rogaway's construction) keyed by
 * (seed, epoch), and ranks' shares of it. Pure; thread-safe. */
#include "pipeline/order.h"

#include <errno.h>
#include <stdlib.h>

#include "lib/rng.h"

#define ROUNDS 6

void spw_order_init(struct spw_order *o, int64_t n, bool shuffle, uint64_t seed)
{
    o->n = n;
    o->shuffle = shuffle;
    o->seed = seed;
    int bits = 1;
    while (bits < 62 && ((int64_t)1 << bits) < n)
        bits++;
    o->half_bits = (bits + 1) / 2;
}

static uint64_t feistel(const struct spw_order *o, uint64_t key, uint64_t x)
{
    const int hb = o->half_bits;
    const uint64_t mask = ((uint64_t)1 << hb) - 1;
    uint64_t l = x >> hb, r = x & mask;
    for (int i = 0; i < ROUNDS; i++) {
        uint64_t f = spw_mix64(key ^ ((uint64_t)i << 56) ^ r) & mask;
        uint64_t t = l ^ f;
        l = r;
        r = t;
    }
    return (l << hb) | r;
}

int64_t spw_order_at(const struct spw_order *o, uint64_t epoch, int64_t pos)
{
    if (!o->shuffle || o->n <= 1)
        return pos;
    uint64_t key = spw_mix64(o->seed ^ spw_mix64(epoch ^ 0x6f72646572ull));
    uint64_t x = (uint64_t)pos;
    /* Cycle-walk: the domain is at most 4n, so this ends after few steps on average. */
    do {
        x = feistel(o, key, x);
    } while (x >= (uint64_t)o->n);
    return (int64_t)x;
}

int64_t spw_rank_view_owned(const struct spw_rank_view *v, int rank)
{
    const int64_t splits = (v->n + v->split - 1) / v->split;
    if (rank >= splits)
        return 0;
    const int64_t mine = (splits - rank + v->world - 1) / v->world;      /* splits rank, rank + world, ... */
    const int64_t last = rank + (mine - 1) * v->world;                  /* the last one may be short */
    const int64_t last_len = last == splits - 1 ? v->n - last * v->split : v->split;
    return (mine - 1) * v->split + last_len;
}

int spw_rank_view_init(struct spw_rank_view *v, int64_t n, int rank, int world, int64_t split, bool pad)
{
    if (world < 1 || rank < 0 || rank >= world || split < 1 || n < 1)
        return -EINVAL;
    *v = (struct spw_rank_view){.n = n, .split = split, .rank = rank, .world = world};
    if (world == 1) {
        v->own = v->len = n;
        return 0;
    }
    int64_t most = 0, least = INT64_MAX;
    for (int r = 0; r < world; r++) {
        const int64_t o = spw_rank_view_owned(v, r);
        most = o > most ? o : most;
        least = o < least ? o : least;
    }
    v->own = spw_rank_view_owned(v, rank);
    if (least == 0)
        return -EINVAL;
    v->len = pad ? most : least;
    return 0;
}

int64_t spw_rank_view_pos(const struct spw_rank_view *v, int64_t i)
{
    if (v->world == 1)
        return i;
    i %= v->own;                                /* padding repeats the rank's first positions */
    const int64_t k = i / v->split, off = i % v->split;
    return (v->rank + k * v->world) * v->split + off;
}

int64_t spw_rank_view_index(const struct spw_rank_view *v, int64_t pos)
{
    if (pos < 0 || pos >= v->n)
        return -1;
    if (v->world == 1)
        return pos;
    const int64_t split = pos / v->split;
    if (split % v->world != v->rank)
        return -1;
    return split / v->world * v->split + pos % v->split;
}

int64_t spw_order_rest(int64_t n, int world, int64_t split, bool pad, const uint8_t *const *delivered,
                       const size_t *bytes, const int64_t *given, int64_t *out)
{
    uint8_t *seen = n > 0 ? calloc((size_t)(n + 7) / 8, 1) : NULL;
    if (!seen)
        return n > 0 ? -ENOMEM : -EINVAL;
    for (int r = 0; r < world; r++) {
        struct spw_rank_view v;
        if (spw_rank_view_init(&v, n, r, world, split, pad) != 0) {
            free(seen);
            return -EINVAL;
        }
        const int64_t places = v.own > v.len ? v.own : v.len;
        if (delivered[r] && bytes[r] != (size_t)(places + 7) / 8) {
            free(seen);
            return -EINVAL;
        }
        for (int64_t p = 0; p < places; p++) {
            const bool given_p = delivered[r] ? (delivered[r][p >> 3] >> (p & 7)) & 1 : p < given[r];
            if (given_p) {
                const int64_t pos = spw_rank_view_pos(&v, p);
                seen[pos >> 3] |= (uint8_t)(1u << (pos & 7));
            }
        }
    }
    int64_t k = 0;
    for (int64_t pos = 0; pos < n; pos++)
        if (!((seen[pos >> 3] >> (pos & 7)) & 1))
            out[k++] = pos;
    free(seen);
    return k;
}
