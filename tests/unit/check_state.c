/* tests/unit/check_state.c - dispatcher/state.c without sockets: leases, generations, acks and epochs,
 * dead workers, client ranks and incarnations, expiry and pausing, speculative re-leases, caps, and that
 * replaying the same updates rebuilds the same state (the journal's premise). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "dispatcher/codec.h"
#include "dispatcher/journal_record.h"
#include "dispatcher/state.h"
#include "lib/err.h"
#include "lib/rng.h"
#include "proto/spillway.pb-c.h"

static struct disp_state *S;
static char err[256];

static void setup(void)
{
    ck_assert_int_eq(disp_state_create(NULL, &S), 0);
}

static void teardown(void)
{
    disp_state_destroy(S);
    S = NULL;
}

static void apply_ok(struct disp_update u)
{
    int rc = disp_state_apply(S, &u, err, sizeof err);
    ck_assert_msg(rc == 0, "update %d refused: %s", (int)u.kind, err);
}

static void worker(uint64_t id, int64_t now)
{
    apply_ok((struct disp_update){.kind = DISP_REGISTER_WORKER, .worker = id, .address = "127.0.0.1:1",
                                  .threads = 2, .now_ms = now});
}

/* n samples, split size s, epochs, world size w */
static void job(uint64_t id, int64_t n, int s, int64_t epochs, int w)
{
    static const uint8_t pipe[] = {1, 2, 3};
    apply_ok((struct disp_update){.kind = DISP_CREATE_JOB, .job = id, .n_samples = n, .split_size = s,
                                  .epochs = epochs, .world_size = w, .cut = 1, .manifest_hash = 77,
                                  .pipeline = pipe, .pipeline_len = sizeof pipe});
}

/* Pick and apply a lease; returns 1 with *l, 0 if none. */
static int lease(uint64_t j, uint64_t producer, int64_t now, int64_t spec, struct disp_lease *l)
{
    int rc = disp_state_pick_lease(S, j, producer, now, spec, l);
    ck_assert_int_ge(rc, 0);
    if (rc == 1)
        apply_ok((struct disp_update){.kind = DISP_LEASE, .job = j, .producer = producer, .epoch = l->epoch,
                                      .split = l->split, .generation = l->generation, .now_ms = now});
    return rc;
}

static void ack(uint64_t j, uint64_t epoch, uint64_t split)
{
    apply_ok((struct disp_update){.kind = DISP_ACK, .job = j, .epoch = epoch, .split = split});
}

START_TEST(test_state_leases_cover_each_split_once_then_epochs_advance)
{
    worker(1, 0);
    job(9, 130, 64, 2, 1);                 /* 3 splits per epoch: 64, 64, 2 */
    struct disp_lease l;
    for (int e = 0; e < 2; e++) {
        for (int s = 0; s < 3; s++) {
            ck_assert_int_eq(lease(9, 1, 10, 0, &l), 1);
            ck_assert_uint_eq(l.epoch, (uint64_t)e);
            ck_assert_uint_eq(l.split, (uint64_t)s);
            ck_assert_uint_eq(l.generation, 1);
            ck_assert_int_eq(l.first_position, s * 64);
            ck_assert_int_eq(l.count, s == 2 ? 2 : 64);
        }
        for (int s = 0; s < 3; s++)
            ack(9, (uint64_t)e, (uint64_t)s);
    }
    struct disp_job_info ji;
    ck_assert_int_eq(disp_state_job(S, 9, &ji), 0);
    ck_assert(ji.finished);
    ck_assert_int_eq(lease(9, 1, 10, 0, &l), 0);
    ack(9, 1, 2);                          /* a duplicate ack after the end is harmless */
}
END_TEST

START_TEST(test_state_next_epoch_only_when_nothing_pending)
{
    job(1, 4, 2, 0, 1);                    /* forever; 2 splits per epoch */
    struct disp_lease l;
    ck_assert_int_eq(lease(1, 5, 0, 0, &l), 1);
    ck_assert_uint_eq(l.epoch, 0);
    ck_assert_int_eq(lease(1, 5, 0, 0, &l), 1);
    ck_assert_uint_eq(l.epoch, 0);
    ck_assert_int_eq(lease(1, 5, 0, 0, &l), 1);      /* epoch 0 all leased: epoch 1 may start */
    ck_assert_uint_eq(l.epoch, 1);
    ck_assert_int_eq(lease(1, 5, 0, 0, &l), 1);
    ck_assert_int_eq(lease(1, 5, 0, 0, &l), 0);      /* never further than the next epoch */
    ack(1, 0, 0);
    ack(1, 0, 1);                          /* epoch 0 done: epoch 2 opens */
    ck_assert_int_eq(lease(1, 5, 0, 0, &l), 1);
    ck_assert_uint_eq(l.epoch, 2);
}
END_TEST

START_TEST(test_state_dead_worker_releases_with_new_generation)
{
    worker(1, 0);
    worker(2, 0);
    job(3, 256, 64, 1, 1);
    struct disp_lease l;
    ck_assert_int_eq(lease(3, 1, 0, 0, &l), 1);
    ck_assert_int_eq(lease(3, 2, 0, 0, &l), 1);
    uint64_t dead[4];
    apply_ok((struct disp_update){.kind = DISP_WORKER_HEARTBEAT, .worker = 2, .now_ms = 5000});
    ck_assert_int_eq(disp_state_dead_workers(S, 5000, 3000, dead, 4), 1);
    ck_assert_uint_eq(dead[0], 1);
    ck_assert_int_eq(disp_state_leased_total(S), 2);
    apply_ok((struct disp_update){.kind = DISP_WORKER_DEAD, .worker = 1});
    ck_assert_int_eq(disp_state_leased_total(S), 1);         /* what the leases-expired metric counts */
    enum disp_split_state st;
    uint64_t gen, holder;
    ck_assert_int_eq(disp_state_split(S, 3, 0, 0, &st, &gen, &holder), 0);
    ck_assert_int_eq(st, DISP_SPLIT_PENDING);
    ck_assert_int_eq(lease(3, 2, 6000, 0, &l), 1);
    ck_assert_uint_eq(l.split, 0);                   /* the released split comes first */
    ck_assert_uint_eq(l.generation, 2);
    struct disp_update beat = {.kind = DISP_WORKER_HEARTBEAT, .worker = 1, .now_ms = 7000};
    ck_assert_int_eq(disp_state_apply(S, &beat, err, sizeof err), -ENOENT);   /* retired until it registers */
}
END_TEST

START_TEST(test_state_client_producers_get_their_rank_only)
{
    job(4, 64 * 8, 64, 1, 2);              /* 8 splits, 2 ranks */
    struct disp_lease l;
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(lease(4, DISP_CLIENT_PRODUCER(4, 1), 0, 0, &l), 1);
        ck_assert_uint_eq(l.split % 2, 1);
    }
    ck_assert_int_eq(lease(4, DISP_CLIENT_PRODUCER(4, 1), 0, 0, &l), 0);
    ck_assert_int_eq(lease(4, 77, 0, 0, &l), 1);     /* a worker takes any rank's */
    ck_assert_uint_eq(l.split, 0);
}
END_TEST

START_TEST(test_state_speculative_lease_of_a_straggler)
{
    job(5, 128, 64, 1, 1);
    struct disp_lease l;
    ck_assert_int_eq(lease(5, 1, 0, 1000, &l), 1);
    ck_assert_int_eq(lease(5, 1, 0, 1000, &l), 1);
    ck_assert_int_eq(lease(5, 2, 500, 1000, &l), 0);          /* not late yet */
    ck_assert_int_eq(lease(5, 1, 5000, 1000, &l), 0);         /* never to the holder itself */
    ck_assert_int_eq(lease(5, 2, 5000, 1000, &l), 1);
    ck_assert(l.speculative);
    ck_assert_uint_eq(l.generation, 2);
    ck_assert_int_eq(lease(5, 3, 5000, 1000, &l), 1);         /* the other split */
    ck_assert_uint_eq(l.split, 1);
    ck_assert_int_eq(lease(5, 4, 5000, 1000, &l), 0);         /* both just re-leased */
}
END_TEST

START_TEST(test_state_client_incarnations_fence_zombies)
{
    job(6, 128, 64, 1, 1);
    apply_ok((struct disp_update){.kind = DISP_CLIENT_HEARTBEAT, .job = 6, .rank = 0, .incarnation = 5, .now_ms = 1});
    struct disp_lease l;
    uint64_t me = DISP_CLIENT_PRODUCER(6, 0);
    ck_assert_int_eq(lease(6, me, 1, 0, &l), 1);
    struct disp_update old = {.kind = DISP_CLIENT_HEARTBEAT, .job = 6, .rank = 0, .incarnation = 4, .now_ms = 2};
    ck_assert_int_eq(disp_state_apply(S, &old, err, sizeof err), -ESTALE);
    ck_assert(strstr(err, "zombie") != NULL);
    apply_ok((struct disp_update){.kind = DISP_CLIENT_HEARTBEAT, .job = 6, .rank = 0, .incarnation = 6, .now_ms = 3});
    enum disp_split_state st;
    uint64_t gen, holder;
    ck_assert_int_eq(disp_state_split(S, 6, 0, 0, &st, &gen, &holder), 0);
    ck_assert_int_eq(st, DISP_SPLIT_PENDING);         /* the old incarnation's lease was released */
    ck_assert_uint_eq(disp_state_client_incarnation(S, 6, 0), 6);
}
END_TEST

