/* dispatcher/workers.c - the worker-facing handlers: RegisterWorker (the address clients will dial, the
 * protocol version), WorkerHeartbeat (progress, refusals, and the task list in reply) and ListWorkers.
 * Thread model: run on the RPC threads; state access under the service lock. */
#include "dispatcher/service_internal.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/rpc.h"

/* The address clients will dial for a worker that advertised `adv` (host:port, [v6]:port): itself, or when
 * its host is a wildcard or empty (a worker started with default flags, listening on 0.0.0.0) the host this
 * call came from with the advertised port. Writes out; false when adv has no port. */
#define HOST_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-:[]*_%"

static bool dialable_address(const char *adv, char *out, size_t outlen)
{
    const char *colon = strrchr(adv, ':');
    /* a host name, an IPv4 or a bracketed IPv6 address, and a port: nothing a log line or JSON would need to
     * escape, nothing a client would misread */
    if (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) || strlen(colon + 1) > 5 ||
        strspn(adv, HOST_CHARS) != strlen(adv))
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

static int register_worker(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg,
                           size_t msglen)
{
    struct disp_service *s = svc;
    const Spillway__V1__RegisterWorkerRequest *r = (const Spillway__V1__RegisterWorkerRequest *)req;
    int status = disp_check_protocol("this worker", r->protocol_version, r->build, msg, msglen);
    if (status != SPW_RPC_OK) {
        spw_log(SPW_LOG_WARN, "dispatcher", "worker refused address=%s: %s", r->address, msg);
        return status;
    }
    char address[300];
    if (!r->address || strlen(r->address) > 255 || !dialable_address(r->address, address, sizeof address) ||
        strlen(address) > 255 || r->threads < 0 || r->threads > 4096 || (r->gpu && strlen(r->gpu) > 127)) {
        snprintf(msg, msglen, "address must be host:port (a host name, an IPv4 or [IPv6] address; at most 255 "
                 "bytes), threads in [0, 4096] and gpu at most 127 bytes");
        return SPW_RPC_INVALID_ARGUMENT;
    }
    uint64_t secret = disp_new_secret();
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    if (r->worker_id && disp_state_worker_known(s->st, r->worker_id)) {
        /* Its id again (a re-registration): only with the secret that id was given. */
        if (!disp_state_worker_secret_ok(s->st, r->worker_id, r->secret)) {
            pthread_mutex_unlock(&s->mu);
            spw_log(SPW_LOG_WARN, "dispatcher", "refused a registration as worker=%llu from address=%s: wrong secret",
                    (unsigned long long)r->worker_id, address);
            snprintf(msg, msglen, "worker id %llu belongs to another registration: register without an id",
                     (unsigned long long)r->worker_id);
            return SPW_RPC_PERMISSION_DENIED;
        }
        secret = r->secret;
    } else if (r->worker_id && r->secret) {
        secret = r->secret;     /* an id this dispatcher does not know (restarted without a journal): keep both */
    }
    struct disp_update u = {.kind = DISP_REGISTER_WORKER, .worker = r->worker_id, .address = address,
                            .name = r->gpu ? r->gpu : "", .threads = r->threads, .now_ms = spw_now_ms(),
                            .secret = secret};
    rc = disp_commit(s, &u, msg, msglen);
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        status = disp_status_of(rc);
    } else {
        spw_log(SPW_LOG_INFO, "dispatcher", "worker registered worker=%llu address=%s advertised=%s threads=%d%s%s",
                (unsigned long long)u.worker, address, r->address, r->threads, r->gpu && *r->gpu ? " gpu=" : "",
                r->gpu && *r->gpu ? "yes" : "");
        Spillway__V1__RegisterWorkerResponse *out =
            disp_reply_new(reply, &spillway__v1__register_worker_response__descriptor);
        if (out) {
            out->worker_id = u.worker;
            out->secret = secret;
            out->address = disp_reply_strdup(reply, address);
            out->heartbeat_interval_ms = s->o.heartbeat_interval_ms;
        }
    }
    return status;
}

/* FNV-1a over what a worker acts on in each task (a job's pipeline never changes under its id and secret), so
 * equal lists have equal digests across dispatcher restarts too. Never 0: a worker sends 0 for "whole list". */
