/* client/streams.c - one receive thread per worker the dispatcher lists (see remote_internal.h): it opens
 * the StreamElements call and a channel on it (lib/channel.h: the elements on the call or on a data
 * connection), grants credit (this stream's share of the client's budget, held back while too much is
 * parked), and hands every message to intake_message. A worker that sends garbage is trusted no further; one
 * that cannot be reached is reported. Threads: its own per stream; r->mu for the table and the stats. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client/remote_internal.h"
#include "lib/channel.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/methods.h"
#include "pipeline/stream_msgs.h"

/* One stream's share of the client's credit budget: equal shares of the workers listed or streaming now (a
 * stream that opens first must not take the whole budget), at least what one message needs. */
static int64_t credit_share(struct remote *r)
{
    pthread_mutex_lock(&r->mu);
    int open = 0;
    for (int i = 0; i < r->n_streams; i++)
        open += r->streams[i].listed || r->streams[i].st != NULL;
    pthread_mutex_unlock(&r->mu);
    int64_t share = r->o.credit_bytes / (open ? open : 1);
    return share < MIN_STREAM_CREDIT ? MIN_STREAM_CREDIT : share;
}

static bool stopping(struct remote *r)
{
    pthread_mutex_lock(&r->mu);
    bool s = r->stopping;
    pthread_mutex_unlock(&r->mu);
    return s;
}

/* Whether stream s should end: the remote stops, or the job was re-attached under another id or secret. */
static bool stream_done(const struct stream *s)
{
    struct remote *r = s->r;
    pthread_mutex_lock(&r->mu);
    bool done = r->stopping || s->job != r->job.job || s->secret != r->job.secret;
    pthread_mutex_unlock(&r->mu);
    return done;
}

/* A stream ended with status: count it towards the worker being unreachable from here (nothing received,
 * a transport failure), logging that once. Returns whether the failure is one of those (logged here). */
