/* dispatcher/service.c - the dispatcher service's core (see service.h): its lifecycle, disp_commit (the one
 * way state changes), the timer that retires silent workers, expires silent clients, removes ended jobs and
 * starts re-plans, and what the handlers share. The handlers: workers.c, create_job.c, jobs.c; messages and
 * statuses: codec.c; planning: plan_view.c, planning.c, and the re-planner (replanner.c, its own lock).
 * Thread model: RPC threads, the timer and one re-plan thread share the state under one mutex; calls to
 * workers (profiles) and a batch's journal sync (group commit) are made without it. */
#include "dispatcher/service.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "dispatcher/journal_record.h"
#include "dispatcher/progress.h"
#include "dispatcher/service_internal.h"
#include "dispatcher/state.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/health.h"
#include "lib/heap.h"
#include "lib/log.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "pipeline/element_size.h"
#include "pipeline/fusion.h"
#include "pipeline/plan_proto.h"
#include "pipeline/source.h"

#define MANIFESTS_CAP_BYTES ((size_t)512 << 20)     /* packed listings kept for GetManifest */
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "pipeline/wire.h"
#include "proto/spillway.pb-c.h"

struct records {                    /* a snapshot's updates, encoded */
    uint8_t **recs;
    size_t *lens, n, cap;
};

static int collect(void *ctx, struct disp_update *u)
{
    struct records *r = ctx;
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 1024;
        uint8_t **recs = realloc(r->recs, cap * sizeof *recs);
        if (recs)
            r->recs = recs;
        size_t *lens = realloc(r->lens, cap * sizeof *lens);
        if (lens)
            r->lens = lens;
        if (!recs || !lens)
            return -ENOMEM;
        r->cap = cap;
    }
    int rc = disp_update_encode(u, &r->recs[r->n], &r->lens[r->n]);
    r->n += rc == 0;
    return rc;
}

/* Swap a journal grown past journal_compact_bytes (and twice its last compacted size) for a snapshot of the
 * state. Between batches only. A failure leaves the old journal, and the next try waits for it to double. */
static void maybe_compact(struct disp_service *s)
{
    if (!s->journal || s->batch || s->j_syncing || s->o.journal_compact_bytes <= 0)
        return;     /* j_syncing: a sync runs on the file with mu released */
    const int64_t size = spw_journal_size(s->journal);
    if (size < s->o.journal_compact_bytes || size < 2 * s->compacted_bytes)
        return;
    const int64_t t0 = spw_now_ms();
    struct records r = {0};
    int rc = disp_state_snapshot(s->st, collect, &r);
    if (rc == 0)
        rc = spw_journal_compact(s->journal, (const uint8_t *const *)r.recs, r.lens, r.n);
    s->compacted_bytes = rc == 0 ? spw_journal_size(s->journal) : size;
    if (rc == 0)
        s->j_synced = s->j_written;     /* the state written whole and synced holds every record */
    if (rc == 0)
        spw_log(SPW_LOG_INFO, "dispatcher", "journal compacted records=%zu bytes_before=%lld bytes_after=%lld "
                "ms=%lld", r.n, (long long)size, (long long)s->compacted_bytes, (long long)(spw_now_ms() - t0));
    else
        spw_log(SPW_LOG_WARN, "dispatcher", "journal compaction failed (the journal stays as it was) err=\"%s\"",
                spw_strerror(rc));
    for (size_t i = 0; i < r.n; i++)
        free(r.recs[i]);
    free(r.recs);
    free(r.lens);
}

/* The journal cannot take a write (rc): once per change of state, log it and say NOT_SERVING. */
static void journal_unwritable(struct disp_service *s, int rc)
{
    if (!s->journal_error) {
        spw_log(SPW_LOG_ERROR, "dispatcher", "journal cannot be written: not ready until it can dir=%s err=\"%s\"",
                s->o.work_dir, spw_strerror(rc));
        if (s->o.health)
            spw_health_set(s->o.health, false);
    }
    s->journal_error = rc;
    s->journal_probe_ms = spw_now_ms();
}

