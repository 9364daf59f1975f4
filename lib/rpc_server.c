/* lib/rpc_server.c - the gRPC C-core server behind spw_rpc_server_*: registered unary and stream methods,
 * bearer-token check, UNIMPLEMENTED for the rest. The token is checked from a call's metadata before any of its
 * body is read (no method reads its payload up front), so a refused call costs no memory for its message.
 * Unary handlers run inline on the io thread once the request has been received, except methods registered as
 * slow, which get a detached thread each (bounded); not a general thread pool.
 * Threads: io_threads completion-queue threads (one `next` queue each, registered before start, one pending
 * request per method per queue, re-armed on every new call; each thread owns the unary calls it accepted);
 * plus one thread per open stream, whose call is bound to its own pluck queue so the handler can block. */
#include "lib/rpc_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/metrics.h"

#include <grpc/status.h>
#include <grpc/support/alloc.h>

enum tag_kind { TAG_NEW_CALL, TAG_UNARY_REQUEST, TAG_UNARY_STEP, TAG_SHUTDOWN };

struct tag {
    enum tag_kind kind;
    void *obj;
};

/* Calls of one method (or of unknown ones) since the start: per status, and unary calls' latency from
 * arrival to the reply. Atomics: any io or handler thread counts, a scrape reads. */
#define N_STATUS 17
struct call_stats {
    uint64_t status[N_STATUS];
    struct spw_hist latency;
};

struct method {
    char *name;
    struct call_stats stats;
    int stream;
    int slow;      /* unary handler may block: run on its own thread */
    unsigned callers;   /* SPW_RPC_CALLER_* whose token it accepts (default: clients) */
    spw_rpc_unary_fn ufn;
    spw_rpc_stream_fn sfn;
    void *ctx;
    void *handle;  /* grpc_server_register_method */
};

struct io_thread {
    struct spw_rpc_server *s;
    grpc_completion_queue *cq;
    pthread_t tid;
    int running;
};

/* One pending grpc_server_request_*call. */
struct request {
    struct tag tag;
    struct io_thread *io;
    struct method *m;                 /* NULL: the catch-all for unknown methods */
    grpc_call *call;
    grpc_completion_queue *call_cq;   /* stream: its own pluck queue; else NULL (bound to io->cq) */
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_call_details details;        /* catch-all only */
};

/* A unary call from its arrival: freed when its batches (close, request, reply) have come back. The request's
 * batch needs no reference of its own: the reply, which holds one until it is sent, comes after it. */
struct unary_call {
    struct tag tag_request, tag_reply, tag_close;
    atomic_int pending;         /* batches in flight + the reply's own reference; any thread may drop one */
    int cancelled;
    grpc_call *call;
    struct spw_rpc_server *s;
    struct method *m;           /* NULL: a method the server does not have */
    int64_t t0;                 /* its arrival (spw_now_ns), for the latency */
    gpr_timespec deadline;      /* the caller's: past it, no one waits for the reply */
    unsigned caller;            /* SPW_RPC_CALLER_* its token proved */
    grpc_byte_buffer *request;  /* the request message once its batch came back (NULL: none was sent) */
    grpc_byte_buffer *reply;
};

/* What one peer host holds of the server's bounded resources (an entry exists while it holds any). */
struct peer_use {
    char host[64];
    int streams, slow;
};

struct server_stream {
    struct spw_rpc_stream st;
    struct spw_rpc_server *s;
    char host[64];              /* its peer host (struct peer_use) */
    struct method *m;
    unsigned caller;            /* SPW_RPC_CALLER_* its token proved */
    pthread_t tid;
    int done;
    struct server_stream *next;
};

struct spw_rpc_server {
    grpc_server *srv;
    struct io_thread *io;
    int nio;
    struct method methods[SPW_RPC_MAX_METHODS];
    int nmethods;
    size_t max_msg;
    int max_streams;
    char *auth;         /* "Bearer <token>" or NULL: the clients' (and the workers' without worker_auth) */
    char *worker_auth;  /* "Bearer <token>" or NULL: the workers' when they have their own */
    int port;
    int started, shut;
    atomic_int stopping;
    struct tag tag_shutdown;
    pthread_mutex_t mu;  /* guards the fields below */
    pthread_cond_t cv;
    int shutdown_done;
    int active_streams;
    int active_slow;                /* slow unary handlers still running */
    int max_streams_per_peer, max_slow_per_peer;
    struct peer_use *peers;         /* max_streams + SPW_RPC_MAX_SLOW_CALLS entries; n_peers in use */
    int n_peers;
    struct server_stream *streams;  /* live and finished-but-unjoined */
    struct call_stats unknown;      /* calls of methods it does not serve */
};

static void count_call(struct spw_rpc_server *s, struct method *m, int status, int64_t t0)
{
    struct call_stats *cs = m ? &m->stats : &s->unknown;
    if (status >= 0 && status < N_STATUS)
        __atomic_fetch_add(&cs->status[status], 1, __ATOMIC_RELAXED);
    if (t0 > 0)
        spw_hist_observe(&cs->latency, spw_now_ns() - t0);
}

/* ---- small helpers ---- */

static int slice_eq(grpc_slice s, const char *str, size_t n)
{
    return GRPC_SLICE_LENGTH(s) == n && memcmp(GRPC_SLICE_START_PTR(s), str, n) == 0;
}

/* Whether the call's metadata carries `want` as its authorization; the comparison does not stop at the first
 * differing byte. */
