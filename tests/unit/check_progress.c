/* tests/unit/check_progress.c - the dispatcher's per (job, producer) delivery table (dispatcher/progress.c):
 * rates over windows of at least a second counted from the first report, CPU per element from the
 * producers' cumulative CPU (what re-planning folds into the plan), restarts and "not measured" reports;
 * 3,000 producers x 40 jobs (far past the old 1,024-entry cap) all kept, walked per job and removed by
 * worker and by job; out of memory drops a report and counts it; through the service, the re-planner's
 * input and /metrics see every producer of a job. Single-threaded (the service's calls take its lock). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tests/unit/check_run.h"
#include "dispatcher/progress.h"
#include "dispatcher/service_internal.h"
#include "lib/clock.h"
#include "lib/metrics.h"

#define PRODUCERS 3000
#define JOBS 40
#define SERVICE_JOBS 400    /* through the service: issue 42's 3,000 workers x 400 jobs */

static struct disp_progress *P;

static void setup(void)
{
    ck_assert_int_eq(disp_progress_create(&P), 0);
}

static void teardown(void)
{
    disp_progress_destroy(P);
    P = NULL;
}

static struct disp_progress_entry only(uint64_t job)
{
    ck_assert_uint_eq(disp_progress_count(P, job), 1);
    const struct disp_progress_entry *e = disp_progress_first(P, job);
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_null(disp_progress_next(e));
    return *e;
}

START_TEST(test_progress_rates_and_cpu_per_element)
{
    /* First seen with 500 elements already sent (it started before the dispatcher heard of it): the first
     * rate counts from here, not from 0. */
    disp_progress_report(P, 7, 1, 500, 5000, 2000000000, 10000);
    disp_progress_report(P, 7, 1, 700, 7000, 2200000000, 10500);     /* under a second: no rate yet */
    ck_assert_double_eq(only(7).elements_per_s, 0);
    disp_progress_report(P, 7, 1, 1500, 15000, 3000000000, 11000);
    struct disp_progress_entry e = only(7);
    ck_assert_double_eq_tol(e.elements_per_s, 1000, 1e-9);
    ck_assert_double_eq_tol(e.bytes_per_s, 10000, 1e-9);
    ck_assert_double_eq_tol(e.cpu_ns_per_element, 1e6, 1e-6);      /* 1 s of CPU for 1000 elements */
    ck_assert_int_eq(e.elements, 1500);
    /* The next window: 400 elements on 0.6 s of CPU. */
    disp_progress_report(P, 7, 1, 1900, 19000, 3600000000, 12000);
    ck_assert_double_eq_tol(only(7).cpu_ns_per_element, 1.5e6, 1e-6);
    /* Not measured now (a worker serving two jobs reports no CPU): the cost is unknown, the rate goes on. */
    disp_progress_report(P, 7, 1, 2400, 24000, 0, 13000);
    e = only(7);
    ck_assert_double_eq(e.cpu_ns_per_element, 0);
    ck_assert_double_eq_tol(e.elements_per_s, 500, 1e-9);
    /* Measured again: a window from the first report that has it, not across the gap. */
    disp_progress_report(P, 7, 1, 2500, 25000, 5000000000, 13500);
    disp_progress_report(P, 7, 1, 3100, 31000, 5300000000, 14500);
    ck_assert_double_eq_tol(only(7).cpu_ns_per_element, 0.3e9 / 600, 1e-6);
    ck_assert_double_eq_tol(only(7).elements_per_s, 600, 1e-9);
    /* A restarted producer counts from 0 again: no negative rate or cost. */
    disp_progress_report(P, 7, 1, 100, 1000, 100000000, 15000);
    disp_progress_report(P, 7, 1, 600, 6000, 400000000, 16000);
    e = only(7);
    ck_assert_double_eq_tol(e.elements_per_s, 500, 1e-9);
    ck_assert_double_eq_tol(e.cpu_ns_per_element, 0.3e9 / 500, 1e-6);
}
END_TEST

