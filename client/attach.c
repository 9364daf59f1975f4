/* client/attach.c - the two ways the client gets its job from the dispatcher (see remote.h,
 * remote_internal.h): CreateJob at the start (create, join a named job, or be told to run it alone), and
 * again from what the trainer was given when the dispatcher lost the job (re-attach).
 * Threads: remote_create the caller's; session_reattach the heartbeat thread's. */
#include "client/remote_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "pipeline/compress.h"

static int create_err(int st, char *err, size_t errlen, const char *what, const char *msg)
{
    snprintf(err, errlen, "%s: %s: %s", what, spw_rpc_status_name(st), msg);
    return st == SPW_RPC_UNAVAILABLE || st == SPW_RPC_DEADLINE_EXCEEDED ? -EIO : -ECONNREFUSED;
}

int remote_create(const struct remote_opts *o, const Spillway__V1__Pipeline *pipe, struct remote **out,
                  struct remote_job *job, char *err, size_t errlen)
{
    memset(job, 0, sizeof *job);
    *out = NULL;
    struct remote *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->o = *o;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    /* Incarnations only grow: a restarted rank (a later wall-clock ns) fences its predecessor, which the
     * dispatcher refuses from then on; the random low bits tell apart two started in the same microsecond. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint16_t salt = 0;
    if (getrandom(&salt, sizeof salt, 0) != sizeof salt)
        salt = (uint16_t)getpid();
    r->incarnation = ((uint64_t)now.tv_sec * 1000000 + (uint64_t)now.tv_nsec / 1000) << 10 | (salt & 1023u) | 1u;
    struct spw_rpc_channel_opts co = {.auth_token = o->auth_token, .tls = o->tls};
    spw_rpc_init();
    if (spw_rpc_channel_create(o->dispatcher, &co, &r->disp) != 0) {
        snprintf(err, errlen, "bad dispatcher address \"%s\"", o->dispatcher);
        spw_rpc_shutdown();
        free(r);
        return -EINVAL;
    }
    Spillway__V1__CreateJobRequest cj = SPILLWAY__V1__CREATE_JOB_REQUEST__INIT;
    cj.pipeline = (Spillway__V1__Pipeline *)pipe;
    cj.protocol_version = SPW_PROTOCOL_VERSION;
    cj.build = (char *)spw_build_version();
    cj.cut = o->cut;
    cj.local_cores = o->local_cores;
    cj.max_workers = o->max_workers;
    cj.incarnation = r->incarnation;
    cj.split_size = o->split_size;
    cj.client = (Spillway__V1__ClientFacts *)o->facts;
    cj.rank = o->rank;
    cj.world_size = o->world_size;
    cj.job_name = (char *)(o->job_name ? o->job_name : "");
    cj.manifest_hash = o->manifest_hash;    /* the dispatcher takes the listing it gave, not listing again */
    Spillway__V1__Resume resume = SPILLWAY__V1__RESUME__INIT;
    if (o->resume) {
        resume.job = o->resume->job;
        resume.job_secret = o->resume->job_secret;
        resume.epoch = o->resume->epoch;
        resume.n_done_splits = o->resume->n_done;
        resume.done_splits = (uint64_t *)o->resume->done;
        cj.resume = &resume;
    }
    uint8_t *resp = NULL;
    size_t len = 0;
    char msg[512] = "";
    /* A dispatcher not up yet (a trainer pod that starts first), restarting, or busy ("retry later") is
     * retried for dispatcher_wait_ms, logged once; by default 30 s before a job exists (a wrong address
     * fails fast), the long wait for a resumed one. */
    const int64_t wait_ms = o->dispatcher_wait_ms > 0 ? o->dispatcher_wait_ms
                            : o->resume && o->resume->job ? DISPATCHER_WAIT_MS
                                                       : CREATE_WAIT_MS;
    const int64_t t0 = spw_now_ms();
    int st, backoff_ms = 100;
    bool cancelled = false;
    for (;;) {
        st = spw_rpc_call_msg(r->disp, SPW_PATH(CREATE_JOB), &cj.base, 30000, &resp, &len, msg,
                              sizeof msg);
        /* A cap of unfinished jobs: those of a trainer killed a moment ago make room once silent for 3 s
         * (dispatcher/create_job.c): worth a few seconds, not the dispatcher's whole wait. */
        const bool capped = st == SPW_RPC_RESOURCE_EXHAUSTED && strstr(msg, "is ended to make room") &&
                            spw_now_ms() - t0 + backoff_ms <= CAP_WAIT_MS;
        const bool transient = st == SPW_RPC_UNAVAILABLE || st == SPW_RPC_DEADLINE_EXCEEDED || capped ||
                               (st == SPW_RPC_RESOURCE_EXHAUSTED && strstr(msg, "retry later"));
        if (!transient || spw_now_ms() - t0 + backoff_ms > wait_ms)
            break;
        if (backoff_ms == 100)
            spw_log(SPW_LOG_WARN, "client", "dispatcher %s does not take the job yet (%s: %s): retrying for up to "
                    "%lld s", o->dispatcher, spw_rpc_status_name(st), msg, (long long)wait_ms / 1000);
        if ((cancelled = spw_sleep_unless(backoff_ms, o->cancel)))
            break;
        backoff_ms = backoff_ms < 2000 ? 2 * backoff_ms : 2000;
    }
    Spillway__V1__CreateJobResponse *cr = st == SPW_RPC_OK ? spillway__v1__create_job_response__unpack(NULL, len, resp)
                                                           : NULL;
    free(resp);
    int rc = 0;
    if (cancelled) {
        snprintf(err, errlen, "interrupted while the dispatcher %s did not take the job (%s: %s)", o->dispatcher,
                 spw_rpc_status_name(st), msg);
        rc = -ECANCELED;
        goto fail;
    }
    if (st != SPW_RPC_OK) {
        char hinted[600], what[300];
        snprintf(hinted, sizeof hinted, "%s%s", msg, spw_rpc_tls_hint(st, msg, spw_rpc_channel_tls(r->disp)));
        snprintf(what, sizeof what, "CreateJob at the dispatcher %s (%lld s)", o->dispatcher,
                 (long long)(spw_now_ms() - t0) / 1000);
        rc = create_err(st, err, errlen, what, hinted);
        goto fail;
    }
    if (cr && cr->plan) {
        job->planned = true;
        job->offload = cr->plan->offload;
        job->predicted = cr->plan->throughput;
        job->local_share = cr->plan->local_share;
        for (size_t k = 0; k < cr->plan->n_candidates; k++)
            if (cr->plan->candidates[k]->cut == cr->plan->cut) {
                job->remote_cores = cr->plan->candidates[k]->remote * cr->plan->candidates[k]->client_ns / 1e9;
            }
        snprintf(job->why, sizeof job->why, "%s", cr->plan->why ? cr->plan->why : "");
    }
    if (r->o.compress_level == REMOTE_COMPRESS_PLANNED)     /* resolved once: re-creations keep it */
        r->o.compress_level = cr && cr->plan && cr->plan->offload && cr->plan->compress_level >= SPW_ZSTD_MIN_LEVEL &&
                              cr->plan->compress_level <= SPW_ZSTD_MAX_LEVEL ? cr->plan->compress_level : 0;
    job->compress_level = r->o.compress_level;
    if (cr && cr->job == 0 && cr->plan && !cr->plan->offload) {
        spw_log(SPW_LOG_INFO, "client", "planned: running in this process why=\"%s\"", job->why);
        rc = REMOTE_RUN_LOCALLY;
        goto fail;
    }
    if (!cr || cr->samples <= 0 || cr->split_size <= 0 || cr->splits_per_epoch <= 0 || cr->groups < 0 ||
        cr->cut < 0 || cr->cut > cr->groups) {
        snprintf(err, errlen, "CreateJob: malformed reply from the dispatcher");
        rc = -EPROTO;
        goto fail;
    }
    if (cr->manifest_hash != o->manifest_hash) {
        snprintf(err, errlen,
                 "the dispatcher lists the dataset as %016llx but this client sees %016llx: the client and the "
                 "service must see the same files",
                 (unsigned long long)cr->manifest_hash, (unsigned long long)o->manifest_hash);
        rc = -ECONNREFUSED;
        goto fail;
    }
    r->pipeline_len = spillway__v1__pipeline__get_packed_size(pipe);
    if (!(r->pipeline = malloc(r->pipeline_len ? r->pipeline_len : 1))) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto fail;
    }
    spillway__v1__pipeline__pack(pipe, r->pipeline);
    job->job = cr->job;
    job->secret = cr->job_secret;
    job->samples = cr->samples;
    job->splits_per_epoch = cr->splits_per_epoch;
    job->split_size = cr->split_size;
    job->cut = cr->cut;
    job->groups = cr->groups;
    job->open_epoch = cr->open_epoch;
    r->job = *job;
    for (size_t i = 0; i < cr->n_workers && r->n_streams < MAX_STREAMS; i++) {
        struct stream *s = &r->streams[r->n_streams++];
        s->r = r;
        s->worker_id = cr->workers[i]->worker_id;
        snprintf(s->addr, sizeof s->addr, "%s", cr->workers[i]->address);
        s->joined = s->listed = true;
    }
    spillway__v1__create_job_response__free_unpacked(cr, NULL);
    spw_log(SPW_LOG_INFO, "client", "job created job=%llu samples=%lld cut=%d groups=%d workers=%d",
            (unsigned long long)r->job.job, (long long)r->job.samples, r->job.cut, r->job.groups, r->n_streams);
    *out = r;
    return 0;