static bool token_matches(const grpc_metadata_array *md, const char *want)
{
    const size_t n = strlen(want);
    for (size_t i = 0; i < md->count; i++) {
        const grpc_metadata *m = &md->metadata[i];
        if (!slice_eq(m->key, "authorization", 13) || GRPC_SLICE_LENGTH(m->value) != n)
            continue;
        const uint8_t *v = GRPC_SLICE_START_PTR(m->value);
        unsigned diff = 0;
        for (size_t k = 0; k < n; k++)
            diff |= (unsigned)(v[k] ^ (uint8_t)want[k]);
        if (diff == 0)
            return true;
    }
    return false;
}

/* Which callers the call's token proves it is (SPW_RPC_CALLER_*), of those method m accepts; 0 = refuse.
 * A server without tokens takes every call as any caller. */
static unsigned authorized(const struct spw_rpc_server *s, const struct method *m, const grpc_metadata_array *md)
{
    if (!s->auth)
        return m->callers;
    unsigned caller = 0;
    if (token_matches(md, s->auth))
        caller |= s->worker_auth ? SPW_RPC_CALLER_CLIENT : SPW_RPC_CALLER_CLIENT | SPW_RPC_CALLER_WORKER;
    if (s->worker_auth && token_matches(md, s->worker_auth))
        caller |= SPW_RPC_CALLER_WORKER;
    return caller & m->callers;
}

static int valid_status(int st)
{
    return st >= SPW_RPC_OK && st <= SPW_RPC_UNAUTHENTICATED;
}

static void free_request(struct request *rq)
{
    grpc_metadata_array_destroy(&rq->md);
    if (!rq->m)
        grpc_call_details_destroy(&rq->details);
    if (rq->call_cq)
        grpc_completion_queue_destroy(rq->call_cq);
    free(rq);
}

static int arm_request(struct io_thread *io, struct method *m)
{
    struct spw_rpc_server *s = io->s;
    struct request *rq = calloc(1, sizeof *rq);
    grpc_call_error e;
    if (!rq)
        return -ENOMEM;
    rq->tag.kind = TAG_NEW_CALL;
    rq->tag.obj = rq;
    rq->io = io;
    rq->m = m;
    grpc_metadata_array_init(&rq->md);
    if (!m) {
        grpc_call_details_init(&rq->details);
        e = grpc_server_request_call(s->srv, &rq->call, &rq->details, &rq->md, io->cq, io->cq, &rq->tag);
    } else {
        if (m->stream)
            rq->call_cq = grpc_completion_queue_create_for_pluck(NULL);
        e = grpc_server_request_registered_call(s->srv, m->handle, &rq->call, &rq->deadline, &rq->md, NULL,
                                                m->stream ? rq->call_cq : io->cq, io->cq, &rq->tag);
    }
    if (e != GRPC_CALL_OK) {
        free_request(rq);
        return -EIO;
    }
    return 0;
}

/* ---- unary calls (io thread) ---- */

static void unary_step(struct unary_call *uc)
{
    if (atomic_fetch_sub(&uc->pending, 1) > 1)
        return;
    if (uc->reply)
        grpc_byte_buffer_destroy(uc->reply);
    grpc_call_unref(uc->call);
    free(uc);
}

/* Post RECV_CLOSE_ON_SERVER in its own batch (it reports cancellation) before handling. NULL: out of memory,
 * the call has been cancelled and released. */
static struct unary_call *unary_begin(struct spw_rpc_server *s, struct method *m, grpc_call *call)
{
    struct unary_call *uc = calloc(1, sizeof *uc);
    if (!uc) {
        count_call(s, m, SPW_RPC_RESOURCE_EXHAUSTED, 0);
        grpc_call_cancel(call, NULL);
        grpc_call_unref(call);
        return NULL;
    }
    uc->s = s;
    uc->m = m;
    uc->t0 = spw_now_ns();
    uc->deadline = gpr_inf_future(GPR_CLOCK_MONOTONIC);
    uc->call = call;
    uc->tag_request = (struct tag){TAG_UNARY_REQUEST, uc};
    uc->tag_reply = (struct tag){TAG_UNARY_STEP, uc};
    uc->tag_close = (struct tag){TAG_UNARY_STEP, uc};
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &uc->cancelled;
    atomic_init(&uc->pending, 2);  /* the reply's own reference (dropped in unary_reply) + this batch */
    if (grpc_call_start_batch(call, &op, 1, &uc->tag_close, NULL) != GRPC_CALL_OK)
        atomic_fetch_sub(&uc->pending, 1);
    return uc;
}

