/* lib/rpc.c - the gRPC runtime reference, the log hook, status names and the stream operations both sides
 * share (send, recv, cancel). Server and client specifics live in lib/rpc_server.c and lib/rpc_client.c.
 * Thread model: a stream's send path runs on its one sender thread and its recv path on its one receiver
 * thread; each plucks only its own tags from the stream's pluck queue (gRPC allows 6 concurrent pluckers). */
#include "lib/rpc_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <grpc/status.h>
#include <grpc/support/log.h>

#define SAME_STATUS(x) _Static_assert((int)SPW_RPC_##x == (int)GRPC_STATUS_##x, "SPW_RPC_" #x " != grpc_status_code");
SAME_STATUS(OK)
SAME_STATUS(CANCELLED)
SAME_STATUS(UNKNOWN)
SAME_STATUS(INVALID_ARGUMENT)
SAME_STATUS(DEADLINE_EXCEEDED)
SAME_STATUS(NOT_FOUND)
SAME_STATUS(ALREADY_EXISTS)
SAME_STATUS(PERMISSION_DENIED)
SAME_STATUS(RESOURCE_EXHAUSTED)
SAME_STATUS(FAILED_PRECONDITION)
SAME_STATUS(ABORTED)
SAME_STATUS(OUT_OF_RANGE)
SAME_STATUS(UNIMPLEMENTED)
SAME_STATUS(INTERNAL)
SAME_STATUS(UNAVAILABLE)
SAME_STATUS(DATA_LOSS)
SAME_STATUS(UNAUTHENTICATED)
#undef SAME_STATUS

const char *spw_rpc_status_name(int status)
{
    switch (status) {
#define SPW_RPC_STATUS_NAME(name, code) case code: return &#name[8];  /* skip "SPW_RPC_" */
    SPW_RPC_STATUSES(SPW_RPC_STATUS_NAME)
#undef SPW_RPC_STATUS_NAME
    default: return "?";
    }
}

/* ---- runtime reference and log hook ---- */

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static _Atomic(spw_rpc_log_fn) log_fn;
static _Atomic(void *) log_ctx;
static _Thread_local char last_log[1024];

static void log_hook(gpr_log_func_args *a)
{
    if (a->severity == GPR_LOG_SEVERITY_ERROR)
        snprintf(last_log, sizeof last_log, "%s", a->message ? a->message : "");
    spw_rpc_log_fn fn = atomic_load(&log_fn);
    if (fn) {
        fn(atomic_load(&log_ctx), (int)a->severity, a->file, a->line, a->message ? a->message : "");
        return;
    }
    /* GPR_ASSERT logs this just before abort(): the one line worth printing without a hook. */
    if (a->message && strncmp(a->message, "assertion failed", 16) == 0)
        fprintf(stderr, "grpc: %s:%d: %s\n", a->file, a->line, a->message);
}

/* absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle) of Debian's abseil (inline namespace debian3),
 * weak: an abseil of another namespace leaves it NULL. Debian builds abseil without NDEBUG, so each absl::Mutex
 * that gRPC takes also updates abseil's lock-order graph, its deadlock detection: 3.5% of the dispatcher's CPU
 * at 1000 workers x 100 jobs (perf, GraphCycles::GetId). A debugging aid that changes nothing a correct
 * program does; off (kIgnore, 0) from the runtime's first use. */
extern void absl_set_mutex_deadlock_detection(int mode)
    __asm__("_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE") __attribute__((weak));

static void install_log_hook(void)
{
    gpr_set_log_function(log_hook);
    if (absl_set_mutex_deadlock_detection)
        absl_set_mutex_deadlock_detection(0);
}

void spw_rpc_set_log_fn(spw_rpc_log_fn fn, void *ctx)
{
    pthread_once(&log_once, install_log_hook);
    atomic_store(&log_ctx, ctx);
    atomic_store(&log_fn, fn);
}

char *spw_rpc__bearer(const char *token, bool *oom)
{
    char *s = NULL;
    *oom = token && *token && asprintf(&s, "Bearer %s", token) < 0;
    return *oom ? NULL : s;
}

const char *spw_rpc__last_log(void)
{
    return last_log;
}

void spw_rpc__clear_last_log(void)
{
    last_log[0] = '\0';
}

void spw_rpc__ref(void)
{
    pthread_once(&log_once, install_log_hook);
    grpc_init();
}

void spw_rpc__unref(void)
{
    grpc_shutdown();
}

void spw_rpc_init(void)
{
    spw_rpc__ref();
}