START_TEST(test_progress_keeps_jobs_and_producers_apart)
{
    disp_progress_report(P, 1, 10, 0, 0, 1, 0);
    disp_progress_report(P, 1, 11, 0, 0, 1, 0);
    disp_progress_report(P, 2, 10, 0, 0, 1, 0);
    disp_progress_report(P, 1, 10, 100, 0, 100000001, 1000);
    disp_progress_report(P, 1, 11, 300, 0, 1, 1000);       /* CPU not moving: no cost, not a zero cost */
    ck_assert_uint_eq(disp_progress_count(P, 1), 2);
    const struct disp_progress_entry *e = disp_progress_first(P, 1);
    for (int i = 0; i < 2; i++, e = disp_progress_next(e)) {
        ck_assert_uint_eq(e->producer, 10 + (uint64_t)i);  /* in the order they first reported */
        ck_assert_double_eq_tol(e->elements_per_s, e->producer == 10 ? 100 : 300, 1e-9);
        ck_assert_double_eq_tol(e->cpu_ns_per_element, e->producer == 10 ? 1e6 : 0, 1e-6);
    }
    ck_assert_ptr_null(e);
    ck_assert_double_eq(only(2).elements_per_s, 0);
    ck_assert_ptr_null(disp_progress_first(P, 3));
    ck_assert_ptr_null(disp_progress_find(P, 2, 11));
}
END_TEST

/* Each pair's counts differ, so a mixed-up entry shows: elements/s and bytes/s (its link's rate) over a 2 s
 * window, and the shard reads kept on the entry. The loops over 120,000 pairs count what is wrong and assert
 * once (a Check assertion costs a write to its parent: millions of them would take seconds). */
static int64_t pair_elements(uint64_t job, uint64_t producer)
{
    return (int64_t)(job * 10007 + producer * 3 + 2);
}

static void fill(void)
{
    size_t failed = 0;
    for (uint64_t j = 1; j <= JOBS; j++)
        for (uint64_t w = 1; w <= PRODUCERS; w++)
            failed += disp_progress_report(P, j, w, 0, 0, 0, 1000) != 0;
    for (uint64_t j = 1; j <= JOBS; j++)
        for (uint64_t w = 1; w <= PRODUCERS; w++) {
            const int64_t n = pair_elements(j, w);
            failed += disp_progress_report(P, j, w, n, n * 100 + (int64_t)j, 0, 3000) != 0;
            disp_progress_source(P, j, w, n, (int64_t)w, (int64_t)j);
        }
    ck_assert_uint_eq(failed, 0);
}

/* What is wrong with e as the entry of (j, w), or NULL. */
static const char *pair_wrong(uint64_t j, uint64_t w, const struct disp_progress_entry *e)
{
    const int64_t n = pair_elements(j, w);
    if (!e)
        return "missing";
    if (e->job != j || e->producer != w)
        return "another pair's";
    if (e->elements != n || fabs(e->elements_per_s - (double)n / 2) > 1e-9)
        return "elements";
    if (fabs(e->bytes_per_s - (double)(n * 100 + (int64_t)j) / 2) > 1e-6)
        return "link rate";
    if (e->source_requests != (int64_t)w || e->source_retries != (int64_t)j)
        return "shard reads";
    return NULL;
}

/* Count the pairs pair_wrong finds fault with; the first one's message into why. */
static size_t count_wrong(uint64_t j, uint64_t w, const struct disp_progress_entry *e, char *why, size_t n)
{
    const char *wrong = pair_wrong(j, w, e);
    if (wrong && !*why)
        snprintf(why, n, "job %llu producer %llu: %s", (unsigned long long)j, (unsigned long long)w, wrong);
    return wrong != NULL;
}

/* The old table held 1,024 entries and lost the rest: every one of 120,000 pairs is kept and read back,
 * found by pair and walked per job, each producer once. */
