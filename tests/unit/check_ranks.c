/* tests/unit/check_ranks.c - data-parallel ranks' shares of an epoch (pipeline/order.c's rank view): shares
 * are disjoint and cover the epoch, every rank gets as many positions (padding repeats a short rank's first
 * positions; drop leaves a long rank's last ones out), whole splits round robin as the dispatcher assigns.
 * The executor running one rank is tested through the Python loader (tests/python/test_ranks.py). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "pipeline/order.h"

/* Every (n, world, split) below: the ranks' owned positions are disjoint and together are [0, n); every
 * rank's epoch has the same length, the largest share with pad and the smallest with drop. */
START_TEST(test_ranks_partition_the_epoch)
{
    static const int64_t ns[] = {1, 7, 64, 160, 1000, 1001};
    static const int worlds[] = {1, 2, 3, 4};
    static const int64_t splits[] = {1, 16, 64};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof worlds / sizeof worlds[0]; b++)
            for (size_t c = 0; c < sizeof splits / sizeof splits[0]; c++) {
                const int64_t n = ns[a], split = splits[c];
                const int world = worlds[b];
                if ((n + split - 1) / split < world)
                    continue;                   /* a rank would own nothing: refused (next test) */
                int *owner = calloc((size_t)n, sizeof *owner);
                int64_t most = 0, least = n, len_pad = -1, len_drop = -1;
                for (int r = 0; r < world; r++) {
                    struct spw_rank_view pad, drop;
                    ck_assert_int_eq(spw_rank_view_init(&pad, n, r, world, split, true), 0);
                    ck_assert_int_eq(spw_rank_view_init(&drop, n, r, world, split, false), 0);
                    ck_assert(len_pad < 0 || pad.len == len_pad);       /* as many positions per rank */
                    ck_assert(len_drop < 0 || drop.len == len_drop);
                    len_pad = pad.len, len_drop = drop.len;
                    for (int64_t i = 0; i < pad.own; i++) {
                        const int64_t pos = spw_rank_view_pos(&pad, i);
                        ck_assert(pos >= 0 && pos < n);
                        ck_assert_int_eq(owner[pos], 0);                /* disjoint */
                        ck_assert_int_eq(spw_rank_view_index(&pad, pos), i);    /* the inverse */
                        ck_assert_int_eq(spw_rank_view_index(&pad, pos), spw_rank_view_index(&drop, pos));
                        owner[pos] = r + 1;
                    }
                    for (int64_t p = 0; p < n; p++)                    /* other ranks' positions */
                        ck_assert(owner[p] == r + 1 || spw_rank_view_index(&pad, p) == -1);
                    for (int64_t i = pad.own; i < pad.len; i++)         /* padding repeats the first ones */
                        ck_assert_int_eq(spw_rank_view_pos(&pad, i), spw_rank_view_pos(&pad, i - pad.own));
                    most = pad.own > most ? pad.own : most;
                    least = pad.own < least ? pad.own : least;
                }
                for (int64_t p = 0; p < n; p++)
                    ck_assert_msg(owner[p] != 0, "n=%lld world=%d split=%lld: position %lld unowned", (long long)n,
                                  world, (long long)split, (long long)p);
                ck_assert_int_eq(len_pad, most);
                ck_assert_int_eq(len_drop, least);
                free(owner);
            }
}
END_TEST

START_TEST(test_ranks_refuse_bad_shapes)
{
    struct spw_rank_view v;
    ck_assert_int_eq(spw_rank_view_init(&v, 100, 2, 2, 16, true), -EINVAL);     /* rank outside the world */
    ck_assert_int_eq(spw_rank_view_init(&v, 100, 0, 0, 16, true), -EINVAL);
    ck_assert_int_eq(spw_rank_view_init(&v, 100, 0, 2, 0, true), -EINVAL);
    ck_assert_int_eq(spw_rank_view_init(&v, 100, 0, 3, 64, true), -EINVAL);     /* 2 splits, 3 ranks */
    ck_assert_int_eq(spw_rank_view_init(&v, 100, 1, 1, 64, true), -EINVAL);
}
END_TEST