START_TEST(test_state_expired_clients_pause_the_job_and_free_leases)
{
    worker(1, 0);
    job(7, 256, 64, 1, 1);
    apply_ok((struct disp_update){.kind = DISP_CLIENT_HEARTBEAT, .job = 7, .rank = 0, .incarnation = 1, .now_ms = 0});
    struct disp_lease l;
    ck_assert_int_eq(lease(7, 1, 0, 0, &l), 1);
    uint64_t jobs[4];
    int32_t ranks[4];
    ck_assert_int_eq(disp_state_expired_clients(S, 100, 1000, jobs, ranks, 4), 0);
    ck_assert_int_eq(disp_state_expired_clients(S, 5000, 1000, jobs, ranks, 4), 1);
    ck_assert_uint_eq(jobs[0], 7);
    apply_ok((struct disp_update){.kind = DISP_CLIENT_EXPIRED, .job = 7, .rank = 0});
    struct disp_job_info ji;
    disp_state_job(S, 7, &ji);
    ck_assert(ji.paused);
    ck_assert_int_eq(ji.leased, 0);
    ck_assert_int_eq(lease(7, 1, 5000, 0, &l), 0);
    struct disp_worker_info wi;
    disp_state_worker_at(S, 0, &wi);
    ck_assert_int_eq(wi.leases, 0);
    apply_ok((struct disp_update){.kind = DISP_CLIENT_HEARTBEAT, .job = 7, .rank = 0, .incarnation = 1, .now_ms = 6000});
    ck_assert_int_eq(lease(7, 1, 6000, 0, &l), 1);   /* resumes, split 0 again with a new generation */
    ck_assert_uint_eq(l.split, 0);
    ck_assert_uint_eq(l.generation, 2);
}
END_TEST

/* Re-planning: a new cut goes to new leases only; leased splits keep the cut they were leased with. */
START_TEST(test_state_max_workers_limits_a_job_to_the_first_alive)
{
    worker(1, 0);
    worker(2, 0);
    worker(3, 0);
    static const uint8_t pipe[] = {1};
    apply_ok((struct disp_update){.kind = DISP_CREATE_JOB, .job = 4, .n_samples = 640, .split_size = 64,
                                  .epochs = 1, .world_size = 1, .cut = 1, .max_workers = 2, .pipeline = pipe,
                                  .pipeline_len = sizeof pipe});
    job(5, 640, 64, 1, 1);                          /* no limit */
    struct disp_lease l;
    ck_assert(disp_state_worker_serves(S, 4, 1) && disp_state_worker_serves(S, 4, 2));
    ck_assert(!disp_state_worker_serves(S, 4, 3));
    ck_assert(disp_state_worker_serves(S, 5, 3));
    ck_assert_int_eq(lease(4, 3, 0, 0, &l), 0);     /* not one of the job's two */
    ck_assert_int_eq(lease(4, 2, 0, 0, &l), 1);
    ck_assert_int_eq(lease(5, 3, 0, 0, &l), 1);
    ck_assert_int_eq(lease(4, DISP_CLIENT_PRODUCER(4, 0), 0, 0, &l), 1);   /* the client always produces */
    apply_ok((struct disp_update){.kind = DISP_WORKER_DEAD, .worker = 1});
    ck_assert(disp_state_worker_serves(S, 4, 3));   /* the dead one's place goes to the next */
    ck_assert_int_eq(lease(4, 3, 0, 0, &l), 1);
    struct disp_job_info ji;
    ck_assert_int_eq(disp_state_job(S, 4, &ji), 0);
    ck_assert_int_eq(ji.max_workers, 2);
    struct disp_update bad = {.kind = DISP_CREATE_JOB, .job = 6, .n_samples = 1, .split_size = 1, .epochs = 1,
                              .world_size = 1, .max_workers = -1, .pipeline = pipe, .pipeline_len = sizeof pipe};
    ck_assert_int_eq(disp_state_apply(S, &bad, err, sizeof err), -EINVAL);
}
END_TEST

START_TEST(test_state_set_cut_applies_to_new_leases)
{
    worker(1, 0);
    job(9, 40, 10, 1, 1);
    struct disp_lease a, b;
    ck_assert_int_eq(lease(9, 1, 0, 0, &a), 1);
    ck_assert_int_eq(a.cut, 1);
    apply_ok((struct disp_update){.kind = DISP_SET_CUT, .job = 9, .cut = 3});
    ck_assert_int_eq(lease(9, 1, 0, 0, &b), 1);
    ck_assert_int_eq(b.cut, 3);
    ck_assert_uint_ne(a.split, b.split);
    struct disp_job_info ji;
    ck_assert_int_eq(disp_state_job(S, 9, &ji), 0);
    ck_assert_int_eq(ji.cut, 3);
    struct disp_update bad = {.kind = DISP_SET_CUT, .job = 9, .cut = -1};
    ck_assert_int_lt(disp_state_apply(S, &bad, err, sizeof err), 0);
    bad.job = 10;
    bad.cut = 2;
    ck_assert_int_lt(disp_state_apply(S, &bad, err, sizeof err), 0);
    ck_assert_int_eq(disp_state_job(S, 9, &ji), 0);
    ck_assert_int_eq(ji.cut, 3);                    /* refused updates changed nothing */
}
END_TEST

/* Handed back to its clients: the workers' leased splits are pending again (a new generation), workers get no
 * leases and serve the job no more, the client's own producers lease every split and the job completes. */
START_TEST(test_state_client_only_hands_the_job_back)
{
    worker(1, 0);
    worker(2, 0);
    job(4, 256, 64, 1, 1);
    const uint64_t me = DISP_CLIENT_PRODUCER(4, 0);
    struct disp_lease w1, w2, c;
    ck_assert_int_eq(lease(4, 1, 0, 0, &w1), 1);
    ck_assert_int_eq(lease(4, me, 0, 0, &c), 1);
    ck_assert_int_eq(lease(4, 2, 0, 0, &w2), 1);
    ck_assert(disp_state_worker_serves(S, 4, 1));
    apply_ok((struct disp_update){.kind = DISP_CLIENT_ONLY, .job = 4});
    struct disp_job_info ji;
    ck_assert_int_eq(disp_state_job(S, 4, &ji), 0);
    ck_assert(ji.client_only);
    ck_assert_int_eq(ji.leased, 1);                 /* only the client's own split is still leased */
    ck_assert(!disp_state_worker_serves(S, 4, 1) && !disp_state_worker_serves(S, 4, 2));
    struct disp_lease l;
    ck_assert_int_eq(disp_state_pick_lease(S, 4, 1, 0, 0, &l), 0);
    ck_assert_int_eq(disp_state_pick_lease(S, 4, 2, 100000, 1, &l), 0);     /* not even speculatively */
    enum disp_split_state st;
    uint64_t gen, holder;
    ck_assert_int_eq(disp_state_split(S, 4, 0, c.split, &st, &gen, &holder), 0);
    ck_assert_int_eq(st, DISP_SPLIT_LEASED);
    ck_assert_uint_eq(holder, me);
    ack(4, 0, c.split);
    int got = 0;
    while (lease(4, me, 0, 0, &l) == 1) {
        if (l.split == w1.split || l.split == w2.split)
            ck_assert_uint_eq(l.generation, 2);     /* the workers' copies are stale */
        ack(4, l.epoch, l.split);
        got++;
    }
    ck_assert_int_eq(got, 3);
    ck_assert_int_eq(disp_state_job(S, 4, &ji), 0);
    ck_assert(ji.finished);
    struct disp_update bad = {.kind = DISP_CLIENT_ONLY, .job = 5};
    ck_assert_int_eq(disp_state_apply(S, &bad, err, sizeof err), -ENOENT);
}
END_TEST

/* A rank resuming from a checkpoint: its splits of open epochs before the checkpoint's epoch and the done
 * ones of it count as acked; the rest of its splits - acked or leased to anyone - are pending again; other
 * ranks' splits are untouched. */
