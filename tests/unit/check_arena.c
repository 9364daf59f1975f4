/* tests/unit/check_arena.c - lib/arena.c: offsets aligned and never overlapping, best fit, neighbours merged
 * on free so the whole region comes back, bad frees refused, an allocation that does not fit fails and is
 * counted (never grows), a random alloc/free run checked against a byte map; and gpu_mem_budget parsing. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "lib/arena.h"
#include "lib/err.h"
#include "lib/rng.h"

#define U SPW_ARENA_ALIGN

START_TEST(test_arena_best_fit_and_merge)
{
    struct spw_arena *a;
    ck_assert_int_eq(spw_arena_create(10 * U + 17, &a), 0);     /* rounded down to 10 units */
    struct spw_arena_stats st;
    spw_arena_stats(a, &st);
    ck_assert_uint_eq(st.capacity, 10 * U);
    size_t o[5];
    ck_assert_int_eq(spw_arena_alloc(a, 1, &o[0]), 0);          /* 1 unit at 0 */
    ck_assert_int_eq(spw_arena_alloc(a, 3 * U, &o[1]), 0);      /* 3 units at 1 */
    ck_assert_int_eq(spw_arena_alloc(a, U + 1, &o[2]), 0);      /* 2 units at 4 */
    ck_assert_int_eq(spw_arena_alloc(a, 0, &o[3]), 0);          /* 1 unit at 6 */
    ck_assert(o[0] == 0 && o[1] == U && o[2] == 4 * U && o[3] == 6 * U);
    spw_arena_stats(a, &st);
    ck_assert_uint_eq(st.used, 7 * U);
    ck_assert_uint_eq(st.largest_free, 3 * U);
    /* freeing o[1] and o[0] merges a 4-unit hole at 0; with 3 units free at 7, a 3-unit request takes the
     * exact fit at 7 (best fit), not the bigger hole at 0 */
    ck_assert_int_eq(spw_arena_free(a, o[1]), 0);
    ck_assert_int_eq(spw_arena_free(a, o[0]), 0);
    ck_assert_int_eq(spw_arena_alloc(a, 3 * U, &o[4]), 0);
    ck_assert_uint_eq(o[4], 7 * U);
    ck_assert_int_eq(spw_arena_alloc(a, 5 * U, &o[0]), -ENOSPC);  /* 4 free at 0: does not fit */
    spw_arena_stats(a, &st);
    ck_assert_int_eq(st.failures, 1);
    ck_assert_int_eq(spw_arena_free(a, 2 * U), -EINVAL);          /* inside a free block */
    ck_assert_int_eq(spw_arena_free(a, 4 * U + 1), -EINVAL);      /* not an allocation's start */
    ck_assert_int_eq(spw_arena_free(a, o[2]), 0);
    ck_assert_int_eq(spw_arena_free(a, o[2]), -EINVAL);           /* twice */
    ck_assert_int_eq(spw_arena_free(a, o[3]), 0);
    ck_assert_int_eq(spw_arena_free(a, o[4]), 0);
    spw_arena_stats(a, &st);
    ck_assert_uint_eq(st.used, 0);
    ck_assert_uint_eq(st.largest_free, 10 * U);                   /* merged back into one block */
    ck_assert_uint_eq(st.peak, 7 * U);
    ck_assert_int_eq(spw_arena_alloc(a, 11 * U, &o[0]), -ENOSPC); /* more than the arena: never grows */
    spw_arena_destroy(a);
    ck_assert_int_eq(spw_arena_create(U - 1, &a), -EINVAL);
}
END_TEST

