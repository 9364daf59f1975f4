/* worker/stream.c - the StreamElements handler (see jobs.h): a client's rank shows its job's secret, gets a
 * channel (lib/channel.h: on the call, or on a data connection when it asked and one could be made) and
 * drains its rank's queue of the job's outbox against the credit it grants; a message it took but could not
 * send goes back to the queue's head (test failpoint stream-send:N:cut cuts the Nth send). Threads: one per
 * stream (the RPC server's); w->mu to find the job, which it holds a reference to. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/channel.h"
#include "lib/clock.h"
#include "lib/failpoint.h"
#include "lib/log.h"
#include "pipeline/compress.h"
#include "pipeline/stream_msgs.h"
#include "worker/jobs_internal.h"

static bool job_stopping(void *arg)
{
    struct job *jb = arg;
    pthread_mutex_lock(&jb->mu);
    bool s = jb->stopping;
    pthread_mutex_unlock(&jb->mu);
    return s;
}

int wrk_jobs_stream(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen)
{
    struct wrk_jobs *w = ctx;
    uint8_t *in = NULL;
    size_t inlen = 0;
    const int64_t t0 = spw_now_ms();
    if (spw_rpc_stream_recv(st, SHOW_SECRET_MS, &in, &inlen) != 1) {
        snprintf(msg, msglen, "expected a StreamRequest with the job's secret within %d ms", SHOW_SECRET_MS);
        return SPW_RPC_PERMISSION_DENIED;
    }
    Spillway__V1__StreamRequest *req = spillway__v1__stream_request__unpack(NULL, inlen, in);
    free(in);
    if (!req) {
        snprintf(msg, msglen, "malformed StreamRequest");
        return SPW_RPC_INVALID_ARGUMENT;
    }
    uint64_t job = req->job, secret = req->job_secret;
    int rank = req->rank, level = req->compress_level;
    const bool want_direct = req->direct;
    int64_t credit = req->credit_bytes;
    spillway__v1__stream_request__free_unpacked(req, NULL);
    if (level != 0 && (level < SPW_ZSTD_MIN_LEVEL || level > SPW_ZSTD_MAX_LEVEL)) {
        snprintf(msg, msglen, "compress_level %d: use 0 (raw) or a zstd level %d..%d", level, SPW_ZSTD_MIN_LEVEL,
                 SPW_ZSTD_MAX_LEVEL);
        return SPW_RPC_INVALID_ARGUMENT;
    }
    /* The job may reach this worker's task list a heartbeat after the client connects (want_tasks asks for
     * that heartbeat now): wait for it, but a stream that has not shown a valid secret SHOW_SECRET_MS after
     * it opened is closed (a slot is not held for a job this worker may never see; the client opens another
     * a second later). */
    struct job *same_id;
    pthread_mutex_lock(&w->mu);
    struct job *jb = wrk_find_job(w, job, secret, &same_id);
    if (!jb && w->o.want_tasks) {
        pthread_mutex_unlock(&w->mu);
        w->o.want_tasks(w->o.want_tasks_ctx);
        pthread_mutex_lock(&w->mu);
    }
    for (;;) {
        jb = wrk_find_job(w, job, secret, &same_id);
        const int64_t left = SHOW_SECRET_MS - (spw_now_ms() - t0);
        if (jb || left <= 0) {
            jb = jb ? jb : same_id;     /* same_id: the caller does not know this job's secret */
            break;
        }
        struct timespec dl = spw_deadline_in_ms(left < 100 ? left : 100);
        pthread_cond_timedwait(&w->cv, &w->mu, &dl);
    }
    if (jb && (jb->secret ^ secret) != 0) {
        pthread_mutex_unlock(&w->mu);
        spw_log(SPW_LOG_WARN, "worker", "refused a stream for job=%llu rank=%d from peer=%s: wrong job secret",
                (unsigned long long)job, rank, spw_rpc_current_peer());
        snprintf(msg, msglen, "job %llu: wrong job secret (an id alone grants nothing)", (unsigned long long)job);
        return SPW_RPC_PERMISSION_DENIED;
    }
    if (jb)
        jb->refs++;
    for (int r = 0; !jb && r < w->n_refused; r++)
        if (w->refused[r].job == job) {
            snprintf(msg, msglen, "this worker cannot serve job %llu: %s", (unsigned long long)job,
                     w->refused[r].reason);
            pthread_mutex_unlock(&w->mu);
            return SPW_RPC_FAILED_PRECONDITION;
        }
    pthread_mutex_unlock(&w->mu);
    if (!jb) {
        snprintf(msg, msglen, "this worker does not serve job %llu (not within %d ms of the stream's start)",
                 (unsigned long long)job, SHOW_SECRET_MS);
        return SPW_RPC_NOT_FOUND;
    }
    int status = SPW_RPC_OK;
    const int at = wrk_outbox_attach(jb->out, rank, level);
    if (at != 0) {
        snprintf(msg, msglen, "rank %d is outside the job's world of %d or already streaming", rank, jb->world);
        status = SPW_RPC_INVALID_ARGUMENT;
        goto out;
    }
    char peer[64];
    snprintf(peer, sizeof peer, "job=%llu rank=%d", (unsigned long long)job, rank);
    const struct spw_stream_request rq = {.job = job};
    const struct spw_channel_opts co = {.call = st, .peer = peer, .stop = job_stopping, .stop_ctx = jb,
                                        .codec = &spw_stream_codec, .codec_ctx = (void *)&rq};
    struct spw_channel *chan = NULL;
    if (spw_channel_accept(&co, w->o.direct, want_direct, &credit, &chan, msg, msglen) != 0)
        status = SPW_RPC_UNAVAILABLE;
    else
        wrk_outbox_set_direct(jb->out, rank, !strcmp(spw_channel_kind(chan), "direct"));
    wrk_outbox_credit(jb->out, rank, credit);
    while (chan) {
        bool stopped;
        struct wrk_msg *m = wrk_outbox_take(jb->out, rank, credit, 100, &stopped);
        if (stopped)
            break;
        if (m) {
            char fp[16];
            const bool cut = spw_failpoint("stream-send", fp, sizeof fp);
            if (cut || spw_channel_send(chan, m->iov, m->iovcnt) != 0) {
                wrk_outbox_put_back(jb->out, rank, m);    /* the client is gone: for its next stream */
                spw_log(cut ? SPW_LOG_WARN : SPW_LOG_INFO, "worker",
                        "stream to %s lost%s: its message of %lld elements kept for the rank's next stream", peer,
                        cut ? " (failpoint stream-send)" : "", (long long)m->elements);
                if (cut) {
                    snprintf(msg, msglen, "failpoint stream-send: the stream cut after a message was taken");
                    status = SPW_RPC_UNAVAILABLE;
                }
                break;
            }
            credit -= (int64_t)m->bytes;
            wrk_outbox_credit(jb->out, rank, credit);
            __atomic_add_fetch(&jb->sent_elements, (int64_t)m->elements, __ATOMIC_RELAXED);
            __atomic_add_fetch(&jb->sent_bytes, (int64_t)m->bytes, __ATOMIC_RELAXED);
            wrk_msg_free(m);
            continue;
        }
        /* Nothing sendable: wait for credit (or the client's end). */
        int r = spw_channel_hear(chan, 100, &in, &inlen);
        if (r == -ETIMEDOUT)
            continue;
        if (r != 1)
            break;
        Spillway__V1__StreamRequest *more = spillway__v1__stream_request__unpack(NULL, inlen, in);
        free(in);
        if (more) {
            credit += more->credit_bytes;
            wrk_outbox_credit(jb->out, rank, credit);
            spillway__v1__stream_request__free_unpacked(more, NULL);
        }
    }
    spw_channel_destroy(chan);     /* a data connection's client reads its end, then this call's status */
    wrk_outbox_detach(jb->out, rank);
out:
    pthread_mutex_lock(&w->mu);
    jb->refs--;
    pthread_mutex_unlock(&w->mu);
    return status;
}