START_TEST(test_state_resume_reopens_a_ranks_undelivered_splits)
{
    job(6, 64 * 8, 64, 3, 2);              /* 8 splits, 2 ranks, 3 epochs */
    struct disp_lease l;
    for (int k = 0; k < 8; k++)             /* a worker leases all of epoch 0 */
        ck_assert_int_eq(lease(6, 77, 0, 0, &l), 1);
    for (uint64_t s = 0; s < 8; s++)
        if (s != 6)
            ack(6, 0, s);                   /* rank 0 has 0 2 4; rank 1 has 1 3 5 7; 6 is still leased */
    struct disp_job_info ji;
    ck_assert_int_eq(disp_state_job(S, 6, &ji), 0);
    ck_assert_int_eq(ji.epoch, 0);
    const uint64_t done[] = {1, 5};
    apply_ok((struct disp_update){.kind = DISP_CLIENT_RESUME, .job = 6, .rank = 1, .epoch = 0, .splits = done,
                                  .n_splits = 2});
    enum disp_split_state st;
    uint64_t gen, holder;
    const enum disp_split_state want[8] = {DISP_SPLIT_ACKED, DISP_SPLIT_ACKED, DISP_SPLIT_ACKED, DISP_SPLIT_PENDING,
                                           DISP_SPLIT_ACKED, DISP_SPLIT_ACKED, DISP_SPLIT_LEASED, DISP_SPLIT_PENDING};
    for (uint64_t s = 0; s < 8; s++) {
        ck_assert_int_eq(disp_state_split(S, 6, 0, s, &st, &gen, &holder), 0);
        ck_assert_msg(st == want[s], "split %llu: state %d, want %d", (unsigned long long)s, (int)st, (int)want[s]);
    }
    ck_assert_int_eq(lease(6, DISP_CLIENT_PRODUCER(6, 1), 0, 0, &l), 1);      /* leased again */
    ck_assert_uint_eq(l.split, 3);
    ck_assert_uint_eq(l.generation, 2);

    /* Resuming at epoch 1: rank 0's epoch-0 splits count as delivered, its epoch-1 ones as pending. */
    apply_ok((struct disp_update){.kind = DISP_CLIENT_RESUME, .job = 6, .rank = 0, .epoch = 1});
    ck_assert_int_eq(disp_state_split(S, 6, 0, 6, &st, &gen, &holder), 0);
    ck_assert_int_eq(st, DISP_SPLIT_ACKED);
    const uint64_t bad[] = {2};             /* rank 0's split, not rank 1's */
    struct disp_update u = {.kind = DISP_CLIENT_RESUME, .job = 6, .rank = 1, .epoch = 0, .splits = bad,
                            .n_splits = 1};
    ck_assert_int_eq(disp_state_apply(S, &u, err, sizeof err), -EINVAL);
}
END_TEST

/* A rank resuming far ahead of the job's open epochs (a dispatcher whose journal lost records) moves them on
 * to its epoch: every split before it delivered, its done splits of it acked, the rest pending; a second
 * rank's job moves on only as far as every rank's splits allow. */
START_TEST(test_state_resume_far_ahead_moves_the_epochs_on)
{
    job(3, 64 * 4, 64, 10, 1);             /* 4 splits, 1 rank, 10 epochs: epochs 0 and 1 open */
    const uint64_t done[] = {0, 2};
    apply_ok((struct disp_update){.kind = DISP_CLIENT_RESUME, .job = 3, .rank = 0, .epoch = 6, .splits = done,
                                  .n_splits = 2});
    struct disp_job_info ji;
    ck_assert_int_eq(disp_state_job(S, 3, &ji), 0);
    ck_assert_int_eq(ji.epoch, 6);
    ck_assert(!ji.finished);
    enum disp_split_state st;
    uint64_t gen, holder;
    for (uint64_t sp = 0; sp < 4; sp++) {
        ck_assert_int_eq(disp_state_split(S, 3, 6, sp, &st, &gen, &holder), 0);
        ck_assert_int_eq(st, sp % 2 == 0 ? DISP_SPLIT_ACKED : DISP_SPLIT_PENDING);
        ck_assert_int_eq(disp_state_split(S, 3, 7, sp, &st, &gen, &holder), 0);     /* the next one: open */
        ck_assert_int_eq(st, DISP_SPLIT_PENDING);
    }
    struct disp_lease l;
    ck_assert_int_eq(lease(3, 77, 0, 0, &l), 1);
    ck_assert_uint_eq(l.epoch, 6);
    ck_assert_uint_eq(l.split, 1);
    /* Past the last epoch: the job is finished. */
    apply_ok((struct disp_update){.kind = DISP_CLIENT_RESUME, .job = 3, .rank = 0, .epoch = 10});
    ck_assert_int_eq(disp_state_job(S, 3, &ji), 0);
    ck_assert(ji.finished);
    /* Two ranks: rank 0 far ahead cannot move the epochs past rank 1's undelivered splits. */
    job(4, 64 * 4, 64, 10, 2);
    apply_ok((struct disp_update){.kind = DISP_CLIENT_RESUME, .job = 4, .rank = 0, .epoch = 6});
    ck_assert_int_eq(disp_state_job(S, 4, &ji), 0);
    ck_assert_int_eq(ji.epoch, 0);
    char why[160];
    ck_assert_msg(disp_state_audit(S, why, sizeof why) == 0, "%s", why);
}
END_TEST

/* A job made for a resumed run starts at the checkpoint's epoch; names find unfinished jobs only. */
START_TEST(test_state_named_job_from_a_later_epoch)
{
    static const uint8_t pipe[] = {1};
    apply_ok((struct disp_update){.kind = DISP_CREATE_JOB, .job = 8, .n_samples = 128, .split_size = 64,
                                  .epochs = 3, .world_size = 1, .pipeline = pipe, .pipeline_len = 1,
                                  .name = "run-1", .first_epoch = 2});
    ck_assert_uint_eq(disp_state_named_job(S, "run-1"), 8);
    ck_assert_uint_eq(disp_state_named_job(S, "run-2"), 0);
    ck_assert_uint_eq(disp_state_named_job(S, ""), 0);
    struct disp_lease l;
    ck_assert_int_eq(lease(8, 77, 0, 0, &l), 1);
    ck_assert_uint_eq(l.epoch, 2);
    ack(8, 2, 0);
    ack(8, 2, 1);
    struct disp_job_info ji;
    ck_assert_int_eq(disp_state_job(S, 8, &ji), 0);
    ck_assert(ji.finished);
    ck_assert_int_eq(ji.epoch, 3);
    ck_assert_str_eq(ji.name, "run-1");
    ck_assert_uint_eq(disp_state_named_job(S, "run-1"), 0);       /* finished: a new run may take the name */
    struct disp_update u = {.kind = DISP_CREATE_JOB, .job = 9, .n_samples = 128, .split_size = 64, .epochs = 3,
                            .world_size = 1, .pipeline = pipe, .pipeline_len = 1, .first_epoch = 4};
    ck_assert_int_eq(disp_state_apply(S, &u, err, sizeof err), -EINVAL);
    u.first_epoch = 3;                          /* every epoch already delivered: created finished */
    ck_assert_int_eq(disp_state_apply(S, &u, err, sizeof err), 0);
    ck_assert_int_eq(disp_state_job(S, 9, &ji), 0);
    ck_assert(ji.finished && ji.epoch == 3);
}
END_TEST

START_TEST(test_state_refuses_bad_updates_and_changes_nothing)
{
    job(8, 128, 64, 1, 1);
    struct disp_update u = {.kind = DISP_LEASE, .job = 8, .producer = 1, .epoch = 0, .split = 0, .generation = 3};
    ck_assert_int_eq(disp_state_apply(S, &u, err, sizeof err), -EINVAL);
    ck_assert(strstr(err, "generation") != NULL);
    u.generation = 1;
    u.split = 99;
    ck_assert_int_eq(disp_state_apply(S, &u, err, sizeof err), -EINVAL);
    u.job = 1234;
    ck_assert_int_eq(disp_state_apply(S, &u, err, sizeof err), -ENOENT);
    struct disp_update dup = {.kind = DISP_CREATE_JOB, .job = 8, .n_samples = 1, .split_size = 1, .epochs = 1,
                              .world_size = 1};
    ck_assert_int_eq(disp_state_apply(S, &dup, err, sizeof err), -EEXIST);
    struct disp_update huge = {.kind = DISP_CREATE_JOB, .job = 99, .n_samples = INT64_C(1) << 40, .split_size = 1,
                               .epochs = 1, .world_size = 1};
    ck_assert_int_lt(disp_state_apply(S, &huge, err, sizeof err), 0);
    ck_assert(strstr(err, "cap") != NULL);
    ck_assert_int_eq(disp_state_job_count(S), 1);
    struct disp_job_info ji;
    disp_state_job(S, 8, &ji);
    ck_assert_int_eq(ji.pending, 2);
}
END_TEST

/* The row answers (disp_state_job_servers, disp_state_worker_jobs, disp_state_worker_tasks) equal
 * disp_state_worker_serves asked one by one, over random mixes of alive and dead workers, capped jobs, refusals and jobs handed back. */