START_TEST(test_progress_keeps_every_pair_past_the_old_cap)
{
    fill();
    struct disp_progress_stats st;
    disp_progress_stats(P, &st);
    ck_assert_uint_eq(st.entries, (size_t)PRODUCERS * JOBS);
    ck_assert_uint_ge(st.bytes, st.entries * sizeof(struct disp_progress_entry));
    ck_assert_uint_eq(st.dropped, 0);
    static bool seen[PRODUCERS + 1];
    char why[128] = "";
    size_t wrong = 0;
    for (uint64_t j = 1; j <= JOBS; j++) {
        for (uint64_t w = 1; w <= PRODUCERS; w++)
            wrong += count_wrong(j, w, disp_progress_find(P, j, w), why, sizeof why);
        ck_assert_uint_eq(disp_progress_count(P, j), PRODUCERS);
        memset(seen, 0, sizeof seen);
        size_t walked = 0, twice = 0;
        for (const struct disp_progress_entry *e = disp_progress_first(P, j); e; e = disp_progress_next(e)) {
            const uint64_t w = e->producer <= PRODUCERS ? e->producer : 0;     /* 0: not one of ours */
            twice += seen[w];
            seen[w] = true;
            wrong += count_wrong(j, e->producer, e, why, sizeof why);
            walked++;
        }
        ck_assert_uint_eq(twice, 0);
        ck_assert(!seen[0]);
        ck_assert_uint_eq(walked, PRODUCERS);
    }
    ck_assert_msg(wrong == 0, "%zu wrong, the first %s", wrong, why);
}
END_TEST

/* A worker that leaves goes from every job; a job that leaves takes its entries; the rest stay as they
 * were; a producer seen again starts a fresh entry; the memory goes back as the table empties. */
START_TEST(test_progress_forgets_a_worker_and_a_job)
{
    struct disp_progress_stats empty, full, st;
    disp_progress_stats(P, &empty);
    fill();
    disp_progress_stats(P, &full);
    disp_progress_forget_producer(P, 17);
    size_t walked_17 = 0;
    for (uint64_t j = 1; j <= JOBS; j++) {
        ck_assert_ptr_null(disp_progress_find(P, j, 17));
        ck_assert_uint_eq(disp_progress_count(P, j), PRODUCERS - 1);
        for (const struct disp_progress_entry *e = disp_progress_first(P, j); e; e = disp_progress_next(e))
            walked_17 += e->producer == 17;
    }
    ck_assert_uint_eq(walked_17, 0);
    disp_progress_forget(P, 5);
    ck_assert_uint_eq(disp_progress_count(P, 5), 0);
    ck_assert_ptr_null(disp_progress_first(P, 5));
    size_t left = 0, wrong = 0;
    char why[128] = "";
    for (uint64_t w = 1; w <= PRODUCERS; w++)
        left += disp_progress_find(P, 5, w) != NULL;
    ck_assert_uint_eq(left, 0);
    for (uint64_t j = 1; j <= JOBS; j++)
        for (uint64_t w = 1; j != 5 && w <= PRODUCERS; w++)
            if (w != 17)
                wrong += count_wrong(j, w, disp_progress_find(P, j, w), why, sizeof why);
    ck_assert_msg(wrong == 0, "%zu wrong, the first %s", wrong, why);
    disp_progress_stats(P, &st);
    ck_assert_uint_eq(st.entries, (size_t)(PRODUCERS - 1) * (JOBS - 1));
    ck_assert_uint_lt(st.bytes, full.bytes);
    /* Back again: a new entry whose first rate counts from this report. */
    ck_assert_int_eq(disp_progress_report(P, 5, 17, 9000, 90000, 0, 5000), 0);
    ck_assert_int_eq(disp_progress_find(P, 5, 17)->elements, 9000);
    ck_assert_double_eq(disp_progress_find(P, 5, 17)->elements_per_s, 0);
    ck_assert_uint_eq(disp_progress_count(P, 5), 1);
    /* A producer alone in its job takes the job's list with it. */
    disp_progress_forget_producer(P, 17);
    ck_assert_ptr_null(disp_progress_first(P, 5));
    for (uint64_t j = 1; j <= JOBS; j++)
        disp_progress_forget(P, j);
    disp_progress_stats(P, &st);
    ck_assert_uint_eq(st.entries, 0);
    ck_assert_uint_eq(st.bytes, empty.bytes);
}
END_TEST

