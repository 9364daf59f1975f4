/* dispatcher/state.c - the dispatcher's pure state machine (see state.h): workers, jobs, and per job the
 * splits of the lowest unfinished epoch and the next one (state, generation, holder, lease time).
 * No I/O, no clock, no locks: the caller serialises. */
#include "dispatcher/state.h"
#include "dispatcher/state_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

int disp_state_create(const struct disp_limits *limits, struct disp_state **out)
{
    struct disp_state *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    if (limits)
        s->lim = *limits;
    if (s->lim.max_workers <= 0) s->lim.max_workers = 4096;
    if (s->lim.max_jobs <= 0) s->lim.max_jobs = 256;
    if (s->lim.max_splits_per_epoch <= 0) s->lim.max_splits_per_epoch = 4 << 20;
    if (s->lim.max_world_size <= 0) s->lim.max_world_size = 1024;
    if (s->lim.max_world_size > DISP_MAX_WORLD) s->lim.max_world_size = DISP_MAX_WORLD;
    if (s->lim.max_pipeline_bytes == 0) s->lim.max_pipeline_bytes = 1 << 20;
    if (s->lim.history <= 0) s->lim.history = 256;
    if (s->lim.max_jobs_per_client <= 0) s->lim.max_jobs_per_client = 64;
    s->next_worker = s->next_job = 1;
    s->workers = calloc((size_t)s->lim.max_workers, sizeof *s->workers);
    s->jobs = calloc((size_t)s->lim.max_jobs, sizeof *s->jobs);
    s->ended = calloc((size_t)s->lim.history, sizeof *s->ended);
    if (!s->workers || !s->jobs || !s->ended || id_index_init(&s->worker_at, s->lim.max_workers) != 0 ||
        id_index_init(&s->job_at, s->lim.max_jobs) != 0) {
        disp_state_destroy(s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

static void epoch_free(struct epoch_splits *e)
{
    free(e->state);
    free(e->generation);
    free(e->holder);
    free(e->leased_at);
    memset(e, 0, sizeof *e);
    e->epoch = -1;
}

static int epoch_init(struct epoch_splits *e, int64_t epoch, int64_t n)
{
    memset(e, 0, sizeof *e);
    e->epoch = epoch;
    e->n = n;
    e->pending = n;
    e->state = calloc((size_t)n, 1);
    e->generation = calloc((size_t)n, sizeof *e->generation);
    e->holder = calloc((size_t)n, sizeof *e->holder);
    e->leased_at = calloc((size_t)n, sizeof *e->leased_at);
    if (!e->state || !e->generation || !e->holder || !e->leased_at) {
        epoch_free(e);
        return -ENOMEM;
    }
    return 0;
}

static void job_free(struct job *j)
{
    free(j->pipeline);
    free(j->clients);
    free(j->refusals);
    epoch_free(&j->ep[0]);
    epoch_free(&j->ep[1]);
    memset(j, 0, sizeof *j);
}

void disp_state_destroy(struct disp_state *s)
{
    if (!s)
        return;
    for (int i = 0; s->jobs && i < s->n_jobs; i++)
        job_free(&s->jobs[i]);
    free(s->jobs);
    free(s->ended);
    free(s->workers);
    id_index_free(&s->worker_at);
    id_index_free(&s->job_at);
    free(s);
}

static struct worker *find_worker(const struct disp_state *s, uint64_t id)
{
    const int i = id_index_find(&s->worker_at, id);
    return i >= 0 ? &s->workers[i] : NULL;
}

static struct job *find_job(const struct disp_state *s, uint64_t id)
{
    const int i = id_index_find(&s->job_at, id);
    return i >= 0 ? &s->jobs[i] : NULL;
}

/* After the tables changed (an entry added, or one removed and the rest moved up). */
static void reindex_workers(struct disp_state *s)
{
    id_index_rebuild(&s->worker_at, s->workers, sizeof *s->workers, offsetof(struct worker, id), s->n_workers);
}

static void reindex_jobs(struct disp_state *s)
{
    id_index_rebuild(&s->job_at, s->jobs, sizeof *s->jobs, offsetof(struct job, id), s->n_jobs);
}

static struct epoch_splits *find_epoch(struct job *j, uint64_t epoch)
{
    for (int k = 0; k < 2; k++)
        if (j->ep[k].epoch >= 0 && (uint64_t)j->ep[k].epoch == epoch)
            return &j->ep[k];
    return NULL;
}

/* A worker's lease count follows every change of a split's holder (a client's producers are not counted). */
static void count_lease(struct disp_state *s, uint64_t holder, int delta)
{
    struct worker *w = holder && !DISP_IS_CLIENT_PRODUCER(holder) ? find_worker(s, holder) : NULL;
    if (w)
        w->leases += delta;
}

/* Split i stops being leased (to pending or acked): its holder's count goes down. */
static void drop_holder(struct disp_state *s, struct epoch_splits *e, int64_t i)
{
    if (e->state[i] == DISP_SPLIT_LEASED)
        count_lease(s, e->holder[i], -1);
    e->holder[i] = 0;
}

static void release_split(struct disp_state *s, struct epoch_splits *e, int64_t i)
{
    if (e->state[i] != DISP_SPLIT_LEASED)
        return;
    drop_holder(s, e, i);
    e->state[i] = DISP_SPLIT_PENDING;
    e->leased--;
    e->pending++;
    if (i < e->cursor)
        e->cursor = i;
}

/* Return every split `producer` holds in job j to pending (their next lease gets a new generation);
 * workers = true: every split any worker holds. */
static void release_held(struct disp_state *s, struct job *j, uint64_t producer, bool workers)
{
    for (int k = 0; k < 2; k++) {
        struct epoch_splits *e = &j->ep[k];
        if (e->epoch < 0 || e->leased == 0)
            continue;
        for (int64_t i = 0; i < e->n; i++)
            if (e->state[i] == DISP_SPLIT_LEASED &&
                (workers ? !DISP_IS_CLIENT_PRODUCER(e->holder[i]) : e->holder[i] == producer))
                release_split(s, e, i);
    }
}

static bool refused(const struct job *j, uint64_t worker)
{
    for (int i = 0; i < j->n_refusals; i++)
        if (j->refusals[i].worker == worker)
            return true;
    return false;
}

static void release_producer(struct disp_state *s, struct job *j, uint64_t producer)
{
    release_held(s, j, producer, false);
}

static void release_all(struct disp_state *s, struct job *j)
{
    for (int k = 0; k < 2; k++) {
        struct epoch_splits *e = &j->ep[k];
        for (int64_t i = 0; e->epoch >= 0 && e->leased && i < e->n; i++)
            release_split(s, e, i);
    }
}

/* Epoch ep[0] fully acked: shift, and open the epoch after the next one if the job has it. */
static int advance_epochs(struct job *j, int64_t now_ms)
{
    while (j->ep[0].epoch >= 0 && j->ep[0].acked == j->ep[0].n) {
        int64_t done = j->ep[0].epoch;
        epoch_free(&j->ep[0]);
        j->ep[0] = j->ep[1];
        memset(&j->ep[1], 0, sizeof j->ep[1]);
        j->ep[1].epoch = -1;
        int64_t next = done + 2;
        if (j->ep[0].epoch < 0) {
            j->finished = true;
            j->ended_ms = now_ms;
            return 0;
        }
        if (j->epochs == 0 || next < j->epochs) {
            int rc = epoch_init(&j->ep[1], next, j->splits_per_epoch);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static void job_info(const struct job *j, struct disp_job_info *out);

/* Move job i out of the table into the ring of ended jobs' summaries, freeing its memory. flags: how an
 * unfinished one ended (DISP_ENDED_CANCELLED, _CLOSED; else its clients never came back). */
static void remove_job(struct disp_state *s, int i, uint32_t flags)
{
    struct disp_job_info *e = &s->ended[s->ended_next];
    job_info(&s->jobs[i], e);
    release_all(s, &s->jobs[i]);            /* an expired job's leases leave their workers' counts */
    e->cancelled = !e->finished && (flags & DISP_ENDED_CANCELLED);
    e->closed = !e->finished && !e->cancelled && (flags & DISP_ENDED_CLOSED);
    e->expired = !e->finished && !e->cancelled && !e->closed;   /* its clients never came back */
    e->paused = false;
    e->leased = 0;
    e->pending = e->finished ? 0 : e->pending;
    e->ended_ms = s->jobs[i].ended_ms;
    s->ended_next = (s->ended_next + 1) % s->lim.history;
    if (s->n_ended < s->lim.history)
        s->n_ended++;
    job_free(&s->jobs[i]);
    memmove(&s->jobs[i], &s->jobs[i + 1], sizeof s->jobs[0] * (size_t)(s->n_jobs - i - 1));
    s->n_jobs--;
    reindex_jobs(s);
}

static int apply_create_job(struct disp_state *s, struct disp_update *u, char *err, size_t errlen)
{
    if (u->job && find_job(s, u->job))
        return spw_fail(err, errlen, -EEXIST, "job %llu exists", (unsigned long long)u->job);
    const char *client = u->client ? u->client : "";
    int live = 0, mine = 0;
    for (int i = 0; i < s->n_jobs; i++) {
        live += !s->jobs[i].finished;
        mine += !s->jobs[i].finished && *client && !strncmp(s->jobs[i].client, client, DISP_CLIENT_MAX);
    }
    if (live >= s->lim.max_jobs)
        return spw_fail(err, errlen, SPW_ETOOBIG, "too many unfinished jobs (cap %d)", s->lim.max_jobs);
    if (mine >= s->lim.max_jobs_per_client)
        return spw_fail(err, errlen, SPW_ETOOBIG, "client %s has %d unfinished jobs (cap %d per client)", client,
                        mine, s->lim.max_jobs_per_client);
    if (u->n_samples <= 0 || u->split_size <= 0 || u->epochs < 0)
        return spw_fail(err, errlen, -EINVAL, "job needs samples > 0, split_size > 0, epochs >= 0");
    if (u->first_epoch < 0 || (u->epochs > 0 && u->first_epoch > u->epochs))
        return spw_fail(err, errlen, -EINVAL, "first epoch %lld is outside the job's %lld", (long long)u->first_epoch,
                        (long long)u->epochs);
    if (u->name && strlen(u->name) > DISP_JOB_NAME_MAX)
        return spw_fail(err, errlen, -EINVAL, "job name longer than %d bytes", DISP_JOB_NAME_MAX);
    if (u->world_size <= 0 || u->world_size > s->lim.max_world_size)
        return spw_fail(err, errlen, -EINVAL, "world_size %d is outside [1, %d]", u->world_size, s->lim.max_world_size);
    if (u->max_workers < 0)
        return spw_fail(err, errlen, -EINVAL, "max_workers %d: use 0 (all) or a positive count", u->max_workers);
    if (u->pipeline_len > s->lim.max_pipeline_bytes)
        return spw_fail(err, errlen, SPW_ETOOBIG, "pipeline of %zu bytes exceeds the cap of %zu", u->pipeline_len,
                    s->lim.max_pipeline_bytes);
    int64_t splits = (u->n_samples + u->split_size - 1) / u->split_size;
    if (splits > s->lim.max_splits_per_epoch)
        return spw_fail(err, errlen, SPW_ETOOBIG, "%lld splits per epoch exceed the cap of %lld", (long long)splits,
                    (long long)s->lim.max_splits_per_epoch);
    struct job j = {0};
    j.id = u->job ? u->job : s->next_job;
    j.manifest_hash = u->manifest_hash;
    j.secret = u->secret;
    j.n_samples = u->n_samples;
    j.epochs = u->epochs;
    j.splits_per_epoch = splits;
    j.split_size = u->split_size;
    j.cut = u->cut;
    j.world_size = u->world_size;
    j.max_workers = u->max_workers;
    snprintf(j.name, sizeof j.name, "%s", u->name ? u->name : "");
    snprintf(j.client, sizeof j.client, "%s", client);
    j.ep[0].epoch = j.ep[1].epoch = -1;
    j.created_ms = u->now_ms;
    j.pipeline = malloc(u->pipeline_len ? u->pipeline_len : 1);
    j.clients = calloc((size_t)u->world_size, sizeof *j.clients);
    const int64_t e0 = u->first_epoch;
    const bool done = u->epochs > 0 && e0 == u->epochs;    /* every epoch delivered: created finished */
    int rc = (!j.pipeline || !j.clients) ? -ENOMEM : done ? 0 : epoch_init(&j.ep[0], e0, splits);
    if (rc == 0 && !done && (u->epochs == 0 || u->epochs > e0 + 1))
        rc = epoch_init(&j.ep[1], e0 + 1, splits);
    if (done) {
        j.finished = true;
        j.ended_ms = u->now_ms;
    }
    if (rc) {
        job_free(&j);
        return spw_fail(err, errlen, rc, "out of memory for job %llu", (unsigned long long)u->job);
    }
    if (u->pipeline_len)
        memcpy(j.pipeline, u->pipeline, u->pipeline_len);
    j.pipeline_len = u->pipeline_len;
    for (int r = 0; r < u->world_size; r++)
        j.clients[r].last_heartbeat_ms = u->now_ms;
    if (s->n_jobs == s->lim.max_jobs) {     /* full of live jobs and finished ones in their grace period */
        int oldest = -1;
        for (int i = 0; i < s->n_jobs; i++)
            if (s->jobs[i].finished && (oldest < 0 || s->jobs[i].ended_ms < s->jobs[oldest].ended_ms))
                oldest = i;
        remove_job(s, oldest, 0);           /* there is one: fewer than max_jobs are unfinished */
    }
    s->jobs[s->n_jobs++] = j;
    reindex_jobs(s);
    u->job = j.id;
    if (j.id >= s->next_job)
        s->next_job = j.id + 1;
    return 0;
}

static int apply_lease(struct disp_state *s, const struct disp_update *u, char *err, size_t errlen)
{
    struct job *j = find_job(s, u->job);
    if (!j)
        return spw_fail(err, errlen, -ENOENT, "unknown job %llu", (unsigned long long)u->job);
    struct epoch_splits *e = find_epoch(j, u->epoch);
    if (!e || u->split >= (uint64_t)e->n)
        return spw_fail(err, errlen, -EINVAL, "job %llu has no open split %llu of epoch %llu",
                    (unsigned long long)u->job, (unsigned long long)u->split, (unsigned long long)u->epoch);
    int64_t i = (int64_t)u->split;
    if (e->state[i] == DISP_SPLIT_ACKED)
        return spw_fail(err, errlen, -EALREADY, "split %lld of epoch %llu is already acked", (long long)i,
                    (unsigned long long)u->epoch);
    if (u->generation != (uint64_t)e->generation[i] + 1)
        return spw_fail(err, errlen, -EINVAL, "lease generation %llu, expected %u", (unsigned long long)u->generation,
                    e->generation[i] + 1);
    if (e->state[i] == DISP_SPLIT_PENDING) {
        e->pending--;
        e->leased++;
    }
    drop_holder(s, e, i);                   /* a re-lease: the previous holder's count */
    e->state[i] = DISP_SPLIT_LEASED;
    e->generation[i]++;
    e->holder[i] = u->producer;
    count_lease(s, u->producer, 1);
    e->leased_at[i] = u->now_ms;
    while (e->cursor < e->n && e->state[e->cursor] != DISP_SPLIT_PENDING)
        e->cursor++;
    return 0;
}

static int apply_ack(struct disp_state *s, const struct disp_update *u, char *err, size_t errlen)
{
    struct job *j = find_job(s, u->job);
    if (!j)
        return spw_fail(err, errlen, -ENOENT, "unknown job %llu", (unsigned long long)u->job);
    if (j->finished || (j->ep[0].epoch >= 0 && u->epoch < (uint64_t)j->ep[0].epoch))
        return 0;                                   /* an epoch already complete: a duplicate ack */
    struct epoch_splits *e = find_epoch(j, u->epoch);
    if (!e || u->split >= (uint64_t)e->n)
        return spw_fail(err, errlen, -EINVAL, "job %llu has no open split %llu of epoch %llu",
                    (unsigned long long)u->job, (unsigned long long)u->split, (unsigned long long)u->epoch);
    int64_t i = (int64_t)u->split;
    if (e->state[i] == DISP_SPLIT_ACKED)
        return 0;
    if (e->state[i] == DISP_SPLIT_LEASED)
        e->leased--;
    else
        e->pending--;
    drop_holder(s, e, i);
    e->state[i] = DISP_SPLIT_ACKED;
    e->acked++;
    return advance_epochs(j, u->now_ms);
}

/* Split i of e (this rank's) counts as delivered (acked) or goes back to pending. */
static void resume_split(struct disp_state *s, struct epoch_splits *e, int64_t i, bool done)
{
    const enum disp_split_state to = done ? DISP_SPLIT_ACKED : DISP_SPLIT_PENDING;
    if (e->state[i] == to)
        return;
    if (e->state[i] == DISP_SPLIT_PENDING)
        e->pending--;
    else if (e->state[i] == DISP_SPLIT_LEASED)
        e->leased--;
    else
        e->acked--;
    drop_holder(s, e, i);
    e->state[i] = to;
    if (done) {
        e->acked++;
    } else {
        e->pending++;
        if (i < e->cursor)
            e->cursor = i;
    }
}

static int apply_client_resume(struct disp_state *s, const struct disp_update *u, char *err, size_t errlen)
{
    struct job *j = find_job(s, u->job);
    if (!j)
        return spw_fail(err, errlen, -ENOENT, "unknown job %llu", (unsigned long long)u->job);
    if (u->rank < 0 || u->rank >= j->world_size)
        return spw_fail(err, errlen, -EINVAL, "rank %d is outside the job's world of %d", u->rank, j->world_size);
    for (size_t k = 0; k < u->n_splits; k++)
        if (u->splits[k] >= (uint64_t)j->splits_per_epoch || (int64_t)(u->splits[k] % (uint64_t)j->world_size) != u->rank)
            return spw_fail(err, errlen, -EINVAL, "resume: split %llu is not one of rank %d's %lld",
                            (unsigned long long)u->splits[k], u->rank, (long long)j->splits_per_epoch);
    /* The rank's splits of the open epochs: done before its epoch, and its done ones of it; a rank further
     * ahead than the two open epochs (a journal that lost records) moves them on until they reach it. */
    for (int64_t first = -1; !j->finished && j->ep[0].epoch != first;) {
        first = j->ep[0].epoch;
        for (int k = 0; k < 2; k++) {
            struct epoch_splits *e = &j->ep[k];
            if (e->epoch < 0)
                continue;
            for (int64_t i = u->rank; i < e->n; i += j->world_size) {
                bool done = (uint64_t)e->epoch < u->epoch;
                for (size_t d = 0; !done && (uint64_t)e->epoch == u->epoch && d < u->n_splits; d++)
                    done = u->splits[d] == (uint64_t)i;
                resume_split(s, e, i, done);
            }
        }
        const int rc = advance_epochs(j, u->now_ms);
        if (rc)
            return rc;
    }
    return 0;
}

static int apply_refuses(struct disp_state *s, const struct disp_update *u, char *err, size_t errlen)
{
    struct job *j = find_job(s, u->job);
    if (!j)
        return spw_fail(err, errlen, -ENOENT, "unknown job %llu", (unsigned long long)u->job);
    if (!find_worker(s, u->worker))
        return spw_fail(err, errlen, -ENOENT, "unknown worker %llu", (unsigned long long)u->worker);
    struct refusal *r = NULL;
    for (int i = 0; i < j->n_refusals && !r; i++)
        if (j->refusals[i].worker == u->worker)
            r = &j->refusals[i];
    if (!r) {               /* one entry per registered worker: bounded by max_workers */
        struct refusal *more = realloc(j->refusals, sizeof *more * (size_t)(j->n_refusals + 1));
        if (!more)
            return spw_fail(err, errlen, -ENOMEM, "out of memory");
        j->refusals = more;
        r = &j->refusals[j->n_refusals++];
        r->worker = u->worker;
    }
    snprintf(r->reason, sizeof r->reason, "%s", u->reason && *u->reason ? u->reason : "no reason given");
    release_producer(s, j, u->worker);
    return 0;
}

static int apply_restore_ended(struct disp_state *s, const struct disp_update *u, char *err, size_t errlen)
{
    if (u->split_size <= 0 || u->n_samples < 0)
        return spw_fail(err, errlen, -EINVAL, "ended job %llu: split_size > 0 and samples >= 0",
                        (unsigned long long)u->job);
    struct disp_job_info *e = &s->ended[s->ended_next];
    memset(e, 0, sizeof *e);
    e->id = u->job;
    e->manifest_hash = u->manifest_hash;
    e->n_samples = u->n_samples;
    e->epochs = u->epochs;
    e->splits_per_epoch = (u->n_samples + u->split_size - 1) / u->split_size;
    e->split_size = u->split_size;
    e->cut = u->cut;
    e->world_size = u->world_size;
    e->max_workers = u->max_workers;
    e->epoch = (int64_t)u->epoch;
    snprintf(e->name, sizeof e->name, "%s", u->name ? u->name : "");
    snprintf(e->client, sizeof e->client, "%s", u->client ? u->client : "");
    e->acked = u->acked;
    e->pending = u->pending;
    e->refusals = u->refusals;
    e->finished = u->flags & DISP_ENDED_FINISHED;
    e->expired = u->flags & DISP_ENDED_EXPIRED;
    e->client_only = u->flags & DISP_ENDED_CLIENT_ONLY;
    e->cancelled = u->flags & DISP_ENDED_CANCELLED;
    e->closed = u->flags & DISP_ENDED_CLOSED;
    e->ended_ms = u->now_ms;
    s->ended_next = (s->ended_next + 1) % s->lim.history;
    if (s->n_ended < s->lim.history)
        s->n_ended++;
    return 0;
}

bool disp_update_durable(const struct disp_state *s, const struct disp_update *u)
{
    switch (u->kind) {
    case DISP_WORKER_HEARTBEAT:
    case DISP_WORKER_DEAD:
    case DISP_CLIENT_EXPIRED:
    case DISP_LEASE:
        return false;
    case DISP_CLIENT_HEARTBEAT:
        return u->incarnation != disp_state_client_incarnation(s, u->job, u->rank);
    default:
        return true;
    }
}

/* A full table makes room for a new worker by forgetting its oldest dead one (which holds nothing: its death
 * released its leases), so dead workers do not use up the cap over a dispatcher's lifetime. The others keep
 * their registration order (max_workers takes the first N alive). Returns 0, or -ENOSPC with none dead. A
 * replay, which knows no deaths (they are soft), may refuse such a registration: the worker's next heartbeat
 * gets NOT_FOUND and it registers again. */
static int evict_dead_worker(struct disp_state *s, uint64_t *evicted)
{
    for (int i = 0; i < s->n_workers; i++)
        if (!s->workers[i].alive && s->workers[i].leases == 0) {
            *evicted = s->workers[i].id;
            memmove(&s->workers[i], &s->workers[i + 1], sizeof s->workers[0] * (size_t)(s->n_workers - i - 1));
            s->n_workers--;
            reindex_workers(s);
            return 0;
        }
    return -ENOSPC;
}

int disp_state_apply(struct disp_state *s, struct disp_update *u, char *err, size_t errlen)
{
    struct worker *w;
    struct job *j;
    switch (u->kind) {
    case DISP_REGISTER_WORKER:
        u->evicted = 0;
        if ((w = u->worker ? find_worker(s, u->worker) : NULL) == NULL) {
            if (s->n_workers >= s->lim.max_workers && evict_dead_worker(s, &u->evicted) != 0)
                return spw_fail(err, errlen, SPW_ETOOBIG, "too many workers (cap %d, none of them dead)",
                                s->lim.max_workers);
            w = &s->workers[s->n_workers++];
            w->id = u->worker ? u->worker : s->next_worker;
            u->worker = w->id;
            if (w->id >= s->next_worker)
                s->next_worker = w->id + 1;
            reindex_workers(s);
        }
        snprintf(w->address, sizeof w->address, "%s", u->address ? u->address : "");
        snprintf(w->gpu, sizeof w->gpu, "%s", u->name ? u->name : "");
        w->secret = u->secret;
        w->threads = u->threads;
        w->alive = true;
        w->last_heartbeat_ms = u->now_ms;
        return 0;
    case DISP_WORKER_HEARTBEAT:
        if (!(w = find_worker(s, u->worker)) || !w->alive)
            return spw_fail(err, errlen, -ENOENT, "unknown or retired worker %llu", (unsigned long long)u->worker);
        w->last_heartbeat_ms = u->now_ms;
        w->buffered_bytes = u->buffered_bytes > 0 ? u->buffered_bytes : 0;
        return 0;
    case DISP_WORKER_DEAD:
        if (!(w = find_worker(s, u->worker)))
            return spw_fail(err, errlen, -ENOENT, "unknown worker %llu", (unsigned long long)u->worker);
        w->alive = false;
        for (int i = 0; i < s->n_jobs; i++)
            release_producer(s, &s->jobs[i], u->worker);
        return 0;
    case DISP_CREATE_JOB:
        return apply_create_job(s, u, err, errlen);
    case DISP_CLIENT_HEARTBEAT:
        if (!(j = find_job(s, u->job)))
            return spw_fail(err, errlen, -ENOENT, "unknown job %llu", (unsigned long long)u->job);
        if (u->rank < 0 || u->rank >= j->world_size)
            return spw_fail(err, errlen, -EINVAL, "rank %d is outside the job's world of %d", u->rank, j->world_size);
        {
            struct client_rank *c = &j->clients[u->rank];
            if (u->incarnation < c->incarnation)
                return spw_fail(err, errlen, -ESTALE, "client incarnation %llu is older than %llu (a zombie)",
                            (unsigned long long)u->incarnation, (unsigned long long)c->incarnation);
            if (u->incarnation > c->incarnation && c->incarnation)
                release_producer(s, j, DISP_CLIENT_PRODUCER(j->id, u->rank));   /* fence the old one */
            c->incarnation = u->incarnation;
            c->last_heartbeat_ms = u->now_ms;
            c->alive = true;
            j->paused = false;
        }
        return 0;
    case DISP_CLIENT_EXPIRED:
        if (!(j = find_job(s, u->job)))
            return spw_fail(err, errlen, -ENOENT, "unknown job %llu", (unsigned long long)u->job);
        if (u->rank < 0 || u->rank >= j->world_size)
            return spw_fail(err, errlen, -EINVAL, "rank %d is outside the job's world of %d", u->rank, j->world_size);
        j->clients[u->rank].alive = false;
        release_producer(s, j, DISP_CLIENT_PRODUCER(j->id, u->rank));
        {
            bool any = false;
            for (int r = 0; r < j->world_size; r++)
                any = any || j->clients[r].alive;
            if (!any && !j->paused) {   /* nobody consumes: stop handing out work, let producers drop it */
                j->paused = true;
                if (!j->finished)
                    j->ended_ms = u->now_ms;
                release_all(s, j);
            }
        }
        return 0;
    case DISP_LEASE:
        return apply_lease(s, u, err, errlen);
    case DISP_ACK:
        return apply_ack(s, u, err, errlen);
    case DISP_FINISH_JOB:
        if (!(j = find_job(s, u->job)))
            return spw_fail(err, errlen, -ENOENT, "unknown job %llu", (unsigned long long)u->job);
        if (!j->finished)
            j->ended_ms = u->now_ms;
        j->finished = true;
        release_all(s, j);
        return 0;
    case DISP_REMOVE_JOB:
        for (int i = 0; i < s->n_jobs; i++)
            if (s->jobs[i].id == u->job) {
                remove_job(s, i, u->flags);
                return 0;
            }
        return spw_fail(err, errlen, -ENOENT, "unknown job %llu", (unsigned long long)u->job);
    case DISP_CLIENT_RESUME:
        return apply_client_resume(s, u, err, errlen);
    case DISP_SET_CUT:
        if (!(j = find_job(s, u->job)))
            return spw_fail(err, errlen, -ENOENT, "unknown job %llu", (unsigned long long)u->job);
        if (u->cut < 0 || u->cut > 256)
            return spw_fail(err, errlen, -EINVAL, "cut %d is outside [0, 256]", u->cut);
        j->cut = u->cut;
        return 0;
    case DISP_CLIENT_ONLY:
        if (!(j = find_job(s, u->job)))
            return spw_fail(err, errlen, -ENOENT, "unknown job %llu", (unsigned long long)u->job);
        j->client_only = true;
        release_held(s, j, 0, true);
        return 0;
    case DISP_WORKER_REFUSES:
        return apply_refuses(s, u, err, errlen);
    case DISP_ID_FLOOR:
        s->next_worker = u->worker > s->next_worker ? u->worker : s->next_worker;
        s->next_job = u->job > s->next_job ? u->job : s->next_job;
        return 0;
    case DISP_RESTORE_ENDED:
        return apply_restore_ended(s, u, err, errlen);
    }
    return spw_fail(err, errlen, -EINVAL, "unknown update kind %d", (int)u->kind);
}

static bool rank_ok(const struct job *j, uint64_t producer, int64_t split)
{
    if (!DISP_IS_CLIENT_PRODUCER(producer))
        return true;
    return (int64_t)(producer & 0xFFFFF) == split % j->world_size;
}

static void fill_lease(const struct job *j, const struct epoch_splits *e, int64_t i, bool spec,
                       struct disp_lease *out)
{
    out->job = j->id;
    out->epoch = (uint64_t)e->epoch;
    out->split = (uint64_t)i;
    out->generation = (uint64_t)e->generation[i] + 1;
    out->cut = j->cut;
    out->split_size = j->split_size;
    out->first_position = i * j->split_size;
    int64_t left = j->n_samples - out->first_position;
    out->count = (int32_t)(left < j->split_size ? left : j->split_size);
    out->speculative = spec;
}

int disp_state_pick_lease(const struct disp_state *s, uint64_t job, uint64_t producer, int64_t now_ms,
                          int64_t spec_after_ms, struct disp_lease *out)
{
    struct job *j = find_job(s, job);
    if (!j)
        return -ENOENT;
    if (j->paused || j->finished)
        return 0;
    if ((j->max_workers || j->client_only || j->n_refusals) && !DISP_IS_CLIENT_PRODUCER(producer) &&
        !disp_state_worker_serves(s, job, producer))
        return 0;
    /* Pending splits, lowest epoch first; epoch e+1 only once e has nothing pending. */
    for (int k = 0; k < 2; k++) {
        const struct epoch_splits *e = &j->ep[k];
        if (e->epoch < 0)
            continue;
        for (int64_t i = e->cursor; e->pending && i < e->n; i++)
            if (e->state[i] == DISP_SPLIT_PENDING && rank_ok(j, producer, i)) {
                fill_lease(j, e, i, false, out);
                return 1;
            }
        if (e->pending)
            return 0;       /* e still has pending splits, just not for this producer */
    }
    /* Stragglers: a split leased long ago to someone else, in the lowest epoch first. */
    for (int k = 0; spec_after_ms > 0 && k < 2; k++) {
        const struct epoch_splits *e = &j->ep[k];
        if (e->epoch < 0 || !e->leased)
            continue;
        for (int64_t i = 0; i < e->n; i++)
            if (e->state[i] == DISP_SPLIT_LEASED && e->holder[i] != producer &&
                now_ms - e->leased_at[i] >= spec_after_ms && rank_ok(j, producer, i)) {
                fill_lease(j, e, i, true, out);
                return 1;
            }
    }
    return 0;
}

int disp_state_dead_workers(const struct disp_state *s, int64_t now_ms, int64_t timeout_ms, uint64_t *out, int cap)
{
    int n = 0;
    for (int i = 0; i < s->n_workers && n < cap; i++)
        if (s->workers[i].alive && now_ms - s->workers[i].last_heartbeat_ms > timeout_ms) {
            if (out)
                out[n] = s->workers[i].id;
            n++;
        }
    return n;
}

int disp_state_expired_clients(const struct disp_state *s, int64_t now_ms, int64_t timeout_ms, uint64_t *jobs,
                               int32_t *ranks, int cap)
{
    int n = 0;
    for (int i = 0; i < s->n_jobs; i++) {
        const struct job *j = &s->jobs[i];
        if (j->finished)
            continue;
        for (int r = 0; r < j->world_size && n < cap; r++)
            if (j->clients[r].alive && now_ms - j->clients[r].last_heartbeat_ms > timeout_ms) {
                if (jobs) {
                    jobs[n] = j->id;
                    ranks[n] = r;
                }
                n++;
            }
    }
    return n;
}

int disp_state_worker_count(const struct disp_state *s)
{
    return s->n_workers;
}

bool disp_state_worker_serves(const struct disp_state *s, uint64_t job, uint64_t worker)
{
    const struct job *j = find_job(s, job);
    if (!j || j->client_only)
        return false;
    int before = 0;     /* alive workers registered before this one that have not refused the job */
    for (int i = 0; i < s->n_workers; i++) {
        const bool able = s->workers[i].alive && !refused(j, s->workers[i].id);
        if (s->workers[i].id == worker)
            return able && (!j->max_workers || before < j->max_workers);
        before += able;
    }
    return false;
}

int disp_state_job_servers(const struct disp_state *s, uint64_t job, bool *serves, int cap)
{
    const struct job *j = find_job(s, job);
    if (!j)
        return -ENOENT;
    int before = 0, n = 0;
    for (; n < s->n_workers && n < cap; n++) {
        const bool able = !j->client_only && s->workers[n].alive && !refused(j, s->workers[n].id);
        serves[n] = able && (!j->max_workers || before < j->max_workers);
        before += able;
    }
    return n;
}

/* Whether the worker at index `at` serves job j (disp_state_worker_serves); *before: the alive workers
 * registered before it, counted at the first job that caps its workers (-1 until then). */
static bool serves_job(const struct disp_state *s, int at, int *before, const struct job *j)
{
    const struct worker *w = &s->workers[at];
    if (!w->alive || j->client_only || refused(j, w->id))
        return false;
    if (!j->max_workers)
        return true;
    if (j->n_refusals)
        return disp_state_worker_serves(s, j->id, w->id);      /* rare: capped and refused */
    if (*before < 0) {
        *before = 0;
        for (int i = 0; i < at; i++)
            *before += s->workers[i].alive;
    }
    return *before < j->max_workers;    /* able before it: the alive ones */
}

int disp_state_worker_jobs(const struct disp_state *s, uint64_t worker, bool *serves, int cap)
{
    const int at = id_index_find(&s->worker_at, worker);
    if (at < 0)
        return -ENOENT;
    int before = -1, n = 0;
    for (; n < s->n_jobs && n < cap; n++)
        serves[n] = serves_job(s, at, &before, &s->jobs[n]);
    return n;
}

int disp_state_worker_tasks(const struct disp_state *s, uint64_t worker, struct disp_task *out, int cap)
{
    const int at = id_index_find(&s->worker_at, worker);
    if (at < 0)
        return -ENOENT;
    int before = -1, n = 0;
    for (int k = 0; k < s->n_jobs && n < cap; k++) {
        const struct job *j = &s->jobs[k];
        if (j->finished || j->paused || !serves_job(s, at, &before, j))
            continue;
        out[n++] = (struct disp_task){.job = j->id, .manifest_hash = j->manifest_hash, .secret = j->secret,
                                      .pipeline = j->pipeline, .pipeline_len = j->pipeline_len, .cut = j->cut,
                                      .world_size = j->world_size};
    }
    return n;
}

int disp_state_worker_at(const struct disp_state *s, int i, struct disp_worker_info *out)
{
    if (i < 0 || i >= s->n_workers)
        return -ENOENT;
    const struct worker *w = &s->workers[i];
    _Static_assert(sizeof out->address == sizeof w->address && sizeof out->gpu == sizeof w->gpu,
                   "disp_worker_info holds struct worker's strings");
    memset(out, 0, sizeof *out);                /* padding and the bytes after each string: comparable */
    out->id = w->id;
    memcpy(out->address, w->address, strnlen(w->address, sizeof out->address - 1));   /* no snprintf: hot */
    memcpy(out->gpu, w->gpu, strnlen(w->gpu, sizeof out->gpu - 1));
    out->threads = w->threads;
    out->alive = w->alive;
    out->last_heartbeat_ms = w->last_heartbeat_ms;
    out->buffered_bytes = w->buffered_bytes;
    out->leases = w->leases;
    return 0;
}

int disp_state_job_count(const struct disp_state *s)
{
    return s->n_jobs;
}

static void job_info(const struct job *j, struct disp_job_info *out)
{
    memset(out, 0, sizeof *out);
    out->id = j->id;
    out->manifest_hash = j->manifest_hash;
    out->n_samples = j->n_samples;
    out->epochs = j->epochs;
    out->splits_per_epoch = j->splits_per_epoch;
    out->split_size = j->split_size;
    out->cut = j->cut;
    out->world_size = j->world_size;
    out->max_workers = j->max_workers;
    out->epoch = j->finished ? j->epochs : j->ep[0].epoch;
    _Static_assert(sizeof out->name == sizeof j->name && sizeof out->client == sizeof j->client,
                   "disp_job_info holds struct job's strings");
    memcpy(out->name, j->name, strnlen(j->name, sizeof out->name - 1));          /* no snprintf: hot */
    memcpy(out->client, j->client, strnlen(j->client, sizeof out->client - 1));
    out->acked = j->ep[0].acked;
    out->leased = j->ep[0].leased;
    out->pending = j->ep[0].pending;
    out->paused = j->paused;
    out->finished = j->finished;
    out->client_only = j->client_only;
    out->refusals = j->n_refusals;
    out->ended_ms = j->finished || j->paused ? j->ended_ms : 0;
}

int disp_state_job_at(const struct disp_state *s, int i, struct disp_job_info *out)
{
    if (i < 0 || i >= s->n_jobs)
        return -ENOENT;
    job_info(&s->jobs[i], out);
    return 0;
}

int disp_state_job(const struct disp_state *s, uint64_t job, struct disp_job_info *out)
{
    const struct job *j = find_job(s, job);
    if (!j)
        return -ENOENT;
    job_info(j, out);
    return 0;
}

const uint8_t *disp_state_job_pipeline(const struct disp_state *s, uint64_t job, size_t *len)
{
    const struct job *j = find_job(s, job);
    if (!j)
        return NULL;
    *len = j->pipeline_len;
    return j->pipeline;
}

int disp_state_split(const struct disp_state *s, uint64_t job, uint64_t epoch, uint64_t split,
                     enum disp_split_state *state, uint64_t *generation, uint64_t *holder)
{
    struct job *j = find_job(s, job);
    if (!j)
        return -ENOENT;
    if (j->finished || (j->ep[0].epoch >= 0 && epoch < (uint64_t)j->ep[0].epoch)) {
        *state = DISP_SPLIT_ACKED;      /* a completed epoch */
        *generation = 0;
        *holder = 0;
        return 0;
    }
    struct epoch_splits *e = find_epoch(j, epoch);
    if (!e || split >= (uint64_t)e->n)
        return -ENOENT;
    *state = (enum disp_split_state)e->state[split];
    *generation = e->generation[split];
    *holder = e->holder[split];
    return 0;
}

uint64_t disp_state_client_incarnation(const struct disp_state *s, uint64_t job, int32_t rank)
{
    const struct job *j = find_job(s, job);
    if (!j || rank < 0 || rank >= j->world_size)
        return 0;
    return j->clients[rank].incarnation;
}

/* How long job j has gone unused, as a rank to end it by (lower goes first): a paused job (no client left)
 * before a silent one (no rank heard from for idle_ms), the oldest of each first; INT64_MAX: in use. */
static int64_t idle_rank(const struct job *j, int64_t now_ms, int64_t idle_ms)
{
    if (j->paused)
        return j->ended_ms - (INT64_MAX / 2);
    int64_t last = j->created_ms;
    for (int r = 0; r < j->world_size; r++)
        if (j->clients[r].last_heartbeat_ms > last)
            last = j->clients[r].last_heartbeat_ms;
    return now_ms - last > idle_ms ? last : INT64_MAX;
}

uint64_t disp_state_job_to_make_room(const struct disp_state *s, const char *client, int64_t now_ms,
                                     int64_t idle_ms)
{
    int live = 0, mine = 0;
    const struct job *host_best = NULL, *any_best = NULL;
    int64_t host_rank = INT64_MAX, any_rank = INT64_MAX;
    for (int i = 0; i < s->n_jobs; i++) {
        const struct job *j = &s->jobs[i];
        if (j->finished)
            continue;
        const bool its = client && *client && !strncmp(j->client, client, DISP_CLIENT_MAX);
        live++;
        mine += its;
        const int64_t rank = idle_rank(j, now_ms, idle_ms);
        if (rank < any_rank)
            any_rank = rank, any_best = j;
        if (its && rank < host_rank)
            host_rank = rank, host_best = j;
    }
    if (mine >= s->lim.max_jobs_per_client)
        return host_best ? host_best->id : 0;
    if (live >= s->lim.max_jobs)
        return host_best ? host_best->id : any_best ? any_best->id : 0;
    return 0;
}

int disp_state_jobs_to_remove(const struct disp_state *s, int64_t now_ms, int64_t finished_ms, int64_t paused_ms,
                              uint64_t *out, int cap)
{
    int n = 0;
    for (int i = 0; i < s->n_jobs && n < cap; i++) {
        const struct job *j = &s->jobs[i];
        if ((j->finished && now_ms - j->ended_ms >= finished_ms) ||
            (!j->finished && j->paused && now_ms - j->ended_ms >= paused_ms))
            out[n++] = j->id;
    }
    return n;
}

int disp_state_ended_count(const struct disp_state *s)
{
    return s->n_ended;
}

int disp_state_ended_at(const struct disp_state *s, int i, struct disp_job_info *out)
{
    if (i < 0 || i >= s->n_ended)
        return -ENOENT;
    /* oldest first */
    *out = s->ended[(s->ended_next - s->n_ended + i + s->lim.history) % s->lim.history];
    return 0;
}

int disp_state_ended_job(const struct disp_state *s, uint64_t job, struct disp_job_info *out)
{
    for (int i = 0; i < s->n_ended; i++)
        if (s->ended[i].id == job) {
            *out = s->ended[i];
            return 0;
        }
    return -ENOENT;
}

int disp_state_refusal_at(const struct disp_state *s, uint64_t job, int i, uint64_t *worker,
                          const char **reason)
{
    const struct job *j = find_job(s, job);
    if (!j || i < 0 || i >= j->n_refusals)
        return -ENOENT;
    *worker = j->refusals[i].worker;
    *reason = j->refusals[i].reason;
    return 0;
}

const char *disp_state_no_worker(const struct disp_state *s, uint64_t job, uint64_t *worker)
{
    const struct job *j = find_job(s, job);
    if (!j || !j->n_refusals || j->client_only)
        return NULL;
    const char *why = NULL;
    for (int i = 0; i < s->n_workers; i++) {
        const struct worker *w = &s->workers[i];
        if (!w->alive)
            continue;
        if (!refused(j, w->id))
            return NULL;        /* an alive worker that has not refused it serves it */
        for (int k = 0; !why && k < j->n_refusals; k++)
            if (j->refusals[k].worker == w->id) {
                why = j->refusals[k].reason;
                *worker = w->id;
            }
    }
    return why;
}

bool disp_state_worker_known(const struct disp_state *s, uint64_t worker)
{
    return find_worker(s, worker) != NULL;
}

bool disp_state_job_known(const struct disp_state *s, uint64_t job)
{
    return find_job(s, job) != NULL;
}

bool disp_state_worker_alive(const struct disp_state *s, uint64_t worker)
{
    const struct worker *w = find_worker(s, worker);
    return w && w->alive;
}

int64_t disp_state_worker_heartbeat_ms(const struct disp_state *s, uint64_t worker)
{
    const struct worker *w = find_worker(s, worker);
    return w ? w->last_heartbeat_ms : -1;
}

bool disp_state_worker_secret_ok(const struct disp_state *s, uint64_t worker, uint64_t secret)
{
    const struct worker *w = find_worker(s, worker);
    return w && (w->secret ^ secret) == 0;
}

bool disp_state_job_secret_ok(const struct disp_state *s, uint64_t job, uint64_t secret)
{
    const struct job *j = find_job(s, job);
    return j && (j->secret ^ secret) == 0;
}

uint64_t disp_state_job_secret(const struct disp_state *s, uint64_t job)
{
    const struct job *j = find_job(s, job);
    return j ? j->secret : 0;
}

uint64_t disp_state_named_job(const struct disp_state *s, const char *name)
{
    for (int i = 0; name && *name && i < s->n_jobs; i++)
        if (!s->jobs[i].finished && !strcmp(s->jobs[i].name, name))
            return s->jobs[i].id;
    return 0;
}

int64_t disp_state_leased_total(const struct disp_state *s)
{
    int64_t n = 0;
    for (int i = 0; i < s->n_jobs; i++)
        for (int k = 0; k < 2; k++)
            n += s->jobs[i].ep[k].epoch >= 0 ? s->jobs[i].ep[k].leased : 0;
    return n;
}

int disp_state_audit(const struct disp_state *s, char *err, size_t errlen)
{
    for (int w = 0; w < s->n_workers; w++) {
        int64_t held = 0;
        for (int k = 0; k < s->n_jobs; k++)
            for (int x = 0; x < 2; x++) {
                const struct epoch_splits *e = &s->jobs[k].ep[x];
                for (int64_t i = 0; e->epoch >= 0 && i < e->n; i++)
                    held += e->state[i] == DISP_SPLIT_LEASED && e->holder[i] == s->workers[w].id;
            }
        if (held != s->workers[w].leases)
            return spw_fail(err, errlen, -EINVAL, "worker %llu: %lld leases counted, %lld held",
                            (unsigned long long)s->workers[w].id, (long long)s->workers[w].leases, (long long)held);
    }
    return 0;
}
