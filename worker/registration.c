/* worker/registration.c - register, heartbeat, re-register (see registration.h). The thread sleeps on a
 * condition variable so stop() wakes it at once; RPCs carry deadlines so a dead dispatcher never blocks
 * it for long. */
#include "worker/registration.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/heap.h"
#include "lib/log.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "proto/spillway.pb-c.h"

#define RPC_TIMEOUT_MS 3000
#define MAX_BACKOFF_MS 5000
#define IDLE_RELEASE_MS 10000       /* no job and nothing buffered this long: the freed heap goes back */
#define MAX_PROGRESS 64             /* jobs reported per heartbeat */

struct wrk_registration {
    char *dispatcher, *advertise, *token, *gpu;
    int threads;
    void (*on_registered)(void *ctx, uint64_t worker_id, uint64_t secret);
    void (*on_unregistered)(void *ctx);
    void (*on_tasks)(void *ctx, const Spillway__V1__WorkerHeartbeatResponse *reply);
    int (*progress)(void *ctx, Spillway__V1__ProducerProgress *out, Spillway__V1__SourceIo *io, int cap, bool again);
    int (*refusals)(void *ctx, Spillway__V1__JobRefusal *out, int cap);
    int64_t (*buffered)(void *ctx);
    void *ctx;
    struct spw_rpc_channel *ch;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping, poked;
    uint64_t id, secret;        /* as the dispatcher gave them; the secret goes with every later call */
    int64_t interval_ms;
    uint64_t tasks_hash;        /* to log task-list changes once */
    Spillway__V1__WorkerHeartbeatResponse *tasks;   /* the last whole task list: its digest goes with each
                                                       heartbeat, and it is applied again while unchanged */
};

/* Sleep up to ms or until stop or a poke; returns false when stopping. */
static bool nap(struct wrk_registration *r, int64_t ms)
{
    struct timespec ts = spw_deadline_in_ms(ms);
    pthread_mutex_lock(&r->mu);
    while (!r->stopping && !r->poked && pthread_cond_timedwait(&r->cv, &r->mu, &ts) != ETIMEDOUT)
        ;
    r->poked = false;
    bool go_on = !r->stopping;
    pthread_mutex_unlock(&r->mu);
    return go_on;
}

static int call(struct wrk_registration *r, const char *method, const ProtobufCMessage *req, uint8_t **resp,
                size_t *len, char *msg, size_t msglen)
{
    return spw_rpc_call_msg(r->ch, method, req, RPC_TIMEOUT_MS, resp, len, msg, msglen);
}

