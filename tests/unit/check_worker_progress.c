/* tests/unit/check_worker_progress.c - what a worker's heartbeat says of its jobs (worker/jobs.c
 * wrk_jobs_progress), over a job table built here (no dispatcher, no producers): after a registration every
 * job, past the cap in later calls, the longest unreported first; then only jobs whose counts changed and each
 * unchanged one again after 30 s, or every job after a lost heartbeat; a stopped job's final counts first and
 * once, those past the cap kept. */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "pipeline/source.h"
#include "tests/unit/check_run.h"
#include "worker/jobs.h"
#include "worker/jobs_internal.h"

#define N_JOBS 100
#define CAP 64

static struct wrk_jobs W;
static struct job J[N_JOBS];
static struct spw_source SRC;
static Spillway__V1__ProducerProgress OUT[CAP];
static Spillway__V1__SourceIo IO[CAP];

static void setup(void)
{
    memset(&W, 0, sizeof W);
    memset(J, 0, sizeof J);
    pthread_mutex_init(&W.mu, NULL);
    for (int i = 0; i < N_JOBS; i++) {     /* listed newest first, as wrk_jobs_update links them */
        J[i].id = 1000 + (uint64_t)i;
        J[i].src = &SRC;
        J[i].next = i + 1 < N_JOBS ? &J[i + 1] : NULL;
    }
    W.jobs = &J[0];
    wrk_jobs_set_worker_id(&W, 7, 77);
}

static void teardown(void)
{
    pthread_mutex_destroy(&W.mu);
}

static int take(void)
{
    return wrk_jobs_progress(&W, OUT, IO, CAP, false);
}

static bool has(int n, uint64_t job)
{
    for (int i = 0; i < n; i++)
        if (OUT[i].job == job)
            return true;
    return false;
}

START_TEST(every_job_after_registration_then_only_changes)
{
    int n = take();
    ck_assert_int_eq(n, CAP);                   /* every job is due: the first 64 */
    bool seen[N_JOBS] = {0};
    for (int i = 0; i < n; i++)
        seen[OUT[i].job - 1000] = true;
    n = take();
    ck_assert_int_eq(n, N_JOBS - CAP);          /* the rest, the unreported ones first */
    for (int i = 0; i < n; i++) {
        ck_assert(!seen[OUT[i].job - 1000]);
        seen[OUT[i].job - 1000] = true;
    }
    for (int i = 0; i < N_JOBS; i++)
        ck_assert(seen[i]);
    ck_assert_int_eq(take(), 0);                /* nothing changed since */
    __atomic_store_n(&J[41].sent_elements, 5, __ATOMIC_RELAXED);
    __atomic_store_n(&J[42].sent_bytes, 9, __ATOMIC_RELAXED);
    n = take();
    ck_assert_int_eq(n, 2);
    ck_assert(has(n, 1041) && has(n, 1042));
    for (int i = 0; i < n; i++)
        if (OUT[i].job == 1041)
            ck_assert_int_eq(OUT[i].elements, 5);
    ck_assert_int_eq(take(), 0);
}
END_TEST

START_TEST(unchanged_jobs_again_after_thirty_seconds)
{
    take();
    take();
    for (int i = 10; i < 13; i++)               /* as if last reported 30 s ago */
        J[i].reported_ms -= 30000;
    J[14].reported_ms -= 29000;
    const int n = take();
    ck_assert_int_eq(n, 3);
    ck_assert(has(n, 1010) && has(n, 1011) && has(n, 1012));
}
END_TEST

START_TEST(a_lost_heartbeat_reports_all_again)
{
    take();
    take();
    ck_assert_int_eq(take(), 0);
    ck_assert_int_eq(wrk_jobs_progress(&W, OUT, IO, CAP, true), CAP);  /* the last one did not arrive */
    ck_assert_int_eq(take(), N_JOBS - CAP);
    ck_assert_int_eq(take(), 0);
}
END_TEST

START_TEST(a_new_registration_reports_all_again)
{
    take();
    take();
    ck_assert_int_eq(take(), 0);
    wrk_jobs_set_worker_id(&W, 7, 78);          /* the dispatcher restarted: it holds no progress */
    ck_assert_int_eq(take(), CAP);
    ck_assert_int_eq(take(), N_JOBS - CAP);
    ck_assert_int_eq(take(), 0);
}
END_TEST

START_TEST(more_changed_than_fit_come_oldest_first)
{
    take();
    take();
    const int64_t t = spw_now_ms();
    for (int i = 0; i < N_JOBS; i++) {          /* every job changed; the last 10 went unreported longest */
        __atomic_store_n(&J[i].sent_elements, 1, __ATOMIC_RELAXED);
        J[i].reported_ms = i >= N_JOBS - 10 ? t - 4000 : t - 100;
    }
    const int n = take();
    ck_assert_int_eq(n, CAP);
    for (int i = N_JOBS - 10; i < N_JOBS; i++)
        ck_assert(has(n, 1000 + (uint64_t)i));
    ck_assert_int_eq(take(), N_JOBS - CAP);     /* the rest next time, none lost */
}
END_TEST

START_TEST(stopped_jobs_first_once_and_kept_past_the_cap)
{
    take();
    take();
    const int n_retired = (int)(sizeof W.retired / sizeof W.retired[0]);
    for (int i = 0; i < n_retired; i++) {
        W.retired[i].job = 5000 + (uint64_t)i;
        W.retired[i].elements = 100 + i;
    }
    W.n_retired = n_retired;
    for (int i = 0; i < N_JOBS; i++)
        __atomic_store_n(&J[i].sent_elements, 3, __ATOMIC_RELAXED);
    int n = wrk_jobs_progress(&W, OUT, IO, 10, false);     /* a cap smaller than the stopped jobs */
    ck_assert_int_eq(n, 10);
    for (int i = 0; i < 10; i++)
        ck_assert_uint_eq(OUT[i].job, 5000 + (uint64_t)i);
    n = take();
    ck_assert_int_eq(n, CAP);
    for (int i = 0; i < n_retired - 10; i++) {      /* the other stopped ones first, then changed jobs */
        ck_assert_uint_eq(OUT[i].job, 5010 + (uint64_t)i);
        ck_assert_int_eq(OUT[i].elements, 110 + i);
    }
    ck_assert_int_eq(W.n_retired, 0);
    ck_assert_int_eq(take(), N_JOBS - (CAP - (n_retired - 10)));
    ck_assert_int_eq(take(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("worker_progress");
    TCase *tc = tcase_create("progress");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, every_job_after_registration_then_only_changes);
    tcase_add_test(tc, unchanged_jobs_again_after_thirty_seconds);
    tcase_add_test(tc, a_lost_heartbeat_reports_all_again);
    tcase_add_test(tc, a_new_registration_reports_all_again);
    tcase_add_test(tc, more_changed_than_fit_come_oldest_first);
    tcase_add_test(tc, stopped_jobs_first_once_and_kept_past_the_cap);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
