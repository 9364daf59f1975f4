/* client/session.c - the client's session with the dispatcher (see remote.h, remote_internal.h): creating
 * or joining the job, the heartbeats (acks, progress, the worker list the streams follow), re-attaching a job
 * the dispatcher lost, and leases for the client's own threads. The streams are streams.c's.
 * Threads: the heartbeat thread; remote_lease from any; r->mu guards the stream table and stats. */
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
#include "pipeline/gpu_backend.h"

/* Threads whose CPU goes to receiving too: gRPC's own (its executor and event engine read the streams'
 * sockets) and the heartbeat thread, whose calls poll for every call on the channel. Measured
 * (docs/planner.md): about 30% of the client's CPU for remote elements runs there, not in spw-rx. */
static const char *const TRANSPORT_THREADS[] = {"spw-heartbeat", "default-execut", "event_engine", "grpc_",
                                                "resolver-execut", "timer_manager"};
static int live_remotes;    /* started in this process (atomic): each takes an equal part of gRPC's threads */

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
     * retried for dispatcher_wait_ms, logged once. */
    const int64_t wait_ms = o->dispatcher_wait_ms > 0 ? o->dispatcher_wait_ms : DISPATCHER_WAIT_MS;
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
        char hinted[600];
        snprintf(hinted, sizeof hinted, "%s%s", msg, spw_rpc_tls_hint(st, msg, spw_rpc_channel_tls(r->disp)));
        rc = create_err(st, err, errlen, "CreateJob", hinted);
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

/* This job's part of the transport threads' CPU so far (other jobs in the process share gRPC's threads;
 * the heartbeat threads are one per job, so the part is approximate there). */
static int64_t transport_cpu_ns(void)
{
    const int jobs = __atomic_load_n(&live_remotes, __ATOMIC_RELAXED);
    return spw_threads_cpu_ns(TRANSPORT_THREADS, (int)(sizeof TRANSPORT_THREADS / sizeof *TRANSPORT_THREADS)) /
           (jobs > 1 ? jobs : 1);
}

/* Share the transport threads' CPU since the last heartbeat (now at `transport`) among the streams, by the
 * elements each received meanwhile, so that each stream's reported CPU is its whole receiving cost. With
 * nothing received it goes to no stream (heartbeats, connecting). Call with r->mu held. */
static void share_transport(struct remote *r, int64_t transport)
{
    int64_t fresh = 0;
    for (int i = 0; i < r->n_streams; i++)
        fresh += r->streams[i].rx_elements - r->streams[i].transport_elements;
    const int64_t spent = transport - r->transport_seen;
    for (int i = 0; i < r->n_streams; i++) {
        struct stream *s = &r->streams[i];
        if (fresh > 0 && spent > 0)
            s->transport_ns += (int64_t)((double)spent * (double)(s->rx_elements - s->transport_elements) /
                                         (double)fresh);
        s->transport_elements = s->rx_elements;
    }
    r->transport_seen = transport;
}

/* One ClientHeartbeat carrying the acks the assembler has ready (and, with done, that the client is
 * closing). Returns the reply (caller frees) or NULL with the status in *st and the acks put back. Scratch
 * arrays hold MAX_ACKS_PER_HEARTBEAT. */
