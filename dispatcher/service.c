/* dispatcher/service.c - Dispatcher RPC handlers (see service.h). Handlers validate requests at the
 * boundary (sizes, ids, incarnations, manifest hashes) and answer with a status that says what is wrong;
 * state changes go through disp_commit only. A timer thread applies worker deaths and client expiries
 * and starts re-plans of planned jobs when the workers change (planning itself: planning.c).
 * Thread model: RPC threads, the timer and one re-plan thread share the state under one mutex; calls to
 * workers (profiles) are made without it. */
#include "dispatcher/service.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/progress.h"
#include "dispatcher/service_internal.h"
#include "dispatcher/state.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "pipeline/element_size.h"
#include "pipeline/fusion.h"
#include "pipeline/plan_proto.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "pipeline/wire.h"
#include "proto/spillway.pb-c.h"

int disp_commit(struct disp_service *s, struct disp_update *u, char *err, size_t errlen)
{
    (void)disp_update_durable;      /* the journal (issue 17) appends durable updates here, before applying */
    return disp_state_apply(s->st, u, err, errlen);
}

void disp_forget_job(struct disp_service *s, uint64_t job)
{
    disp_progress_forget(&s->progress, job);
    disp_progress_forget(&s->received, job);
}

/* Timer: retire workers and expire clients that stopped heartbeating; re-plan planned jobs when the workers
 * change. */
