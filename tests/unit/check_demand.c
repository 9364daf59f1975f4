/* tests/unit/check_demand.c - the workers a trainer's measured demand needs (dispatcher/demand.c), the
 * autoscaling signal of a job with no stated trainer rate: a starving trainer with no worker asks for some,
 * a satisfied one for what keeps it so (fewer when the workers are idle), a trainer that only waits for at
 * least one, nothing measured gives -1. Pure; no threads. */
#include <check.h>
#include <math.h>

#include "tests/unit/check_run.h"
#include "dispatcher/demand.h"

START_TEST(test_demand_rate_is_the_rate_without_waiting)
{
    ck_assert_double_eq_tol(disp_demand_rate(100, 0), 100, 1e-9);
    ck_assert_double_eq_tol(disp_demand_rate(100, 0.01), 100, 1e-9);     /* not waiting: its rate */
    ck_assert_double_eq_tol(disp_demand_rate(100, 0.5), 200, 1e-9);
    ck_assert_double_eq_tol(disp_demand_rate(100, 0.75), 400, 1e-9);
    ck_assert_double_eq_tol(disp_demand_rate(100, 1.0), 100 / (1 - DISP_DEMAND_MAX_WAIT), 1e-6);
    ck_assert_double_eq(disp_demand_rate(NAN, 0.5), 0);
    ck_assert_double_eq(disp_demand_rate(-3, 0.5), 0);
}
END_TEST

START_TEST(test_demand_starving_trainer_without_workers)
{
    /* The trainer makes 100/s itself at 10 ms of CPU each and waits 75% of the time: it would take 400/s.
     * A new worker of 2 cores makes 200/s at that cost; 300/s more at 90% of that is 2 workers. */
    struct disp_demand_input in = {.consumed_per_s = 100, .wait_fraction = 0.75,
                                   .client = {.elements_per_s = 100, .cpu_ns_per_element = 1e7},
                                   .worker_cores = 2};
    ck_assert_int_eq(disp_demand_workers(&in), 2);
    in.worker_cores = 1;                    /* 100/s a worker: 300 / 90 -> 4 */
    ck_assert_int_eq(disp_demand_workers(&in), 4);
    in.client.cpu_ns_per_element = 0;       /* no cost measured yet: one worker to start with */
    ck_assert_int_eq(disp_demand_workers(&in), 1);
}
END_TEST

START_TEST(test_demand_satisfied_trainer)
{
    /* Not waiting, nothing from workers: the trainer's own threads keep up. */
    struct disp_demand_input in = {.consumed_per_s = 50, .wait_fraction = 0.0,
                                   .client = {.elements_per_s = 50, .cpu_ns_per_element = 1e7},
                                   .worker_cores = 1};
    ck_assert_int_eq(disp_demand_workers(&in), 0);
    /* Not waiting with 4 workers of 4 cores at 10 ms each (400/s each) and 1000/s consumed, 100 of them its
     * own: 900/s from workers keeps it satisfied, 900 / 360 -> 3 (one of the 4 could go). */
    struct disp_demand_producer w[4];
    for (int i = 0; i < 4; i++)
        w[i] = (struct disp_demand_producer){.elements_per_s = 225, .cpu_ns_per_element = 1e7, .cores = 4};
    in = (struct disp_demand_input){.consumed_per_s = 1000, .wait_fraction = 0.0,
                                    .client = {.elements_per_s = 100}, .workers = w, .n_workers = 4,
                                    .worker_cores = 1};
    ck_assert_int_eq(disp_demand_workers(&in), 3);
    in.wait_fraction = 0.5;                 /* waiting half the time: 2000/s wanted, 1900 / 360 -> 6 */
    ck_assert_int_eq(disp_demand_workers(&in), 6);
    for (int i = 0; i < 4; i++)
        w[i].cpu_ns_per_element = 0;        /* the workers' cost unknown: one more than now while it waits */
    ck_assert_int_eq(disp_demand_workers(&in), 5);
}
END_TEST