static Spillway__V1__ClientHeartbeatResponse *heartbeat(struct remote *r, struct asm_split *acks,
                                                        Spillway__V1__SplitRef *refs, Spillway__V1__SplitRef **ptrs,
                                                        bool done, int *st, char *msg, size_t msglen)
{
    int n = asm_take_acks(r->a, acks, MAX_ACKS_PER_HEARTBEAT);
    Spillway__V1__ClientHeartbeatRequest hb = SPILLWAY__V1__CLIENT_HEARTBEAT_REQUEST__INIT;
    hb.job = r->job.job;
    hb.job_secret = r->job.secret;
    hb.workers_digest = r->workers_digest;
    hb.rank = r->o.rank;
    hb.incarnation = r->incarnation;
    for (int i = 0; i < n; i++) {
        spillway__v1__split_ref__init(&refs[i]);
        refs[i].epoch = acks[i].epoch;
        refs[i].split = acks[i].split;
        ptrs[i] = &refs[i];
    }
    hb.n_acked = (size_t)n;
    hb.acked = ptrs;
    Spillway__V1__ProducerProgress own = SPILLWAY__V1__PRODUCER_PROGRESS__INIT;
    own.job = r->job.job;
    for (int i = 0; i < 2; i++)
        own.elements += r->o.own_counts[i] ? __atomic_load_n(r->o.own_counts[i], __ATOMIC_RELAXED) : 0;
    own.cpu_ns = r->o.own_cpu_ns ? __atomic_load_n(r->o.own_cpu_ns, __ATOMIC_RELAXED) : 0;
    Spillway__V1__SourceIo io = SPILLWAY__V1__SOURCE_IO__INIT;
    if (r->in.src && __atomic_load_n(&r->in.src->io.requests, __ATOMIC_RELAXED) > 0) {
        io.bytes = __atomic_load_n(&r->in.src->io.bytes, __ATOMIC_RELAXED);
        io.requests = __atomic_load_n(&r->in.src->io.requests, __ATOMIC_RELAXED);
        io.retries = __atomic_load_n(&r->in.src->io.retries, __ATOMIC_RELAXED);
        own.source = &io;
    }
    hb.own = &own;
    Spillway__V1__ProducerProgress own_gpu = SPILLWAY__V1__PRODUCER_PROGRESS__INIT;
    if (r->o.own_gpu) {
        struct spw_gpu_stats gs;
        spw_gpu_backend_stats(r->o.own_gpu, &gs);
        own_gpu.job = r->job.job;
        own_gpu.elements = gs.elements;
        hb.own_gpu = &own_gpu;
    }
    hb.done = done;
    hb.keep = done && __atomic_load_n(&r->o.keep_job, __ATOMIC_RELAXED);
    /* What arrived from each worker's stream: the dispatcher takes links' measured rates from these. */
    Spillway__V1__ProducerProgress rx[MAX_STREAMS], *rxp[MAX_STREAMS];
    const int64_t transport = transport_cpu_ns();
    pthread_mutex_lock(&r->mu);
    share_transport(r, transport);
    for (int i = 0; i < r->n_streams; i++) {
        spillway__v1__producer_progress__init(&rx[hb.n_received]);
        rx[hb.n_received].job = r->job.job;
        rx[hb.n_received].worker_id = r->streams[i].worker_id;
        rx[hb.n_received].elements = r->streams[i].rx_elements;
        rx[hb.n_received].bytes = r->streams[i].rx_bytes;
        rx[hb.n_received].cpu_ns = r->streams[i].rx_cpu_ns + r->streams[i].transport_ns;
        rxp[hb.n_received] = &rx[hb.n_received];
        hb.n_received++;
    }
    Spillway__V1__JobRefusal unreach[MAX_STREAMS], *unreachp[MAX_STREAMS];
    for (int i = 0; i < r->n_streams; i++)
        if (r->streams[i].unreachable[0]) {
            spillway__v1__job_refusal__init(&unreach[hb.n_unreachable]);
            unreach[hb.n_unreachable].job = r->job.job;
            unreach[hb.n_unreachable].worker_id = r->streams[i].worker_id;
            unreach[hb.n_unreachable].reason = r->streams[i].unreachable;  /* kept until the stream table goes */
            unreachp[hb.n_unreachable] = &unreach[hb.n_unreachable];
            hb.n_unreachable++;
        }
    hb.unreachable = unreachp;
    pthread_mutex_unlock(&r->mu);
    hb.received = rxp;
    /* The trainer's rate and how much of the time it waited for data (the planner trusts a measured rate
     * only while the prefetch buffer is rarely empty, i.e. the wait fraction is near 0). */
    if (r->o.consumed && r->o.wait_ns) {
        const struct trainer_sample now = {spw_now_ns(), __atomic_load_n(r->o.consumed, __ATOMIC_RELAXED),
                                           __atomic_load_n(r->o.wait_ns, __ATOMIC_RELAXED), spw_process_cpu_ns()};
        const struct trainer_sample *old = &r->hb_seen[r->hb_n % RATE_BEATS];  /* the oldest kept */
        if (r->hb_n < RATE_BEATS)
            old = &r->hb_seen[0];
        const double dt = (double)(now.ns - old->ns);
        if (r->hb_n && dt > 0) {
            hb.consumed_per_s = (double)(now.consumed - old->consumed) * 1e9 / dt;
            hb.wait_fraction = (double)(now.wait_ns - old->wait_ns) / dt;
            hb.cpu_cores = (double)(now.cpu_ns - old->cpu_ns) / dt;
            if (hb.wait_fraction > 1)
                hb.wait_fraction = 1;
        }
        r->hb_seen[r->hb_n++ % RATE_BEATS] = now;
    }
    uint8_t *resp = NULL;
    size_t len = 0;
    *st = spw_rpc_call_msg(r->disp, SPW_PATH(CLIENT_HEARTBEAT), &hb.base, 5000, &resp, &len, msg,
                           msglen);
    Spillway__V1__ClientHeartbeatResponse *hr =
        *st == SPW_RPC_OK ? spillway__v1__client_heartbeat_response__unpack(NULL, len, resp) : NULL;
    free(resp);
    if (!hr)
        asm_return_acks(r->a, acks, n);
    return hr;
}