static uint64_t tasks_digest(const Spillway__V1__JobTaskWire *tasks, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        const uint64_t v[] = {tasks[i].job, tasks[i].job_secret, tasks[i].manifest_hash, (uint64_t)tasks[i].cut,
                              (uint64_t)tasks[i].world_size, (uint64_t)tasks[i].pipeline.len};
        for (size_t k = 0; k < sizeof v / sizeof *v; k++)
            h = (h ^ v[k]) * 1099511628211ull;
    }
    return h ? h : 1;
}

static int worker_heartbeat(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg,
                            size_t msglen)
{
    struct disp_service *s = svc;
    const Spillway__V1__WorkerHeartbeatRequest *r = (const Spillway__V1__WorkerHeartbeatRequest *)req;
    Spillway__V1__WorkerHeartbeatResponseWire *out = NULL;
    Spillway__V1__JobTaskWire *tasks = NULL, **ptrs = NULL;
    struct disp_task *served = NULL;
    int status = SPW_RPC_OK, n = 0;
    if ((status = disp_lock_call(s, msg, msglen)) != 0)
        return status;
    if (disp_state_worker_known(s->st, r->worker_id) && !disp_state_worker_secret_ok(s->st, r->worker_id, r->secret)) {
        snprintf(msg, msglen, "worker %llu: wrong secret (an id alone grants nothing)",
                 (unsigned long long)r->worker_id);
        status = SPW_RPC_PERMISSION_DENIED;
        goto out;
    }
    struct disp_update u = {.kind = DISP_WORKER_HEARTBEAT, .worker = r->worker_id, .now_ms = spw_now_ms(),
                            .buffered_bytes = r->buffered_bytes};
    const bool was_usable = disp_state_worker_heartbeat_ms(s->st, r->worker_id) >= s->started_ms;
    int rc = disp_commit(s, &u, msg, msglen);
    if (rc) {
        status = rc == -ENOENT ? SPW_RPC_NOT_FOUND : disp_status_of(rc);      /* NOT_FOUND: register again */
        goto out;
    }
    if (!was_usable)
        s->members_gen++;       /* a replayed worker's first heartbeat since the start: usable now */
    for (size_t i = 0; i < r->n_cannot_serve && i < DISP_MAX_REFUSALS_PER_BEAT; i++)
        disp_note_refusal(s, r->worker_id, r->cannot_serve[i]);
    for (size_t i = 0; i < r->n_jobs; i++)     /* a job that left the table keeps no progress */
        if (r->jobs[i]->elements >= 0 && r->jobs[i]->bytes >= 0 && disp_state_job_known(s->st, r->jobs[i]->job)) {
            disp_progress_report(s->progress, r->jobs[i]->job, r->worker_id, r->jobs[i]->elements,
                                 r->jobs[i]->bytes, r->jobs[i]->cpu_ns > 0 ? r->jobs[i]->cpu_ns : 0, u.now_ms);
            const Spillway__V1__SourceIo *io = r->jobs[i]->source;
            if (io)
                disp_progress_source(s->progress, r->jobs[i]->job, r->worker_id, io->bytes, io->requests,
                                     io->retries);
        }
    const int nj = disp_state_job_count(s->st);
    out = disp_reply_new(reply, &spillway__v1__worker_heartbeat_response_wire__descriptor);
    tasks = disp_reply_alloc(reply, ((size_t)nj + 1) * sizeof *tasks);
    ptrs = disp_reply_alloc(reply, ((size_t)nj + 1) * sizeof *ptrs);
    served = malloc(((size_t)nj + 1) * sizeof *served);
    if (!out || !tasks || !ptrs || !served) {
        snprintf(msg, msglen, "out of memory");
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    n = disp_state_worker_tasks(s->st, r->worker_id, served, nj);
    n = n < 0 ? 0 : n;
    for (int i = 0; i < n; i++) {
        spillway__v1__job_task_wire__init(&tasks[i]);
        tasks[i].job = served[i].job;
        tasks[i].pipeline = (ProtobufCBinaryData){.len = served[i].pipeline_len,
                                                  .data = (uint8_t *)served[i].pipeline};   /* the state's: below */
        tasks[i].manifest_hash = served[i].manifest_hash;
        tasks[i].cut = served[i].cut;
        tasks[i].world_size = served[i].world_size;
        tasks[i].job_secret = served[i].secret;
        ptrs[i] = &tasks[i];
    }
    out->tasks_digest = tasks_digest(tasks, n);
    if (r->tasks_digest == out->tasks_digest) {
        out->tasks_unchanged = true;    /* the worker holds this list: a few bytes instead of every pipeline */
    } else {
        for (int i = 0; i < n; i++)     /* the reply is packed after mu is released: its own copies */
            tasks[i].pipeline.data = disp_reply_copy(reply, tasks[i].pipeline.data, tasks[i].pipeline.len);
        out->n_tasks = (size_t)n;
        out->tasks = ptrs;
    }
out:
    pthread_mutex_unlock(&s->mu);
    free(served);
    return status;
}

static int list_workers(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg, size_t msglen)
{
    struct disp_service *s = svc;
    pthread_mutex_lock(&s->mu);
    const int64_t now = spw_now_ms();
    int nw = disp_state_worker_count(s->st), nj = disp_state_job_count(s->st), nref = 0;
    for (int k = 0; k < nj; k++) {
        struct disp_job_info ji;
        nref += disp_state_job_at(s->st, k, &ji) == 0 ? ji.refusals : 0;
    }
    Spillway__V1__ListWorkersResponse *out = disp_reply_new(reply, &spillway__v1__list_workers_response__descriptor);
    Spillway__V1__WorkerInfo *infos = disp_reply_alloc(reply, ((size_t)nw + 1) * sizeof *infos);
    Spillway__V1__WorkerInfo **ptrs = disp_reply_alloc(reply, ((size_t)nw + 1) * sizeof *ptrs);
    /* every job's refusals, and pointers to them grouped by worker */
    Spillway__V1__JobRefusal *refs = disp_reply_alloc(reply, ((size_t)nref + 1) * sizeof *refs);
    Spillway__V1__JobRefusal **refp = disp_reply_alloc(reply, ((size_t)nref + 1) * sizeof *refp);
    if (out && infos && ptrs && refs && refp) {
        int r = 0, used = 0;
        for (int k = 0; k < nj; k++) {
            struct disp_job_info ji;
            disp_state_job_at(s->st, k, &ji);
            for (int x = 0; x < ji.refusals && r < nref; x++) {
                const char *why;
                spillway__v1__job_refusal__init(&refs[r]);
                refs[r].job = ji.id;
                if (disp_state_refusal_at(s->st, ji.id, x, &refs[r].worker_id, &why) == 0)
                    refs[r].reason = disp_reply_strdup(reply, why);
                r++;
            }
        }
        for (int i = 0; i < nw; i++) {
            struct disp_worker_info wi;
            disp_state_worker_at(s->st, i, &wi);
            spillway__v1__worker_info__init(&infos[i]);
            infos[i].worker_id = wi.id;
            infos[i].address = disp_reply_strdup(reply, wi.address);
            infos[i].threads = wi.threads;
            infos[i].gpu = disp_reply_strdup(reply, wi.gpu);
            infos[i].alive = wi.alive;
            infos[i].last_heartbeat_ms_ago = now - wi.last_heartbeat_ms;
            infos[i].leases = wi.leases;
            infos[i].buffered_bytes = wi.buffered_bytes;
            infos[i].cannot_serve = refp + used;
            for (int x = 0; x < r; x++)
                if (refs[x].worker_id == wi.id) {
                    refp[used++] = &refs[x];
                    infos[i].n_cannot_serve++;
                }
            ptrs[i] = &infos[i];
        }
        out->n_workers = (size_t)nw;
        out->workers = ptrs;
    }
    pthread_mutex_unlock(&s->mu);
    return SPW_RPC_OK;
}

DISP_UNARY(disp_register_worker, spillway__v1__register_worker_request__descriptor, register_worker)

DISP_UNARY(disp_worker_heartbeat, spillway__v1__worker_heartbeat_request__descriptor, worker_heartbeat)

DISP_UNARY(disp_list_workers, spillway__v1__list_workers_request__descriptor, list_workers)