/* Out of memory on a new entry: that report is dropped and counted, the table keeps what it had and still
 * updates existing entries. Address space is capped (the soft limit, put back before asserting); skipped
 * under AddressSanitizer, whose shadow memory needs the address space. */
START_TEST(test_progress_out_of_memory_drops_the_report)
{
#if defined(__SANITIZE_ADDRESS__)
    return;
#else
    disp_progress_report(P, 1, 1, 0, 0, 0, 0);
    struct rlimit old;
    ck_assert_int_eq(getrlimit(RLIMIT_AS, &old), 0);
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    unsigned long pages = 0;
    ck_assert_int_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    struct rlimit cap = {.rlim_cur = (pages + 4096) * 4096, .rlim_max = old.rlim_max};  /* about 16 MiB more */
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &cap), 0);
    uint64_t failed = 0, added = 0;
    int unexpected = 0;
    for (uint64_t w = 2; w < 4000000 && failed < 100; w++) {
        const int rc = disp_progress_report(P, 1, w, 1, 1, 0, 0);
        if (rc == -ENOMEM)
            failed++;
        else if (rc == 0)
            added++;
        else
            unexpected = rc;
    }
    const int existing = disp_progress_report(P, 1, 1, 5, 50, 0, 2000);    /* no allocation: still taken */
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
    ck_assert_int_eq(unexpected, 0);
    ck_assert_uint_eq(failed, 100);
    ck_assert_int_eq(existing, 0);
    ck_assert_double_eq_tol(disp_progress_find(P, 1, 1)->elements_per_s, 2.5, 1e-9);
    struct disp_progress_stats st;
    disp_progress_stats(P, &st);
    ck_assert_uint_eq(st.dropped, failed);
    ck_assert_uint_eq(st.entries, added + 1);
    ck_assert_uint_eq(disp_progress_count(P, 1), added + 1);
    /* With memory again, a dropped producer's next report makes its entry. */
    ck_assert_int_eq(disp_progress_report(P, 1, 3999999, 1, 1, 0, 0), 0);
    ck_assert_uint_eq(disp_progress_count(P, 1), added + 2);
#endif
}
END_TEST

/* Through the service: 3,000 workers serving one job, with their CPU per element in the delivered table
 * and their links' rates in the received one. The re-planner's input (disp_replan_gather) has every
 * worker's cost and rate, not the first 64; /metrics has a row per producer and the tables' memory; a dead
 * worker evicted from the registry by a new one takes its rows with it. */
static struct disp_service *S;

static void commit_ok(struct disp_update u)
{
    char err[256] = "";
    pthread_mutex_lock(&S->mu);
    const int rc = disp_commit(S, &u, err, sizeof err);
    pthread_mutex_unlock(&S->mu);
    ck_assert_msg(rc == 0, "update %d: %s", u.kind, err);
}

static double cost_of(uint64_t w) { return 1000.0 + (double)w; }
static double link_of(uint64_t w) { return 1e6 + 10.0 * (double)w; }

