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
    ck_assert_int_eq(disp_demand_workers(&in), -1);      /* no rate and no wait: unknown */
    in.wait_fraction = NAN;
    ck_assert_int_eq(disp_demand_workers(&in), -1);
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
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