static void *timer_main(void *arg)
{
    struct disp_service *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        struct timespec ts = spw_deadline_in_ms(200);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        if (s->stopping)
            break;
        const int64_t now = spw_now_ms();
        uint64_t ids[64];
        int32_t ranks[64];
        int n = disp_state_dead_workers(s->st, now, s->o.worker_timeout_ms, ids, 64);
        for (int i = 0; i < n; i++) {
            struct disp_update u = {.kind = DISP_WORKER_DEAD, .worker = ids[i]};
            if (disp_commit(s, &u, NULL, 0) == 0)
                spw_log(SPW_LOG_WARN, "dispatcher", "worker dead worker=%llu silent_ms>%lld leases_released=yes",
                        (unsigned long long)ids[i], (long long)s->o.worker_timeout_ms);
        }
        n = disp_state_expired_clients(s->st, now, s->o.client_timeout_ms, ids, ranks, 64);
        for (int i = 0; i < n; i++) {
            struct disp_update u = {.kind = DISP_CLIENT_EXPIRED, .job = ids[i], .rank = ranks[i], .now_ms = now};
            if (disp_commit(s, &u, NULL, 0) == 0)
                spw_log(SPW_LOG_WARN, "dispatcher", "client expired job=%llu rank=%d silent_ms>%lld",
                        (unsigned long long)ids[i], ranks[i], (long long)s->o.client_timeout_ms);
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
        disp_maybe_replan(s, now);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int disp_service_create(const struct disp_service_opts *o, struct disp_service **out)
{
    struct disp_service *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->o = *o;
    if (s->o.default_split_size <= 0)
        s->o.default_split_size = 64;
    struct disp_limits lim = {.max_jobs = o->max_jobs, .history = o->job_history,
                              .max_jobs_per_client = o->max_jobs_per_client};
    int rc = disp_state_create(&lim, &s->st);
    if (rc) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->timer, NULL, timer_main, s) != 0) {
        disp_state_destroy(s->st);
        free(s);
        return -EAGAIN;
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
    disp_plans_stop(s);
    disp_state_destroy(s->st);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

#define UNPACK(type, fn, var)                                                       \
    type *var = fn(NULL, len, req);                                                 \
    if (!var) {                                                                     \
        snprintf(msg, msglen, "malformed request (%zu bytes)", len);                \
        return SPW_RPC_INVALID_ARGUMENT;                                            \
    }

/* The address clients will dial for a worker that advertised `adv` (host:port, [v6]:port): itself, or when
 * its host is a wildcard or empty (a worker started with default flags, listening on 0.0.0.0) the host this
 * call came from with the advertised port. Writes out; false when adv has no port. */
static bool dialable_address(const char *adv, char *out, size_t outlen)
{
    const char *colon = strrchr(adv, ':');
    if (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
        return false;
    const size_t hostlen = (size_t)(colon - adv);
    static const char *const wildcards[] = {"", "0.0.0.0", "::", "[::]", "*"};
    bool wild = false;
    for (size_t i = 0; i < sizeof wildcards / sizeof wildcards[0]; i++)
        wild = wild || (strlen(wildcards[i]) == hostlen && !strncmp(adv, wildcards[i], hostlen));
    char peer[128];
    if (!wild || spw_rpc_peer_host(spw_rpc_current_peer(), peer, sizeof peer) != 0) {
        snprintf(out, outlen, "%s", adv);
        return true;
    }
    snprintf(out, outlen, strchr(peer, ':') ? "[%s]%s" : "%s%s", peer, colon);
    return true;
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

int disp_register_worker(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                         size_t msglen)
{
    struct disp_service *s = svc;
    UNPACK(Spillway__V1__RegisterWorkerRequest, spillway__v1__register_worker_request__unpack, r);
    int status = disp_check_protocol("this worker", r->protocol_version, r->build, msg, msglen);
    if (status != SPW_RPC_OK) {
        spw_log(SPW_LOG_WARN, "dispatcher", "worker refused address=%s: %s", r->address, msg);
        spillway__v1__register_worker_request__free_unpacked(r, NULL);
        return status;
    }
    char address[300];
    if (!r->address || strlen(r->address) > 255 || !dialable_address(r->address, address, sizeof address) ||
        strlen(address) > 255 || r->threads < 0 || r->threads > 4096) {
        snprintf(msg, msglen, "address must be host:port (at most 255 bytes) and threads in [0, 4096]");
        spillway__v1__register_worker_request__free_unpacked(r, NULL);
        return SPW_RPC_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&s->mu);
    struct disp_update u = {.kind = DISP_REGISTER_WORKER, .worker = r->worker_id, .address = address,
                            .threads = r->threads, .now_ms = spw_now_ms()};
    int rc = disp_commit(s, &u, msg, msglen);
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        status = disp_status_of(rc);
    } else {
        spw_log(SPW_LOG_INFO, "dispatcher", "worker registered worker=%llu address=%s advertised=%s threads=%d",
                (unsigned long long)u.worker, address, r->address, r->threads);
        Spillway__V1__RegisterWorkerResponse out = SPILLWAY__V1__REGISTER_WORKER_RESPONSE__INIT;
        out.worker_id = u.worker;
        out.address = address;
        out.heartbeat_interval_ms = s->o.heartbeat_interval_ms;
        status = disp_pack(&out.base, resp, resp_len, msg, msglen);
    }
    spillway__v1__register_worker_request__free_unpacked(r, NULL);
    return status;
}

#define MAX_REFUSALS_PER_BEAT 64

/* A worker says it cannot serve a job, or a client of the job that it cannot reach the worker: stop giving
 * the worker the job (once; both repeat it while it applies). Called with mu held. */
static void note_refusal(struct disp_service *s, uint64_t worker, const Spillway__V1__JobRefusal *r)
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

int disp_worker_heartbeat(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                          size_t msglen)
{
    struct disp_service *s = svc;
    UNPACK(Spillway__V1__WorkerHeartbeatRequest, spillway__v1__worker_heartbeat_request__unpack, r);
    Spillway__V1__WorkerHeartbeatResponse out = SPILLWAY__V1__WORKER_HEARTBEAT_RESPONSE__INIT;
    Spillway__V1__JobTask *tasks = NULL, **ptrs = NULL;
    Spillway__V1__Pipeline **pipes = NULL;
    int status = SPW_RPC_OK, n = 0;
    pthread_mutex_lock(&s->mu);
    struct disp_update u = {.kind = DISP_WORKER_HEARTBEAT, .worker = r->worker_id, .now_ms = spw_now_ms()};
    int rc = disp_commit(s, &u, msg, msglen);
    if (rc) {
        status = rc == -ENOENT ? SPW_RPC_NOT_FOUND : disp_status_of(rc);      /* NOT_FOUND: register again */
        goto out;
    }
    for (size_t i = 0; i < r->n_cannot_serve && i < MAX_REFUSALS_PER_BEAT; i++)
        note_refusal(s, r->worker_id, r->cannot_serve[i]);
    struct disp_job_info ji;
    for (size_t i = 0; i < r->n_jobs; i++)     /* a job that left the table keeps no progress */
        if (r->jobs[i]->elements >= 0 && r->jobs[i]->bytes >= 0 && disp_state_job(s->st, r->jobs[i]->job, &ji) == 0)
            disp_progress_report(&s->progress, r->jobs[i]->job, r->worker_id, r->jobs[i]->elements,
                                 r->jobs[i]->bytes, r->jobs[i]->cpu_ns > 0 ? r->jobs[i]->cpu_ns : 0, u.now_ms);
    int nj = disp_state_job_count(s->st);
    tasks = calloc((size_t)nj + 1, sizeof *tasks);
    ptrs = calloc((size_t)nj + 1, sizeof *ptrs);
    pipes = calloc((size_t)nj + 1, sizeof *pipes);
    if (!tasks || !ptrs || !pipes) {
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    for (int i = 0; i < nj; i++) {
        disp_state_job_at(s->st, i, &ji);
        if (ji.finished || ji.paused || !disp_state_worker_serves(s->st, ji.id, r->worker_id))
            continue;
        size_t plen;
        const uint8_t *p = disp_state_job_pipeline(s->st, ji.id, &plen);
        pipes[n] = spillway__v1__pipeline__unpack(NULL, plen, p);
        if (!pipes[n])
            continue;
        spillway__v1__job_task__init(&tasks[n]);
        tasks[n].job = ji.id;
        tasks[n].pipeline = pipes[n];
        tasks[n].manifest_hash = ji.manifest_hash;
        tasks[n].cut = ji.cut;
        tasks[n].world_size = ji.world_size;
        ptrs[n] = &tasks[n];
        n++;
    }
    out.n_tasks = (size_t)n;
    out.tasks = ptrs;
    status = disp_pack(&out.base, resp, resp_len, msg, msglen);
out:
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; pipes && i < n; i++)
        spillway__v1__pipeline__free_unpacked(pipes[i], NULL);
    free(pipes);
    free(ptrs);
    free(tasks);
    spillway__v1__worker_heartbeat_request__free_unpacked(r, NULL);
    return status;
}

size_t disp_alive_workers(struct disp_service *s, uint64_t job, int max, Spillway__V1__WorkerAddress ***out)
{
    int nw = disp_state_worker_count(s->st);
    Spillway__V1__WorkerAddress **v = calloc((size_t)nw + 1, sizeof *v);
    size_t n = 0;
    for (int i = 0; v && i < nw && (job || !max || n < (size_t)max); i++) {
        struct disp_worker_info wi;
        disp_state_worker_at(s->st, i, &wi);
        if (!wi.alive || (job && !disp_state_worker_serves(s->st, job, wi.id)))
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
    *out = v;
    return n;
}

void disp_free_addresses(Spillway__V1__WorkerAddress **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]->address);
        free(v[i]);
    }
    free(v);
}

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

int disp_client_heartbeat(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                          size_t msglen)
{
    struct disp_service *s = svc;
    UNPACK(Spillway__V1__ClientHeartbeatRequest, spillway__v1__client_heartbeat_request__unpack, r);
    Spillway__V1__WorkerAddress **workers = NULL;
    size_t n_workers = 0;
    int status = SPW_RPC_OK;
    pthread_mutex_lock(&s->mu);
    struct disp_update hb = {.kind = DISP_CLIENT_HEARTBEAT, .job = r->job, .rank = r->rank,
                             .incarnation = r->incarnation, .now_ms = spw_now_ms()};
    int rc = disp_commit(s, &hb, msg, msglen);
    for (size_t i = 0; rc == 0 && i < r->n_acked; i++) {
        struct disp_update a = {.kind = DISP_ACK, .job = r->job, .epoch = r->acked[i]->epoch,
                                .split = r->acked[i]->split, .now_ms = hb.now_ms};
        rc = disp_commit(s, &a, msg, msglen);
    }
    struct disp_job_info ji;
    if (rc == 0)
        rc = disp_state_job(s->st, r->job, &ji);
    for (size_t i = 0; rc == 0 && i < r->n_unreachable && i < MAX_REFUSALS_PER_BEAT; i++)
        if (r->unreachable[i]->job == r->job && r->unreachable[i]->worker_id)   /* its own job only */
            note_refusal(s, r->unreachable[i]->worker_id, r->unreachable[i]);
    if (rc == 0 && !ji.client_only)
        n_workers = disp_alive_workers(s, ji.id, ji.max_workers, &workers);
    uint64_t refuser = 0;
    const char *no_worker = rc == 0 ? disp_state_no_worker(s->st, r->job, &refuser) : NULL;
    char no_worker_why[DISP_REASON_MAX + 64] = "";
    if (no_worker)
        snprintf(no_worker_why, sizeof no_worker_why, "every worker refused it; worker %llu: %s",
                 (unsigned long long)refuser, no_worker);
    if (rc == 0 && r->own && r->own->elements >= 0 && r->own->bytes >= 0)
        disp_progress_report(&s->progress, r->job, DISP_CLIENT_PRODUCER(r->job, r->rank), r->own->elements,
                             r->own->bytes, r->own->cpu_ns > 0 ? r->own->cpu_ns : 0, hb.now_ms);
    for (size_t i = 0; rc == 0 && r->rank == 0 && i < r->n_received; i++)
        if (r->received[i]->worker_id && r->received[i]->elements >= 0 && r->received[i]->bytes >= 0)
            disp_progress_report(&s->received, r->job, r->received[i]->worker_id, r->received[i]->elements,
                                 r->received[i]->bytes, r->received[i]->cpu_ns > 0 ? r->received[i]->cpu_ns : 0,
                                 hb.now_ms);
    if (rc == 0 && r->rank == 0 && !r->done)
        disp_plan_observe(s, r->job, r->consumed_per_s * ji.world_size, r->wait_fraction, r->cpu_cores);
    if (rc == 0 && r->done && !ji.finished) {
        /* A client that closes early (it took fewer batches than the job has) frees the workers now rather
         * than after its timeout. */
        struct disp_update bye = {.kind = DISP_CLIENT_EXPIRED, .job = r->job, .rank = r->rank,
                                  .now_ms = hb.now_ms};
        if (disp_commit(s, &bye, NULL, 0) == 0)
            spw_log(SPW_LOG_INFO, "dispatcher", "client closed job=%llu rank=%d", (unsigned long long)r->job,
                    r->rank);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        status = disp_status_of(rc);
    } else {
        Spillway__V1__ClientHeartbeatResponse out = SPILLWAY__V1__CLIENT_HEARTBEAT_RESPONSE__INIT;
        out.n_workers = n_workers;
        out.workers = workers;
        out.finished = ji.finished;
        out.client_only = ji.client_only;
        out.no_worker = no_worker_why;
        status = disp_pack(&out.base, resp, resp_len, msg, msglen);
    }
    disp_free_addresses(workers, n_workers);
    spillway__v1__client_heartbeat_request__free_unpacked(r, NULL);
    return status;
}

int disp_lease_split(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                     size_t msglen)
{
    struct disp_service *s = svc;
    UNPACK(Spillway__V1__LeaseSplitRequest, spillway__v1__lease_split_request__unpack, r);
    enum { MAX_LEASES = 64 };
    Spillway__V1__Lease leases[MAX_LEASES], *ptrs[MAX_LEASES];
    int n = 0, status = SPW_RPC_OK;
    const int want = r->max_splits <= 0 ? 1 : r->max_splits > MAX_LEASES ? MAX_LEASES : r->max_splits;
    pthread_mutex_lock(&s->mu);
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
    if (r->worker_id) {
        struct disp_worker_info wi = {0};
        bool alive = false;
        for (int i = 0; i < disp_state_worker_count(s->st); i++)
            if (disp_state_worker_at(s->st, i, &wi) == 0 && wi.id == r->worker_id)
                alive = wi.alive;
        if (!alive) {
            snprintf(msg, msglen, "worker %llu is not registered (or was retired): register again",
                     (unsigned long long)r->worker_id);
            status = SPW_RPC_NOT_FOUND;
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
out:
    pthread_mutex_unlock(&s->mu);
    if (status == SPW_RPC_OK) {
        Spillway__V1__LeaseSplitResponse out = SPILLWAY__V1__LEASE_SPLIT_RESPONSE__INIT;
        out.n_leases = (size_t)n;
        out.leases = ptrs;
        out.finished = ji.finished;
        status = disp_pack(&out.base, resp, resp_len, msg, msglen);
    }
    spillway__v1__lease_split_request__free_unpacked(r, NULL);
    return status;
}

int disp_list_workers(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                      size_t msglen)
{
    struct disp_service *s = svc;
    (void)req;
    (void)len;
    pthread_mutex_lock(&s->mu);
    const int64_t now = spw_now_ms();
    int nw = disp_state_worker_count(s->st), nj = disp_state_job_count(s->st), nref = 0;
    for (int k = 0; k < nj; k++) {
        struct disp_job_info ji;
        nref += disp_state_job_at(s->st, k, &ji) == 0 ? ji.refusals : 0;
    }
    Spillway__V1__WorkerInfo *infos = calloc((size_t)nw + 1, sizeof *infos);
    Spillway__V1__WorkerInfo **ptrs = calloc((size_t)nw + 1, sizeof *ptrs);
    struct disp_worker_info *wi = calloc((size_t)nw + 1, sizeof *wi);
    Spillway__V1__JobRefusal *refs = calloc((size_t)nref + 1, sizeof *refs);     /* every job's refusals */
    Spillway__V1__JobRefusal **refp = calloc((size_t)nref + 1, sizeof *refp);    /* grouped by worker */
    int status = SPW_RPC_RESOURCE_EXHAUSTED;
    if (infos && ptrs && wi && refs && refp) {
        int r = 0, used = 0;
        for (int k = 0; k < nj; k++) {
            struct disp_job_info ji;
            disp_state_job_at(s->st, k, &ji);
            for (int x = 0; x < ji.refusals && r < nref; x++) {
                const char *why;
                spillway__v1__job_refusal__init(&refs[r]);
                refs[r].job = ji.id;
                if (disp_state_refusal_at(s->st, ji.id, x, &refs[r].worker_id, &why) == 0)
                    refs[r].reason = (char *)why;   /* owned by the state; packed under mu */
                r++;
            }
        }
        for (int i = 0; i < nw; i++) {
            disp_state_worker_at(s->st, i, &wi[i]);
            spillway__v1__worker_info__init(&infos[i]);
            infos[i].worker_id = wi[i].id;
            infos[i].address = wi[i].address;
            infos[i].threads = wi[i].threads;
            infos[i].alive = wi[i].alive;
            infos[i].last_heartbeat_ms_ago = now - wi[i].last_heartbeat_ms;
            infos[i].leases = wi[i].leases;
            infos[i].cannot_serve = refp + used;
            for (int x = 0; x < r; x++)
                if (refs[x].worker_id == wi[i].id) {
                    refp[used++] = &refs[x];
                    infos[i].n_cannot_serve++;
                }
            ptrs[i] = &infos[i];
        }
        Spillway__V1__ListWorkersResponse out = SPILLWAY__V1__LIST_WORKERS_RESPONSE__INIT;
        out.n_workers = (size_t)nw;
        out.workers = ptrs;
        status = disp_pack(&out.base, resp, resp_len, msg, msglen);
    }
    pthread_mutex_unlock(&s->mu);
    free(refp);
    free(refs);
    free(wi);
    free(ptrs);
    free(infos);
    return status;
}

static void job_info_msg(const struct disp_job_info *ji, Spillway__V1__JobInfo *m)
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
    m->client = (char *)ji->client;     /* lives as long as *ji */
    m->name = (char *)ji->name;     /* lives as long as *ji */
}

int disp_list_jobs(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                   size_t msglen)
{
    struct disp_service *s = svc;
    (void)req;
    (void)len;
    pthread_mutex_lock(&s->mu);
    /* The ended jobs' summaries (oldest first), then the jobs in the table. */
    const int ne = disp_state_ended_count(s->st), nj = ne + disp_state_job_count(s->st);
    Spillway__V1__JobInfo *infos = calloc((size_t)nj + 1, sizeof *infos);
    Spillway__V1__JobInfo **ptrs = calloc((size_t)nj + 1, sizeof *ptrs);
    struct disp_job_info *jis = calloc((size_t)nj + 1, sizeof *jis);   /* the messages point into them */
    int status = SPW_RPC_RESOURCE_EXHAUSTED;
    if (infos && ptrs && jis) {
        for (int i = 0; i < nj; i++) {
            if (i < ne)
                disp_state_ended_at(s->st, i, &jis[i]);
            else
                disp_state_job_at(s->st, i - ne, &jis[i]);
            job_info_msg(&jis[i], &infos[i]);
            infos[i].ended = i < ne;
            ptrs[i] = &infos[i];
        }
        Spillway__V1__ListJobsResponse out = SPILLWAY__V1__LIST_JOBS_RESPONSE__INIT;
        out.n_jobs = (size_t)nj;
        out.jobs = ptrs;
        status = disp_pack(&out.base, resp, resp_len, msg, msglen);
    }
    pthread_mutex_unlock(&s->mu);
    free(ptrs);
    free(infos);
    free(jis);
    return status;
}

int disp_describe_job(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                      size_t msglen)
{
    struct disp_service *s = svc;
    UNPACK(Spillway__V1__DescribeJobRequest, spillway__v1__describe_job_request__unpack, r);
    enum { MAX_HOLDERS = 4096 };
    int status = SPW_RPC_OK;
    Spillway__V1__SplitHolder *holders = NULL, **ptrs = NULL;
    size_t n = 0;
    pthread_mutex_lock(&s->mu);
    struct disp_job_info ji;
    if (disp_state_job(s->st, r->job, &ji) != 0) {
        if (disp_state_ended_job(s->st, r->job, &ji) == 0) {    /* ended: its summary */
            Spillway__V1__JobInfo info;
            job_info_msg(&ji, &info);
            info.ended = true;
            Spillway__V1__DescribeJobResponse out = SPILLWAY__V1__DESCRIBE_JOB_RESPONSE__INIT;
            out.job = &info;
            status = disp_pack(&out.base, resp, resp_len, msg, msglen);
            goto out;
        }
        snprintf(msg, msglen, "unknown job %llu (or ended longer ago than the dispatcher's history)",
                 (unsigned long long)r->job);
        status = SPW_RPC_NOT_FOUND;
        goto out;
    }
    holders = calloc(MAX_HOLDERS, sizeof *holders);
    ptrs = calloc(MAX_HOLDERS, sizeof *ptrs);
    if (!holders || !ptrs) {
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    for (int64_t e = ji.epoch; !ji.finished && e >= 0 && e < ji.epoch + 2; e++)
        for (int64_t sp = 0; sp < ji.splits_per_epoch && n < MAX_HOLDERS; sp++) {
            enum disp_split_state st;
            uint64_t gen, holder;
            if (disp_state_split(s->st, r->job, (uint64_t)e, (uint64_t)sp, &st, &gen, &holder) != 0 ||
                st != DISP_SPLIT_LEASED)
                continue;
            spillway__v1__split_holder__init(&holders[n]);
            holders[n].epoch = (uint64_t)e;
            holders[n].split = (uint64_t)sp;
            holders[n].generation = gen;
            holders[n].holder = holder;
            ptrs[n] = &holders[n];
            n++;
        }
    Spillway__V1__JobInfo info;
    job_info_msg(&ji, &info);
    Spillway__V1__DescribeJobResponse out = SPILLWAY__V1__DESCRIBE_JOB_RESPONSE__INIT;
    out.job = &info;
    out.n_leased = n;
    out.leased = ptrs;
    enum { MAX_PRODUCERS = 128 };
    struct disp_progress_entry pe[MAX_PRODUCERS];
    Spillway__V1__ProducerStats ps[MAX_PRODUCERS], *pp[MAX_PRODUCERS];
    int np = disp_progress_of_job(&s->progress, r->job, pe, MAX_PRODUCERS);
    for (int i = 0; i < np; i++) {
        spillway__v1__producer_stats__init(&ps[i]);
        ps[i].producer = pe[i].producer;
        ps[i].elements = pe[i].elements;
        ps[i].bytes = pe[i].bytes;
        ps[i].elements_per_s = pe[i].elements_per_s;
        ps[i].bytes_per_s = pe[i].bytes_per_s;
        ps[i].cpu_ns_per_element = pe[i].cpu_ns_per_element;
        pp[i] = &ps[i];
    }
    out.n_producers = (size_t)np;
    out.producers = pp;
    out.client_remote_ns = disp_client_remote_ns(s, r->job);
    Spillway__V1__JobRefusal *refs = calloc((size_t)ji.refusals + 1, sizeof *refs);
    Spillway__V1__JobRefusal **refp = calloc((size_t)ji.refusals + 1, sizeof *refp);
    for (int i = 0; refs && refp && i < ji.refusals; i++) {
        const char *why;
        spillway__v1__job_refusal__init(&refs[i]);
        refs[i].job = r->job;
        if (disp_state_refusal_at(s->st, r->job, i, &refs[i].worker_id, &why) == 0)
            refs[i].reason = (char *)why;       /* owned by the state; packed under mu */
        refp[out.n_cannot_serve++] = &refs[i];
    }
    out.cannot_serve = refp;
    Spillway__V1__Plan *plan = disp_plan_of(s, r->job);
    out.plan = plan;
    status = disp_pack(&out.base, resp, resp_len, msg, msglen);
    if (plan)
        spillway__v1__plan__free_unpacked(plan, NULL);
    free(refp);
    free(refs);
out:
    pthread_mutex_unlock(&s->mu);
    free(ptrs);
    free(holders);
    spillway__v1__describe_job_request__free_unpacked(r, NULL);
    return status;
}
