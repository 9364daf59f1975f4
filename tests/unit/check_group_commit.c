/* tests/unit/check_group_commit.c - the dispatcher's journal group commit (dispatcher/service.c
 * journal_durable): 4 threads commit batches of durable updates at once, each waiting for its records'
 * sync with the service lock released (one syncs, the others share it); afterwards every record is on disk
 * (synced == written) and a dispatcher started on the same work dir replays every update; commits outside a
 * batch, synced under the lock, mix in. A sync that fails meanwhile fails only the calls whose records it
 * cut: every commit that said 0 is replayed. */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/service_internal.h"
#include "lib/clock.h"
#include "tests/unit/check_run.h"

#define THREADS 4
#define ROUNDS 150
#define PER_BATCH 3

static struct disp_service *S;
static char g_dir[64];
static bool g_ok[THREADS + 1][ROUNDS * (PER_BATCH + 1) + 1];  /* [thread][k]: its registration's commit said 0 */

static struct disp_service *open_service(void)
{
    const struct disp_service_opts o = {.worker_timeout_ms = 600000, .client_timeout_ms = 600000,
                                        .heartbeat_interval_ms = 500, .max_workers = 4096, .work_dir = g_dir};
    struct disp_service *s = NULL;
    char err[256] = "";
    ck_assert_msg(disp_service_create(&o, &s, err, sizeof err) == 0, "%s", err);
    return s;
}

/* Thread t registers workers t*10000 + k: PER_BATCH in a batch, then one alone (synced under the lock). */
static void *committer(void *arg)
{
    const uint64_t t = (uint64_t)(uintptr_t)arg;
    int failed = 0;
    for (int r = 0; r < ROUNDS; r++) {
        char err[256];
        pthread_mutex_lock(&S->mu);
        disp_batch_begin(S);
        for (int k = 0; k < PER_BATCH; k++) {
            struct disp_update u = {.kind = DISP_REGISTER_WORKER, .worker = t * 10000 + (uint64_t)(r * (PER_BATCH + 1) + k) + 1,
                                    .address = "127.0.0.1:1", .threads = 1, .now_ms = spw_now_ms(), .secret = 7};
            failed += disp_commit(S, &u, err, sizeof err) != 0;
        }
        const bool batch_ok = disp_batch_end(S, err, sizeof err) == 0;
        failed += !batch_ok;
        for (int k = 0; k < PER_BATCH; k++)
            g_ok[t][r * (PER_BATCH + 1) + k + 1] = batch_ok;
        struct disp_update alone = {.kind = DISP_REGISTER_WORKER, .worker = t * 10000 + (uint64_t)(r * (PER_BATCH + 1) + PER_BATCH) + 1,
                                    .address = "127.0.0.1:1", .threads = 1, .now_ms = spw_now_ms(), .secret = 7};
        const bool alone_ok = disp_commit(S, &alone, err, sizeof err) == 0;
        failed += !alone_ok;
        g_ok[t][r * (PER_BATCH + 1) + PER_BATCH + 1] = alone_ok;
        pthread_mutex_unlock(&S->mu);
    }
    return (void *)(intptr_t)failed;
}

START_TEST(test_group_commit_concurrent_batches_all_reach_the_journal)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/spw-gc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    S = open_service();
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, committer, (void *)(uintptr_t)(t + 1));
    intptr_t failed = 0;
    for (int t = 0; t < THREADS; t++) {
        void *rv;
        pthread_join(th[t], &rv);
        failed += (intptr_t)rv;
    }
    ck_assert_int_eq(failed, 0);
    const int n = THREADS * ROUNDS * (PER_BATCH + 1);
    pthread_mutex_lock(&S->mu);
    ck_assert_uint_eq(S->j_written, (uint64_t)n);
    ck_assert_uint_eq(S->j_synced, S->j_written);
    ck_assert(!S->j_syncing);
    ck_assert_int_eq(disp_state_worker_count(S->st), n);
    pthread_mutex_unlock(&S->mu);
    disp_service_destroy(S);
    S = open_service();         /* the journal replayed: every registration */
    ck_assert_int_eq(disp_state_worker_count(S->st), n);
    for (int t = 1; t <= THREADS; t++)
        for (int k = 1; k <= ROUNDS * (PER_BATCH + 1); k++)
            ck_assert_msg(disp_state_worker_known(S->st, (uint64_t)t * 10000 + (uint64_t)k), "worker %d", t * 10000 + k);
    disp_service_destroy(S);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A sync fails (EIO) while the threads commit: the calls whose records it cut fail, the others succeed,
 * and after a restart every registration whose commit said 0 is in the journal. */
START_TEST(test_group_commit_a_failed_sync_fails_only_what_it_cut)
{
    setenv("SPILLWAY_FAILPOINT", "journal-sync:40:eio", 1);
    snprintf(g_dir, sizeof g_dir, "/tmp/spw-gc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    S = open_service();
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, committer, (void *)(uintptr_t)(t + 1));
    intptr_t failed = 0;
    for (int t = 0; t < THREADS; t++) {
        void *rv;
        pthread_join(th[t], &rv);
        failed += (intptr_t)rv;
    }
    ck_assert_int_gt(failed, 0);
    ck_assert_int_lt(failed, THREADS * ROUNDS * 2);
    disp_service_destroy(S);
    unsetenv("SPILLWAY_FAILPOINT");
    S = open_service();
    int acked = 0;
    for (int t = 1; t <= THREADS; t++)
        for (int k = 1; k <= ROUNDS * (PER_BATCH + 1); k++)
            if (g_ok[t][k]) {
                acked++;
                ck_assert_msg(disp_state_worker_known(S->st, (uint64_t)t * 10000 + (uint64_t)k),
                              "worker %d: its commit succeeded, its record is not in the journal", t * 10000 + k);
            }
    ck_assert_int_gt(acked, 0);
    disp_service_destroy(S);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("group_commit");
    TCase *tc = tcase_create("group_commit");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_group_commit_concurrent_batches_all_reach_the_journal);
    tcase_add_test(tc, test_group_commit_a_failed_sync_fails_only_what_it_cut);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