START_TEST(test_state_serving_rows_match_one_by_one)
{
    struct spw_rng r;
    spw_rng_init(&r, 77, 0, 0, 0);
    for (int round = 0; round < 40; round++) {
        teardown();
        setup();
        const int nw = 1 + (int)spw_rng_below(&r, 12), nj = 1 + (int)spw_rng_below(&r, 6);
        for (int w = 1; w <= nw; w++)
            worker((uint64_t)w, 0);
        for (int k = 1; k <= nj; k++)
            apply_ok((struct disp_update){.kind = DISP_CREATE_JOB, .job = 100 + (uint64_t)k, .n_samples = 64,
                                          .split_size = 64, .epochs = 1, .world_size = 1, .cut = 1,
                                          .max_workers = (int32_t)spw_rng_below(&r, 4),
                                          .pipeline = (const uint8_t *)"p", .pipeline_len = 1});
        for (int e = 0; e < nw; e++) {
            const uint64_t w = 1 + spw_rng_below(&r, (uint32_t)nw), jb = 101 + spw_rng_below(&r, (uint32_t)nj);
            switch (spw_rng_below(&r, 4)) {
            case 0: apply_ok((struct disp_update){.kind = DISP_WORKER_DEAD, .worker = w}); break;
            case 1: disp_state_apply(S, &(struct disp_update){.kind = DISP_WORKER_REFUSES, .job = jb, .worker = w,
                                                              .reason = "r"}, NULL, 0); break;
            case 2: if (spw_rng_below(&r, 4) == 0)
                        apply_ok((struct disp_update){.kind = DISP_CLIENT_ONLY, .job = jb});
                    break;
            default: break;
            }
        }
        uint64_t wid[16], jid[16];
        for (int i = 0; i < nw; i++) {
            struct disp_worker_info wi;
            disp_state_worker_at(S, i, &wi);
            wid[i] = wi.id;
        }
        for (int k = 0; k < nj; k++) {
            struct disp_job_info ji;
            disp_state_job_at(S, k, &ji);
            jid[k] = ji.id;
        }
        bool row[16];
        for (int k = 0; k < nj; k++) {
            ck_assert_int_eq(disp_state_job_servers(S, jid[k], row, 16), nw);
            for (int i = 0; i < nw; i++)
                ck_assert_msg(row[i] == disp_state_worker_serves(S, jid[k], wid[i]), "round %d job %d worker %d",
                              round, k, i);
        }
        for (int i = 0; i < nw; i++) {
            ck_assert_int_eq(disp_state_worker_jobs(S, wid[i], row, 16), nj);
            for (int k = 0; k < nj; k++)
                ck_assert_msg(row[k] == disp_state_worker_serves(S, jid[k], wid[i]), "round %d worker %d job %d",
                              round, i, k);
        }
        for (int i = 0; i < nw; i++) {     /* a heartbeat's tasks: the jobs served, in table order */
            struct disp_task t[16];
            const int n = disp_state_worker_tasks(S, wid[i], t, 16);
            int m = 0;
            for (int k = 0; k < nj; k++) {
                if (!disp_state_worker_serves(S, jid[k], wid[i]))
                    continue;
                ck_assert_msg(m < n && t[m].job == jid[k], "round %d worker %d job %d", round, i, k);
                ck_assert_uint_eq(t[m].secret, disp_state_job_secret(S, jid[k]));
                ck_assert(t[m].pipeline_len == 1 && t[m].pipeline[0] == 'p' && t[m].cut == 1 && t[m].world_size == 1);
                m++;
            }
            ck_assert_int_eq(n, m);
        }
        ck_assert_int_eq(disp_state_job_servers(S, 999, row, 16), -ENOENT);
        ck_assert_int_eq(disp_state_worker_jobs(S, 999, row, 16), -ENOENT);
        ck_assert_int_eq(disp_state_worker_tasks(S, 999, NULL, 0), -ENOENT);
    }
}
END_TEST

/* A random workload as updates; returns them so they can be replayed. */
static int random_run(struct disp_state *s, struct disp_update *log, int cap, uint64_t seed)
{
    struct spw_rng r;
    spw_rng_init(&r, seed, 0, 0, 0);
    int n = 0;
    struct disp_update u;
    for (uint64_t w = 1; w <= 3; w++) {
        u = (struct disp_update){.kind = DISP_REGISTER_WORKER, .worker = w, .address = "a", .now_ms = 0};
        disp_state_apply(s, &u, NULL, 0);
        log[n++] = u;
    }
    u = (struct disp_update){.kind = DISP_CREATE_JOB, .job = 1, .n_samples = 1000, .split_size = 64, .epochs = 3,
                             .world_size = 2};
    disp_state_apply(s, &u, NULL, 0);
    log[n++] = u;
    for (int64_t t = 1; n < cap - 2; t++) {
        uint32_t what = spw_rng_below(&r, 10);
        uint64_t prod = what < 6 ? 1 + spw_rng_below(&r, 3) : DISP_CLIENT_PRODUCER(1, spw_rng_below(&r, 2));
        struct disp_lease l;
        if (what < 8) {
            if (disp_state_pick_lease(s, 1, prod, t, 50, &l) != 1)
                continue;
            u = (struct disp_update){.kind = DISP_LEASE, .job = 1, .producer = prod, .epoch = l.epoch,
                                     .split = l.split, .generation = l.generation, .now_ms = t};
        } else if (what == 8) {
            u = (struct disp_update){.kind = DISP_WORKER_DEAD, .worker = 1 + spw_rng_below(&r, 3)};
        } else {
            struct disp_job_info ji;
            disp_state_job(s, 1, &ji);
            if (ji.finished)
                break;
            u = (struct disp_update){.kind = DISP_ACK, .job = 1, .epoch = (uint64_t)ji.epoch,
                                     .split = spw_rng_below(&r, (uint32_t)ji.splits_per_epoch)};
        }
        disp_state_apply(s, &u, NULL, 0);
        log[n++] = u;
        char why[160];
        ck_assert_msg(disp_state_audit(s, why, sizeof why) == 0, "after update %d: %s", n, why);
    }
    return n;
}

START_TEST(test_state_refusing_worker_loses_the_job_and_its_place)
{
    worker(1, 0);
    worker(2, 0);
    worker(3, 0);
    job(9, 640, 64, 1, 1);
    struct disp_update lim = {.kind = DISP_CREATE_JOB, .job = 10, .n_samples = 64, .split_size = 64, .epochs = 1,
                              .world_size = 1, .max_workers = 1, .pipeline = (const uint8_t *)"p", .pipeline_len = 1};
    apply_ok(lim);
    struct disp_lease l;
    ck_assert_int_eq(lease(9, 2, 0, 0, &l), 1);
    ck_assert(disp_state_worker_serves(S, 10, 1));
    ck_assert(!disp_state_worker_serves(S, 10, 2));
    uint64_t who = 0;
    ck_assert_ptr_null(disp_state_no_worker(S, 9, &who));
    /* Worker 2 cannot serve job 9: its split is pending again and it gets no more. */
    apply_ok((struct disp_update){.kind = DISP_WORKER_REFUSES, .job = 9, .worker = 2, .reason = "no mount"});
    enum disp_split_state st;
    uint64_t gen, holder;
    ck_assert_int_eq(disp_state_split(S, 9, 0, l.split, &st, &gen, &holder), 0);
    ck_assert_int_eq(st, DISP_SPLIT_PENDING);
    ck_assert(!disp_state_worker_serves(S, 9, 2));
    ck_assert(disp_state_worker_serves(S, 9, 1));
    ck_assert_int_eq(disp_state_pick_lease(S, 9, 2, 0, 0, &l), 0);
    ck_assert_int_eq(lease(9, 1, 0, 0, &l), 1);
    /* With max_workers 1, worker 1 refusing job 10 hands its place to worker 2. */
    apply_ok((struct disp_update){.kind = DISP_WORKER_REFUSES, .job = 10, .worker = 1, .reason = "other listing"});
    ck_assert(!disp_state_worker_serves(S, 10, 1));
    ck_assert(disp_state_worker_serves(S, 10, 2));
    /* Reasons are kept per worker (once each, the latest), capped in length. */
    char longer[600];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    apply_ok((struct disp_update){.kind = DISP_WORKER_REFUSES, .job = 9, .worker = 2, .reason = longer});
    struct disp_job_info ji;
    ck_assert_int_eq(disp_state_job(S, 9, &ji), 0);
    ck_assert_int_eq(ji.refusals, 1);
    const char *why;
    ck_assert_int_eq(disp_state_refusal_at(S, 9, 0, &who, &why), 0);
    ck_assert_uint_eq(who, 2);
    ck_assert_uint_eq(strlen(why), DISP_REASON_MAX);
    ck_assert_int_eq(disp_state_refusal_at(S, 9, 1, &who, &why), -ENOENT);
    /* No worker can serve job 9 once every alive one refused it; a dead one does not count. */
    apply_ok((struct disp_update){.kind = DISP_WORKER_REFUSES, .job = 9, .worker = 1, .reason = "no mount here"});
    ck_assert_ptr_null(disp_state_no_worker(S, 9, &who));
    apply_ok((struct disp_update){.kind = DISP_WORKER_DEAD, .worker = 3});
    ck_assert_ptr_nonnull(disp_state_no_worker(S, 9, &who));
    ck_assert_uint_eq(who, 1);
    ck_assert_str_eq(disp_state_no_worker(S, 9, &who), "no mount here");
    /* Unknown job or worker: refused, nothing changes. */
    struct disp_update bad = {.kind = DISP_WORKER_REFUSES, .job = 99, .worker = 1, .reason = "x"};
    ck_assert_int_eq(disp_state_apply(S, &bad, err, sizeof err), -ENOENT);
    bad.job = 9;
    bad.worker = 42;
    ck_assert_int_eq(disp_state_apply(S, &bad, err, sizeof err), -ENOENT);
}
END_TEST

/* A full worker table forgets its oldest dead worker for a new one (the cap is on live workers, not on a
 * dispatcher's lifetime), naming it in the update; with none dead it refuses; the others keep their
 * registration order. */
START_TEST(test_state_dead_workers_free_their_slots)
{
    disp_state_destroy(S);
    struct disp_limits lim = {.max_workers = 3};
    ck_assert_int_eq(disp_state_create(&lim, &S), 0);
    for (uint64_t id = 1; id <= 3; id++)
        worker(id, 0);
    job(9, 640, 64, 1, 1);
    struct disp_lease l;
    ck_assert_int_eq(lease(9, 2, 0, 0, &l), 1);
    struct disp_update w4 = {.kind = DISP_REGISTER_WORKER, .worker = 4, .address = "127.0.0.1:4", .threads = 1};
    ck_assert_int_eq(disp_state_apply(S, &w4, err, sizeof err), SPW_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(err, "none of them dead"));
    ck_assert_uint_eq(w4.evicted, 0);
    apply_ok((struct disp_update){.kind = DISP_WORKER_DEAD, .worker = 2});
    ck_assert_int_eq(disp_state_apply(S, &w4, err, sizeof err), 0);
    ck_assert_uint_eq(w4.evicted, 2);          /* the service drops its progress rows */
    ck_assert_int_eq(disp_state_worker_count(S), 3);
    const uint64_t order[] = {1, 3, 4};
    struct disp_worker_info wi;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(disp_state_worker_at(S, i, &wi), 0);
        ck_assert_uint_eq(wi.id, order[i]);
    }
    ck_assert(!disp_state_worker_known(S, 2));
    /* Worker 2's split went back to pending when it died; worker 4 can lease it. */
    ck_assert_int_eq(lease(9, 4, 0, 0, &l), 1);
    char why[160];
    ck_assert_msg(disp_state_audit(S, why, sizeof why) == 0, "%s", why);
}
END_TEST