/* RegisterWorker until it succeeds (or stop). Keeps the old id when there is one. */
static bool register_worker(struct wrk_registration *r)
{
    int64_t backoff = 100;
    for (;;) {
        Spillway__V1__RegisterWorkerRequest req = SPILLWAY__V1__REGISTER_WORKER_REQUEST__INIT;
        req.address = r->advertise;
        req.threads = r->threads;
        req.gpu = r->gpu;
        req.worker_id = r->id;
        req.secret = r->secret;
        req.protocol_version = SPW_PROTOCOL_VERSION;
        req.build = (char *)spw_build_version();
        uint8_t *resp = NULL;
        size_t len = 0;
        char msg[256] = "";
        int st = call(r, SPW_PATH(REGISTER_WORKER), &req.base, &resp, &len, msg, sizeof msg);
        Spillway__V1__RegisterWorkerResponse *out =
            st == SPW_RPC_OK ? spillway__v1__register_worker_response__unpack(NULL, len, resp) : NULL;
        free(resp);
        if (out) {
            pthread_mutex_lock(&r->mu);
            r->id = out->worker_id;
            r->secret = out->secret;
            r->interval_ms = out->heartbeat_interval_ms > 0 ? out->heartbeat_interval_ms : 1000;
            pthread_mutex_unlock(&r->mu);
            spw_log(SPW_LOG_INFO, "worker", "registered worker=%llu dispatcher=%s heartbeat_ms=%lld address=%s",
                    (unsigned long long)out->worker_id, r->dispatcher, (long long)r->interval_ms,
                    out->address && *out->address ? out->address : r->advertise);
            spillway__v1__register_worker_response__free_unpacked(out, NULL);
            if (r->on_registered)
                r->on_registered(r->ctx, r->id, r->secret);
            return true;
        }
        if (st == SPW_RPC_PERMISSION_DENIED && r->id) {
            /* Our id is another registration's now (its secret is not ours): join as a new worker. */
            spw_log(SPW_LOG_WARN, "worker", "the dispatcher refused worker=%llu again (%s): registering anew",
                    (unsigned long long)r->id, msg);
            pthread_mutex_lock(&r->mu);
            r->id = r->secret = 0;
            pthread_mutex_unlock(&r->mu);
            continue;
        }
        spw_log(SPW_LOG_WARN, "worker", "register failed dispatcher=%s status=%s msg=\"%s%s\" retry_ms=%lld",
                r->dispatcher, spw_rpc_status_name(st), msg, spw_rpc_tls_hint(st, msg, spw_rpc_channel_tls(r->ch)),
                (long long)backoff);
        if (!nap(r, backoff))
            return false;
        backoff = backoff * 2 > MAX_BACKOFF_MS ? MAX_BACKOFF_MS : backoff * 2;
    }
}

static void note_tasks(struct wrk_registration *r, const Spillway__V1__WorkerHeartbeatResponse *out)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < out->n_tasks; i++)
        h = (h ^ out->tasks[i]->job) * 1099511628211ull;
    if (h == r->tasks_hash)
        return;
    r->tasks_hash = h;
    char list[512] = "";
    size_t off = 0;
    for (size_t i = 0; i < out->n_tasks && off < sizeof list - 24; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%llu", i ? "," : "",
                                (unsigned long long)out->tasks[i]->job);
    spw_log(SPW_LOG_INFO, "worker", "tasks jobs=[%s]", list);
}

static void forget_tasks(struct wrk_registration *r)
{
    if (r->tasks)
        spillway__v1__worker_heartbeat_response__free_unpacked(r->tasks, NULL);
    r->tasks = NULL;
}