START_TEST(test_demand_only_waiting_and_nothing_measured)
{
    struct disp_demand_input in = {.consumed_per_s = 0, .wait_fraction = 1.0, .worker_cores = 1};
    ck_assert_int_eq(disp_demand_workers(&in), 1);       /* it gets nothing: at least one */
    in.wait_fraction = 0;
    ck_assert_int_eq(disp_demand_workers(&in), 0);       /* no rate and no wait: what it has, none */
    in.wait_fraction = NAN;
    ck_assert_int_eq(disp_demand_workers(&in), 0);
    struct disp_demand_producer w[2] = {{.elements_per_s = 0}, {.elements_per_s = 0}};
    in.workers = w;
    in.n_workers = 2;
    ck_assert_int_eq(disp_demand_workers(&in), 2);       /* two workers and nothing measured: keep them */
}
END_TEST

START_TEST(test_demand_throttled_trainer)
{
    /* The 2026-12-07 eval's case: a trainer in a 0.5-core quota takes 636/s making every element itself (0.75
     * ms of CPU each: 0.48 of its 0.5 cores), barely waits in next(), but its thread was ready and had no CPU
     * 40% of the time (the quota throttled by its own producers). Idle 0.01 + 0.4 x 0.954 = 0.392: demand
     * 636 / 0.608 = 1045/s; one worker core makes 1333/s, 1045 - 636 = 409 more / 1200 -> 1 worker. */
    struct disp_demand_input in = {.consumed_per_s = 636, .wait_fraction = 0.01, .starved_fraction = 0.4,
                                   .trainer_cpu_cores = 0.5, .trainer_own_cores = 0.477,
                                   .client = {.elements_per_s = 636, .cpu_ns_per_element = 7.5e5},
                                   .worker_cores = 1};
    ck_assert_double_eq_tol(disp_demand_idle(&in), 0.01 + 0.4 * 0.477 / 0.5, 1e-9);
    ck_assert_double_eq_tol(disp_demand_rate(in.consumed_per_s, disp_demand_idle(&in)), 1045.4, 0.1);
    ck_assert_int_eq(disp_demand_workers(&in), 1);
    in.worker_cores = 0.2;                  /* 267/s a worker: 409 / 240 -> 2 */
    ck_assert_int_eq(disp_demand_workers(&in), 2);
    /* Without the starvation it looks satisfied: its own threads keep up, nothing needed. */
    in.starved_fraction = 0;
    ck_assert_int_eq(disp_demand_workers(&in), 0);
    /* Starvation the producers do not cause (the trainer's own compute fills the quota, its producers use
     * 1% of the process's CPU) barely counts: 0.4 x 0.01 = 0.004, under the 2% that counts as waiting. */
    in.starved_fraction = 0.4;
    in.trainer_own_cores = 0.005;
    ck_assert_double_eq_tol(disp_demand_idle(&in), 0.014, 1e-9);
    ck_assert_int_eq(disp_demand_workers(&in), 0);
    /* Unknown process CPU or no own production: not attributed. A starved fraction past 1 or NAN: ignored. */
    in.trainer_own_cores = 0.477;
    in.trainer_cpu_cores = 0;
    ck_assert_double_eq_tol(disp_demand_idle(&in), 0.01, 1e-12);
    in.trainer_cpu_cores = 0.5;
    in.starved_fraction = NAN;
    ck_assert_double_eq_tol(disp_demand_idle(&in), 0.01, 1e-12);
    in.starved_fraction = 3;                /* a lying client: the idle fraction is still at most 1 */
    ck_assert(disp_demand_idle(&in) <= 1);
    ck_assert_double_eq_tol(disp_demand_rate(636, disp_demand_idle(&in)), 636 / (1 - DISP_DEMAND_MAX_WAIT), 1e-6);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("demand");
    TCase *tc = tcase_create("demand");
    tcase_add_test(tc, test_demand_rate_is_the_rate_without_waiting);
    tcase_add_test(tc, test_demand_starving_trainer_without_workers);
    tcase_add_test(tc, test_demand_satisfied_trainer);
    tcase_add_test(tc, test_demand_only_waiting_and_nothing_measured);
    tcase_add_test(tc, test_demand_throttled_trainer);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