/* Workers and jobs are found by id (a hash index) after the tables move: removals shift entries, workers
 * re-register with their old ids after others (a restarted dispatcher), jobs come back with old ids (a client
 * re-attaching); every id maps to its own entry and a removed one to none. */
START_TEST(test_state_finds_ids_after_the_tables_move)
{
    disp_state_destroy(S);
    struct disp_limits lim = {.max_workers = 3000, .max_jobs = 400};
    ck_assert_int_eq(disp_state_create(&lim, &S), 0);
    for (uint64_t id = 3000; id >= 1; id--)           /* descending: the table is not in id order */
        worker(id, 0);
    for (uint64_t id = 1; id <= 400; id++)
        job(id * 7, 64, 64, 1, 1);
    for (uint64_t id = 2; id <= 400; id += 2)         /* every other job leaves: the rest move up */
        apply_ok((struct disp_update){.kind = DISP_REMOVE_JOB, .job = id * 7});
    for (uint64_t id = 10; id <= 3000; id += 10)        /* every tenth worker dies */
        apply_ok((struct disp_update){.kind = DISP_WORKER_DEAD, .worker = id});
    job(14, 64, 64, 1, 1);                              /* an old id back, after higher ones */
    struct disp_job_info ji;
    for (uint64_t id = 1; id <= 3000; id++) {
        ck_assert(disp_state_worker_known(S, id));
        ck_assert_int_eq(disp_state_worker_alive(S, id), id % 10 != 0);
    }
    for (uint64_t id = 1; id <= 400; id++) {
        const bool kept = id % 2 == 1 || id == 2;
        ck_assert_int_eq(disp_state_job(S, id * 7, &ji), kept ? 0 : -ENOENT);
        if (kept)
            ck_assert_uint_eq(ji.id, id * 7);
    }
    ck_assert(!disp_state_worker_known(S, 3001));
    ck_assert_int_eq(disp_state_job(S, 5, &ji), -ENOENT);
    /* A full table evicts a dead worker for a new one: the rest keep their ids. */
    disp_state_destroy(S);
    struct disp_limits small = {.max_workers = 4};
    ck_assert_int_eq(disp_state_create(&small, &S), 0);
    for (uint64_t id = 1; id <= 4; id++)
        worker(id, 0);
    apply_ok((struct disp_update){.kind = DISP_WORKER_DEAD, .worker = 1});
    worker(9, 0);
    ck_assert(!disp_state_worker_known(S, 1));
    for (uint64_t id = 2; id <= 4; id++)
        ck_assert(disp_state_worker_known(S, id));
    ck_assert(disp_state_worker_known(S, 9));
}
END_TEST

START_TEST(test_state_ended_jobs_leave_the_table_into_a_bounded_history)
{
    disp_state_destroy(S);
    struct disp_limits lim = {.max_jobs = 3, .history = 2};
    ck_assert_int_eq(disp_state_create(&lim, &S), 0);
    worker(1, 0);
    struct disp_lease l;
    for (uint64_t id = 1; id <= 3; id++)
        job(id, 64, 64, 1, 1);
    /* Three unfinished jobs fill the cap: a fourth is refused. */
    struct disp_update more = {.kind = DISP_CREATE_JOB, .job = 4, .n_samples = 64, .split_size = 64, .epochs = 1,
                               .world_size = 1, .pipeline = (const uint8_t *)"p", .pipeline_len = 1};
    ck_assert_int_eq(disp_state_apply(S, &more, err, sizeof err), SPW_ETOOBIG);
    /* Job 2 finishes at t=100, job 1 at t=200: both still listed, in their grace period. */
    for (uint64_t id = 2; id >= 1; id--) {
        ck_assert_int_eq(lease(id, 1, 0, 0, &l), 1);
        apply_ok((struct disp_update){.kind = DISP_ACK, .job = id, .epoch = 0, .split = 0,
                                      .now_ms = id == 2 ? 100 : 200});
    }
    uint64_t out[8];
    ck_assert_int_eq(disp_state_jobs_to_remove(S, 165, 60, 1000, out, 8), 1);
    ck_assert_uint_eq(out[0], 2);
    /* A new job takes the place of the oldest finished one (job 2), which joins the history. */
    more.now_ms = 210;
    apply_ok(more);
    ck_assert_int_eq(disp_state_job_count(S), 3);
    struct disp_job_info ji;
    ck_assert_int_eq(disp_state_job(S, 2, &ji), -ENOENT);
    ck_assert_int_eq(disp_state_ended_count(S), 1);
    ck_assert_int_eq(disp_state_ended_job(S, 2, &ji), 0);
    ck_assert(ji.finished && !ji.expired);
    ck_assert_int_eq(ji.ended_ms, 100);
    /* Job 3's only client expires at t=300: paused, removed as expired once paused_ms has passed. */
    apply_ok((struct disp_update){.kind = DISP_CLIENT_HEARTBEAT, .job = 3, .rank = 0, .incarnation = 1});
    apply_ok((struct disp_update){.kind = DISP_CLIENT_EXPIRED, .job = 3, .rank = 0, .now_ms = 300});
    ck_assert_int_eq(disp_state_jobs_to_remove(S, 1299, 5000, 1000, out, 8), 0);
    ck_assert_int_eq(disp_state_jobs_to_remove(S, 1300, 5000, 1000, out, 8), 1);
    ck_assert_uint_eq(out[0], 3);
    /* A client back in time un-pauses it. */
    apply_ok((struct disp_update){.kind = DISP_CLIENT_HEARTBEAT, .job = 3, .rank = 0, .incarnation = 1,
                                  .now_ms = 1200});
    ck_assert_int_eq(disp_state_jobs_to_remove(S, 5000, 1000000, 1000, out, 8), 0);
    apply_ok((struct disp_update){.kind = DISP_CLIENT_EXPIRED, .job = 3, .rank = 0, .now_ms = 2000});
    apply_ok((struct disp_update){.kind = DISP_REMOVE_JOB, .job = 3, .now_ms = 3000});
    apply_ok((struct disp_update){.kind = DISP_REMOVE_JOB, .job = 1, .now_ms = 3000});
    ck_assert_int_eq(disp_state_job_count(S), 1);
    /* The history keeps the last two: 3 (expired) and 1 (finished); 2 is gone. */
    ck_assert_int_eq(disp_state_ended_count(S), 2);
    ck_assert_int_eq(disp_state_ended_at(S, 0, &ji), 0);
    ck_assert_uint_eq(ji.id, 3);
    ck_assert(ji.expired && !ji.finished && !ji.paused);
    ck_assert_int_eq(ji.ended_ms, 2000);
    ck_assert_int_eq(disp_state_ended_at(S, 1, &ji), 0);
    ck_assert_uint_eq(ji.id, 1);
    ck_assert_int_eq(disp_state_ended_job(S, 2, &ji), -ENOENT);
    ck_assert_int_eq(disp_state_ended_at(S, 2, &ji), -ENOENT);
    /* Removed jobs are unknown to every update. */
    struct disp_update hb = {.kind = DISP_CLIENT_HEARTBEAT, .job = 1, .rank = 0, .incarnation = 1};
    ck_assert_int_eq(disp_state_apply(S, &hb, err, sizeof err), -ENOENT);
    ck_assert_int_eq(disp_state_pick_lease(S, 3, 1, 0, 0, &l), -ENOENT);
}
END_TEST

START_TEST(test_state_caps_unfinished_jobs_per_client_host)
{
    disp_state_destroy(S);
    struct disp_limits lim = {.max_jobs_per_client = 2};
    ck_assert_int_eq(disp_state_create(&lim, &S), 0);
    struct disp_update u = {.kind = DISP_CREATE_JOB, .n_samples = 64, .split_size = 64, .epochs = 1,
                            .world_size = 1, .pipeline = (const uint8_t *)"p", .pipeline_len = 1, .client = "10.0.0.7"};
    for (uint64_t id = 1; id <= 2; id++) {
        u.job = id;
        apply_ok(u);
    }
    u.job = 3;
    ck_assert_int_eq(disp_state_apply(S, &u, err, sizeof err), SPW_ETOOBIG);
    ck_assert_ptr_nonnull(strstr(err, "client 10.0.0.7 has 2 unfinished jobs (cap 2 per client)"));
    u.client = "10.0.0.8";                  /* another host */
    apply_ok(u);
    u.client = "";                          /* unknown hosts are not counted together */
    for (uint64_t id = 4; id <= 6; id++) {
        u.job = id;
        apply_ok(u);
    }
    /* A finished job no longer counts. */
    struct disp_lease l;
    worker(1, 0);
    ck_assert_int_eq(lease(1, 1, 0, 0, &l), 1);
    ack(1, 0, 0);
    u.job = 7;
    u.client = "10.0.0.7";
    apply_ok(u);
    struct disp_job_info ji;
    ck_assert_int_eq(disp_state_job(S, 7, &ji), 0);
    ck_assert_str_eq(ji.client, "10.0.0.7");
}
END_TEST