void spw_rpc_shutdown(void)
{
    spw_rpc__unref();
}

/* ---- helpers ---- */

gpr_timespec spw_rpc__deadline(int timeout_ms)
{
    if (timeout_ms <= 0)
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
}

grpc_event spw_rpc__pluck(grpc_completion_queue *cq, void *tag)
{
    return grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
}

int spw_rpc__bb_flatten(grpc_byte_buffer *bb, uint8_t **out, size_t *len)
{
    size_t cap = grpc_byte_buffer_length(bb), off = 0;
    uint8_t *p = malloc(cap ? cap : 1);
    grpc_byte_buffer_reader r;
    grpc_slice s;
    if (!p)
        return -ENOMEM;
    if (!grpc_byte_buffer_reader_init(&r, bb)) {
        free(p);
        return -EIO;
    }
    while (grpc_byte_buffer_reader_next(&r, &s)) {
        size_t n = GRPC_SLICE_LENGTH(s);
        if (off + n > cap) {  /* only if the buffer was compressed: the reader inflates */
            size_t ncap = cap * 2 > off + n ? cap * 2 : off + n;
            uint8_t *q = realloc(p, ncap);
            if (!q) {
                grpc_slice_unref(s);
                grpc_byte_buffer_reader_destroy(&r);
                free(p);
                return -ENOMEM;
            }
            p = q;
            cap = ncap;
        }
        memcpy(p + off, GRPC_SLICE_START_PTR(s), n);
        off += n;
        grpc_slice_unref(s);
    }
    grpc_byte_buffer_reader_destroy(&r);
    *out = p;
    *len = off;
    return 0;
}

void spw_rpc__slice_to_msg(grpc_slice s, char *msg, size_t msglen)
{
    if (!msg || msglen == 0)
        return;
    size_t n = GRPC_SLICE_LENGTH(s);
    if (n >= msglen)
        n = msglen - 1;
    memcpy(msg, GRPC_SLICE_START_PTR(s), n);
    msg[n] = '\0';
}

void spw_rpc__stream_init(struct spw_rpc_stream *st, int client, size_t max_msg)
{
    st->client = client;
    st->max_msg = max_msg;
    atomic_init(&st->cancelled, 0);
    grpc_metadata_array_init(&st->rimd);
}

/* ---- send ---- */

/* Zero-copy parts: gRPC calls zc_release once per referenced slice when it is done with the caller's bytes;
 * the sender holds one more reference and waits for the others before returning. The tracker lives on the
 * heap so a release that comes after a failed send gave up waiting frees it instead of touching st. */
struct zc_tracker {
    atomic_int refs;
};

static void zc_release(void *p)
{
    struct zc_tracker *t = p;
    if (atomic_fetch_sub(&t->refs, 1) == 1)
        free(t);
}

/* Slices of a gather list: big parts referenced, runs of small parts copied into one slice each. */
static int build_slices(const struct iovec *iov, int iovcnt, grpc_slice *sl, size_t *nsl, struct zc_tracker **zcp)
{
    size_t n = 0;
    int i = 0;
    while (i < iovcnt) {
        if (iov[i].iov_len == 0) {
            i++;
        } else if (iov[i].iov_len >= SPW_RPC_ZC_MIN) {
            if (!*zcp) {
                *zcp = malloc(sizeof **zcp);
                if (!*zcp)
                    goto fail;
                atomic_init(&(*zcp)->refs, 1);
            }
            atomic_fetch_add(&(*zcp)->refs, 1);
            sl[n++] = grpc_slice_new_with_user_data(iov[i].iov_base, iov[i].iov_len, zc_release, *zcp);
            i++;
        } else {
            size_t run = 0;
            int j = i;
            while (j < iovcnt && iov[j].iov_len < SPW_RPC_ZC_MIN)
                run += iov[j++].iov_len;
            grpc_slice s = grpc_slice_malloc(run);
            uint8_t *d = GRPC_SLICE_START_PTR(s);
            for (; i < j; i++) {
                if (iov[i].iov_len)
                    memcpy(d, iov[i].iov_base, iov[i].iov_len);
                d += iov[i].iov_len;
            }
            sl[n++] = s;
        }
    }
    *nsl = n;
    return 0;
fail:
    for (size_t k = 0; k < n; k++)
        grpc_slice_unref(sl[k]);
    return -ENOMEM;
}

