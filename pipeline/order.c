/* pipeline/order.c - Feistel permutation with cycle-walking (Black & Rogaway's construction) keyed by
 * (seed, epoch). Pure; thread-safe. */
#include "pipeline/order.h"

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