static void *thread_main(void *arg)
{
    struct wrk_registration *r = arg;
    if (!register_worker(r))
        return NULL;
    int64_t idle_since = spw_now_ms();
    bool released = false, lost = false;    /* lost: the last heartbeat's progress did not arrive */
    while (nap(r, r->interval_ms)) {
        Spillway__V1__WorkerHeartbeatRequest req = SPILLWAY__V1__WORKER_HEARTBEAT_REQUEST__INIT;
        req.worker_id = r->id;
        req.secret = r->secret;
        Spillway__V1__ProducerProgress prog[MAX_PROGRESS], *progp[MAX_PROGRESS];
        Spillway__V1__SourceIo io[MAX_PROGRESS];
        int np = r->progress ? r->progress(r->ctx, prog, io, MAX_PROGRESS, lost) : 0;
        for (int i = 0; i < np; i++)
            progp[i] = &prog[i];
        req.n_jobs = (size_t)np;
        req.jobs = progp;
        Spillway__V1__JobRefusal ref[MAX_PROGRESS], *refp[MAX_PROGRESS];
        int nr = r->refusals ? r->refusals(r->ctx, ref, MAX_PROGRESS) : 0;
        for (int i = 0; i < nr; i++)
            refp[i] = &ref[i];
        req.n_cannot_serve = (size_t)nr;
        req.cannot_serve = refp;
        req.buffered_bytes = r->buffered ? r->buffered(r->ctx) : 0;
        /* Idle a while (no job, nothing buffered): the heap keeps freed buffers for speed while serving
         * (lib/heap.h), which an idle worker does not need. Once per idle spell. */
        if (np > 0 || req.buffered_bytes > 0) {
            idle_since = spw_now_ms();
            released = false;
        } else if (!released && spw_now_ms() - idle_since >= IDLE_RELEASE_MS) {
            released = true;
            const long freed = spw_heap_release_idle();
            spw_log(SPW_LOG_DEBUG, "worker", "idle: returned freed heap to the OS bytes=%ld", freed);
        }
        req.tasks_digest = r->tasks ? r->tasks->tasks_digest : 0;
        uint8_t *resp = NULL;
        size_t len = 0;
        char msg[256] = "";
        int st = call(r, SPW_PATH(WORKER_HEARTBEAT), &req.base, &resp, &len, msg, sizeof msg);
        lost = st != SPW_RPC_OK && np > 0;
        if (st == SPW_RPC_OK) {
            Spillway__V1__WorkerHeartbeatResponse *out = spillway__v1__worker_heartbeat_response__unpack(NULL, len, resp);
            if (out && !out->tasks_unchanged) {     /* a whole list: it replaces the one held */
                forget_tasks(r);
                r->tasks = out;
            } else if (out) {
                spillway__v1__worker_heartbeat_response__free_unpacked(out, NULL);
            }
            if (out && r->tasks) {
                note_tasks(r, r->tasks);
                if (r->on_tasks)
                    r->on_tasks(r->ctx, r->tasks);
            }
        } else if (st == SPW_RPC_NOT_FOUND || st == SPW_RPC_PERMISSION_DENIED) {
            /* The dispatcher restarted or retired us after missed heartbeats: join again, same id (a new one when
             * it says the id is not ours). */
            spw_log(SPW_LOG_WARN, "worker", "dispatcher does not know worker=%llu: registering again",
                    (unsigned long long)r->id);
            forget_tasks(r);
            if (r->on_unregistered)
                r->on_unregistered(r->ctx);
            if (!register_worker(r))
                break;
        } else {
            spw_log(SPW_LOG_WARN, "worker", "heartbeat failed status=%s msg=\"%s\"", spw_rpc_status_name(st), msg);
        }
        free(resp);
    }
    return NULL;
}

int wrk_registration_start(const struct wrk_registration_opts *o, struct wrk_registration **out)
{
    struct wrk_registration *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->dispatcher = strdup(o->dispatcher);
    r->advertise = strdup(o->advertise);
    r->token = o->auth_token ? strdup(o->auth_token) : NULL;
    r->threads = o->threads;
    r->gpu = strdup(o->gpu ? o->gpu : "");
    r->on_registered = o->on_registered;
    r->on_unregistered = o->on_unregistered;
    r->on_tasks = o->on_tasks;
    r->progress = o->progress;
    r->refusals = o->refusals;
    r->buffered = o->buffered;
    r->ctx = o->ctx;
    r->interval_ms = 1000;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    struct spw_rpc_channel_opts co = {.auth_token = r->token};
    int rc = (!r->dispatcher || !r->advertise || !r->gpu) ? -ENOMEM
                                                           : spw_rpc_channel_create(r->dispatcher, &co, &r->ch);
    if (rc == 0 && pthread_create(&r->thread, NULL, thread_main, r) != 0)
        rc = -EAGAIN;
    if (rc) {
        spw_rpc_channel_destroy(r->ch);
        free(r->dispatcher);
        free(r->advertise);
        free(r->token);
        free(r->gpu);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void wrk_registration_stop(struct wrk_registration *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    forget_tasks(r);
    spw_rpc_channel_destroy(r->ch);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->dispatcher);
    free(r->advertise);
    free(r->token);
    free(r->gpu);
    free(r);
}

uint64_t wrk_registration_id(struct wrk_registration *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t id = r->id;
    pthread_mutex_unlock(&r->mu);
    return id;
}

void wrk_registration_poke(struct wrk_registration *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->poked = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}