/* A journal write failed with rc: unwritable, and counted. The reply names the cause, and its status
 * (UNAVAILABLE) tells the peer to retry. */
static int journal_failed(struct disp_service *s, int rc, char *err, size_t errlen)
{
    s->journal_failures++;
    journal_unwritable(s, rc);
    return spw_fail(err, errlen, rc == -ENOMEM ? -ENOMEM : -EIO, "the dispatcher's journal in %s cannot be "
                    "written (%s): it takes no changes until it can", s->o.work_dir, spw_strerror(rc));
}

/* The failed journal's disk took a whole page and its fsync (probe_journal): ready again. Not on a record
 * that fits the journal's last page, which a full disk still takes - readiness would flap. */
static void journal_writable(struct disp_service *s)
{
    spw_log(SPW_LOG_INFO, "dispatcher", "journal writable again: ready dir=%s failures=%llu", s->o.work_dir,
            (unsigned long long)s->journal_failures);
    s->journal_error = 0;
    if (s->o.health && !s->stopping)
        spw_health_set(s->o.health, true);
}

bool disp_worker_usable(const struct disp_service *s, const struct disp_worker_info *wi)
{
    return wi->alive && wi->last_heartbeat_ms >= s->started_ms;
}

bool disp_journal_failing(const struct disp_service *s)
{
    return s->journal_error != 0;
}

/* Whether the journal's file system has a block left for this process (root may use the reserved ones). */
static bool journal_disk_has_room(const struct disp_service *s)
{
    struct statvfs v;
    if (statvfs(s->o.work_dir, &v) != 0)
        return true;            /* unknown: the writes themselves tell */
    return (geteuid() == 0 ? v.f_bfree : v.f_bavail) > 0;
}

/* Timer, once a second. While the journal works: a full disk makes it NOT_SERVING now, not when a record
 * first needs a new page (appends into the last page still succeed, for minutes at a slow pace). While it
 * fails: can its disk take a page and an fsync again? A probe file, not a record, so the journal holds only
 * updates. */
