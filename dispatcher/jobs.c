/* dispatcher/jobs.c - the client-facing handlers besides CreateJob: ClientHeartbeat (acks, measurements,
 * unreachable workers; the worker list and the job's state in reply), LeaseSplit (for workers and the
 * clients' own threads), ListJobs and DescribeJob. Thread model: run on the RPC threads; state access under
 * the service lock. */
#include "dispatcher/service_internal.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/progress.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/rpc.h"

/* The client's incarnation must be the current one (a zombie client is refused). Called with mu held. */
static int check_client(struct disp_service *s, uint64_t job, int32_t rank, uint64_t inc, char *msg, size_t msglen)
{
    uint64_t cur = disp_state_client_incarnation(s->st, job, rank);
    if (cur != inc) {
        snprintf(msg, msglen, "client incarnation %llu of job %llu rank %d is not the current one (%llu)",
                 (unsigned long long)inc, (unsigned long long)job, rank, (unsigned long long)cur);
        return SPW_RPC_FAILED_PRECONDITION;
    }
    return SPW_RPC_OK;
}

static int client_heartbeat(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg,
                            size_t msglen)
{
    struct disp_service *s = svc;
    const Spillway__V1__ClientHeartbeatRequest *r = (const Spillway__V1__ClientHeartbeatRequest *)req;
    Spillway__V1__WorkerAddress **workers = NULL;
    size_t n_workers = 0;
    int status = SPW_RPC_OK;
    if ((status = disp_lock_call(s, msg, msglen)) != 0)
        return status;
    if (!disp_state_job_secret_ok(s->st, r->job, r->job_secret)) {
        status = disp_wrong_job_secret(s, r->job, msg, msglen);
        pthread_mutex_unlock(&s->mu);
        return status;
    }
    struct disp_update hb = {.kind = DISP_CLIENT_HEARTBEAT, .job = r->job, .rank = r->rank,
                             .incarnation = r->incarnation, .now_ms = spw_now_ms()};
    disp_batch_begin(s);        /* the acks reach the disk with one fsync, before the reply */
    int rc = disp_commit(s, &hb, msg, msglen);
    for (size_t i = 0; rc == 0 && i < r->n_acked; i++) {
        struct disp_update a = {.kind = DISP_ACK, .job = r->job, .epoch = r->acked[i]->epoch,
                                .split = r->acked[i]->split, .now_ms = hb.now_ms};
        rc = disp_commit(s, &a, msg, msglen);
    }
    const int synced = disp_batch_end(s, rc ? NULL : msg, msglen);
    rc = rc ? rc : synced;
    struct disp_job_info ji;
    if (rc == 0)
        rc = disp_state_job(s->st, r->job, &ji);
    for (size_t i = 0; rc == 0 && i < r->n_unreachable && i < DISP_MAX_REFUSALS_PER_BEAT; i++)
        if (r->unreachable[i]->job == r->job && r->unreachable[i]->worker_id)   /* its own job only */
            disp_note_refusal(s, r->unreachable[i]->worker_id, r->unreachable[i]);
    uint64_t workers_digest = 0;
    if (rc == 0 && !ji.client_only) {
        n_workers = disp_serving_workers(s, &ji, r->workers_digest, &workers_digest, &workers);
        disp_reply_later(reply, workers, disp_free_addresses);
    }
    uint64_t refuser = 0;
    const char *no_worker = rc == 0 ? disp_state_no_worker(s->st, r->job, &refuser) : NULL;
    char no_worker_why[DISP_REASON_MAX + 64] = "";
    if (no_worker)
        snprintf(no_worker_why, sizeof no_worker_why, "every worker refused it; worker %llu: %s",
                 (unsigned long long)refuser, no_worker);
    if (rc == 0 && r->own && r->own->elements >= 0 && r->own->bytes >= 0) {
        disp_progress_report(s->progress, r->job, DISP_CLIENT_PRODUCER(r->job, r->rank), r->own->elements,
                             r->own->bytes, r->own->cpu_ns > 0 ? r->own->cpu_ns : 0, hb.now_ms);
        if (r->own->source)
            disp_progress_source(s->progress, r->job, DISP_CLIENT_PRODUCER(r->job, r->rank),
                                 r->own->source->bytes, r->own->source->requests, r->own->source->retries);
    }
    if (rc == 0 && r->own && r->rank == 0 && isfinite(r->consumed_per_s) && isfinite(r->wait_fraction))
        disp_progress_client(s->progress, r->job, DISP_CLIENT_PRODUCER(r->job, 0),
                             &(struct disp_client_view){r->consumed_per_s * ji.world_size, r->wait_fraction,
                                                        r->cpu_starved_fraction, r->cpu_cores});
    if (rc == 0 && r->own_gpu && r->own_gpu->elements > 0 && r->own_gpu->bytes >= 0)
        disp_progress_report(s->progress, r->job, DISP_CLIENT_GPU_PRODUCER(r->job, r->rank), r->own_gpu->elements,
                             r->own_gpu->bytes, 0, hb.now_ms);
    for (size_t i = 0; rc == 0 && r->rank == 0 && i < r->n_received; i++)   /* workers the state knows only */
        if (r->received[i]->worker_id && r->received[i]->elements >= 0 && r->received[i]->bytes >= 0 &&
            disp_state_worker_known(s->st, r->received[i]->worker_id))
            disp_progress_report(s->received, r->job, r->received[i]->worker_id, r->received[i]->elements,
                                 r->received[i]->bytes, r->received[i]->cpu_ns > 0 ? r->received[i]->cpu_ns : 0,
                                 hb.now_ms);
    if (rc == 0 && r->rank == 0 && !r->done)
        disp_replanner_observe(s->replanner, r->job, r->consumed_per_s * ji.world_size, r->wait_fraction,
                               r->cpu_cores);
    if (rc == 0 && r->done && !ji.finished) {
        /* A client that closes early (it took fewer batches than the job has) frees the workers now rather
         * than after its timeout; with no rank left the job ends, unless this one keeps it for a resume. */
        struct disp_update bye = {.kind = DISP_CLIENT_EXPIRED, .job = r->job, .rank = r->rank,
                                  .now_ms = hb.now_ms};
        struct disp_job_info after;
        if (disp_commit(s, &bye, NULL, 0) == 0 && disp_state_job(s->st, r->job, &after) == 0) {
            struct disp_update end = {.kind = DISP_REMOVE_JOB, .job = r->job, .flags = DISP_ENDED_CLOSED,
                                      .now_ms = hb.now_ms};
            const bool ends = after.paused && !r->keep && disp_commit(s, &end, NULL, 0) == 0;
            if (ends)
                disp_forget_job(s, r->job);
            spw_log(SPW_LOG_INFO, "dispatcher", "client closed job=%llu rank=%d job_now=%s",
                    (unsigned long long)r->job, r->rank, ends ? "ended" : after.paused ? "paused (kept for a "
                    "resume)" : "running (other ranks)");
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        status = disp_status_of(rc);
    } else {
        Spillway__V1__ClientHeartbeatResponse *out =
            disp_reply_new(reply, &spillway__v1__client_heartbeat_response__descriptor);
        if (out) {
            out->n_workers = n_workers;
            out->workers = workers;
            out->workers_digest = workers_digest;
            out->workers_unchanged = r->workers_digest && r->workers_digest == workers_digest;
            out->finished = ji.finished;
            out->client_only = ji.client_only;
            out->no_worker = disp_reply_strdup(reply, no_worker_why);
        }
    }
    return status;
}

static int lease_split(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg, size_t msglen)
{
    struct disp_service *s = svc;
    const Spillway__V1__LeaseSplitRequest *r = (const Spillway__V1__LeaseSplitRequest *)req;
    enum { MAX_LEASES = 64 };
    int n = 0, status = SPW_RPC_OK;
    const int want = r->max_splits <= 0 ? 1 : r->max_splits > MAX_LEASES ? MAX_LEASES : r->max_splits;
    Spillway__V1__LeaseSplitResponse *out = disp_reply_new(reply, &spillway__v1__lease_split_response__descriptor);
    Spillway__V1__Lease *leases = disp_reply_alloc(reply, MAX_LEASES * sizeof *leases);
    Spillway__V1__Lease **ptrs = disp_reply_alloc(reply, MAX_LEASES * sizeof *ptrs);
    if (!out || !leases || !ptrs)
        return SPW_RPC_OK;      /* the adapter answers RESOURCE_EXHAUSTED */
    if ((status = disp_lock_call(s, msg, msglen)) != 0)
        return status;
    struct disp_job_info ji;
    if (disp_state_job(s->st, r->job, &ji) != 0) {
        snprintf(msg, msglen, "unknown job %llu", (unsigned long long)r->job);
        status = SPW_RPC_NOT_FOUND;
        goto out;
    }
    if (r->manifest_hash != ji.manifest_hash) {
        snprintf(msg, msglen, "manifest hash %016llx does not match job %llu's %016llx (the data changed?)",
                 (unsigned long long)r->manifest_hash, (unsigned long long)r->job,
                 (unsigned long long)ji.manifest_hash);
        status = SPW_RPC_FAILED_PRECONDITION;
        goto out;
    }
    uint64_t producer;
    /* With tokens of their own, a worker's lease needs the workers' token and a client's the clients'. (0:
     * outside a server, as in unit tests.) */
    const unsigned caller = spw_rpc_current_caller();
    if (caller && !(caller & (r->worker_id ? SPW_RPC_CALLER_WORKER : SPW_RPC_CALLER_CLIENT))) {
        snprintf(msg, msglen, "a %s lease needs the %s token", r->worker_id ? "worker's" : "client's",
                 r->worker_id ? "workers'" : "clients'");
        status = SPW_RPC_PERMISSION_DENIED;
        goto out;
    }
    if (!disp_state_job_secret_ok(s->st, r->job, r->job_secret)) {   /* workers know it from their tasks */
        status = disp_wrong_job_secret(s, r->job, msg, msglen);
        goto out;
    }
    if (r->worker_id) {
        if (!disp_state_worker_alive(s->st, r->worker_id)) {
            snprintf(msg, msglen, "worker %llu is not registered (or was retired): register again",
                     (unsigned long long)r->worker_id);
            status = SPW_RPC_NOT_FOUND;
            goto out;
        }
        if (!disp_state_worker_secret_ok(s->st, r->worker_id, r->worker_secret)) {
            snprintf(msg, msglen, "worker %llu: wrong secret (an id alone grants nothing)",
                     (unsigned long long)r->worker_id);
            status = SPW_RPC_PERMISSION_DENIED;
            goto out;
        }
        producer = r->worker_id;
    } else {
        if ((status = check_client(s, r->job, r->rank, r->incarnation, msg, msglen)) != SPW_RPC_OK)
            goto out;
        producer = DISP_CLIENT_PRODUCER(r->job, r->rank);
    }
    const int64_t now = spw_now_ms();
    while (n < want) {
        struct disp_lease l;
        if (disp_state_pick_lease(s->st, r->job, producer, now, s->o.speculate_after_ms, &l) != 1)
            break;
        struct disp_update u = {.kind = DISP_LEASE, .job = r->job, .producer = producer, .epoch = l.epoch,
                                .split = l.split, .generation = l.generation, .now_ms = now};
        if (disp_commit(s, &u, msg, msglen) != 0) {
            status = SPW_RPC_INTERNAL;
            goto out;
        }
        spillway__v1__lease__init(&leases[n]);
        leases[n].job = l.job;
        leases[n].epoch = l.epoch;
        leases[n].split = l.split;
        leases[n].generation = l.generation;
        leases[n].cut = l.cut;
        leases[n].first_position = l.first_position;
        leases[n].count = l.count;
        leases[n].speculative = l.speculative;
        ptrs[n] = &leases[n];
        n++;
    }
    disp_state_job(s->st, r->job, &ji);
    out->n_leases = (size_t)n;
    out->leases = ptrs;
    out->finished = ji.finished;
out:
    pthread_mutex_unlock(&s->mu);
    return status;
}

static void job_info_msg(struct disp_reply *reply, const struct disp_job_info *ji, Spillway__V1__JobInfo *m)
{
    spillway__v1__job_info__init(m);
    m->job = ji->id;
    m->manifest_hash = ji->manifest_hash;
    m->samples = ji->n_samples;
    m->epochs = ji->epochs;
    m->splits_per_epoch = ji->splits_per_epoch;
    m->split_size = ji->split_size;
    m->cut = ji->cut;
    m->world_size = ji->world_size;
    m->epoch = ji->epoch;
    m->acked = ji->acked;
    m->leased = ji->leased;
    m->pending = ji->pending;
    m->paused = ji->paused;
    m->finished = ji->finished;
    m->client_only = ji->client_only;
    m->expired = ji->expired;
    m->cancelled = ji->cancelled;
    m->closed = ji->closed;
    m->client = disp_reply_strdup(reply, ji->client);
    m->name = disp_reply_strdup(reply, ji->name);
}

static int list_jobs(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg, size_t msglen)
{
    struct disp_service *s = svc;
    pthread_mutex_lock(&s->mu);
    /* The ended jobs' summaries (oldest first), then the jobs in the table. */
    const int ne = disp_state_ended_count(s->st), nj = ne + disp_state_job_count(s->st);
    Spillway__V1__ListJobsResponse *out = disp_reply_new(reply, &spillway__v1__list_jobs_response__descriptor);
    Spillway__V1__JobInfo *infos = disp_reply_alloc(reply, ((size_t)nj + 1) * sizeof *infos);
    Spillway__V1__JobInfo **ptrs = disp_reply_alloc(reply, ((size_t)nj + 1) * sizeof *ptrs);
    for (int i = 0; out && infos && ptrs && i < nj; i++) {
        struct disp_job_info ji;
        if (i < ne)
            disp_state_ended_at(s->st, i, &ji);
        else
            disp_state_job_at(s->st, i - ne, &ji);
        job_info_msg(reply, &ji, &infos[i]);
        infos[i].ended = i < ne;
        ptrs[i] = &infos[i];
        out->jobs = ptrs;
        out->n_jobs = (size_t)i + 1;
    }
    pthread_mutex_unlock(&s->mu);
    return SPW_RPC_OK;
}

static void free_plan(void *plan)
{
    spillway__v1__plan__free_unpacked(plan, NULL);
}

/* The producers' rates as the job's progress rows hold them, every one of them. */
static void producer_stats(struct disp_service *s, struct disp_reply *reply, uint64_t job,
                           Spillway__V1__DescribeJobResponse *out)
{
    const size_t np = disp_progress_count(s->progress, job);
    Spillway__V1__ProducerStats *ps = disp_reply_alloc(reply, (np + 1) * sizeof *ps);
    Spillway__V1__ProducerStats **pp = disp_reply_alloc(reply, (np + 1) * sizeof *pp);
    Spillway__V1__SourceIo *io = disp_reply_alloc(reply, (np + 1) * sizeof *io);
    out->client_wait_fraction = -1;
    size_t i = 0;
    for (const struct disp_progress_entry *e = disp_progress_first(s->progress, job); ps && pp && io && e;
         e = disp_progress_next(e), i++) {
        spillway__v1__producer_stats__init(&ps[i]);
        ps[i].producer = e->producer;
        ps[i].elements = e->elements;
        ps[i].bytes = e->bytes;
        ps[i].elements_per_s = e->elements_per_s;
        ps[i].bytes_per_s = e->bytes_per_s;
        ps[i].cpu_ns_per_element = e->cpu_ns_per_element;
        if (e->source_requests > 0) {
            spillway__v1__source_io__init(&io[i]);
            io[i].bytes = e->source_bytes;
            io[i].requests = e->source_requests;
            io[i].retries = e->source_retries;
            ps[i].source = &io[i];
        }
        pp[i] = &ps[i];
        out->n_producers = i + 1;
        out->producers = pp;
        if (e->producer == DISP_CLIENT_PRODUCER(job, 0) && e->wait_fraction >= 0) {
            out->client_elements_per_s = e->consumed_per_s;
            out->client_wait_fraction = e->wait_fraction;
        }
    }
}

static int describe_job(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg, size_t msglen)
{
    struct disp_service *s = svc;
    const Spillway__V1__DescribeJobRequest *r = (const Spillway__V1__DescribeJobRequest *)req;
    enum { MAX_HOLDERS = 4096 };
    int status = SPW_RPC_OK;
    Spillway__V1__DescribeJobResponse *out = disp_reply_new(reply, &spillway__v1__describe_job_response__descriptor);
    Spillway__V1__JobInfo *info = disp_reply_alloc(reply, sizeof *info);
    if (!out || !info)
        return SPW_RPC_OK;      /* the adapter answers RESOURCE_EXHAUSTED */
    pthread_mutex_lock(&s->mu);
    struct disp_job_info ji;
    if (disp_state_job(s->st, r->job, &ji) != 0) {
        if (disp_state_ended_job(s->st, r->job, &ji) == 0) {    /* ended: its summary */
            job_info_msg(reply, &ji, info);
            info->ended = true;
            out->job = info;
        } else {
            snprintf(msg, msglen, "unknown job %llu (or ended longer ago than the dispatcher's history)",
                     (unsigned long long)r->job);
            status = SPW_RPC_NOT_FOUND;
        }
        pthread_mutex_unlock(&s->mu);
        return status;
    }
    job_info_msg(reply, &ji, info);
    out->job = info;
    Spillway__V1__SplitHolder *holders = disp_reply_alloc(reply, MAX_HOLDERS * sizeof *holders);
    Spillway__V1__SplitHolder **ptrs = disp_reply_alloc(reply, MAX_HOLDERS * sizeof *ptrs);
    for (int64_t e = ji.epoch; holders && ptrs && !ji.finished && e >= 0 && e < ji.epoch + 2; e++)
        for (int64_t sp = 0; sp < ji.splits_per_epoch && out->n_leased < MAX_HOLDERS; sp++) {
            enum disp_split_state st;
            uint64_t gen, holder;
            if (disp_state_split(s->st, r->job, (uint64_t)e, (uint64_t)sp, &st, &gen, &holder) != 0 ||
                st != DISP_SPLIT_LEASED)
                continue;
            Spillway__V1__SplitHolder *h = &holders[out->n_leased];
            spillway__v1__split_holder__init(h);
            h->epoch = (uint64_t)e;
            h->split = (uint64_t)sp;
            h->generation = gen;
            h->holder = holder;
            ptrs[out->n_leased++] = h;
            out->leased = ptrs;
        }
    producer_stats(s, reply, r->job, out);
    out->client_remote_ns = disp_client_remote_ns(s, r->job);
    Spillway__V1__JobRefusal *refs = disp_reply_alloc(reply, ((size_t)ji.refusals + 1) * sizeof *refs);
    Spillway__V1__JobRefusal **refp = disp_reply_alloc(reply, ((size_t)ji.refusals + 1) * sizeof *refp);
    for (int i = 0; refs && refp && i < ji.refusals; i++) {
        const char *why;
        spillway__v1__job_refusal__init(&refs[i]);
        refs[i].job = r->job;
        if (disp_state_refusal_at(s->st, r->job, i, &refs[i].worker_id, &why) == 0)
            refs[i].reason = disp_reply_strdup(reply, why);
        refp[out->n_cannot_serve++] = &refs[i];
        out->cannot_serve = refp;
    }
    out->plan = disp_replanner_plan_of(s->replanner, r->job);
    disp_reply_later(reply, out->plan, free_plan);
    pthread_mutex_unlock(&s->mu);
    return status;
}

/* spillctl job cancel ID: end a job now, finished or not (its workers stop, its trainers are told). */
static int cancel_job(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg, size_t msglen)
{
    struct disp_service *s = svc;
    const Spillway__V1__CancelJobRequest *r = (const Spillway__V1__CancelJobRequest *)req;
    pthread_mutex_lock(&s->mu);
    struct disp_job_info ji;
    int status = SPW_RPC_OK;
    if (disp_state_job(s->st, r->job, &ji) != 0) {
        const bool ended = disp_state_ended_job(s->st, r->job, &ji) == 0;
        snprintf(msg, msglen, ended ? "job %llu has ended already" : "unknown job %llu", (unsigned long long)r->job);
        status = ended ? SPW_RPC_FAILED_PRECONDITION : SPW_RPC_NOT_FOUND;
    } else {
        struct disp_update u = {.kind = DISP_REMOVE_JOB, .job = r->job, .flags = DISP_ENDED_CANCELLED,
                                .now_ms = spw_now_ms()};
        const int rc = disp_commit(s, &u, msg, msglen);
        if (rc == 0) {
            disp_forget_job(s, r->job);
            spw_log(SPW_LOG_INFO, "dispatcher", "job cancelled job=%llu state=%s by=%s", (unsigned long long)r->job,
                    ji.finished ? "finished" : ji.paused ? "paused" : "running", spw_rpc_current_peer());
        }
        status = rc ? disp_status_of(rc) : SPW_RPC_OK;
    }
    pthread_mutex_unlock(&s->mu);
    Spillway__V1__CancelJobResponse *out = status == SPW_RPC_OK
        ? disp_reply_new(reply, &spillway__v1__cancel_job_response__descriptor) : NULL;
    if (out)
        out->was_finished = ji.finished;
    return status;
}

DISP_UNARY(disp_cancel_job, spillway__v1__cancel_job_request__descriptor, cancel_job)

DISP_UNARY(disp_client_heartbeat, spillway__v1__client_heartbeat_request__descriptor, client_heartbeat)

DISP_UNARY(disp_lease_split, spillway__v1__lease_split_request__descriptor, lease_split)

DISP_UNARY(disp_describe_job, spillway__v1__describe_job_request__descriptor, describe_job)

DISP_UNARY(disp_list_jobs, spillway__v1__list_jobs_request__descriptor, list_jobs)