/* The dispatcher no longer knows the job (it restarted without a journal, or gave its id to another job):
 * create it again from what the trainer has been given (a resume point, as a restarted trainer would), take
 * its new id and secret, and reopen the streams for it. Elements already held are deduplicated by the
 * assembler. Returns 0; -EAGAIN when the dispatcher could not be asked (try again later); another negative
 * code with why when it refused. Heartbeat thread only. */
static int reattach(struct remote *r, char *why, size_t whylen)
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
    spw_log(SPW_LOG_WARN, "client", "the dispatcher no longer knew job=%llu (restarted without --work-dir?): "
            "re-attached as job=%llu from epoch %llu with %zu splits of it delivered; what this client already "
            "holds is kept", (unsigned long long)old, (unsigned long long)cr->job, (unsigned long long)rr.epoch,
            rr.n_done);
    spillway__v1__create_job_response__free_unpacked(cr, NULL);
    return 0;
}

static void *heartbeat_main(void *arg)
{
    struct remote *r = arg;
    int64_t last_ok = spw_now_ms(), lost_since = 0;
    const int wait_ms = r->o.dispatcher_wait_ms > 0 ? r->o.dispatcher_wait_ms : DISPATCHER_WAIT_MS;
    pthread_setname_np(pthread_self(), "spw-heartbeat");
    pthread_mutex_lock(&r->mu);
    while (!r->stopping) {
        streams_start(r);
        struct timespec dl = spw_deadline_in_ms(HEARTBEAT_MS);
        pthread_cond_timedwait(&r->cv, &r->mu, &dl);
        if (r->stopping)
            break;
        if (r->hb_over)
            continue;
        pthread_mutex_unlock(&r->mu);
        /* A lost dispatcher: wait for its channel to connect, polling; with the elements on data connections
         * no other thread may be in a gRPC call to move the reconnect along (measured: the restarted
         * dispatcher found 2.4-10 s late, against 0.6-0.8 s with the streams on gRPC). */
        if (lost_since)
            spw_rpc_channel_wait_ready(r->disp, HEARTBEAT_MS);
        char msg[256] = "";
        int st;
        Spillway__V1__ClientHeartbeatResponse *hr =
            heartbeat(r, r->acks, r->refs, r->ptrs, false, &st, msg, sizeof msg);
        const int64_t now = spw_now_ms();
        if (!hr && (st == SPW_RPC_NOT_FOUND || st == SPW_RPC_PERMISSION_DENIED)) {
            char why[600];
            pthread_mutex_lock(&r->mu);
            const bool over = r->finished_seen;
            r->hb_over = over;
            pthread_mutex_unlock(&r->mu);
            if (over) {         /* removed after it finished: this client holds the rest, nothing to tell */
                spw_log(SPW_LOG_INFO, "client", "job=%llu left the dispatcher's table after it finished; no more "
                        "heartbeats", (unsigned long long)r->job.job);
            } else {
                const int rc = reattach(r, why, sizeof why);
                if (rc == 0)
                    last_ok = now;
                else if (rc != -EAGAIN) {
                    asm_fail(r->a, -ECONNABORTED, why);
                    r->hb_over = true;      /* read under mu below */
                }
            }
            pthread_mutex_lock(&r->mu);
            continue;
        }
        if (!hr) {
            if (st == SPW_RPC_FAILED_PRECONDITION) {
                /* Fenced (another incarnation took over): nothing more will come. */
                char why[400];
                snprintf(why, sizeof why, "the dispatcher ended this client's job: %s: %s", spw_rpc_status_name(st),
                         msg);
                asm_fail(r->a, -ECONNABORTED, why);
            } else if (now - last_ok > wait_ms) {
                char why[400];
                snprintf(why, sizeof why, "lost the dispatcher at %s: no heartbeat answered for %d s (last: %s: %s)",
                         r->o.dispatcher, wait_ms / 1000, spw_rpc_status_name(st), msg);
                asm_fail(r->a, -EIO, why);
            } else if (!lost_since) {
                lost_since = now;
                spw_log(SPW_LOG_WARN, "client", "the dispatcher at %s does not answer (%s: %s): retrying for up to "
                        "%d s; prefetched batches, streams and own threads go on", r->o.dispatcher,
                        spw_rpc_status_name(st), msg, wait_ms / 1000);
            }
            pthread_mutex_lock(&r->mu);
            continue;
        }
        last_ok = now;
        if (lost_since) {
            spw_log(SPW_LOG_INFO, "client", "the dispatcher answers again after %.1f s", (now - lost_since) / 1e3);
            lost_since = 0;
        }
        pthread_mutex_lock(&r->mu);
        if (!hr->workers_unchanged || !r->workers_digest) {       /* else the list it holds is the dispatcher's */
            streams_update(r, hr->workers, hr->n_workers);
            r->workers_digest = hr->workers_digest;
        }
        if (hr->client_only && !r->client_only)
            spw_log(SPW_LOG_INFO, "client", "job=%llu handed back to this client by re-planning: producing every "
                    "split here", (unsigned long long)r->job.job);
        r->client_only = r->client_only || hr->client_only;
        r->finished_seen = r->finished_seen || hr->finished;
        if (hr->no_worker[0] && strcmp(hr->no_worker, r->no_worker) != 0)
            spw_log(SPW_LOG_ERROR, "client", "no worker can serve job=%llu: %s", (unsigned long long)r->job.job,
                    hr->no_worker);
        snprintf(r->no_worker, sizeof r->no_worker, "%s", hr->no_worker);
        spillway__v1__client_heartbeat_response__free_unpacked(hr, NULL);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int remote_start(struct remote *r, struct assembler *a, const struct spw_element_ctx *ctx,
                 const struct spw_source *src, const struct spw_order *order)
{
    r->a = a;
    r->in = (struct intake){.a = a, .ctx = ctx, .src = src, .order = order, .job = &r->job,
                            .elements = &r->stats.elements};
    r->acks = malloc(sizeof *r->acks * MAX_ACKS_PER_HEARTBEAT);
    r->refs = malloc(sizeof *r->refs * MAX_ACKS_PER_HEARTBEAT);
    r->ptrs = malloc(sizeof *r->ptrs * MAX_ACKS_PER_HEARTBEAT);
    if (!r->acks || !r->refs || !r->ptrs)
        return -ENOMEM;
    __atomic_add_fetch(&live_remotes, 1, __ATOMIC_RELAXED);
    r->transport_seen = transport_cpu_ns();
    if (pthread_create(&r->hb_tid, NULL, heartbeat_main, r) != 0) {
        __atomic_sub_fetch(&live_remotes, 1, __ATOMIC_RELAXED);
        return -EAGAIN;
    }
    r->started = true;
    return 0;
}

int remote_lease(struct remote *r, struct remote_lease *l)
{
    Spillway__V1__LeaseSplitRequest req = SPILLWAY__V1__LEASE_SPLIT_REQUEST__INIT;
    pthread_mutex_lock(&r->mu);         /* re-attaching changes them */
    req.job = r->job.job;
    req.job_secret = r->job.secret;
    pthread_mutex_unlock(&r->mu);
    req.rank = r->o.rank;
    req.incarnation = r->incarnation;
    req.max_splits = 1;
    req.manifest_hash = r->o.manifest_hash;
    uint8_t *resp = NULL;
    size_t len = 0;
    int st = spw_rpc_call_msg(r->disp, SPW_PATH(LEASE_SPLIT), &req.base, 5000, &resp, &len, NULL, 0);
    Spillway__V1__LeaseSplitResponse *lr =
        st == SPW_RPC_OK ? spillway__v1__lease_split_response__unpack(NULL, len, resp) : NULL;
    free(resp);
    if (!lr)
        return -EIO;
    int got = 0;
    if (lr->n_leases >= 1 && lr->leases[0]->count > 0 && lr->leases[0]->first_position >= 0 &&
        lr->leases[0]->first_position + lr->leases[0]->count <= r->job.samples) {
        *l = (struct remote_lease){lr->leases[0]->epoch, lr->leases[0]->split, lr->leases[0]->first_position,
                                   lr->leases[0]->count};
        got = 1;
    } else if (lr->finished) {
        got = 2;
    }
    spillway__v1__lease_split_response__free_unpacked(lr, NULL);
    return got;
}

void remote_stats(struct remote *r, struct remote_stats *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->stats;
    out->elements = __atomic_load_n(&r->stats.elements, __ATOMIC_RELAXED);
    out->streams = 0;
    for (int i = 0; i < r->n_streams; i++)
        out->streams += r->streams[i].started_ms > 0;
    pthread_mutex_unlock(&r->mu);
}

bool remote_client_only(struct remote *r)
{
    pthread_mutex_lock(&r->mu);
    const bool only = r->client_only || r->no_worker[0];
    pthread_mutex_unlock(&r->mu);
    return only;
}

bool remote_no_worker(struct remote *r, char *why, size_t whylen)
{
    pthread_mutex_lock(&r->mu);
    const bool none = r->no_worker[0] != '\0';
    if (none)
        snprintf(why, whylen, "%s", r->no_worker);
    pthread_mutex_unlock(&r->mu);
    return none;
}

void remote_keep(struct remote *r)
{
    if (r)
        __atomic_store_n(&r->o.keep_job, true, __ATOMIC_RELAXED);
}

void remote_destroy(struct remote *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    pthread_cond_broadcast(&r->cv);
    for (int i = 0; i < r->n_streams; i++)
        if (r->streams[i].st)
            spw_rpc_stream_cancel(r->streams[i].st);
    pthread_mutex_unlock(&r->mu);
    if (r->started) {
        pthread_join(r->hb_tid, NULL);
        __atomic_sub_fetch(&live_remotes, 1, __ATOMIC_RELAXED);
    }
    for (int i = 0; i < r->n_streams; i++)
        if (!r->streams[i].joined)
            pthread_join(r->streams[i].tid, NULL);
    if (r->started) {
        /* Report the last complete splits (a finished job is finished at the dispatcher too) and that this
         * client is gone (an unfinished one stops occupying the workers). */
        int st;
        Spillway__V1__ClientHeartbeatResponse *hr = heartbeat(r, r->acks, r->refs, r->ptrs, true, &st, NULL, 0);
        if (hr)
            spillway__v1__client_heartbeat_response__free_unpacked(hr, NULL);
    }
    free(r->acks);
    free(r->refs);
    free(r->ptrs);
    free(r->pipeline);
    spw_rpc_channel_destroy(r->disp);
    spw_rpc_shutdown();
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}