static void probe_journal(struct disp_service *s, int64_t now)
{
    if (!s->journal || now - s->journal_probe_ms < 1000)
        return;
    s->journal_probe_ms = now;
    if (!s->journal_error) {
        if (!journal_disk_has_room(s))
            journal_unwritable(s, -ENOSPC);
        return;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/probe", s->o.work_dir);
    static const uint8_t page[4096];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const bool ok = fd >= 0 && write(fd, page, sizeof page) == (ssize_t)sizeof page && fdatasync(fd) == 0;
    if (fd >= 0)
        close(fd);
    unlink(path);
    if (ok && journal_disk_has_room(s))
        journal_writable(s);
}

/* Is record `ticket` in a range a failed sync cut off? */
static bool journal_lost(const struct disp_service *s, uint64_t ticket)
{
    for (size_t i = 0; i < sizeof s->j_lost / sizeof s->j_lost[0]; i++)
        if (ticket > s->j_lost[i].lo && ticket <= s->j_lost[i].hi)
            return true;
    return false;
}

/* Sync every record written so far; `unlocked`: with mu released during the file's sync (calls go on and
 * write into the next batch). Call with mu held (held again at return). Returns 0 or -errno: then every
 * unsynced record is cut off (a lost range) and the journal marked failing. */
static int journal_sync_now(struct disp_service *s, bool unlocked)
{
    const uint64_t target = s->j_written, cuts = s->j_cuts;
    const int64_t t0 = spw_now_ns();
    int64_t upto = 0;
    int rc = spw_journal_sync_begin(s->journal, &upto);
    if (rc == 0 && unlocked) {
        s->j_syncing = true;
        pthread_mutex_unlock(&s->mu);
        rc = spw_journal_sync_file(s->journal);
        pthread_mutex_lock(&s->mu);
        s->j_syncing = false;
        if (s->j_cuts != cuts)          /* a sync under mu failed meanwhile: these records were cut with it */
            rc = rc ? rc : -EIO;
    } else if (rc == 0) {
        rc = spw_journal_sync_file(s->journal);
    }
    spw_hist_observe(&s->journal_sync, spw_now_ns() - t0);
    if (s->j_cuts != cuts) {
        /* counted and cut by that failure already */
    } else if (rc == 0) {
        spw_journal_sync_end(s->journal, upto, 0);
        s->j_synced = target > s->j_synced ? target : s->j_synced;
        maybe_compact(s);
    } else {
        spw_journal_sync_end(s->journal, upto, rc);
        s->j_lost[s->j_lost_next].lo = s->j_synced;
        s->j_lost[s->j_lost_next].hi = s->j_written;
        s->j_lost_next = (s->j_lost_next + 1) % (int)(sizeof s->j_lost / sizeof s->j_lost[0]);
        s->j_synced = s->j_written;
        s->j_cuts++;
        s->journal_failures++;
        journal_unwritable(s, rc);
    }
    pthread_cond_broadcast(&s->j_cv);
    return rc;
}

/* Group commit: until the records up to `ticket` are on disk, sync them with mu released, or wait for the
 * call that is syncing (its sync may not reach them: then sync again). Call with mu held: it is released
 * meanwhile, so callers read the state again after. Returns 0, or -EIO with err when a failed sync cut them
 * off. Before, each heartbeat's acks were synced under mu: on a disk whose sync takes 1 ms, the client
 * heartbeats' syncs held the lock half the time at 1000 workers x 100 jobs. */
static int journal_durable(struct disp_service *s, uint64_t ticket, char *err, size_t errlen)
{
    for (;;) {
        if (journal_lost(s, ticket))
            return spw_fail(err, errlen, -EIO, "the dispatcher's journal in %s cannot be written (%s): it takes "
                            "no changes until it can", s->o.work_dir, spw_strerror(s->journal_error ? s->journal_error
                                                                                                 : -EIO));
        if (s->j_synced >= ticket)
            return 0;
        if (s->j_syncing)
            pthread_cond_wait(&s->j_cv, &s->mu);
        else
            journal_sync_now(s, true);
    }
}

int disp_commit(struct disp_service *s, struct disp_update *u, char *err, size_t errlen)
{
    const bool journaled = s->journal && disp_update_durable(s->st, u);
    if (journaled) {
        uint8_t *rec = NULL;
        size_t len = 0;
        int rc = disp_update_encode(u, &rec, &len);
        if (rc == 0)
            rc = spw_journal_write(s->journal, rec, len);
        free(rec);
        if (rc)
            return journal_failed(s, rc, err, errlen);
        s->j_written++;
        /* Outside a batch (job changes, registrations: rare) synced now, under mu, and applied only once on
         * disk; a batch's records are synced at its end (group commit). */
        if (!s->batch && (rc = journal_sync_now(s, false)) != 0)
            return spw_fail(err, errlen, rc == -ENOMEM ? -ENOMEM : -EIO, "the dispatcher's journal in %s cannot "
                            "be written (%s): it takes no changes until it can", s->o.work_dir, spw_strerror(rc));
    }
    const bool releases = u->kind == DISP_WORKER_DEAD || u->kind == DISP_CLIENT_EXPIRED ||
                          u->kind == DISP_WORKER_REFUSES || u->kind == DISP_CLIENT_ONLY;
    const int64_t leased_before = releases ? disp_state_leased_total(s->st) : 0;
    const int rc = disp_state_apply(s->st, u, err, errlen);
    const int64_t leased_after = releases ? disp_state_leased_total(s->st) : 0;
    if (rc == 0 && leased_before > leased_after)
        s->leases_released += (uint64_t)(leased_before - leased_after);
    if (rc == 0 && u->kind >= 0 && u->kind <= DISP_RESTORE_ENDED)
        s->applied[u->kind]++;
    s->re_leases += rc == 0 && u->kind == DISP_LEASE && u->generation > 1;
    if (rc == 0 && (u->kind == DISP_REGISTER_WORKER || u->kind == DISP_WORKER_DEAD))
        s->members_gen++;       /* which workers are usable (or their addresses) may have changed */
    if (rc == 0 && u->kind == DISP_REGISTER_WORKER && u->evicted) {   /* gone from the registry: its rows too */
        disp_progress_forget_producer(s->progress, u->evicted);
        disp_progress_forget_producer(s->received, u->evicted);
    }
    return rc;
}

void disp_batch_begin(struct disp_service *s)
{
    s->batch++;
}

int disp_batch_end(struct disp_service *s, char *err, size_t errlen)
{
    if (--s->batch > 0 || !s->journal)
        return 0;
    return journal_durable(s, s->j_written, err, errlen);
}

/* spw_journal_open's replay: each durable update, applied as when it was first committed. */
static int replay_one(void *ctx, const uint8_t *rec, size_t len, char *why, size_t whylen)
{
    struct disp_service *s = ctx;
    struct disp_update u;
    ProtobufCMessage *m;
    const int rc = disp_update_decode(rec, len, &u, &m);
    if (rc == -EPROTONOSUPPORT)
        return spw_fail(why, whylen, rc, "an update kind this release does not know (written by a later "
                                         "release? run that release on this work dir)");
    if (rc)
        return spw_fail(why, whylen, rc, "not a journal update this release can read");
    disp_state_apply(s->st, &u, NULL, 0);  /* refused the first time too: the same outcome now */
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

void disp_forget_job(struct disp_service *s, uint64_t job)
{
    disp_progress_forget(s->progress, job);
    disp_progress_forget(s->received, job);
}

#define TIMER_TICK_MS 200

/* The deadline (a silence, ms) past which peers of one kind (0 workers, 1 client ranks) are dead this tick:
 * timeout_ms plus the dispatcher's recent lag, or none in a tick that woke late (disp_liveness_deadline_ms).
 * Counts the peers silent past timeout_ms that it spares, and logs once when sparing starts. Call with mu. */
static int64_t liveness_deadline(struct disp_service *s, int kind, int64_t now, int64_t timeout_ms)
{
    const struct disp_lag *lag = kind ? &s->client_lag : &s->worker_lag;
    const int64_t recent = disp_lag_recent(lag, now);
    /* Only a late wake-up (the whole process stalled) skips the tick's deaths: calls that wait under steady
     * overload only extend the timeout, or a worker that died then would never be declared dead. */
    const int64_t deadline = disp_liveness_deadline_ms(timeout_ms, recent, s->late_ms);
    int spared = 0;
    if (deadline != timeout_ms) {
        spared = kind ? disp_state_expired_clients(s->st, now, timeout_ms, NULL, NULL, INT_MAX) -
                        disp_state_expired_clients(s->st, now, deadline, NULL, NULL, INT_MAX)
                      : disp_state_dead_workers(s->st, now, timeout_ms, NULL, INT_MAX) -
                        disp_state_dead_workers(s->st, now, deadline, NULL, INT_MAX);
    }
    if (spared > 0 && !s->deferring[kind])
        spw_log(SPW_LOG_WARN, "dispatcher", "dispatcher lagging: %s silent past their timeout not declared %s yet "
                "count=%d late_ms=%lld recent_lag_ms=%lld timeout_ms=%lld", kind ? "client ranks" : "workers",
                kind ? "expired" : "dead", spared, (long long)s->late_ms, (long long)recent,
                (long long)timeout_ms);
    s->deaths_deferred[kind] += spared > 0 ? (uint64_t)spared : 0;
    s->deferring[kind] = spared > 0;
    return deadline;
}

/* Timer: retire workers and expire clients that stopped heartbeating; re-plan planned jobs when the workers
 * change. Each tick first measures the dispatcher's own lag, which extends the timeouts (liveness.h). */
static void *timer_main(void *arg)
{
    struct disp_service *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        const int64_t due = spw_now_ms() + TIMER_TICK_MS;
        struct timespec ts = spw_deadline_in_ms(TIMER_TICK_MS);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        if (s->stopping)
            break;
        const int64_t now = spw_now_ms();
        /* Late to wake (stopped, starved of CPU, the lock held long), or calls waited long for a handler and
         * the lock: either way what the state says of who spoke last is that stale. */
        s->late_ms = now - due > 0 ? now - due : 0;
        s->tick_lag_ms = s->late_ms > s->call_wait_ms ? s->late_ms : s->call_wait_ms;
        s->call_wait_ms = 0;
        disp_lag_note(&s->worker_lag, now, s->tick_lag_ms);
        disp_lag_note(&s->client_lag, now, s->tick_lag_ms);
        disp_lag_note(&s->overload_lag, now, s->tick_lag_ms);
        const int64_t overload = disp_lag_recent(&s->overload_lag, now);
        __atomic_store_n(&s->overload_ms, disp_liveness_overloaded(overload, s->o.worker_timeout_ms) ? overload : 0,
                         __ATOMIC_RELAXED);
        uint64_t ids[64];
        int32_t ranks[64];
        probe_journal(s, now);
        const bool trim = now - s->trimmed_ms >= 10000;    /* freed message buffers go back to the OS */
        if (trim)
            s->trimmed_ms = now;
        /* Replayed peers had no chance to speak to this process yet: one timeout from its start first. */
        int64_t deadline = now - s->started_ms <= s->o.worker_timeout_ms
                               ? INT64_MAX : liveness_deadline(s, 0, now, s->o.worker_timeout_ms);
        int n = disp_state_dead_workers(s->st, now, deadline, ids, 64);
        for (int i = 0; i < n; i++) {
            struct disp_update u = {.kind = DISP_WORKER_DEAD, .worker = ids[i]};
            if (disp_commit(s, &u, NULL, 0) == 0)
                spw_log(SPW_LOG_WARN, "dispatcher", "worker dead worker=%llu silent_ms>%lld timeout_ms=%lld "
                        "leases_released=yes", (unsigned long long)ids[i], (long long)deadline,
                        (long long)s->o.worker_timeout_ms);
        }
        deadline = now - s->started_ms <= s->o.client_timeout_ms
                       ? INT64_MAX : liveness_deadline(s, 1, now, s->o.client_timeout_ms);
        n = disp_state_expired_clients(s->st, now, deadline, ids, ranks, 64);
        for (int i = 0; i < n; i++) {
            struct disp_update u = {.kind = DISP_CLIENT_EXPIRED, .job = ids[i], .rank = ranks[i], .now_ms = now};
            if (disp_commit(s, &u, NULL, 0) == 0)
                spw_log(SPW_LOG_WARN, "dispatcher", "client expired job=%llu rank=%d silent_ms>%lld timeout_ms=%lld",
                        (unsigned long long)ids[i], ranks[i], (long long)deadline,
                        (long long)s->o.client_timeout_ms);
        }
        n = disp_state_jobs_to_remove(s->st, now, s->o.finished_job_ms, s->o.paused_job_ms, ids, 64);
        for (int i = 0; i < n; i++) {
            struct disp_job_info ji;
            disp_state_job(s->st, ids[i], &ji);
            struct disp_update u = {.kind = DISP_REMOVE_JOB, .job = ids[i], .now_ms = now};
            if (disp_commit(s, &u, NULL, 0) != 0)
                continue;
            disp_forget_job(s, ids[i]);
            spw_log(SPW_LOG_INFO, "dispatcher", "job removed job=%llu state=%s ended_ms_ago=%lld",
                    (unsigned long long)ids[i], ji.finished ? "finished" : "expired", (long long)(now - ji.ended_ms));
        }
        pthread_mutex_unlock(&s->mu);
        disp_replanner_tick(s->replanner, now);     /* it takes this lock itself, when it needs to */
        if (trim)
            spw_heap_release_idle();                /* without the lock: it may take milliseconds */
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int disp_service_create(const struct disp_service_opts *o, struct disp_service **out, char *err, size_t errlen)
{
    struct disp_service *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->o = *o;
    if (s->o.default_split_size <= 0)
        s->o.default_split_size = 64;
    if (s->o.worker_millicores <= 0)
        s->o.worker_millicores = 1000;
    struct disp_limits lim = {.max_workers = o->max_workers, .max_jobs = o->max_jobs, .history = o->job_history,
                              .max_jobs_per_client = o->max_jobs_per_client};
    int rc = disp_state_create(&lim, &s->st);
    if (rc == 0 && (rc = disp_progress_create(&s->progress)) == 0)
        rc = disp_progress_create(&s->received);
    if (rc) {
        disp_progress_destroy(s->progress);
        disp_state_destroy(s->st);
        free(s);
        return spw_fail(err, errlen, rc, "out of memory");
    }
    if (o->work_dir && *o->work_dir) {
        struct spw_journal_opened info;
        if ((rc = spw_journal_open(o->work_dir, o->journal_recover ? SPW_JOURNAL_RECOVER : 0, replay_one, s,
                                   &s->journal, &info, err, errlen)) != 0) {
            disp_progress_destroy(s->received);
            disp_progress_destroy(s->progress);
            disp_state_destroy(s->st);
            free(s);
            return rc;
        }
        spw_log(SPW_LOG_INFO, "dispatcher", "journal replayed dir=%s records=%lld bytes=%lld dropped_bytes=%lld "
                "jobs=%d workers=%d", o->work_dir, (long long)info.records, (long long)info.bytes,
                (long long)info.dropped_bytes, disp_state_job_count(s->st), disp_state_worker_count(s->st));
        maybe_compact(s);
    }
    s->started_ms = spw_now_ms();
    s->members_gen = 1;             /* usable.gen 0: not computed yet */
    disp_lag_init(&s->worker_lag, o->worker_timeout_ms);
    disp_lag_init(&s->client_lag, o->client_timeout_ms);
    disp_lag_init(&s->overload_lag, DISP_OVERLOAD_WINDOW_MS);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_cond_init(&s->j_cv, NULL);
    s->ask = (struct disp_ask){.auth_token = o->auth_token,
                               .timeout_ms = o->profile_timeout_ms > 0 ? (int)o->profile_timeout_ms
                                                                       : DISP_PROFILE_TIMEOUT_MS};
    const struct disp_replan_env env = {.ctx = s, .gather = disp_replan_gather, .apply = disp_replan_apply,
                                        .ask = s->ask, .replan_after_ms = o->replan_after_ms};
    if (disp_manifests_create(MANIFESTS_CAP_BYTES, &s->manifests) != 0 ||
        disp_ahead_create(&s->ask, &s->ahead) != 0 ||
        disp_replanner_create(&env, &s->replanner) != 0 || pthread_create(&s->timer, NULL, timer_main, s) != 0) {
        disp_ahead_destroy(s->ahead);
        disp_manifests_destroy(s->manifests);
        disp_replanner_destroy(s->replanner);
        spw_journal_close(s->journal);
        disp_progress_destroy(s->received);
        disp_progress_destroy(s->progress);
        disp_state_destroy(s->st);
        free(s);
        return spw_fail(err, errlen, -EAGAIN, "cannot start the timer thread");
    }
    *out = s;
    return 0;
}

void disp_service_destroy(struct disp_service *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->timer, NULL);
    disp_replanner_destroy(s->replanner);
    disp_ahead_destroy(s->ahead);
    disp_manifests_destroy(s->manifests);
    disp_progress_destroy(s->received);
    disp_progress_destroy(s->progress);
    disp_state_destroy(s->st);
    spw_journal_close(s->journal);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->j_cv);
    free(s);
}

uint64_t disp_new_secret(void)
{
    uint64_t secret = 0;
    while (!secret && getrandom(&secret, sizeof secret, 0) != (ssize_t)sizeof secret)
        ;                                                   /* 0 means none: draw again */
    return secret;
}

int disp_wrong_job_secret(struct disp_service *s, uint64_t job, char *msg, size_t msglen)
{
    struct disp_job_info ji;
    if (disp_state_job(s->st, job, &ji) != 0) {
        if (disp_state_ended_job(s->st, job, &ji) == 0 && ji.cancelled) {
            /* Not NOT_FOUND, which a trainer answers by creating its job again. */
            snprintf(msg, msglen, "job %llu was cancelled (spillctl job cancel)", (unsigned long long)job);
            return SPW_RPC_FAILED_PRECONDITION;
        }
        snprintf(msg, msglen, "unknown job %llu", (unsigned long long)job);
        return SPW_RPC_NOT_FOUND;
    }
    spw_log(SPW_LOG_WARN, "dispatcher", "refused a call for job=%llu from peer=%s: wrong job secret",
            (unsigned long long)job, spw_rpc_current_peer());
    snprintf(msg, msglen, "job %llu: wrong job secret (an id alone grants nothing)", (unsigned long long)job);
    return SPW_RPC_PERMISSION_DENIED;
}

int disp_check_protocol(const char *who, uint32_t version, const char *build, char *msg, size_t msglen)
{
    if (version == SPW_PROTOCOL_VERSION)
        return SPW_RPC_OK;
    snprintf(msg, msglen, "%s speaks protocol %u%s (build %.64s), this dispatcher protocol %d (build %s): run "
             "the same Spillway version on the dispatcher, the workers and the trainers", who, version,
             version ? "" : ", i.e. a build from before protocol versions", build && *build ? build : "unknown",
             SPW_PROTOCOL_VERSION, spw_build_version());
    return SPW_RPC_FAILED_PRECONDITION;
}

int disp_lock_call(struct disp_service *s, char *msg, size_t msglen)
{
    pthread_mutex_lock(&s->mu);
    const int64_t waited_ms = spw_rpc_current_age_ns() / 1000000;  /* shed or not: the dispatcher's lag */
    if (waited_ms > s->call_wait_ms)
        s->call_wait_ms = waited_ms;
    if (!spw_rpc_current_expired())
        return 0;
    pthread_mutex_unlock(&s->mu);
    snprintf(msg, msglen, "the call's deadline passed while it waited for the dispatcher (overloaded): shed");
    __atomic_add_fetch(&s->shed_calls, 1, __ATOMIC_RELAXED);
    return SPW_RPC_DEADLINE_EXCEEDED;
}

int disp_refuse_new_work(struct disp_service *s, const char *what, char *msg, size_t msglen)
{
    const int64_t lag_ms = __atomic_load_n(&s->overload_ms, __ATOMIC_RELAXED);
    if (lag_ms <= 0)
        return SPW_RPC_OK;
    __atomic_add_fetch(&s->new_work_refused, 1, __ATOMIC_RELAXED);
    snprintf(msg, msglen, "the dispatcher is overloaded (its lag %lld ms, over a quarter of --worker-timeout-ms): "
             "%s waits so that running work is served; retry later (after about %d s)", (long long)lag_ms, what,
             DISP_OVERLOAD_WINDOW_MS / 1000);
    return SPW_RPC_RESOURCE_EXHAUSTED;
}

/* FNV-1a over the ids and addresses of the workers serving job (as disp_alive_workers lists them; serves
 * NULL: every usable worker); never 0. Reads the state only: no allocation per worker. */
static uint64_t serving_digest(struct disp_service *s, const bool *serves, int nw, size_t *count)
{
    uint64_t h = 1469598103934665603ull;
    *count = 0;
    for (int i = 0; i < nw; i++) {
        struct disp_worker_info wi;
        if ((serves && !serves[i]) || disp_state_worker_at(s->st, i, &wi) != 0 || !disp_worker_usable(s, &wi))
            continue;
        ++*count;
        for (int b = 0; b < 8; b++)
            h = (h ^ ((wi.id >> (8 * b)) & 0xff)) * 1099511628211ull;
        for (const char *c = wi.address; *c; c++)
            h = (h ^ (uint8_t)*c) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull;      /* ends the address */
    }
    return h ? h : 1;
}

/* The digest of every usable worker (serving_digest with serves NULL), kept while members_gen stays and for
 * at most DISP_USABLE_DIGEST_MS (a change it missed shows within that). */
static uint64_t usable_digest(struct disp_service *s, size_t *count)
{
    const int64_t now = spw_now_ms();
    if (s->usable.gen != s->members_gen || now - s->usable.at_ms >= DISP_USABLE_DIGEST_MS) {
        s->usable.digest = serving_digest(s, NULL, disp_state_worker_count(s->st), &s->usable.count);
        s->usable.gen = s->members_gen;
        s->usable.at_ms = now;
    }
    *count = s->usable.count;
    return s->usable.digest;
}

size_t disp_serving_workers(struct disp_service *s, const struct disp_job_info *ji, uint64_t known, uint64_t *digest,
                            Spillway__V1__WorkerAddress ***out)
{
    *out = NULL;
    *digest = 0;
    size_t count;
    if (!ji->refusals && !ji->max_workers && !ji->client_only) {
        *digest = usable_digest(s, &count);    /* served by every usable worker */
    } else {
        int nw = disp_state_worker_count(s->st);
        bool *serves = calloc((size_t)nw + 1, sizeof *serves);
        if (!serves || disp_state_job_servers(s->st, ji->id, serves, nw) < 0) {
            free(serves);
            return 0;
        }
        *digest = serving_digest(s, serves, nw, &count);
        free(serves);
    }
    if (known && known == *digest)
        return 0;
    const size_t n = disp_alive_workers(s, ji->id, 0, out);
    if (n != count)
        *digest = 1;        /* a partial list (out of memory): not one the client may keep */
    return n;
}

size_t disp_alive_workers(struct disp_service *s, uint64_t job, int max, Spillway__V1__WorkerAddress ***out)
{
    int nw = disp_state_worker_count(s->st);
    Spillway__V1__WorkerAddress **v = calloc((size_t)nw + 1, sizeof *v);
    bool *serves = job ? calloc((size_t)nw + 1, sizeof *serves) : NULL;
    if (job && (!serves || disp_state_job_servers(s->st, job, serves, nw) < 0))
        nw = 0;
    size_t n = 0;
    for (int i = 0; v && i < nw && (job || !max || n < (size_t)max); i++) {
        struct disp_worker_info wi;
        disp_state_worker_at(s->st, i, &wi);
        if (!disp_worker_usable(s, &wi) || (job && !serves[i]))
            continue;
        Spillway__V1__WorkerAddress *a = calloc(1, sizeof *a);
        char *addr = strdup(wi.address);
        if (!a || !addr) {
            free(a);
            free(addr);
            break;
        }
        spillway__v1__worker_address__init(a);
        a->worker_id = wi.id;
        a->address = addr;
        v[n++] = a;
    }
    free(serves);
    *out = v;
    return n;
}

void disp_free_addresses(void *v)
{
    Spillway__V1__WorkerAddress **a = v;
    for (size_t i = 0; a && a[i]; i++) {
        free(a[i]->address);
        free(a[i]);
    }
    free(a);
}

/* A worker says it cannot serve a job, or a client of the job that it cannot reach the worker: stop giving
 * the worker the job (once; both repeat it while it applies). Called with mu held. */
void disp_note_refusal(struct disp_service *s, uint64_t worker, const Spillway__V1__JobRefusal *r)
{
    struct disp_job_info ji;
    if (disp_state_job(s->st, r->job, &ji) != 0)
        return;
    for (int i = 0; i < ji.refusals; i++) {
        uint64_t w;
        const char *why;
        if (disp_state_refusal_at(s->st, r->job, i, &w, &why) == 0 && w == worker)
            return;
    }
    struct disp_update u = {.kind = DISP_WORKER_REFUSES, .job = r->job, .worker = worker, .reason = r->reason};
    if (disp_commit(s, &u, NULL, 0) == 0)
        spw_log(SPW_LOG_WARN, "dispatcher", "worker cannot serve worker=%llu job=%llu reason=\"%.255s\"",
                (unsigned long long)worker, (unsigned long long)r->job, r->reason);
}
