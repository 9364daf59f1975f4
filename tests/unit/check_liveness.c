/* tests/unit/check_liveness.c - dispatcher/liveness.c without sockets or clocks: a silent peer is dead only
 * past its timeout plus the dispatcher's recent lag, never in a tick that found the dispatcher late, and the
 * lag is kept for a window; new work is refused past a quarter of the timeout; the state's queries take that
 * deadline as data. Single-threaded. */
#include <check.h>
#include <stdint.h>

#include "tests/unit/check_run.h"
#include "dispatcher/liveness.h"
#include "dispatcher/state.h"

START_TEST(test_liveness_dead_only_past_timeout_plus_recent_lag)
{
    ck_assert(!disp_liveness_dead(1000, 1000, 0, 0));       /* strictly past, as the state's queries */
    ck_assert(disp_liveness_dead(1001, 1000, 0, 0));
    /* The dispatcher lagged 3 s lately (a stop, starvation): a peer silent 3.9 s may have spoken into it. */
    ck_assert(!disp_liveness_dead(3999, 1000, 3000, 0));
    ck_assert(!disp_liveness_dead(4000, 1000, 3000, 0));
    ck_assert(disp_liveness_dead(4001, 1000, 3000, 0));
    ck_assert_int_eq(disp_liveness_deadline_ms(1000, 3000, 0), 4000);
    ck_assert_int_eq(disp_liveness_deadline_ms(1000, -5, -5), 1000);         /* no negative lag */
    ck_assert_int_eq(disp_liveness_deadline_ms(1000, INT64_MAX, 0), INT64_MAX); /* saturates */
}
END_TEST

START_TEST(test_liveness_no_deaths_in_a_tick_that_found_the_dispatcher_late)
{
    /* A tick late by more than a quarter of the timeout declares nobody dead, however long the silence. */
    ck_assert(!disp_liveness_dead(INT64_MAX / 2, 1000, 0, 251));
    ck_assert(!disp_liveness_dead(10 * 1000, 1000, 3000, 3000));
    ck_assert_int_eq(disp_liveness_deadline_ms(1000, 0, 251), INT64_MAX);
    /* A quarter exactly is still a tick that decides. */
    ck_assert(disp_liveness_dead(1251, 1000, 250, 250));
    ck_assert(!disp_liveness_dead(1250, 1000, 250, 250));
}
END_TEST

START_TEST(test_liveness_overloaded_past_a_quarter_of_the_timeout)
{
    ck_assert(!disp_liveness_overloaded(0, 10000));
    ck_assert(!disp_liveness_overloaded(2500, 10000));
    ck_assert(disp_liveness_overloaded(2501, 10000));
    ck_assert(disp_liveness_overloaded(3000, 1000));
}
END_TEST

START_TEST(test_liveness_lag_kept_one_to_two_windows)
{
    struct disp_lag l;
    disp_lag_init(&l, 1000);
    ck_assert_int_eq(disp_lag_recent(&l, 5000), 0);         /* nothing noted */
    disp_lag_note(&l, 1000, 3000);                          /* the first tick after a 3 s stop */
    for (int64_t t = 1200; t < 2000; t += 200)
        disp_lag_note(&l, t, 5);
    ck_assert_int_eq(disp_lag_recent(&l, 1800), 3000);
    disp_lag_note(&l, 2000, 7);                             /* a new bucket: the old one still counts */
    ck_assert_int_eq(disp_lag_recent(&l, 2000), 3000);
    for (int64_t t = 2200; t < 3000; t += 200)
        disp_lag_note(&l, t, -40);                          /* a tick that woke early: no lag */
    ck_assert_int_eq(disp_lag_recent(&l, 2800), 3000);
    disp_lag_note(&l, 3000, 0);                             /* two windows on: forgotten */
    ck_assert_int_eq(disp_lag_recent(&l, 3000), 7);
    /* Nothing noted for two windows (the timer did not run): nothing recent either. */
    ck_assert_int_eq(disp_lag_recent(&l, 5000), 0);
    disp_lag_note(&l, 9000, 2);
    ck_assert_int_eq(disp_lag_recent(&l, 9000), 2);
}
END_TEST

START_TEST(test_liveness_state_queries_take_the_deadline_as_data)
{
    struct disp_state *st;
    char err[256];
    ck_assert_int_eq(disp_state_create(NULL, &st), 0);
    for (uint64_t w = 1; w <= 3; w++) {
        struct disp_update u = {.kind = DISP_REGISTER_WORKER, .worker = w, .address = "127.0.0.1:1", .threads = 1,
                                .now_ms = w == 3 ? 2500 : 0};   /* 1 and 2 spoke at 0, 3 at 2.5 s */
        ck_assert_msg(disp_state_apply(st, &u, err, sizeof err) == 0, "%s", err);
    }
    uint64_t ids[4] = {0};
    /* At 3.2 s after a 3 s lag, with a 1 s timeout: 1 and 2 are silent past the timeout but spared. */
    const int64_t deadline = disp_liveness_deadline_ms(1000, 3000, 0);
    ck_assert_int_eq(disp_state_dead_workers(st, 3200, deadline, ids, 4), 0);
    ck_assert_int_eq(disp_state_dead_workers(st, 3200, 1000, NULL, 4), 2);    /* counted only */
    ck_assert_int_eq(disp_state_dead_workers(st, 3200, 1000, NULL, 1), 1);    /* up to cap */
    /* Past timeout + lag they are dead; 3, heard at 2.5 s, is not. */
    ck_assert_int_eq(disp_state_dead_workers(st, 4001, deadline, ids, 4), 2);
    ck_assert(ids[0] != 3 && ids[1] != 3);
    ck_assert_int_eq(disp_state_dead_workers(st, 1000000, INT64_MAX, ids, 4), 0);  /* a late tick: none */
    disp_state_destroy(st);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("liveness");
    TCase *tc = tcase_create("liveness");
    tcase_add_test(tc, test_liveness_dead_only_past_timeout_plus_recent_lag);
    tcase_add_test(tc, test_liveness_no_deaths_in_a_tick_that_found_the_dispatcher_late);
    tcase_add_test(tc, test_liveness_overloaded_past_a_quarter_of_the_timeout);
    tcase_add_test(tc, test_liveness_lag_kept_one_to_two_windows);
    tcase_add_test(tc, test_liveness_state_queries_take_the_deadline_as_data);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