static bool note_unreachable(struct stream *s, int status, const char *msg)
{
    struct remote *r = s->r;
    bool counted = false, now_unreachable = false;
    pthread_mutex_lock(&r->mu);
    if ((status == SPW_RPC_UNAVAILABLE || status == SPW_RPC_DEADLINE_EXCEEDED) && s->rx_elements == 0) {
        counted = true;
        if (++s->failed_opens >= UNREACHABLE_AFTER && !s->unreachable[0]) {
            snprintf(s->unreachable, sizeof s->unreachable, "unreachable from client rank %d: %s: %.160s",
                     r->o.rank, spw_rpc_status_name(status), msg);
            now_unreachable = true;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (now_unreachable)
        spw_log(SPW_LOG_ERROR, "client", "cannot reach worker=%llu address=%s status=%s msg=\"%s\": told the "
                "dispatcher, which gives its part of job=%llu to the other producers", (unsigned long long)s->worker_id,
                s->addr, spw_rpc_status_name(status), msg, (unsigned long long)r->job.job);
    return counted;
}

static bool stream_stop(void *arg)
{
    return stream_done(arg);
}

/* A StreamRequest on the stream's call granting credit (the first one may ask for a data connection). */
static int grant(struct spw_channel *ch, const struct spw_stream_request *rq, int64_t credit, bool direct)
{
    uint8_t buf[128];
    const struct iovec iov = {buf, spw_stream_request_pack(rq, credit, direct, 0, buf, sizeof buf)};
    return iov.iov_len ? spw_channel_tell(ch, &iov, 1) : -EINVAL;
}

static void *stream_main(void *arg)
{
    struct stream *s = arg;
    struct remote *r = s->r;
    pthread_setname_np(pthread_self(), "spw-rx");
    struct spw_rpc_channel_opts co = {.auth_token = r->o.auth_token, .tls = r->o.tls};
    struct spw_rpc_channel *ch = NULL;
    struct spw_rpc_stream *st = NULL;
    struct spw_channel *chan = NULL;
    bool call_ended = false;
    struct intake_rx rx = {0};
    if (spw_rpc_channel_create(s->addr, &co, &ch) != 0 ||
        spw_rpc_stream_open(ch, SPW_PATH(STREAM_ELEMENTS), 0, &st) != 0)
        goto out;
    pthread_mutex_lock(&r->mu);
    s->st = st;
    s->job = r->job.job;
    s->secret = r->job.secret;
    pthread_mutex_unlock(&r->mu);
    const struct spw_stream_request rq = {.job = s->job, .secret = s->secret, .rank = r->o.rank,
                                          .incarnation = r->incarnation, .compress_level = r->o.compress_level};
    const struct spw_channel_opts o = {.call = st, .peer = s->addr, .stop = stream_stop, .stop_ctx = s,
                                       .max_message = SPW_RPC_DEFAULT_MAX_MESSAGE, .codec = &spw_stream_codec,
                                       .codec_ctx = (void *)&rq, .tls = r->direct_tls};
    /* A data connection has TLS where the stream does (never plaintext beside a TLS stream). */
    const bool ask_direct = !r->o.no_direct && !s->no_direct && (!spw_rpc_channel_tls(ch) || r->direct_tls);
    if (spw_channel_open(&o, s->addr, ask_direct, &chan) != 0)
        goto out;
    /* outstanding: bytes this worker may still send. Kept at this stream's share of the client's budget,
     * so all streams together stay within it as workers come and go. */
    int64_t share = credit_share(r), outstanding = share;
    if (grant(chan, &rq, share, ask_direct) != 0) {
        call_ended = true;      /* the call failed (e.g. the worker cannot be reached): its status says why */
        goto out;
    }
    while (!stream_done(s)) {
        struct spw_channel_msg m;
        char err[256];
        const int rc = spw_channel_recv(chan, 200, &m, err, sizeof err);
        s->no_direct = s->no_direct || spw_channel_offer_failed(chan);
        if (rc == -ETIMEDOUT)
            continue;
        call_ended = rc == 0;   /* the worker finished or the call failed: its status says which */
        if (rc == 0 || rc == -EPIPE || rc == -ECANCELED)
            break;
        int64_t elements = 0, dups = 0;
        const char *bad = rc == 1 ? intake_message(&r->in, &rx, s->job, m.parts, m.n, s->addr, &elements, &dups,
                                                   err, sizeof err)
                                  : err;
        const size_t len = m.len;
        spw_channel_msg_done(chan, &m);
        if (bad) {
            /* A worker that sends garbage is not trusted further: close its stream. Its splits complete
             * through re-leases or the head rescue; nothing is delivered from this message. */
            spw_log(SPW_LOG_ERROR, "client", "bad message from worker=%s err=\"%s\": closing its stream", s->addr,
                    bad);
            pthread_mutex_lock(&r->mu);
            r->stats.bad_messages++;
            pthread_mutex_unlock(&r->mu);
            break;
        }
        pthread_mutex_lock(&r->mu);
        r->stats.duplicates += dups;
        r->stats.bytes += (int64_t)len;
        s->failed_opens = 0;
        s->rx_elements += elements;
        s->rx_bytes += (int64_t)len;
        s->rx_cpu_ns = spw_thread_cpu_ns();
        pthread_mutex_unlock(&r->mu);
        outstanding -= (int64_t)len;
        share = credit_share(r);
        if (outstanding <= share / 2) {
            /* Parked elements are memory too: hold the worker back while too many wait for the window - a
             * worker that is ahead (its last message parked), not one making what the head batch waits for
             * (held too, a restarted dispatcher's leases of the next epoch to one worker stalled the head). */
            int64_t total, delivered, parked;
            for (asm_progress(r->a, &total, &delivered, &parked);
                 rx.parked > 0 && parked > r->o.park_cap_bytes && !stream_done(s);
                 asm_progress(r->a, &total, &delivered, &parked))
                usleep(20 * 1000);
            if (grant(chan, &rq, share - outstanding, false) != 0)
                break;
            outstanding = share;
        }
    }
out:
    spw_channel_destroy(chan);
    intake_rx_free(&rx);
    pthread_mutex_lock(&r->mu);
    s->st = NULL;
    pthread_mutex_unlock(&r->mu);
    if (st) {
        char msg[256] = "";
        if (!call_ended)
            spw_rpc_stream_cancel(st);
        int status = spw_rpc_stream_finish(st, msg, sizeof msg);
        const bool busy = call_ended && status == SPW_RPC_INVALID_ARGUMENT && strstr(msg, "already streaming");
        pthread_mutex_lock(&r->mu);
        s->busy_refusals = busy ? s->busy_refusals + 1 : 0;
        const bool quick = busy && s->rx_elements == 0 && s->busy_refusals <= BUSY_RETRIES;
        if (quick)
            s->started_ms -= 1000;  /* streams_start takes it at the next beat */
        pthread_mutex_unlock(&r->mu);
        if (call_ended && status != SPW_RPC_OK && !stopping(r) && !quick && !note_unreachable(s, status, msg))
            spw_log(SPW_LOG_WARN, "client", "stream from worker=%s ended status=%s msg=\"%s\"", s->addr,
                    spw_rpc_status_name(status), msg);
    }
    spw_rpc_channel_destroy(ch);
    pthread_mutex_lock(&r->mu);
    s->running = false;
    const long long received = (long long)s->rx_elements;
    pthread_mutex_unlock(&r->mu);
    spw_log(SPW_LOG_DEBUG, "client", "stream from worker=%s closed elements=%lld (in all)", s->addr, received);
    return NULL;
}

void streams_start(struct remote *r)
{
    for (int i = 0; i < r->n_streams; i++) {
        struct stream *s = &r->streams[i];
        if (s->running || !s->listed || r->stopping || spw_now_ms() - s->started_ms < 1000)
            continue;
        if (!s->joined) {
            pthread_mutex_unlock(&r->mu);
            pthread_join(s->tid, NULL);
            pthread_mutex_lock(&r->mu);
            s->joined = true;
        }
        s->running = true;
        s->joined = false;
        s->started_ms = spw_now_ms();
        if (pthread_create(&s->tid, NULL, stream_main, s) != 0) {
            s->running = false;
            s->joined = true;
        }
    }
}

void streams_update(struct remote *r, Spillway__V1__WorkerAddress **w, size_t n)
{
    bool was[MAX_STREAMS];
    for (int k = 0; k < r->n_streams; k++) {
        was[k] = r->streams[k].listed;
        r->streams[k].listed = false;
    }
    for (size_t i = 0; i < n; i++) {
        int k = 0;
        while (k < r->n_streams && strcmp(r->streams[k].addr, w[i]->address) != 0)
            k++;
        if (k == r->n_streams) {
            if (r->n_streams == MAX_STREAMS)
                continue;
            struct stream *s = &r->streams[r->n_streams++];
            memset(s, 0, sizeof *s);
            s->r = r;
            s->worker_id = w[i]->worker_id;
            s->joined = true;
            snprintf(s->addr, sizeof s->addr, "%s", w[i]->address);
            was[k] = false;
        }
        r->streams[k].listed = true;
    }
    for (int k = 0; k < r->n_streams; k++)
        if (was[k] != r->streams[k].listed)
            spw_log(SPW_LOG_DEBUG, "client", "worker %s job=%llu worker=%s", was[k] ? "left" : "joined",
                    (unsigned long long)r->job.job, r->streams[k].addr);
}