int spw_rpc_stream_send(struct spw_rpc_stream *st, const struct iovec *iov, int iovcnt)
{
    grpc_slice stack_sl[16], *sl = stack_sl;
    struct zc_tracker *zc = NULL;
    grpc_byte_buffer *bb = NULL;
    size_t total = 0, nsl = 0;
    int ok = 0, ret;

    if (!st || iovcnt < 0 || (iovcnt > 0 && !iov))
        return -EINVAL;
    if (st->send_closed)
        return -EPIPE;
    if (st->send_failed || atomic_load(&st->cancelled))
        return -ECANCELED;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    if (total > st->max_msg)
        return -EMSGSIZE;
    if (iovcnt > 16 && !(sl = malloc((size_t)iovcnt * sizeof *sl)))
        return -ENOMEM;
    if ((ret = build_slices(iov, iovcnt, sl, &nsl, &zc)) < 0)
        goto out;
    bb = grpc_raw_byte_buffer_create(sl, nsl);  /* takes its own refs */
    for (size_t k = 0; k < nsl; k++)
        grpc_slice_unref(sl[k]);

    grpc_op ops[2];
    size_t nops = 0;
    memset(ops, 0, sizeof ops);
    if (!st->client && !st->imd_sent)
        ops[nops++].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[nops].op = GRPC_OP_SEND_MESSAGE;
    ops[nops++].data.send_message.send_message = bb;
    grpc_call_error e = grpc_call_start_batch(st->call, ops, nops, &st->tag_send, NULL);
    if (e == GRPC_CALL_OK) {
        ok = spw_rpc__pluck(st->cq, &st->tag_send).success;
        st->imd_sent = 1;
    }
    grpc_byte_buffer_destroy(bb);
    if (zc) {
        /* gRPC may still hold the slices after the batch completes (the socket write finishes later); keep
         * polling so that someone drives that write. A failed call may keep them until the call is freed,
         * but will never write them: stop waiting after 100 ms then (zc_release frees the tracker). */
        gpr_timespec give_up = spw_rpc__deadline(100);
        while (atomic_load(&zc->refs) > 1) {
            if (!ok && gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), give_up) > 0)
                break;
            grpc_completion_queue_pluck(st->cq, &st->tag_poll, spw_rpc__deadline(1), NULL);
        }
        zc_release(zc);
        zc = NULL;
    }
    if (e == GRPC_CALL_ERROR_TOO_MANY_OPERATIONS) {
        ret = -EBUSY;  /* a second sender: a caller bug */
    } else if (e != GRPC_CALL_OK || !ok) {
        st->send_failed = 1;
        ret = -ECANCELED;
    } else {
        ret = 0;
    }
out:
    if (zc)
        zc_release(zc);
    if (sl != stack_sl)
        free(sl);
    return ret;
}

int spw_rpc_stream_close_send(struct spw_rpc_stream *st)
{
    if (!st || !st->client)
        return -EINVAL;
    if (st->send_closed)
        return 0;
    if (st->send_failed || atomic_load(&st->cancelled))
        return -ECANCELED;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    if (grpc_call_start_batch(st->call, &op, 1, &st->tag_send, NULL) != GRPC_CALL_OK) {
        st->send_failed = 1;
        return -ECANCELED;
    }
    int ok = spw_rpc__pluck(st->cq, &st->tag_send).success;
    st->send_closed = 1;
    return ok ? 0 : -ECANCELED;
}

/* ---- recv ---- */

/* Receive one message as gRPC's byte buffer (*bb, caller destroys). Returns as spw_rpc_stream_recv. */
static int recv_bb(struct spw_rpc_stream *st, int timeout_ms, grpc_byte_buffer **out)
{
    if (st->recv_ended)
        return 0;
    if (st->recv_failed)
        return -ECANCELED;
    if (!st->recv_pending) {
        grpc_op ops[2];
        size_t nops = 0;
        memset(ops, 0, sizeof ops);
        if (st->client && !st->rimd_done) {
            ops[nops].op = GRPC_OP_RECV_INITIAL_METADATA;
            ops[nops++].data.recv_initial_metadata.recv_initial_metadata = &st->rimd;
        }
        st->recv_bb = NULL;
        ops[nops].op = GRPC_OP_RECV_MESSAGE;
        ops[nops++].data.recv_message.recv_message = &st->recv_bb;
        if (grpc_call_start_batch(st->call, ops, nops, &st->tag_recv, NULL) != GRPC_CALL_OK) {
            st->recv_failed = 1;
            return -ECANCELED;
        }
        st->rimd_done = 1;
        st->recv_pending = 1;
    }
    grpc_event ev = grpc_completion_queue_pluck(st->cq, &st->tag_recv, spw_rpc__deadline(timeout_ms), NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT)
        return -ETIMEDOUT;
    st->recv_pending = 0;
    grpc_byte_buffer *bb = st->recv_bb;
    st->recv_bb = NULL;
    if (!ev.success || (!bb && !st->client && grpc_call_failed_before_recv_message(st->call))) {
        if (bb)
            grpc_byte_buffer_destroy(bb);
        st->recv_failed = 1;
        return -ECANCELED;
    }
    if (!bb) {
        st->recv_ended = 1;
        return 0;
    }
    *out = bb;
    return 1;
}