START_TEST(test_state_a_job_nobody_uses_makes_room_at_a_cap)
{
    disp_state_destroy(S);
    struct disp_limits lim = {.max_jobs_per_client = 2, .max_jobs = 3};
    ck_assert_int_eq(disp_state_create(&lim, &S), 0);
    struct disp_update u = {.kind = DISP_CREATE_JOB, .n_samples = 64, .split_size = 64, .epochs = 1,
                            .world_size = 1, .pipeline = (const uint8_t *)"p", .pipeline_len = 1, .client = "10.0.0.7"};
    for (uint64_t id = 1; id <= 2; id++) {
        u.job = id;
        u.now_ms = (int64_t)id * 1000;
        apply_ok(u);
    }
    /* Both heard from recently: no room made, the cap refuses. */
    for (uint64_t id = 1; id <= 2; id++)
        apply_ok((struct disp_update){.kind = DISP_CLIENT_HEARTBEAT, .job = id, .rank = 0, .incarnation = 1,
                                      .now_ms = 10000});
    ck_assert_int_eq(disp_state_job_to_make_room(S, "10.0.0.7", 11000, 3000), 0);
    ck_assert_int_eq(disp_state_job_to_make_room(S, "10.0.0.8", 11000, 3000), 0);   /* under its caps */
    /* Job 2 silent past the idle time (its trainer killed): it goes; but a paused job goes before it. */
    apply_ok((struct disp_update){.kind = DISP_CLIENT_HEARTBEAT, .job = 1, .rank = 0, .incarnation = 1,
                                  .now_ms = 14000});
    ck_assert_int_eq(disp_state_job_to_make_room(S, "10.0.0.7", 14500, 3000), 2);
    apply_ok((struct disp_update){.kind = DISP_CLIENT_EXPIRED, .job = 1, .rank = 0, .now_ms = 14600});
    ck_assert_int_eq(disp_state_job_to_make_room(S, "10.0.0.7", 14700, 3000), 1);
    /* The global cap: another host's new job takes an idle job of any host when none of its own is idle. */
    u.job = 3;
    u.client = "10.0.0.9";
    u.now_ms = 14800;
    apply_ok(u);
    ck_assert_int_eq(disp_state_job_to_make_room(S, "10.0.0.8", 14900, 3000), 1);
}
END_TEST

START_TEST(test_state_allocates_ids_so_that_replay_rebuilds_them)
{
    struct disp_update reg = {.kind = DISP_REGISTER_WORKER, .address = "127.0.0.1:1", .threads = 1};
    apply_ok(reg);                          /* apply_ok applies a copy: ids below come from the state */
    ck_assert_int_eq(disp_state_worker_count(S), 1);
    struct disp_update log[4] = {
        {.kind = DISP_REGISTER_WORKER, .address = "127.0.0.1:2", .threads = 1},
        {.kind = DISP_REGISTER_WORKER, .worker = 7, .address = "127.0.0.1:3", .threads = 1},  /* an old id back */
        {.kind = DISP_CREATE_JOB, .n_samples = 10, .split_size = 5, .epochs = 1, .world_size = 1,
         .pipeline = (const uint8_t *)"p", .pipeline_len = 1},
        {.kind = DISP_REGISTER_WORKER, .address = "127.0.0.1:4", .threads = 1},
    };
    struct disp_update replayed[4];
    memcpy(replayed, log, sizeof log);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(disp_state_apply(S, &log[i], err, sizeof err), 0);
    ck_assert_uint_eq(log[0].worker, 2);
    ck_assert_uint_eq(log[1].worker, 7);
    ck_assert_uint_eq(log[2].job, 1);
    ck_assert_uint_eq(log[3].worker, 8);    /* never an id given before, nor one below a known one */
    /* Replaying the updates as journaled (ids 0 where they were asked for) gives the same ids. */
    struct disp_state *r;
    ck_assert_int_eq(disp_state_create(NULL, &r), 0);
    struct disp_update first = {.kind = DISP_REGISTER_WORKER, .address = "127.0.0.1:1", .threads = 1};
    ck_assert_int_eq(disp_state_apply(r, &first, err, sizeof err), 0);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(disp_state_apply(r, &replayed[i], err, sizeof err), 0);
        ck_assert_uint_eq(replayed[i].worker, log[i].worker);
        ck_assert_uint_eq(replayed[i].job, log[i].job);
    }
    disp_state_destroy(r);
}
END_TEST

START_TEST(test_state_marks_updates_durable_or_soft)
{
    worker(1, 0);
    job(9, 64, 64, 1, 1);
    struct disp_update u = {.kind = DISP_WORKER_HEARTBEAT, .worker = 1};
    ck_assert(!disp_update_durable(S, &u));
    u.kind = DISP_LEASE;
    ck_assert(!disp_update_durable(S, &u));
    u.kind = DISP_ACK;
    ck_assert(disp_update_durable(S, &u));
    u.kind = DISP_CREATE_JOB;
    ck_assert(disp_update_durable(S, &u));
    /* A client heartbeat is durable only when it brings a new incarnation (it fences the old client). */
    struct disp_update hb = {.kind = DISP_CLIENT_HEARTBEAT, .job = 9, .rank = 0, .incarnation = 5};
    ck_assert(disp_update_durable(S, &hb));
    apply_ok(hb);
    ck_assert(!disp_update_durable(S, &hb));
    hb.incarnation = 6;
    ck_assert(disp_update_durable(S, &hb));
}
END_TEST

/* Compare a job of two states: its info and every open split. */
static void same_job(struct disp_state *a, struct disp_state *b, uint64_t job)
{
    struct disp_job_info x, y;
    ck_assert_int_eq(disp_state_job(a, job, &x), 0);
    ck_assert_int_eq(disp_state_job(b, job, &y), 0);
    ck_assert_msg(memcmp(&x, &y, sizeof x) == 0, "job %llu differs", (unsigned long long)job);
    for (uint64_t e = (uint64_t)x.epoch; !x.finished && e < (uint64_t)x.epoch + 2; e++)
        for (uint64_t sp = 0; sp < (uint64_t)x.splits_per_epoch; sp++) {
            enum disp_split_state s1, s2;
            uint64_t g1, g2, h1, h2;
            int r1 = disp_state_split(a, job, e, sp, &s1, &g1, &h1);
            int r2 = disp_state_split(b, job, e, sp, &s2, &g2, &h2);
            ck_assert_int_eq(r1, r2);
            if (r1 == 0)
                ck_assert(s1 == s2 && g1 == g2 && h1 == h2);
        }
}

START_TEST(test_state_replay_of_journal_records_rebuilds_every_prefix)
{
    enum { CAP = 1500 };
    struct disp_update *log = calloc(CAP, sizeof *log);
    const int n = random_run(S, log, CAP, 7);
    /* Every update through the journal's codec (encode, decode) and applied, against the same prefix applied
     * as it was: equal at every 50th prefix and at the end. */
    struct disp_state *direct, *replayed;
    ck_assert_int_eq(disp_state_create(NULL, &direct), 0);
    ck_assert_int_eq(disp_state_create(NULL, &replayed), 0);
    for (int i = 0; i < n; i++) {
        struct disp_update u = log[i], v;
        disp_state_apply(direct, &u, NULL, 0);
        uint8_t *rec;
        size_t len;
        ProtobufCMessage *m;
        ck_assert_int_eq(disp_update_encode(&log[i], &rec, &len), 0);
        ck_assert_int_eq(disp_update_decode(rec, len, &v, &m), 0);
        disp_state_apply(replayed, &v, NULL, 0);
        protobuf_c_message_free_unpacked(m, NULL);
        free(rec);
        if (i >= 3 && (i % 50 == 0 || i == n - 1))
            same_job(direct, replayed, 1);
    }
    ck_assert_int_eq(disp_update_decode((const uint8_t *)"\xff\xff", 2, &(struct disp_update){0},
                                        &(ProtobufCMessage *){NULL}), -EINVAL);
    disp_state_destroy(direct);
    disp_state_destroy(replayed);
    free(log);
}
END_TEST

START_TEST(test_state_replay_rebuilds_the_same_state)
{
    enum { CAP = 4000 };
    struct disp_update *log = calloc(CAP, sizeof *log);
    int n = random_run(S, log, CAP, 42);
    struct disp_state *r;
    ck_assert_int_eq(disp_state_create(NULL, &r), 0);
    for (int i = 0; i < n; i++)
        disp_state_apply(r, &log[i], NULL, 0);
    struct disp_job_info a, b;
    ck_assert_int_eq(disp_state_job(S, 1, &a), 0);
    ck_assert_int_eq(disp_state_job(r, 1, &b), 0);
    ck_assert(memcmp(&a, &b, sizeof a) == 0);
    for (uint64_t e = (uint64_t)a.epoch; !a.finished && e < (uint64_t)a.epoch + 2; e++)
        for (uint64_t sp = 0; sp < (uint64_t)a.splits_per_epoch; sp++) {
            enum disp_split_state s1, s2;
            uint64_t g1, g2, h1, h2;
            int r1 = disp_state_split(S, 1, e, sp, &s1, &g1, &h1), r2 = disp_state_split(r, 1, e, sp, &s2, &g2, &h2);
            ck_assert_int_eq(r1, r2);
            if (r1 == 0)
                ck_assert(s1 == s2 && g1 == g2 && h1 == h2);
        }
    disp_state_destroy(r);
    free(log);
}
END_TEST