/* A service (S) of PRODUCERS registered workers taking max_jobs jobs, and a packed pipeline for its jobs. */
static uint8_t packed[64];
static size_t plen;
static void service_with_workers(int max_jobs)
{
    const struct disp_service_opts o = {.worker_timeout_ms = 60000, .client_timeout_ms = 60000,
                                        .heartbeat_interval_ms = 500, .max_workers = PRODUCERS,
                                        .max_jobs = max_jobs, .max_jobs_per_client = max_jobs};
    char err[256];
    ck_assert_int_eq(disp_service_create(&o, &S, err, sizeof err), 0);
    const int64_t now = spw_now_ms();
    for (uint64_t w = 1; w <= PRODUCERS; w++)
        commit_ok((struct disp_update){.kind = DISP_REGISTER_WORKER, .worker = w, .address = "127.0.0.1:1",
                                       .threads = 1, .now_ms = now, .secret = 1});
    Spillway__V1__Pipeline pl = SPILLWAY__V1__PIPELINE__INIT;
    Spillway__V1__Batch batch = SPILLWAY__V1__BATCH__INIT;
    batch.size = 2;
    batch.opt_size_case = SPILLWAY__V1__BATCH__OPT_SIZE_SIZE;
    pl.batch = &batch;
    plen = spillway__v1__pipeline__pack(&pl, packed);
}

START_TEST(test_progress_replan_input_sees_every_producer)
{
    service_with_workers(0);
    const int64_t now = spw_now_ms();
    const uint64_t job = 9;
    commit_ok((struct disp_update){.kind = DISP_CREATE_JOB, .job = job, .n_samples = 6400, .split_size = 64,
                                   .epochs = 1, .world_size = 1, .cut = 1, .manifest_hash = 77, .pipeline = packed,
                                   .pipeline_len = plen, .secret = 5});
    pthread_mutex_lock(&S->mu);
    int failed = 0;
    for (uint64_t w = 1; w <= PRODUCERS; w++) {
        const int64_t cpu = (int64_t)(cost_of(w) * 1000);      /* 1000 elements over each 1 s window */
        failed |= disp_progress_report(S->progress, job, w, 0, 0, 1, 1000);
        failed |= disp_progress_report(S->progress, job, w, 1000, 1000, 1 + cpu, 2000);
        failed |= disp_progress_report(S->received, job, w, 0, 0, 0, 1000);
        failed |= disp_progress_report(S->received, job, w, 1000, (int64_t)link_of(w), 0, 2000);
    }
    pthread_mutex_unlock(&S->mu);
    ck_assert_int_eq(failed, 0);
    struct disp_replan_input in;
    ck_assert_int_eq(disp_replan_gather(S, job, true, &in), 0);
    ck_assert_uint_eq(in.n_workers, PRODUCERS);
    size_t wrong = 0;
    for (size_t i = 0; i < in.n_workers; i++) {
        const uint64_t w = in.workers[i]->worker_id;
        wrong += fabs(in.worker_ns[i] - cost_of(w)) > 1e-6 || fabs(in.delivered_bytes_per_s[i] - link_of(w)) > 1e-6;
    }
    ck_assert_uint_eq(wrong, 0);
    disp_replan_input_free(&in);

    struct spw_prom prom;
    spw_prom_init(&prom);
    disp_service_metrics(S, &prom);
    ck_assert(!prom.oom);
    size_t rows = 0;
    for (const char *q = prom.buf; (q = strstr(q, "\nspillway_job_producer_elements_total{")); q++)
        rows++;
    ck_assert_uint_eq(rows, PRODUCERS);
    ck_assert_ptr_nonnull(strstr(prom.buf, "producer=\"worker:2999\"} 1000\n"));
    ck_assert_ptr_nonnull(strstr(prom.buf, "spillway_dispatcher_progress_entries{table=\"received\"} 3000\n"));
    ck_assert_ptr_nonnull(strstr(prom.buf, "spillway_dispatcher_progress_bytes{table=\"delivered\"} "));
    spw_prom_free(&prom);

    /* Worker 17 dies; a new worker takes its place in the full registry: 17's rows go from both tables. */
    commit_ok((struct disp_update){.kind = DISP_WORKER_DEAD, .worker = 17});
    pthread_mutex_lock(&S->mu);
    ck_assert_ptr_nonnull(disp_progress_find(S->progress, job, 17));  /* dead, still registered: kept */
    pthread_mutex_unlock(&S->mu);
    commit_ok((struct disp_update){.kind = DISP_REGISTER_WORKER, .worker = PRODUCERS + 1, .address = "127.0.0.1:2",
                                   .threads = 1, .now_ms = now, .secret = 1});
    pthread_mutex_lock(&S->mu);
    ck_assert_ptr_null(disp_progress_find(S->progress, job, 17));
    ck_assert_ptr_null(disp_progress_find(S->received, job, 17));
    ck_assert_uint_eq(disp_progress_count(S->progress, job), PRODUCERS - 1);
    ck_assert_uint_eq(disp_progress_count(S->received, job), PRODUCERS - 1);
    pthread_mutex_unlock(&S->mu);
    disp_service_destroy(S);
}
END_TEST