/* Send the reply (takes ownership of resp, a malloc'd buffer or NULL) and the status. */
static void unary_reply(struct unary_call *uc, int status, const char *msg, uint8_t *resp, size_t resp_len)
{
    count_call(uc->s, uc->m, status, uc->t0);
    grpc_op ops[3];
    grpc_slice details = grpc_slice_from_copied_string(msg ? msg : "");
    size_t nops = 0;
    memset(ops, 0, sizeof ops);
    ops[nops++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (status == SPW_RPC_OK) {
        grpc_slice body = resp && resp_len ? grpc_slice_new(resp, resp_len, free) : grpc_empty_slice();
        if (resp && !resp_len)
            free(resp);
        uc->reply = grpc_raw_byte_buffer_create(&body, 1);
        grpc_slice_unref(body);
        ops[nops].op = GRPC_OP_SEND_MESSAGE;
        ops[nops++].data.send_message.send_message = uc->reply;
    } else {
        free(resp);
    }
    ops[nops].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[nops].data.send_status_from_server.status = (grpc_status_code)status;
    ops[nops++].data.send_status_from_server.status_details = &details;
    atomic_fetch_add(&uc->pending, 1);     /* before the batch: its completion may run on an io thread first */
    if (grpc_call_start_batch(uc->call, ops, nops, &uc->tag_reply, NULL) != GRPC_CALL_OK) {
        atomic_fetch_sub(&uc->pending, 1);
        grpc_call_cancel(uc->call, NULL);
    }
    grpc_slice_unref(details);  /* the call keeps its own reference */
    unary_step(uc);             /* drop the reply's reference */
}

static _Thread_local char current_peer[128];
static _Thread_local unsigned current_caller;
static _Thread_local gpr_timespec current_deadline;     /* of the unary call running here */
static _Thread_local int64_t current_t0;                /* its arrival (spw_now_ns); 0: none */

bool spw_rpc_current_expired(void)
{
    return current_deadline.clock_type != GPR_TIMESPAN && current_deadline.tv_sec != 0 &&
           gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), gpr_convert_clock_type(current_deadline,
                                                                               GPR_CLOCK_MONOTONIC)) > 0;
}

int64_t spw_rpc_current_age_ns(void)
{
    return current_t0 > 0 ? spw_now_ns() - current_t0 : 0;
}

const char *spw_rpc_current_peer(void)
{
    return current_peer;
}

unsigned spw_rpc_current_caller(void)
{
    return current_caller;
}

/* The call's peer and caller become spw_rpc_current_peer() and _caller() on this thread (NULL: none). */
static void set_current_peer(grpc_call *call, unsigned caller)
{
    char *p = call ? grpc_call_get_peer(call) : NULL;
    snprintf(current_peer, sizeof current_peer, "%s", p ? p : "");
    current_caller = caller;
    current_deadline = (gpr_timespec){0};
    current_t0 = 0;
    gpr_free(p);
}

/* Run a unary handler and send its reply (any thread). Takes req. */
static void run_unary(struct method *m, struct unary_call *uc, uint8_t *req, size_t req_len)
{
    uint8_t *resp = NULL;
    size_t resp_len = 0;
    char msg[512] = "";
    set_current_peer(uc->call, uc->caller);
    current_deadline = uc->deadline;
    current_t0 = uc->t0;
    int status = m->ufn(m->ctx, req, req_len, &resp, &resp_len, msg, sizeof msg);
    set_current_peer(NULL, 0);
    free(req);
    if (!valid_status(status)) {
        snprintf(msg, sizeof msg, "%s: handler returned %d, not a status", m->name, status);
        status = SPW_RPC_UNKNOWN;
    }
    msg[sizeof msg - 1] = '\0';
    unary_reply(uc, status, msg, resp, resp_len);
}

struct slow_call {
    struct spw_rpc_server *s;
    char host[64];
    struct method *m;
    struct unary_call *uc;
    uint8_t *req;
    size_t req_len;
};

/* ---- per-peer bounds: one peer host may hold at most part of the streams and slow calls, so that it cannot
 * lock the others out ---- */

static void peer_host_of(grpc_call *call, char host[64])
{
    char *p = grpc_call_get_peer(call);
    if (spw_rpc_peer_host(p ? p : "", host, 64) != 0)
        snprintf(host, 64, "%.63s", p ? p : "");       /* not an IP peer (a unix socket): the whole name */
    gpr_free(p);
}

/* Count one more stream (or slow call) for host, unless it holds its share already. Call with mu held. */
static bool peer_take(struct spw_rpc_server *s, const char *host, bool stream)
{
    struct peer_use *u = NULL;
    for (int i = 0; i < s->n_peers && !u; i++)
        if (!strcmp(s->peers[i].host, host))
            u = &s->peers[i];
    if (u && (stream ? u->streams >= s->max_streams_per_peer : u->slow >= s->max_slow_per_peer))
        return false;
    if (!u) {       /* room is certain: each entry holds at least one of the bounded total */
        u = &s->peers[s->n_peers++];
        memset(u, 0, sizeof *u);
        snprintf(u->host, sizeof u->host, "%s", host);
    }
    stream ? u->streams++ : u->slow++;
    return true;
}

static void peer_give(struct spw_rpc_server *s, const char *host, bool stream)
{
    for (int i = 0; i < s->n_peers; i++) {
        struct peer_use *u = &s->peers[i];
        if (strcmp(u->host, host) != 0)
            continue;
        stream ? u->streams-- : u->slow--;
        if (u->streams <= 0 && u->slow <= 0)
            *u = s->peers[--s->n_peers];
        return;
    }
}

static void *slow_main(void *arg)
{
    struct slow_call *sc = arg;
    struct spw_rpc_server *s = sc->s;
    run_unary(sc->m, sc->uc, sc->req, sc->req_len);
    pthread_mutex_lock(&s->mu);
    peer_give(s, sc->host, false);
    s->active_slow--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(sc);
    return NULL;
}