START_TEST(test_arena_random_against_byte_map)
{
    enum { UNITS = 512, SLOTS = 64 };
    struct spw_arena *a;
    ck_assert_int_eq(spw_arena_create((size_t)UNITS * U, &a), 0);
    unsigned char owner[UNITS];
    memset(owner, 0, sizeof owner);
    size_t off[SLOTS], len[SLOTS];
    bool live[SLOTS] = {false};
    struct spw_rng r;
    spw_rng_init(&r, 5, 0, 0, 0);
    int64_t fits = 0, misses = 0;
    for (int step = 0; step < 20000; step++) {
        const int s = (int)spw_rng_below(&r, SLOTS);
        if (live[s]) {
            ck_assert_int_eq(spw_arena_free(a, off[s]), 0);
            for (size_t u = off[s] / U; u < (off[s] + len[s]) / U; u++)
                owner[u] = 0;
            live[s] = false;
            continue;
        }
        const size_t bytes = 1 + spw_rng_below(&r, 40 * U);
        if (spw_arena_alloc(a, bytes, &off[s]) != 0) {
            misses++;
            continue;
        }
        fits++;
        len[s] = (bytes + U - 1) / U * U;
        ck_assert_uint_eq(off[s] % U, 0);
        ck_assert_uint_le(off[s] + len[s], (size_t)UNITS * U);
        for (size_t u = off[s] / U; u < (off[s] + len[s]) / U; u++) {
            ck_assert_msg(owner[u] == 0, "unit %zu handed out twice", u);
            owner[u] = (unsigned char)(s + 1);
        }
        live[s] = true;
    }
    ck_assert(fits > 1000 && misses > 0);
    struct spw_arena_stats st;
    spw_arena_stats(a, &st);
    ck_assert_int_eq(st.failures, misses);
    ck_assert_uint_le(st.peak, (size_t)UNITS * U);
    for (int s = 0; s < SLOTS; s++)
        if (live[s])
            ck_assert_int_eq(spw_arena_free(a, off[s]), 0);
    spw_arena_stats(a, &st);
    ck_assert_uint_eq(st.largest_free, (size_t)UNITS * U);
    spw_arena_destroy(a);
}
END_TEST

START_TEST(test_arena_budget)
{
    char err[256];
    size_t b;
    const size_t free_bytes = (size_t)8 << 30;
    ck_assert_int_eq(spw_arena_budget("0.25", free_bytes, &b, err, sizeof err), 0);
    ck_assert_uint_eq(b, (size_t)2 << 30);
    ck_assert_int_eq(spw_arena_budget("1.0", free_bytes, &b, err, sizeof err), 0);
    ck_assert_uint_eq(b, free_bytes);
    ck_assert_int_eq(spw_arena_budget("512Mi", free_bytes, &b, err, sizeof err), 0);
    ck_assert_uint_eq(b, (size_t)512 << 20);
    ck_assert_int_eq(spw_arena_budget("2G", free_bytes, &b, err, sizeof err), 0);
    ck_assert_uint_eq(b, 2000000000u);
    ck_assert_int_eq(spw_arena_budget("1048576", free_bytes, &b, err, sizeof err), 0);
    ck_assert_uint_eq(b, 1048576u);
    ck_assert_int_eq(spw_arena_budget("1.5", free_bytes, &b, err, sizeof err), SPW_ESPEC);
    ck_assert_ptr_nonnull(strstr(err, "at most 1"));
    ck_assert_int_eq(spw_arena_budget("9Gi", free_bytes, &b, err, sizeof err), SPW_ESPEC);
    ck_assert_ptr_nonnull(strstr(err, "more than the 8192 MiB free"));
    ck_assert_int_eq(spw_arena_budget("3X", free_bytes, &b, err, sizeof err), SPW_ESPEC);
    ck_assert_ptr_nonnull(strstr(err, "unknown unit"));
    ck_assert_int_eq(spw_arena_budget("0", free_bytes, &b, err, sizeof err), SPW_ESPEC);
    ck_assert_int_eq(spw_arena_budget("-1", free_bytes, &b, err, sizeof err), SPW_ESPEC);
    ck_assert_int_eq(spw_arena_budget("lots", free_bytes, &b, err, sizeof err), SPW_ESPEC);
    ck_assert_int_eq(spw_arena_budget(NULL, free_bytes, &b, err, sizeof err), SPW_ESPEC);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("arena");
    tcase_add_test(tc, test_arena_best_fit_and_merge);
    tcase_add_test(tc, test_arena_random_against_byte_map);
    tcase_add_test(tc, test_arena_budget);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