/* Issue 42's point: 3,000 workers x 400 jobs (1.2 M (worker, job) pairs, past the old 1,024-entry cap a
 * thousand times over), each pair's delivered counts and its link's received bytes reported: for every job
 * the re-planner's input has all 3,000 workers with their own cost and link rate. */
START_TEST(test_progress_3000_workers_by_400_jobs_all_reach_the_replanner)
{
    service_with_workers(SERVICE_JOBS);
    for (uint64_t j = 1; j <= SERVICE_JOBS; j++)
        commit_ok((struct disp_update){.kind = DISP_CREATE_JOB, .job = j, .n_samples = 6400, .split_size = 64,
                                       .epochs = 1, .world_size = 1, .cut = 1, .manifest_hash = 77,
                                       .pipeline = packed, .pipeline_len = plen, .secret = 5 + j});
    /* A cost and a link rate of each pair's own: worker w on job j. */
    pthread_mutex_lock(&S->mu);
    int failed = 0;
    for (uint64_t j = 1; j <= SERVICE_JOBS; j++)
        for (uint64_t w = 1; w <= PRODUCERS; w++) {
            const int64_t cpu = (int64_t)((cost_of(w) + (double)j) * 1000);
            failed |= disp_progress_report(S->progress, j, w, 0, 0, 1, 1000);
            failed |= disp_progress_report(S->progress, j, w, 1000, 1000, 1 + cpu, 2000);
            failed |= disp_progress_report(S->received, j, w, 0, 0, 0, 1000);
            failed |= disp_progress_report(S->received, j, w, 1000, (int64_t)(link_of(w) + (double)j), 0, 2000);
        }
    struct disp_progress_stats ps;
    disp_progress_stats(S->progress, &ps);
    pthread_mutex_unlock(&S->mu);
    ck_assert_int_eq(failed, 0);
    ck_assert_uint_eq(ps.entries, (size_t)PRODUCERS * SERVICE_JOBS);
    ck_assert_uint_eq(ps.dropped, 0);
    size_t wrong = 0;
    for (uint64_t j = 1; j <= SERVICE_JOBS; j++) {
        struct disp_replan_input in;
        ck_assert_int_eq(disp_replan_gather(S, j, true, &in), 0);
        ck_assert_uint_eq(in.n_workers, PRODUCERS);
        for (size_t i = 0; i < in.n_workers; i++) {
            const uint64_t w = in.workers[i]->worker_id;
            wrong += fabs(in.worker_ns[i] - (cost_of(w) + (double)j)) > 1e-6 ||
                     fabs(in.delivered_bytes_per_s[i] - (link_of(w) + (double)j)) > 1e-6;
        }
        disp_replan_input_free(&in);
    }
    ck_assert_uint_eq(wrong, 0);
    disp_service_destroy(S);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("progress");
    TCase *tc = tcase_create("progress");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_progress_rates_and_cpu_per_element);
    tcase_add_test(tc, test_progress_keeps_jobs_and_producers_apart);
    tcase_add_test(tc, test_progress_keeps_every_pair_past_the_old_cap);
    tcase_add_test(tc, test_progress_forgets_a_worker_and_a_job);
    tcase_add_test(tc, test_progress_out_of_memory_drops_the_report);
    tcase_add_test(tc, test_progress_replan_input_sees_every_producer);
    tcase_add_test(tc, test_progress_3000_workers_by_400_jobs_all_reach_the_replanner);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
