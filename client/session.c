/* client/session.c - the client's session with the dispatcher once its job exists (see remote.h,
 * remote_internal.h): the heartbeats (acks, progress, the worker list the streams follow; a lost job is
 * re-attached by attach.c), leases for the client's own threads, and the end. The streams are streams.c's.
 * Threads: the heartbeat thread; remote_lease from any; r->mu guards the stream table and stats. */
#include "client/remote_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "pipeline/gpu_backend.h"

/* Threads whose CPU goes to receiving too: gRPC's own (its executor and event engine read the streams'
 * sockets) and the heartbeat thread, whose calls poll for every call on the channel. Measured
 * (docs/planner.md): about 30% of the client's CPU for remote elements runs there, not in spw-rx. */
static const char *const TRANSPORT_THREADS[] = {"spw-heartbeat", "default-execut", "event_engine", "grpc_",
                                                "resolver-execut", "timer_manager"};
static int live_remotes;    /* started in this process (atomic): each takes an equal part of gRPC's threads */

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
                                           __atomic_load_n(r->o.wait_ns, __ATOMIC_RELAXED), spw_process_cpu_ns(),
                                           r->o.starved_ns ? __atomic_load_n(r->o.starved_ns, __ATOMIC_RELAXED) : 0};
        const struct trainer_sample *old = &r->hb_seen[r->hb_n % RATE_BEATS];  /* the oldest kept */
        if (r->hb_n < RATE_BEATS)
            old = &r->hb_seen[0];
        const double dt = (double)(now.ns - old->ns);
        if (r->hb_n && dt > 0) {
            hb.consumed_per_s = (double)(now.consumed - old->consumed) * 1e9 / dt;
            hb.wait_fraction = (double)(now.wait_ns - old->wait_ns) / dt;
            hb.cpu_cores = (double)(now.cpu_ns - old->cpu_ns) / dt;
            hb.cpu_starved_fraction = (double)(now.starved_ns - old->starved_ns) / dt;
            if (hb.wait_fraction > 1)
                hb.wait_fraction = 1;
            if (hb.cpu_starved_fraction > 1 - hb.wait_fraction)
                hb.cpu_starved_fraction = 1 - hb.wait_fraction;
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
        /* The dispatcher's job is behind what this client acked (its journal lost records, --journal-recover):
         * rejoin it from what the trainer was given, which moves its epochs on (a resume). */
        const bool behind = !hr && st == SPW_RPC_INVALID_ARGUMENT && strstr(msg, "has no open split");
        if (!hr && (st == SPW_RPC_NOT_FOUND || st == SPW_RPC_PERMISSION_DENIED || behind)) {
            char why[600];
            pthread_mutex_lock(&r->mu);
            const bool over = r->finished_seen && !behind;
            r->hb_over = over;
            pthread_mutex_unlock(&r->mu);
            if (over) {         /* removed after it finished: this client holds the rest, nothing to tell */
                spw_log(SPW_LOG_INFO, "client", "job=%llu left the dispatcher's table after it finished; no more "
                        "heartbeats", (unsigned long long)r->job.job);
            } else {
                const int rc = session_reattach(r, why, sizeof why);
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
    /* Data connections carry TLS where the calls do: the same CA (and certificate, under mutual TLS). */
    const struct spw_rpc_tls *tls = r->o.tls ? r->o.tls : spw_rpc_channel_tls_default();
    char err[256];
    if (tls && tls->ca_pem && spw_direct_tls_create(tls, false, &r->direct_tls, err, sizeof err) != 0)
        spw_log(SPW_LOG_WARN, "client", "%s: elements come on the gRPC streams", err);
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
    spw_direct_tls_destroy(r->direct_tls);  /* after the streams whose connections use it */
    spw_rpc_shutdown();
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}