/* Hand a slow method's call to a detached thread, so the io thread goes on serving quick calls. */
static void start_slow(struct spw_rpc_server *s, struct method *m, struct unary_call *uc, uint8_t *req,
                       size_t req_len)
{
    struct slow_call *sc = calloc(1, sizeof *sc);
    char host[64];
    peer_host_of(uc->call, host);
    pthread_mutex_lock(&s->mu);
    /* After the shutdown tag, spw_rpc_server_shutdown no longer waits for slow calls: start none. */
    const int busy = s->active_slow >= SPW_RPC_MAX_SLOW_CALLS || s->shutdown_done;
    const bool mine = !busy && sc && peer_take(s, host, false);
    if (mine)
        s->active_slow++;
    pthread_mutex_unlock(&s->mu);
    if (!mine) {
        free(sc);
        free(req);
        unary_reply(uc, SPW_RPC_RESOURCE_EXHAUSTED,
                    busy ? "too many slow calls in progress; retry later"
                         : sc ? "too many slow calls in progress from this peer; retry later" : "out of memory",
                    NULL, 0);
        return;
    }
    *sc = (struct slow_call){.s = s, .m = m, .uc = uc, .req = req, .req_len = req_len};
    snprintf(sc->host, sizeof sc->host, "%s", host);
    pthread_attr_t attr;
    pthread_t tid;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&tid, &attr, slow_main, sc);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_lock(&s->mu);
        s->active_slow--;
        peer_give(s, host, false);
        pthread_mutex_unlock(&s->mu);
        free(sc);
        free(req);
        unary_reply(uc, SPW_RPC_RESOURCE_EXHAUSTED, "cannot start a thread for the call", NULL, 0);
    }
}

/* A new unary call: check its token from the metadata, and only then start receiving its message (a refused
 * call's status ends the stream, so gRPC drops whatever of the body it had buffered). */
static void handle_unary(struct spw_rpc_server *s, struct request *rq)
{
    struct unary_call *uc = unary_begin(s, rq->m, rq->call);
    grpc_op op;

    rq->call = NULL;
    if (!uc)
        return;
    uc->deadline = rq->deadline;
    if (!(uc->caller = authorized(s, rq->m, &rq->md))) {
        unary_reply(uc, SPW_RPC_UNAUTHENTICATED, "missing or wrong authorization bearer token", NULL, 0);
        return;
    }
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &uc->request;
    if (grpc_call_start_batch(uc->call, &op, 1, &uc->tag_request, NULL) != GRPC_CALL_OK)
        unary_reply(uc, SPW_RPC_INTERNAL, "cannot start receiving the request", NULL, 0);
}

/* The request's batch came back (io thread): run the handler. ok == 0: the call failed (cancelled, deadline,
 * message over the cap, which gRPC answers itself), so there is no one to reply to. */
static void on_unary_request(struct unary_call *uc, int ok)
{
    struct method *m = uc->m;
    grpc_byte_buffer *bb = uc->request;
    uint8_t *req = NULL;
    size_t req_len = 0;
    char msg[512];
    int rc = 0;

    uc->request = NULL;
    if (bb) {
        rc = spw_rpc__bb_flatten(bb, &req, &req_len);
        grpc_byte_buffer_destroy(bb);
    }
    if (!ok) {
        count_call(uc->s, m, SPW_RPC_CANCELLED, uc->t0);
        free(req);
        grpc_call_cancel(uc->call, NULL);
        unary_step(uc);  /* drop the reply's reference: no reply */
    } else if (rc < 0) {
        unary_reply(uc, SPW_RPC_RESOURCE_EXHAUSTED, "out of memory reading the request", NULL, 0);
    } else if (!req) {
        snprintf(msg, sizeof msg, "%s: request message missing", m->name);
        unary_reply(uc, SPW_RPC_INVALID_ARGUMENT, msg, NULL, 0);
    } else if (m->slow) {
        start_slow(uc->s, m, uc, req, req_len);
    } else {
        run_unary(m, uc, req, req_len);
    }
}

static void handle_unknown(struct spw_rpc_server *s, struct request *rq)
{
    char msg[512], name[256];
    struct unary_call *uc = unary_begin(s, NULL, rq->call);
    rq->call = NULL;
    if (!uc)
        return;
    spw_rpc__slice_to_msg(rq->details.method, name, sizeof name);
    snprintf(msg, sizeof msg, "unknown method %s", name);
    unary_reply(uc, SPW_RPC_UNIMPLEMENTED, msg, NULL, 0);
}

/* ---- streams ---- */

/* Refuse a stream call (bound to its own pluck queue) from the io thread. A client that does not read could
 * hold the status write: give it 5 s, then cancel. Releases call and cq. */
static void stream_reject(grpc_call *call, grpc_completion_queue *cq, int status, const char *msg)
{
    char tag_a, tag_b;
    int cancelled = 0, started_b;
    grpc_slice details = grpc_slice_from_copied_string(msg);
    grpc_op ops[2], close_op;
    memset(ops, 0, sizeof ops);
    memset(&close_op, 0, sizeof close_op);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[1].data.send_status_from_server.status = (grpc_status_code)status;
    ops[1].data.send_status_from_server.status_details = &details;
    close_op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    close_op.data.recv_close_on_server.cancelled = &cancelled;
    started_b = grpc_call_start_batch(call, &close_op, 1, &tag_b, NULL) == GRPC_CALL_OK;
    if (grpc_call_start_batch(call, ops, 2, &tag_a, NULL) == GRPC_CALL_OK) {
        if (grpc_completion_queue_pluck(cq, &tag_a, spw_rpc__deadline(5000), NULL).type == GRPC_QUEUE_TIMEOUT) {
            grpc_call_cancel(call, NULL);
            spw_rpc__pluck(cq, &tag_a);
        }
    } else {
        grpc_call_cancel(call, NULL);
    }
    grpc_slice_unref(details);
    if (started_b)
        spw_rpc__pluck(cq, &tag_b);
    grpc_call_unref(call);
    grpc_completion_queue_destroy(cq);
}