fail:
    if (cr)
        spillway__v1__create_job_response__free_unpacked(cr, NULL);
    spw_rpc_channel_destroy(r->disp);
    spw_rpc_shutdown();
    free(r->pipeline);
    free(r);
    return rc;
}

/* The dispatcher no longer knows the job (it restarted without a journal, or gave its id to another job):
 * create it again from what the trainer has been given (a resume point, as a restarted trainer would), take
 * its new id and secret, and reopen the streams for it. Elements already held are deduplicated by the
 * assembler. Returns 0; -EAGAIN when the dispatcher could not be asked (try again later); another negative
 * code with why when it refused. Heartbeat thread only. */
int session_reattach(struct remote *r, char *why, size_t whylen)
{
    struct remote_resume rr = {0};
    uint64_t *done = NULL;
    int rc = r->o.delivered ? r->o.delivered(r->o.delivered_ctx, &rr, &done) : -ENOTSUP;
    if (rc) {
        snprintf(why, whylen, "cannot tell what was delivered (%s)", spw_strerror(rc));
        return rc;
    }
    const uint64_t old = r->job.job;
    rr.job = old;
    rr.job_secret = r->job.secret;
    Spillway__V1__Pipeline *pipe = spillway__v1__pipeline__unpack(NULL, r->pipeline_len, r->pipeline);
    Spillway__V1__CreateJobRequest cj = SPILLWAY__V1__CREATE_JOB_REQUEST__INIT;
    cj.pipeline = pipe;
    cj.protocol_version = SPW_PROTOCOL_VERSION;
    cj.build = (char *)spw_build_version();
    cj.cut = r->job.cut;                    /* as it ran: no new plan */
    cj.local_cores = r->o.local_cores;
    cj.max_workers = r->o.max_workers;
    cj.incarnation = r->incarnation;
    cj.split_size = r->job.split_size;
    cj.rank = r->o.rank;
    cj.world_size = r->o.world_size;
    cj.job_name = (char *)(r->o.job_name ? r->o.job_name : "");
    cj.manifest_hash = r->o.manifest_hash;
    Spillway__V1__Resume resume = SPILLWAY__V1__RESUME__INIT;
    resume.job = rr.job;
    resume.job_secret = rr.job_secret;
    resume.epoch = rr.epoch;
    resume.n_done_splits = rr.n_done;
    resume.done_splits = done;
    cj.resume = &resume;
    uint8_t *resp = NULL;
    size_t len = 0;
    char msg[512] = "";
    const int st = pipe ? spw_rpc_call_msg(r->disp, SPW_PATH(CREATE_JOB), &cj.base, 30000, &resp,
                                           &len, msg, sizeof msg) : SPW_RPC_INTERNAL;
    spillway__v1__pipeline__free_unpacked(pipe, NULL);
    free(done);
    Spillway__V1__CreateJobResponse *cr = st == SPW_RPC_OK ? spillway__v1__create_job_response__unpack(NULL, len, resp)
                                                           : NULL;
    free(resp);
    if (st == SPW_RPC_UNAVAILABLE || st == SPW_RPC_DEADLINE_EXCEEDED || st == SPW_RPC_RESOURCE_EXHAUSTED)
        return -EAGAIN;
    if (!cr || !cr->job || cr->manifest_hash != r->o.manifest_hash || cr->samples != r->job.samples ||
        cr->split_size != r->job.split_size || cr->splits_per_epoch != r->job.splits_per_epoch) {
        snprintf(why, whylen, "the dispatcher lost job %llu and did not take it back: %s",
                 (unsigned long long)old, st != SPW_RPC_OK ? msg : cr && !cr->job ? "it planned no offload"
                                                                            : "another job came back");
        if (cr)
            spillway__v1__create_job_response__free_unpacked(cr, NULL);
        return -ECONNABORTED;
    }
    asm_reack(r->a, rr.epoch);          /* the new job must hear what this client already holds */
    pthread_mutex_lock(&r->mu);
    r->job.job = cr->job;
    r->job.secret = cr->job_secret;
    r->job.open_epoch = cr->open_epoch;
    r->finished_seen = false;
    streams_update(r, cr->workers, cr->n_workers);   /* streams of the old job end by themselves (stream_done) */
    r->workers_digest = 0;
    pthread_mutex_unlock(&r->mu);
    if (cr->job == old && cr->job_secret == rr.job_secret)
        spw_log(SPW_LOG_WARN, "client", "the dispatcher's job=%llu was behind this client (a journal that lost "
                "records?): rejoined it from epoch %llu with %zu splits of it delivered", (unsigned long long)old,
                (unsigned long long)rr.epoch, rr.n_done);
    else
        spw_log(SPW_LOG_WARN, "client", "the dispatcher no longer knew job=%llu (restarted without --work-dir?): "
                "re-attached as job=%llu from epoch %llu with %zu splits of it delivered; what this client "
                "already holds is kept", (unsigned long long)old, (unsigned long long)cr->job,
                (unsigned long long)rr.epoch, rr.n_done);
    spillway__v1__create_job_response__free_unpacked(cr, NULL);
    return 0;
}
