/* tests/unit/check_progress.c - the dispatcher's per (job, producer) delivery table (dispatcher/progress.c):
 * rates over windows of at least a second counted from the first report, CPU per element from the
 * producers' cumulative CPU (what re-planning folds into the plan), restarts and "not measured" reports.
 * Pure; no threads. */
#include <check.h>
#include <stdlib.h>

#include "tests/unit/check_run.h"
#include "dispatcher/progress.h"

static struct disp_progress_entry only(const struct disp_progress *p, uint64_t job)
{
    struct disp_progress_entry e[4];
    ck_assert_int_eq(disp_progress_of_job(p, job, e, 4), 1);
    return e[0];
}

START_TEST(test_progress_rates_and_cpu_per_element)
{
    struct disp_progress *p = calloc(1, sizeof *p);
    /* First seen with 500 elements already sent (it started before the dispatcher heard of it): the first
     * rate counts from here, not from 0. */
    disp_progress_report(p, 7, 1, 500, 5000, 2000000000, 10000);
    disp_progress_report(p, 7, 1, 700, 7000, 2200000000, 10500);     /* under a second: no rate yet */
    ck_assert_double_eq(only(p, 7).elements_per_s, 0);
    disp_progress_report(p, 7, 1, 1500, 15000, 3000000000, 11000);
    struct disp_progress_entry e = only(p, 7);
    ck_assert_double_eq_tol(e.elements_per_s, 1000, 1e-9);
    ck_assert_double_eq_tol(e.bytes_per_s, 10000, 1e-9);
    ck_assert_double_eq_tol(e.cpu_ns_per_element, 1e6, 1e-6);      /* 1 s of CPU for 1000 elements */
    ck_assert_int_eq(e.elements, 1500);
    /* The next window: 400 elements on 0.6 s of CPU. */
    disp_progress_report(p, 7, 1, 1900, 19000, 3600000000, 12000);
    ck_assert_double_eq_tol(only(p, 7).cpu_ns_per_element, 1.5e6, 1e-6);
    /* Not measured now (a worker serving two jobs reports no CPU): the cost is unknown, the rate goes on. */
    disp_progress_report(p, 7, 1, 2400, 24000, 0, 13000);
    e = only(p, 7);
    ck_assert_double_eq(e.cpu_ns_per_element, 0);
    ck_assert_double_eq_tol(e.elements_per_s, 500, 1e-9);
    /* Measured again: a window from the first report that has it, not across the gap. */
    disp_progress_report(p, 7, 1, 2500, 25000, 5000000000, 13500);
    disp_progress_report(p, 7, 1, 3100, 31000, 5300000000, 14500);
    ck_assert_double_eq_tol(only(p, 7).cpu_ns_per_element, 0.3e9 / 600, 1e-6);
    ck_assert_double_eq_tol(only(p, 7).elements_per_s, 600, 1e-9);
    /* A restarted producer counts from 0 again: no negative rate or cost. */
    disp_progress_report(p, 7, 1, 100, 1000, 100000000, 15000);
    disp_progress_report(p, 7, 1, 600, 6000, 400000000, 16000);
    e = only(p, 7);
    ck_assert_double_eq_tol(e.elements_per_s, 500, 1e-9);
    ck_assert_double_eq_tol(e.cpu_ns_per_element, 0.3e9 / 500, 1e-6);
    free(p);
}
END_TEST

START_TEST(test_progress_keeps_jobs_and_producers_apart)
{
    struct disp_progress *p = calloc(1, sizeof *p);
    disp_progress_report(p, 1, 10, 0, 0, 1, 0);
    disp_progress_report(p, 1, 11, 0, 0, 1, 0);
    disp_progress_report(p, 2, 10, 0, 0, 1, 0);
    disp_progress_report(p, 1, 10, 100, 0, 100000001, 1000);
    disp_progress_report(p, 1, 11, 300, 0, 1, 1000);       /* CPU not moving: no cost, not a zero cost */
    struct disp_progress_entry e[4];
    ck_assert_int_eq(disp_progress_of_job(p, 1, e, 4), 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_double_eq_tol(e[i].elements_per_s, e[i].producer == 10 ? 100 : 300, 1e-9);
        ck_assert_double_eq_tol(e[i].cpu_ns_per_element, e[i].producer == 10 ? 1e6 : 0, 1e-6);
    }
    ck_assert_int_eq(disp_progress_of_job(p, 2, e, 4), 1);
    ck_assert_double_eq(e[0].elements_per_s, 0);
    free(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("progress");
    TCase *tc = tcase_create("progress");
    tcase_add_test(tc, test_progress_rates_and_cpu_per_element);
    tcase_add_test(tc, test_progress_keeps_jobs_and_producers_apart);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