/* Every observable part of two states: workers, jobs (info, secrets, pipelines, incarnations, refusals, open
 * splits), ended jobs, and the ids each gives next. Changes both (allocates an id in each). */
static void same_state(struct disp_state *a, struct disp_state *b)
{
    ck_assert_int_eq(disp_state_worker_count(a), disp_state_worker_count(b));
    for (int i = 0; i < disp_state_worker_count(a); i++) {
        struct disp_worker_info x, y;
        disp_state_worker_at(a, i, &x);
        disp_state_worker_at(b, i, &y);
        ck_assert(memcmp(&x, &y, sizeof x) == 0);
    }
    ck_assert_int_eq(disp_state_job_count(a), disp_state_job_count(b));
    for (int i = 0; i < disp_state_job_count(a); i++) {
        struct disp_job_info x;
        disp_state_job_at(a, i, &x);
        same_job(a, b, x.id);
        ck_assert_uint_eq(disp_state_job_secret(a, x.id), disp_state_job_secret(b, x.id));
        size_t la, lb;
        const uint8_t *pa = disp_state_job_pipeline(a, x.id, &la), *pb = disp_state_job_pipeline(b, x.id, &lb);
        ck_assert(la == lb && (!la || memcmp(pa, pb, la) == 0));
        for (int r = 0; r < x.world_size; r++)
            ck_assert_uint_eq(disp_state_client_incarnation(a, x.id, r), disp_state_client_incarnation(b, x.id, r));
        for (int k = 0; k < x.refusals; k++) {
            uint64_t wa, wb;
            const char *ra, *rb;
            disp_state_refusal_at(a, x.id, k, &wa, &ra);
            disp_state_refusal_at(b, x.id, k, &wb, &rb);
            ck_assert(wa == wb && !strcmp(ra, rb));
        }
    }
    ck_assert_int_eq(disp_state_ended_count(a), disp_state_ended_count(b));
    for (int i = 0; i < disp_state_ended_count(a); i++) {
        struct disp_job_info x, y;
        disp_state_ended_at(a, i, &x);
        disp_state_ended_at(b, i, &y);
        ck_assert_msg(memcmp(&x, &y, sizeof x) == 0, "ended job %llu differs", (unsigned long long)x.id);
    }
    struct disp_update wa = {.kind = DISP_REGISTER_WORKER, .address = "x"}, wb = wa;
    struct disp_update ja = {.kind = DISP_CREATE_JOB, .n_samples = 1, .split_size = 1, .epochs = 1, .world_size = 1},
                       jb = ja;
    ck_assert_int_eq(disp_state_apply(a, &wa, NULL, 0), 0);
    ck_assert_int_eq(disp_state_apply(b, &wb, NULL, 0), 0);
    ck_assert_int_eq(disp_state_apply(a, &ja, NULL, 0), 0);
    ck_assert_int_eq(disp_state_apply(b, &jb, NULL, 0), 0);
    ck_assert_uint_eq(wa.worker, wb.worker);
    ck_assert_uint_eq(ja.job, jb.job);
}

/* An update of `kind` with every member set, to values no two members share. */
static struct disp_update every_member(enum disp_update_kind kind)
{
    static const uint8_t pipe[] = {1, 2, 3, 4};
    static const uint64_t splits[] = {5, 9, 13};
    return (struct disp_update){.kind = kind, .worker = 11, .job = 12, .producer = 13, .manifest_hash = 14,
                                .incarnation = 15, .now_ms = 16, .epoch = 17, .split = 18, .generation = 19,
                                .n_samples = 20, .epochs = 21, .first_epoch = 22, .split_size = 23, .cut = 24,
                                .world_size = 25, .rank = 26, .threads = 27, .max_workers = 28, .address = "a:1",
                                .pipeline = pipe, .pipeline_len = sizeof pipe, .name = "nm", .client = "cl",
                                .splits = splits, .n_splits = 3, .reason = "why", .secret = 29, .acked = 30,
                                .pending = 31, .refusals = 32, .flags = 33, .buffered_bytes = 34};
}

static struct disp_update round_trip(const struct disp_update *u, ProtobufCMessage **m)
{
    uint8_t *rec;
    size_t len;
    struct disp_update v;
    ck_assert_int_eq(disp_update_encode(u, &rec, &len), 0);
    ck_assert_int_eq(disp_update_decode(rec, len, &v, m), 0);
    free(rec);
    return v;
}