int spw_rpc_stream_recv(struct spw_rpc_stream *st, int timeout_ms, uint8_t **msg, size_t *len)
{
    if (!st || !msg || !len)
        return -EINVAL;
    grpc_byte_buffer *bb;
    int r = recv_bb(st, timeout_ms, &bb);
    if (r != 1)
        return r;
    r = spw_rpc__bb_flatten(bb, msg, len);
    grpc_byte_buffer_destroy(bb);
    return r < 0 ? r : 1;
}

struct spw_rpc_msg {
    grpc_slice *slices;
    struct iovec *iov;
    int n;
    size_t len;
};

void spw_rpc_msg_free(struct spw_rpc_msg *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n; i++)
        grpc_slice_unref(m->slices[i]);
    free(m->slices);
    free(m->iov);
    free(m);
}

const struct iovec *spw_rpc_msg_parts(const struct spw_rpc_msg *m, int *n, size_t *len)
{
    *n = m->n;
    *len = m->len;
    return m->iov;
}

int spw_rpc_stream_recv_parts(struct spw_rpc_stream *st, int timeout_ms, struct spw_rpc_msg **out)
{
    if (!st || !out)
        return -EINVAL;
    grpc_byte_buffer *bb;
    int r = recv_bb(st, timeout_ms, &bb);
    if (r != 1)
        return r;
    struct spw_rpc_msg *m = calloc(1, sizeof *m);
    grpc_byte_buffer_reader rd;
    const int inited = m && grpc_byte_buffer_reader_init(&rd, bb);
    int cap = 0, ok = inited;
    grpc_slice s;
    while (ok && grpc_byte_buffer_reader_next(&rd, &s)) {   /* the reader hands out references */
        if (m->n == cap) {
            cap = cap ? 2 * cap : 64;
            grpc_slice *ns = realloc(m->slices, (size_t)cap * sizeof *ns);
            if (ns)
                m->slices = ns;
            if (!ns) {
                grpc_slice_unref(s);
                ok = 0;
                break;
            }
        }
        m->slices[m->n++] = s;
        m->len += GRPC_SLICE_LENGTH(s);
    }
    if (inited)
        grpc_byte_buffer_reader_destroy(&rd);
    grpc_byte_buffer_destroy(bb);
    if (ok && !(m->iov = malloc(sizeof *m->iov * (size_t)(m->n ? m->n : 1))))
        ok = 0;
    if (!ok) {
        spw_rpc_msg_free(m);
        return -ENOMEM;
    }
    for (int i = 0; i < m->n; i++)
        m->iov[i] = (struct iovec){GRPC_SLICE_START_PTR(m->slices[i]), GRPC_SLICE_LENGTH(m->slices[i])};
    *out = m;
    return 1;
}

void spw_rpc_stream_cancel(struct spw_rpc_stream *st)
{
    if (!st)
        return;
    atomic_store(&st->cancelled, 1);
    grpc_call_cancel(st->call, NULL);
}

int spw_rpc_peer_host(const char *peer, char *host, size_t hostlen)
{
    if (hostlen)
        host[0] = '\0';
    const char *h, *end;
    if (!strncmp(peer, "ipv4:", 5)) {
        h = peer + 5;
        end = strrchr(h, ':');
    } else if (!strncmp(peer, "ipv6:[", 6)) {
        h = peer + 6;
        end = strchr(h, ']');
    } else if (!strncasecmp(peer, "ipv6:%5B", 8)) {    /* gRPC URI-encodes the brackets */
        h = peer + 8;
        for (end = h; *end && strncasecmp(end, "%5D", 3); end++)
            ;
        if (!*end)
            end = NULL;
    } else {
        return -EINVAL;
    }
    if (!end || end == h)
        return -EINVAL;
    if ((size_t)(end - h) >= hostlen)
        return -ENOSPC;
    memcpy(host, h, (size_t)(end - h));
    host[end - h] = '\0';
    return 0;
}