/* Split-granular and round robin, as the dispatcher hands splits to ranks (split s -> rank s mod world). */
START_TEST(test_ranks_own_whole_splits_round_robin)
{
    struct spw_rank_view v;
    ck_assert_int_eq(spw_rank_view_init(&v, 160, 1, 2, 64, true), 0);       /* splits 64, 64, 32 */
    ck_assert_int_eq(v.own, 64);
    ck_assert_int_eq(v.len, 96);
    ck_assert_int_eq(spw_rank_view_pos(&v, 0), 64);
    ck_assert_int_eq(spw_rank_view_pos(&v, 63), 127);
    ck_assert_int_eq(spw_rank_view_pos(&v, 64), 64);                         /* padding */
    ck_assert_int_eq(spw_rank_view_init(&v, 160, 0, 2, 64, false), 0);
    ck_assert_int_eq(v.own, 96);
    ck_assert_int_eq(v.len, 64);
    ck_assert_int_eq(spw_rank_view_pos(&v, 64), 128);
}
END_TEST

/* The rest of an epoch stopped mid-way: exactly the positions no rank delivered, whether ranks give a prefix
 * count or a bitmap (padding places count as their repeated position); a bitmap of another length is refused. */
START_TEST(test_ranks_rest_of_an_epoch)
{
    const int64_t n = 1000, split = 16;
    const int world = 3;
    int64_t given[3] = {100, 100, 100}, rest[1000];
    const uint8_t *none[3] = {NULL, NULL, NULL};
    size_t bytes[3] = {0, 0, 0};
    const int64_t k = spw_order_rest(n, world, split, true, none, bytes, given, rest);
    int *hits = calloc((size_t)n, sizeof *hits);
    for (int r = 0; r < world; r++) {
        struct spw_rank_view v;
        ck_assert_int_eq(spw_rank_view_init(&v, n, r, world, split, true), 0);
        for (int64_t p = 0; p < given[r]; p++)
            hits[spw_rank_view_pos(&v, p)]++;
    }
    int64_t want = 0;
    for (int64_t pos = 0; pos < n; pos++)
        want += hits[pos] == 0;
    ck_assert_int_eq(k, want);
    ck_assert_int_eq(k, n - 300);
    for (int64_t i = 0; i < k; i++) {
        ck_assert_int_eq(hits[rest[i]], 0);
        ck_assert(i == 0 || rest[i] > rest[i - 1]);             /* ascending, no repeats */
    }
    /* Bitmaps: rank 2 (328 positions, 336 places) delivered its places from 300 on, padding included: its
     * positions 300..327 and, through the padding places 328..335, its first 8. */
    struct spw_rank_view v2;
    ck_assert_int_eq(spw_rank_view_init(&v2, n, 2, world, split, true), 0);
    ck_assert_int_eq(v2.own, 328);
    ck_assert_int_eq(v2.len, 336);
    uint8_t *bits = calloc(336 / 8, 1);
    for (int64_t p = 300; p < 336; p++)
        bits[p >> 3] |= (uint8_t)(1u << (p & 7));
    const uint8_t *maps[3] = {NULL, NULL, bits};
    size_t lens[3] = {0, 0, 336 / 8};
    int64_t zero[3] = {0, 0, 0};
    ck_assert_int_eq(spw_order_rest(n, world, split, true, maps, lens, zero, rest), n - 36);
    for (int64_t i = 0; i < n - 36; i++)
        ck_assert(spw_rank_view_index(&v2, rest[i]) < 0 || (spw_rank_view_index(&v2, rest[i]) >= 8 &&
                                                            spw_rank_view_index(&v2, rest[i]) < 300));
    lens[2]--;
    ck_assert_int_eq(spw_order_rest(n, world, split, true, maps, lens, zero, rest), -EINVAL);
    free(bits);
    free(hits);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ranks");
    TCase *tc = tcase_create("ranks");
    tcase_add_test(tc, test_ranks_partition_the_epoch);
    tcase_add_test(tc, test_ranks_refuse_bad_shapes);
    tcase_add_test(tc, test_ranks_own_whole_splits_round_robin);
    tcase_add_test(tc, test_ranks_rest_of_an_epoch);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