START_TEST(test_journal_records_keep_each_kinds_members_and_read_the_flat_form)
{
    /* Every kind has a record message, and each keeps what its kind uses (dispatcher/state.h), no more. */
    for (int k = DISP_REGISTER_WORKER; k <= DISP_RESTORE_ENDED; k++) {
        ck_assert_msg(disp_update_record_of(k) != NULL, "kind %d has no record message", k);
        const struct disp_update u = every_member((enum disp_update_kind)k);
        ProtobufCMessage *m;
        const struct disp_update v = round_trip(&u, &m);
        ck_assert_int_eq(v.kind, k);
        ck_assert_int_eq(v.producer, k == DISP_LEASE ? 13 : 0);
        ck_assert_int_eq(v.secret, k == DISP_REGISTER_WORKER || k == DISP_CREATE_JOB ? 29 : 0);
        ck_assert_int_eq(v.buffered_bytes, k == DISP_WORKER_HEARTBEAT ? 34 : 0);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    ProtobufCMessage *m;
    struct disp_update c = every_member(DISP_CREATE_JOB), v = round_trip(&c, &m);
    ck_assert(v.job == 12 && v.manifest_hash == 14 && v.n_samples == 20 && v.split_size == 23 && v.epochs == 21 &&
              v.cut == 24 && v.world_size == 25 && v.max_workers == 28 && v.first_epoch == 22 && v.now_ms == 16);
    ck_assert(v.pipeline_len == 4 && memcmp(v.pipeline, c.pipeline, 4) == 0);
    ck_assert_str_eq(v.name, "nm");
    ck_assert_str_eq(v.client, "cl");
    ck_assert(v.address == NULL && v.reason == NULL && v.n_splits == 0 && v.rank == 0 && v.worker == 0);
    protobuf_c_message_free_unpacked(m, NULL);
    c = every_member(DISP_REGISTER_WORKER);
    v = round_trip(&c, &m);
    ck_assert(v.worker == 11 && v.threads == 27 && v.now_ms == 16 && v.job == 0);
    ck_assert_str_eq(v.address, "a:1");
    ck_assert_str_eq(v.name, "nm");     /* its GPU */
    protobuf_c_message_free_unpacked(m, NULL);
    c = every_member(DISP_CLIENT_RESUME);
    v = round_trip(&c, &m);
    ck_assert(v.job == 12 && v.rank == 26 && v.epoch == 17 && v.n_splits == 3 && v.splits[2] == 13);
    protobuf_c_message_free_unpacked(m, NULL);
    c = every_member(DISP_RESTORE_ENDED);
    v = round_trip(&c, &m);
    ck_assert(v.acked == 30 && v.pending == 31 && v.refusals == 32 && v.flags == 33 && v.epoch == 17 &&
              v.pipeline == NULL);
    protobuf_c_message_free_unpacked(m, NULL);

    /* The previous release's flat record (a kind and the fields it used) reads as the same update. */
    Spillway__V1__JournalUpdate flat = SPILLWAY__V1__JOURNAL_UPDATE__INIT;
    flat.kind = DISP_CLIENT_RESUME;
    flat.job = 12;
    flat.rank = 26;
    flat.epoch = 17;
    flat.n_splits = 3;
    flat.splits = (uint64_t[]){5, 9, 13};
    uint8_t buf[128];
    size_t len = spillway__v1__journal_update__pack(&flat, buf);
    ck_assert_int_eq(disp_update_decode(buf, len, &v, &m), 0);
    ck_assert(v.kind == DISP_CLIENT_RESUME && v.job == 12 && v.rank == 26 && v.epoch == 17 && v.n_splits == 3 &&
              v.splits[1] == 9);
    protobuf_c_message_free_unpacked(m, NULL);

    /* No kind this release knows: refused, whichever form (and nothing to free). */
    flat.kind = DISP_RESTORE_ENDED + 1;
    len = spillway__v1__journal_update__pack(&flat, buf);
    ck_assert_int_eq(disp_update_decode(buf, len, &v, &m), -EPROTONOSUPPORT);
    ck_assert_int_eq(disp_update_decode(buf, 0, &v, &m), -EINVAL);
    static const uint8_t later[] = {0xfa, 0x02, 0x02, 0x08, 0x01};   /* field 47 (a later kind), length 2 */
    ck_assert_int_eq(disp_update_decode(later, sizeof later, &v, &m), -EPROTONOSUPPORT);
    uint8_t *rec;
    ck_assert_int_eq(disp_update_encode(&(struct disp_update){.kind = 0}, &rec, &len), -EINVAL);
    ck_assert_int_eq(disp_update_encode(&(struct disp_update){.kind = DISP_RESTORE_ENDED + 1}, &rec, &len), -EINVAL);
}
END_TEST

/* disp_state_snapshot's emit: each update through the journal's codec, applied to the state in ctx. */
static int replay_into(void *ctx, struct disp_update *u)
{
    uint8_t *rec;
    size_t len;
    struct disp_update v;
    ProtobufCMessage *m;
    ck_assert_int_eq(disp_update_encode(u, &rec, &len), 0);
    ck_assert_int_eq(disp_update_decode(rec, len, &v, &m), 0);
    int rc = disp_state_apply(ctx, &v, err, sizeof err);
    ck_assert_msg(rc == 0, "snapshot update %d refused: %s", (int)v.kind, err);
    protobuf_c_message_free_unpacked(m, NULL);
    free(rec);
    return 0;
}

START_TEST(test_state_snapshot_rebuilds_the_journaled_state)
{
    /* A live state S through a random workload with every kind of update; J holds only what the journal
     * keeps (its durable updates); the snapshot of J, through the codec, rebuilds J exactly. */
    enum { CAP = 3000 };
    struct disp_update *log = calloc(CAP, sizeof *log);
    int n = random_run(S, log, CAP - 40, 11);
    static const uint8_t pipe[] = {9, 8, 7};
    struct disp_update more[] = {
        {.kind = DISP_CLIENT_HEARTBEAT, .job = 1, .rank = 0, .incarnation = 7, .now_ms = 5},
        {.kind = DISP_CLIENT_HEARTBEAT, .job = 1, .rank = 1, .incarnation = 9, .now_ms = 6},
        {.kind = DISP_WORKER_REFUSES, .job = 1, .worker = 2, .reason = "no mount"},
        {.kind = DISP_SET_CUT, .job = 1, .cut = 0},
        {.kind = DISP_CREATE_JOB, .job = 0, .n_samples = 100, .split_size = 10, .epochs = 2, .world_size = 1,
         .name = "two", .client = "10.0.0.2", .secret = 0xabc, .pipeline = pipe, .pipeline_len = 3, .now_ms = 7},
        {.kind = DISP_CLIENT_HEARTBEAT, .job = 2, .rank = 0, .incarnation = 3, .now_ms = 8},
        {.kind = DISP_ACK, .job = 2, .epoch = 0, .split = 4, .now_ms = 9},
        {.kind = DISP_CLIENT_EXPIRED, .job = 2, .rank = 0, .now_ms = 10},
        {.kind = DISP_CREATE_JOB, .job = 0, .n_samples = 30, .split_size = 10, .epochs = 1, .world_size = 1,
         .first_epoch = 1, .now_ms = 11},                                 /* created finished */
        {.kind = DISP_CREATE_JOB, .job = 40, .n_samples = 20, .split_size = 10, .epochs = 0, .world_size = 2,
         .now_ms = 12},                                                   /* forever, explicit id */
        {.kind = DISP_CLIENT_ONLY, .job = 40},
        {.kind = DISP_FINISH_JOB, .job = 40, .now_ms = 13},
        {.kind = DISP_CREATE_JOB, .job = 0, .n_samples = 10, .split_size = 10, .epochs = 1, .world_size = 1,
         .now_ms = 14},
        {.kind = DISP_REMOVE_JOB, .job = 41, .now_ms = 15},               /* ended unfinished */
        {.kind = DISP_REMOVE_JOB, .job = 3, .now_ms = 16},                /* ended finished */
        {.kind = DISP_CREATE_JOB, .job = 0, .n_samples = 10, .split_size = 10, .epochs = 1, .world_size = 1,
         .now_ms = 17},
        {.kind = DISP_REMOVE_JOB, .job = 42, .flags = DISP_ENDED_CANCELLED, .now_ms = 18},  /* spillctl job cancel */
        {.kind = DISP_CREATE_JOB, .job = 0, .n_samples = 10, .split_size = 10, .epochs = 1, .world_size = 1,
         .now_ms = 19},
        {.kind = DISP_REMOVE_JOB, .job = 43, .flags = DISP_ENDED_CLOSED, .now_ms = 20},     /* its client closed */
        {.kind = DISP_REGISTER_WORKER, .worker = 0, .address = "10.0.0.9:1", .threads = 3, .secret = 5},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        struct disp_update u = more[i];
        int rc = disp_state_apply(S, &u, err, sizeof err);
        ck_assert_msg(rc == 0, "more[%zu] refused: %s", i, err);
        log[n++] = u;
    }
    for (uint64_t sp = 0; sp <= 10; sp++) {     /* job 2 into its second epoch, split 2 of it acked */
        struct disp_update a = {.kind = DISP_ACK, .job = 2, .epoch = sp / 10, .split = sp < 10 ? sp : 2};
        ck_assert_int_eq(disp_state_apply(S, &a, err, sizeof err), 0);
        log[n++] = a;
    }
    struct disp_job_info two;
    ck_assert_int_eq(disp_state_job(S, 2, &two), 0);
    ck_assert_int_eq(two.epoch, 1);
    struct disp_state *J, *K;
    ck_assert_int_eq(disp_state_create(NULL, &J), 0);
    ck_assert_int_eq(disp_state_create(NULL, &K), 0);
    for (int i = 0; i < n; i++) {
        struct disp_update u = log[i];
        if (disp_update_durable(J, &u))
            disp_state_apply(J, &u, NULL, 0);
    }
    ck_assert_int_eq(disp_state_ended_count(J), 4);
    ck_assert_int_eq(disp_state_snapshot(J, replay_into, K), 0);
    same_state(J, K);
    struct disp_job_info e;         /* how they ended survives the snapshot (a cancelled job's trainer is told) */
    ck_assert_int_eq(disp_state_ended_job(K, 42, &e), 0);
    ck_assert(e.cancelled && !e.closed && !e.expired);
    ck_assert_int_eq(disp_state_ended_job(K, 43, &e), 0);
    ck_assert(e.closed && !e.cancelled && !e.expired);
    ck_assert_int_eq(disp_state_ended_job(K, 41, &e), 0);
    ck_assert(e.expired && !e.closed && !e.cancelled);
    char why[160];
    ck_assert_msg(disp_state_audit(S, why, sizeof why) == 0, "live state: %s", why);
    ck_assert_msg(disp_state_audit(K, why, sizeof why) == 0, "rebuilt from a snapshot: %s", why);
    /* The live state's own snapshot (soft parts too: dead workers, a gone client) replays as cleanly. */
    struct disp_state *L;
    ck_assert_int_eq(disp_state_create(NULL, &L), 0);
    ck_assert_int_eq(disp_state_snapshot(S, replay_into, L), 0);
    struct disp_job_info a, b;
    ck_assert_int_eq(disp_state_job(S, 2, &a), 0);
    ck_assert_int_eq(disp_state_job(L, 2, &b), 0);
    ck_assert(a.paused && b.paused && a.ended_ms == b.ended_ms && a.acked == b.acked);
    disp_state_destroy(J);
    disp_state_destroy(K);
    disp_state_destroy(L);
    free(log);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("state");
    TCase *tc = tcase_create("state");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_state_leases_cover_each_split_once_then_epochs_advance);
    tcase_add_test(tc, test_state_next_epoch_only_when_nothing_pending);
    tcase_add_test(tc, test_state_dead_worker_releases_with_new_generation);
    tcase_add_test(tc, test_state_client_producers_get_their_rank_only);
    tcase_add_test(tc, test_state_speculative_lease_of_a_straggler);
    tcase_add_test(tc, test_state_client_incarnations_fence_zombies);
    tcase_add_test(tc, test_state_expired_clients_pause_the_job_and_free_leases);
    tcase_add_test(tc, test_state_refuses_bad_updates_and_changes_nothing);
    tcase_add_test(tc, test_state_set_cut_applies_to_new_leases);
    tcase_add_test(tc, test_state_client_only_hands_the_job_back);
    tcase_add_test(tc, test_state_resume_reopens_a_ranks_undelivered_splits);
    tcase_add_test(tc, test_state_resume_far_ahead_moves_the_epochs_on);
    tcase_add_test(tc, test_state_named_job_from_a_later_epoch);
    tcase_add_test(tc, test_state_max_workers_limits_a_job_to_the_first_alive);
    tcase_add_test(tc, test_state_serving_rows_match_one_by_one);
    tcase_add_test(tc, test_state_refusing_worker_loses_the_job_and_its_place);
    tcase_add_test(tc, test_state_ended_jobs_leave_the_table_into_a_bounded_history);
    tcase_add_test(tc, test_state_caps_unfinished_jobs_per_client_host);
    tcase_add_test(tc, test_state_a_job_nobody_uses_makes_room_at_a_cap);
    tcase_add_test(tc, test_state_allocates_ids_so_that_replay_rebuilds_them);
    tcase_add_test(tc, test_state_marks_updates_durable_or_soft);
    tcase_add_test(tc, test_state_replay_rebuilds_the_same_state);
    tcase_add_test(tc, test_state_dead_workers_free_their_slots);
    tcase_add_test(tc, test_state_finds_ids_after_the_tables_move);
    tcase_add_test(tc, test_state_replay_of_journal_records_rebuilds_every_prefix);
    tcase_add_test(tc, test_state_snapshot_rebuilds_the_journaled_state);
    tcase_add_test(tc, test_journal_records_keep_each_kinds_members_and_read_the_flat_form);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