/* stream_reject, counted. */
static void reject_stream(struct spw_rpc_server *s, struct method *m, grpc_call *call, grpc_completion_queue *cq,
                          int status, const char *msg)
{
    count_call(s, m, status, 0);
    stream_reject(call, cq, status, msg);
}

static void *stream_main(void *arg)
{
    struct server_stream *ss = arg;
    struct spw_rpc_stream *st = &ss->st;
    struct spw_rpc_server *s = ss->s;
    char msg[512] = "";
    int status, close_started;
    grpc_op op, ops[2];
    size_t nops = 0;

    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &st->close_cancelled;
    close_started = grpc_call_start_batch(st->call, &op, 1, &st->tag_close, NULL) == GRPC_CALL_OK;

    set_current_peer(st->call, ss->caller);
    status = ss->m->sfn(ss->m->ctx, st, msg, sizeof msg);
    set_current_peer(NULL, 0);
    if (!valid_status(status)) {
        snprintf(msg, sizeof msg, "%s: handler returned %d, not a status", ss->m->name, status);
        status = SPW_RPC_UNKNOWN;
    }
    count_call(s, ss->m, status, 0);
    msg[sizeof msg - 1] = '\0';

    grpc_slice details = grpc_slice_from_copied_string(msg);
    memset(ops, 0, sizeof ops);
    if (!st->imd_sent)
        ops[nops++].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[nops].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[nops].data.send_status_from_server.status = (grpc_status_code)status;
    ops[nops++].data.send_status_from_server.status_details = &details;
    if (grpc_call_start_batch(st->call, ops, nops, &st->tag_status, NULL) == GRPC_CALL_OK)
        spw_rpc__pluck(st->cq, &st->tag_status);
    else
        grpc_call_cancel(st->call, NULL);
    grpc_slice_unref(details);
    if (close_started)
        spw_rpc__pluck(st->cq, &st->tag_close);
    if (st->recv_pending) {  /* a receive the handler left behind after a timeout */
        spw_rpc__pluck(st->cq, &st->tag_recv);
        if (st->recv_bb)
            grpc_byte_buffer_destroy(st->recv_bb);
    }
    grpc_metadata_array_destroy(&st->rimd);
    grpc_call_unref(st->call);
    grpc_completion_queue_destroy(st->cq);

    pthread_mutex_lock(&s->mu);
    s->active_streams--;
    peer_give(s, ss->host, true);
    ss->done = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Join the stream threads that have finished. Called with s->mu held. */
static void reap_streams(struct spw_rpc_server *s)
{
    struct server_stream **pp = &s->streams;
    while (*pp) {
        struct server_stream *ss = *pp;
        if (ss->done) {
            *pp = ss->next;
            pthread_join(ss->tid, NULL);
            free(ss);
        } else {
            pp = &ss->next;
        }
    }
}

static void handle_stream(struct spw_rpc_server *s, struct request *rq)
{
    grpc_call *call = rq->call;
    grpc_completion_queue *cq = rq->call_cq;
    struct server_stream *ss = NULL;
    char msg[256];

    rq->call = NULL;
    rq->call_cq = NULL;
    const unsigned caller = authorized(s, rq->m, &rq->md);
    if (!caller) {
        reject_stream(s, rq->m, call, cq, SPW_RPC_UNAUTHENTICATED, "missing or wrong authorization bearer token");
        return;
    }
    char host[64];
    peer_host_of(call, host);
    pthread_mutex_lock(&s->mu);
    reap_streams(s);
    const int full = s->active_streams >= s->max_streams;
    const int mine = !full && peer_take(s, host, true);
    if (mine)
        s->active_streams++;
    pthread_mutex_unlock(&s->mu);
    if (!mine) {
        if (full)
            snprintf(msg, sizeof msg, "%s: too many open streams (max %d)", rq->m->name, s->max_streams);
        else
            snprintf(msg, sizeof msg, "%s: too many open streams from this peer (max %d per peer host)",
                     rq->m->name, s->max_streams_per_peer);
        reject_stream(s, rq->m, call, cq, SPW_RPC_RESOURCE_EXHAUSTED, msg);
        return;
    }
    if ((ss = calloc(1, sizeof *ss))) {
        snprintf(ss->host, sizeof ss->host, "%s", host);
        ss->st.call = call;
        ss->st.cq = cq;
        spw_rpc__stream_init(&ss->st, 0, s->max_msg);
        ss->s = s;
        ss->m = rq->m;
        ss->caller = caller;
        pthread_mutex_lock(&s->mu);
        if (pthread_create(&ss->tid, NULL, stream_main, ss) == 0) {
            ss->next = s->streams;
            s->streams = ss;
            ss = NULL;
            call = NULL;
        } else {
            grpc_metadata_array_destroy(&ss->st.rimd);
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (call) {  /* out of memory or threads */
        free(ss);
        pthread_mutex_lock(&s->mu);
        s->active_streams--;
        peer_give(s, host, true);
        pthread_mutex_unlock(&s->mu);
        reject_stream(s, rq->m, call, cq, SPW_RPC_RESOURCE_EXHAUSTED, "cannot start a stream thread");
    }
}

/* ---- io threads ---- */

static void on_new_call(struct request *rq, int ok)
{
    struct io_thread *io = rq->io;
    struct spw_rpc_server *s = io->s;
    if (!ok || !rq->call) {  /* the server is shutting down */
        free_request(rq);
        return;
    }
    if (!atomic_load(&s->stopping))
        arm_request(io, rq->m);  /* on failure this queue stops taking this method; the others still do */
    if (!rq->m)
        handle_unknown(s, rq);
    else if (rq->m->stream)
        handle_stream(s, rq);
    else
        handle_unary(s, rq);
    free_request(rq);
}

static void *io_main(void *arg)
{
    struct io_thread *io = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(io->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        struct tag *t = ev.tag;
        switch (t->kind) {
        case TAG_NEW_CALL:
            on_new_call(t->obj, ev.success);
            break;
        case TAG_UNARY_REQUEST:
            on_unary_request(t->obj, ev.success);
            break;
        case TAG_UNARY_STEP:
            unary_step(t->obj);
            break;
        case TAG_SHUTDOWN:
            pthread_mutex_lock(&io->s->mu);
            io->s->shutdown_done = 1;
            pthread_cond_broadcast(&io->s->cv);
            pthread_mutex_unlock(&io->s->mu);
            break;
        }
    }
    return NULL;
}

/* ---- lifecycle ---- */

static void destroy_cqs(struct spw_rpc_server *s)
{
    for (int i = 0; i < s->nio; i++) {
        if (!s->io[i].cq)
            continue;
        grpc_completion_queue_shutdown(s->io[i].cq);
        if (s->io[i].running) {
            pthread_join(s->io[i].tid, NULL);
            s->io[i].running = 0;
        } else {
            grpc_event ev;  /* no thread took this queue: drain it here, freeing failed requests */
            while ((ev = grpc_completion_queue_next(s->io[i].cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL)).type !=
                   GRPC_QUEUE_SHUTDOWN)
                if (ev.type == GRPC_OP_COMPLETE && ((struct tag *)ev.tag)->kind == TAG_NEW_CALL)
                    free_request(((struct tag *)ev.tag)->obj);
        }
        grpc_completion_queue_destroy(s->io[i].cq);
        s->io[i].cq = NULL;
    }
}

/* gRPC explains a failed bind only in an ERROR log line, a nested status whose innermost child carries
 * errno:N and os_error:"text". Returns -errno (or -EIO) and the shortest useful text. */
static int bind_failure(const char *log, char *why, size_t whylen)
{
    const char *os = strstr(log, "os_error:\""), *en = strstr(log, "errno:");
    if (os) {
        os += 10;
        const char *end = strchr(os, '"');
        snprintf(why, whylen, "%.*s", (int)(end ? end - os : (ptrdiff_t)strlen(os)), os);
    } else if (*log) {
        const char *brace = strstr(log, " {");
        if (strncmp(log, "UNKNOWN:", 8) == 0)
            log += 8;
        snprintf(why, whylen, "%.*s", (int)(brace && brace > log ? brace - log : (ptrdiff_t)strlen(log)), log);
    } else {
        snprintf(why, whylen, "gRPC gave no reason");
    }
    int e = en ? atoi(en + 6) : 0;
    return e > 0 && e < 4096 ? -e : -EIO;
}

int spw_rpc_server_create(const struct spw_rpc_server_opts *o, struct spw_rpc_server **out, char *err,
                          size_t errlen)
{
    struct spw_rpc_server *s = NULL;
    grpc_server_credentials *creds;
    pthread_condattr_t ca;
    int ret;

    if (err && errlen)
        err[0] = '\0';
    if (!o || !out || !o->listen_addr || !*o->listen_addr || o->io_threads < 0 || o->io_threads > 64 ||
        o->max_streams < 0 || o->max_streams_per_peer < 0 || o->max_message_bytes > INT_MAX) {
        if (err)
            snprintf(err, errlen, "rpc server: bad options (listen_addr required, io_threads 0..64, "
                                  "max_message_bytes <= %d, max_streams and max_streams_per_peer >= 0)", INT_MAX);
        return -EINVAL;
    }
    if (o->tls && (!o->tls->cert_pem || !o->tls->key_pem || (o->tls->require_client_cert && !o->tls->ca_pem))) {
        if (err)
            snprintf(err, errlen, "rpc server: TLS needs a certificate and its key%s",
                     o->tls->require_client_cert ? ", and a CA to verify clients' certificates" : "");
        return -EINVAL;
    }
    if (!(s = calloc(1, sizeof *s)))
        return -ENOMEM;
    s->nio = o->io_threads ? o->io_threads : SPW_RPC_DEFAULT_IO_THREADS;
    s->max_msg = o->max_message_bytes ? o->max_message_bytes : SPW_RPC_DEFAULT_MAX_MESSAGE;
    s->max_streams = o->max_streams ? o->max_streams : SPW_RPC_DEFAULT_MAX_STREAMS;
    s->max_streams_per_peer = o->max_streams_per_peer ? o->max_streams_per_peer
                                                      : (s->max_streams + 1) / 2;
    s->max_slow_per_peer = SPW_RPC_MAX_SLOW_CALLS / 2;
    s->tag_shutdown = (struct tag){TAG_SHUTDOWN, s};
    atomic_init(&s->stopping, 0);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    bool oom, oom2 = false;
    s->auth = spw_rpc__bearer(o->auth_token, &oom);
    if (s->auth)                /* a workers' token only beside a clients' one */
        s->worker_auth = spw_rpc__bearer(o->worker_token, &oom2);
    if (oom || oom2) {
        ret = -ENOMEM;
        goto fail_nogrpc;
    }
    if (!(s->peers = calloc((size_t)s->max_streams + SPW_RPC_MAX_SLOW_CALLS, sizeof *s->peers))) {
        ret = -ENOMEM;
        goto fail_nogrpc;
    }
    if (!(s->io = calloc((size_t)s->nio, sizeof *s->io))) {
        ret = -ENOMEM;
        goto fail_nogrpc;
    }

    spw_rpc__ref();
    grpc_arg args[6];
    memset(args, 0, sizeof args);
    for (int i = 0; i < 6; i++)
        args[i].type = GRPC_ARG_INTEGER;
    args[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = (int)s->max_msg;
    args[1].key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    args[1].value.integer = (int)s->max_msg;
    args[2].key = GRPC_ARG_ALLOW_REUSEPORT;  /* a second daemon on the same port must fail, not share it */
    args[2].value.integer = 0;
    /* Connections that hold nothing are closed (peers reconnect by themselves), a handshake that does not
     * finish is dropped, and one connection carries a bounded number of calls at once. */
    args[3].key = GRPC_ARG_MAX_CONNECTION_IDLE_MS;
    args[3].value.integer = SPW_RPC_IDLE_CONNECTION_MS;
    args[4].key = GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS;
    args[4].value.integer = 20000;
    args[5].key = GRPC_ARG_MAX_CONCURRENT_STREAMS;
    args[5].value.integer = 1024;
    grpc_channel_args chargs = {6, args};
    s->srv = grpc_server_create(&chargs, NULL);
    for (int i = 0; i < s->nio; i++) {
        s->io[i].s = s;
        s->io[i].cq = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(s->srv, s->io[i].cq, NULL);
    }
    if (o->tls) {
        grpc_ssl_pem_key_cert_pair pair = {o->tls->key_pem, o->tls->cert_pem};
        creds = grpc_ssl_server_credentials_create_ex(
            o->tls->ca_pem, &pair, 1,
            o->tls->require_client_cert ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                        : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE, NULL);
    } else {
        creds = grpc_insecure_server_credentials_create();
    }
    spw_rpc__clear_last_log();
    s->port = grpc_server_add_http2_port(s->srv, o->listen_addr, creds);
    grpc_server_credentials_release(creds);
    if (s->port <= 0) {
        char why[160];
        ret = bind_failure(spw_rpc__last_log(), why, sizeof why);
        if (err)
            snprintf(err, errlen, "rpc server: cannot listen on %s: %s", o->listen_addr, why);
        grpc_server_destroy(s->srv);  /* nothing bound, never started: no shutdown needed */
        destroy_cqs(s);
        spw_rpc__unref();
        goto fail_nogrpc;
    }
    *out = s;
    return 0;

fail_nogrpc:
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->io);
    free(s->auth);
    free(s->worker_auth);
    free(s->peers);
    free(s);
    return ret;
}

static int add_method(struct spw_rpc_server *s, const char *method, int stream, int slow, spw_rpc_unary_fn ufn,
                      spw_rpc_stream_fn sfn, void *ctx)
{
    if (!s || !method || method[0] != '/' || (!ufn && !sfn))
        return -EINVAL;
    if (s->started || s->shut)
        return -EBUSY;
    for (int i = 0; i < s->nmethods; i++)
        if (strcmp(s->methods[i].name, method) == 0)
            return -EEXIST;
    if (s->nmethods == SPW_RPC_MAX_METHODS)
        return -ENOSPC;
    struct method *m = &s->methods[s->nmethods];
    if (!(m->name = strdup(method)))
        return -ENOMEM;
    /* No payload up front, for unary methods too: gRPC would read the whole message before the token check. */
    m->handle = grpc_server_register_method(s->srv, m->name, NULL, GRPC_SRM_PAYLOAD_NONE, 0);
    if (!m->handle) {
        free(m->name);
        m->name = NULL;
        return -EEXIST;
    }
    m->stream = stream;
    m->slow = slow;
    m->callers = SPW_RPC_CALLER_CLIENT;
    m->ufn = ufn;
    m->sfn = sfn;
    m->ctx = ctx;
    s->nmethods++;
    return 0;
}

int spw_rpc_server_add_unary(struct spw_rpc_server *s, const char *method, spw_rpc_unary_fn fn, void *ctx)
{
    return add_method(s, method, 0, 0, fn, NULL, ctx);
}

int spw_rpc_server_add_unary_slow(struct spw_rpc_server *s, const char *method, spw_rpc_unary_fn fn, void *ctx)
{
    return add_method(s, method, 0, 1, fn, NULL, ctx);
}

int spw_rpc_server_add_stream(struct spw_rpc_server *s, const char *method, spw_rpc_stream_fn fn, void *ctx)
{
    return add_method(s, method, 1, 0, NULL, fn, ctx);
}

int spw_rpc_server_set_callers(struct spw_rpc_server *s, const char *method, unsigned callers)
{
    if (!s || !method || !callers || (callers & ~(unsigned)(SPW_RPC_CALLER_CLIENT | SPW_RPC_CALLER_WORKER)))
        return -EINVAL;
    if (s->started || s->shut)
        return -EBUSY;
    for (int i = 0; i < s->nmethods; i++)
        if (strcmp(s->methods[i].name, method) == 0)
            return s->methods[i].callers = callers, 0;
    return -ENOENT;
}

int spw_rpc_server_start(struct spw_rpc_server *s, int *bound_port)
{
    int ret = 0;
    if (!s)
        return -EINVAL;
    if (s->started || s->shut)
        return -EBUSY;
    grpc_server_start(s->srv);
    s->started = 1;
    for (int i = 0; i < s->nio; i++) {
        for (int k = 0; k < s->nmethods; k++)
            if ((ret = arm_request(&s->io[i], &s->methods[k])) < 0)
                return ret;
        if ((ret = arm_request(&s->io[i], NULL)) < 0)
            return ret;
    }
    for (int i = 0; i < s->nio; i++) {
        if ((ret = pthread_create(&s->io[i].tid, NULL, io_main, &s->io[i])) != 0)
            return -ret;  /* spw_rpc_server_shutdown copes with the threads that did start */
        s->io[i].running = 1;
    }
    if (bound_port)
        *bound_port = s->port;
    return 0;
}

void spw_rpc_server_shutdown(struct spw_rpc_server *s, int deadline_ms)
{
    struct timespec until;
    if (!s || s->shut)
        return;
    atomic_store(&s->stopping, 1);
    grpc_server_shutdown_and_notify(s->srv, s->io[0].cq, &s->tag_shutdown);
    if (!s->io[0].running) {  /* never started (or its thread failed to): pump the queue here */
        grpc_event ev;
        do {
            ev = grpc_completion_queue_next(s->io[0].cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
            if (ev.type == GRPC_OP_COMPLETE && ((struct tag *)ev.tag)->kind == TAG_NEW_CALL)
                free_request(((struct tag *)ev.tag)->obj);
        } while (!(ev.type == GRPC_OP_COMPLETE && ev.tag == &s->tag_shutdown));
        s->shutdown_done = 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (deadline_ms > 0) {
        until.tv_sec += deadline_ms / 1000;
        until.tv_nsec += (long)(deadline_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&s->mu);
    while (!(s->shutdown_done && s->active_streams == 0))
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until) == ETIMEDOUT)
            break;
    int graceful = s->shutdown_done && s->active_streams == 0;
    pthread_mutex_unlock(&s->mu);
    if (!graceful)
        grpc_server_cancel_all_calls(s->srv);
    pthread_mutex_lock(&s->mu);
    /* Slow handlers reply through the io threads' queues: they must be done before the queues go. */
    while (!(s->shutdown_done && s->active_streams == 0 && s->active_slow == 0))
        pthread_cond_wait(&s->cv, &s->mu);
    reap_streams(s);
    pthread_mutex_unlock(&s->mu);
    destroy_cqs(s);
    /* Every call was finished before the shutdown tag, so no io thread can have started a stream since;
     * this last pass is belt and braces. */
    pthread_mutex_lock(&s->mu);
    while (s->active_streams > 0)
        pthread_cond_wait(&s->cv, &s->mu);
    reap_streams(s);
    pthread_mutex_unlock(&s->mu);
    s->shut = 1;
}

void spw_rpc_server_destroy(struct spw_rpc_server *s)
{
    if (!s)
        return;
    spw_rpc_server_shutdown(s, 0);
    grpc_server_destroy(s->srv);
    for (int i = 0; i < s->nmethods; i++)
        free(s->methods[i].name);
    spw_rpc__unref();
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->io);
    free(s->auth);
    free(s->worker_auth);
    free(s->peers);
    free(s);
}

void spw_rpc_server_metrics(struct spw_rpc_server *s, struct spw_prom *p)
{
    spw_prom_family(p, "spillway_rpc_requests_total", "counter",
                    "RPCs this server answered, by method and status code (streams when they end)");
    for (int i = 0; i <= s->nmethods; i++) {
        const struct call_stats *cs = i < s->nmethods ? &s->methods[i].stats : &s->unknown;
        const char *method = i < s->nmethods ? s->methods[i].name + (s->methods[i].name[0] == '/') : "unknown";
        for (int code = 0; code < N_STATUS; code++) {
            const uint64_t n = __atomic_load_n(&cs->status[code], __ATOMIC_RELAXED);
            if (n == 0 && code != SPW_RPC_OK)
                continue;
            const struct spw_label l[] = {{"method", method}, {"code", spw_rpc_status_name(code)}};
            spw_prom_sample(p, "spillway_rpc_requests_total", l, 2, (double)n);
        }
    }
    spw_prom_family(p, "spillway_rpc_request_duration_seconds", "histogram",
                    "unary RPCs from arrival to the reply, by method");
    for (int i = 0; i <= s->nmethods; i++) {
        if (i < s->nmethods && s->methods[i].stream)
            continue;
        const struct call_stats *cs = i < s->nmethods ? &s->methods[i].stats : &s->unknown;
        const struct spw_label l[] = {{"method", i < s->nmethods ? s->methods[i].name + (s->methods[i].name[0] == '/')
                                                                 : "unknown"}};
        spw_prom_hist(p, "spillway_rpc_request_duration_seconds", l, 1, &cs->latency);
    }
}
