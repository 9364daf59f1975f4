/* client/remote.c - the dispatcher session and the worker streams (see remote.h). Each stream thread
 * receives ElementBatch messages against byte credit, checks every field a worker controls, claims each
 * position in the assembler (the first copy wins), runs the suffix groups when the element arrived before
 * the end of the pipeline, and copies the result once, into its batch slot.
 * Threads: heartbeat thread, one per stream; the struct's mutex guards the stream table and stats. */
#include "client/remote.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/direct.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "pipeline/compress.h"
#include "pipeline/element_size.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/op_registry.h"
#include "pipeline/produce.h"
#include "pipeline/wire.h"

#define MAX_STREAMS 64
#define MIN_STREAM_CREDIT ((int64_t)4 << 20)    /* a worker sends a message only when it fits its credit */
#define HEARTBEAT_MS 200
#define CAP_WAIT_MS 10000           /* CreateJob refused at a cap of unfinished jobs: retried this long */
#define DISPATCHER_WAIT_MS 300000      /* remote_opts.dispatcher_wait_ms 0 */
#define MAX_ACKS_PER_HEARTBEAT 4096
#define RATE_BEATS 10               /* the trainer's rate is reported over the last 10 heartbeats (2 s): a
                                     * beat's 200 ms sees whole batches only, 0 or 1 or 2 of them */

struct stream {
    struct remote *r;
    uint64_t worker_id;
    uint64_t job, secret;       /* the job the stream was opened for (a re-attached job has another id) */
    char addr[256];
    pthread_t tid;
    bool running;               /* the thread is live */
    bool joined;                /* no thread to join */
    bool listed;                /* in the dispatcher's latest worker list */
    int64_t started_ms;
    struct spw_rpc_stream *st;  /* while open; guarded by r->mu for cancel */
    int64_t rx_elements, rx_bytes;  /* received from this worker so far (r->mu), for the heartbeats */
    int64_t rx_cpu_ns;          /* this stream's thread's CPU so far: receiving, the suffix, the copy (r->mu) */
    int64_t transport_ns;       /* its share of the transport threads' CPU so far (heartbeat thread only) */
    int64_t transport_elements; /* rx_elements when that share was last given (heartbeat thread only) */
    int failed_opens;           /* streams in a row that ended unreachable with nothing received (r->mu) */
    bool no_direct;             /* a data connection to this worker could not be opened: streams stay on gRPC
                                   (stream thread only) */
    char unreachable[256];      /* non-empty: this worker cannot be reached from here, and why (r->mu) */
};

/* A listed worker whose streams fail this many times in a row (one try a second) with nothing received is
 * unreachable from this client: logged once and reported to the dispatcher. */
#define UNREACHABLE_AFTER 2

/* Threads whose CPU goes to receiving too: gRPC's own (its executor and event engine read the streams'
 * sockets) and the heartbeat thread, whose calls poll for every call on the channel. Measured
 * (docs/planner.md): about 30% of the client's CPU for remote elements runs there, not in spw-rx. */
static const char *const TRANSPORT_THREADS[] = {"spw-heartbeat", "default-execut", "event_engine", "grpc_",
                                                "resolver-execut", "timer_manager"};
static int live_remotes;    /* started in this process (atomic): each takes an equal part of gRPC's threads */

struct remote {
    struct remote_opts o;
    struct remote_job job;
    uint64_t incarnation;
    struct spw_rpc_channel *disp;
    struct assembler *a;
    const struct spw_element_ctx *ctx;
    const struct spw_source *src;
    const struct spw_order *order;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping, started;
    bool client_only;                   /* the dispatcher handed the job back: no worker serves it */
    bool finished_seen;                 /* a heartbeat said the job is finished at the dispatcher */
    bool hb_over;                       /* the dispatcher removed the finished job: no more heartbeats */
    uint8_t *pipeline;                  /* the job's Pipeline, packed: re-attaching creates it again */
    size_t pipeline_len;
    char no_worker[256];                /* non-empty: every alive worker refused the job; the dispatcher's why */
    uint64_t workers_digest;            /* of the worker list last received by heartbeat (0: none) */
    pthread_t hb_tid;
    struct stream streams[MAX_STREAMS];
    int n_streams;
    struct remote_stats stats;
    struct asm_split *acks;             /* heartbeat scratch (MAX_ACKS_PER_HEARTBEAT each) */
    Spillway__V1__SplitRef *refs;
    Spillway__V1__SplitRef **ptrs;
    struct trainer_sample {             /* the trainer's counters at the last RATE_BEATS heartbeats */
        int64_t ns, consumed, wait_ns, cpu_ns;
    } hb_seen[RATE_BEATS];
    int hb_n;
    int64_t transport_seen;             /* the transport threads' CPU when last shared out (heartbeat thread) */
};

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

/* ---- elements ---- */

/* A received message in the parts gRPC holds it in, and a scratch buffer for an element that spans parts. */
struct received;
static const uint8_t *contiguous(struct received *rx, size_t off, size_t len);

struct received {
    const struct iovec *parts;
    int n;
    uint8_t *msg;               /* a message from a data connection, whole (kept from one to the next) */
    size_t msg_cap;
    struct iovec msg_part;
    uint8_t *scratch;
    size_t scratch_cap;
    uint8_t *raw;               /* a compressed message's elements, decompressed (reused) */
    size_t raw_cap;
    struct iovec raw_part;      /* parts then point here */
    struct spw_zstd *z;         /* made at the first compressed message */
};

/* A compressed data tensor checked frame by frame and decompressed into rx->raw; the message is then read
 * from there as if it had come raw (one more copy of the elements' bytes, only on compressed streams).
 * Returns NULL or why the message is refused. */
static const char *decompress_into(struct received *rx, struct spw_wire_tensor *t, char *err, size_t errlen)
{
    const uint8_t *z = contiguous(rx, t->offset, t->nbytes);
    if (!z)
        return "out of memory for a compressed message";
    if (rx->raw_cap < t->raw_bytes) {           /* raw_bytes <= SPW_WIRE_MAX_RAW_BYTES (checked at decode) */
        uint8_t *nr = realloc(rx->raw, t->raw_bytes);
        if (!nr)
            return "out of memory for a compressed message";
        rx->raw = nr;
        rx->raw_cap = t->raw_bytes;
    }
    if (!rx->z && spw_zstd_create(0, &rx->z) != 0)
        return "out of memory for a compressed message";
    const size_t n = (size_t)t->shape[0];
    if (spw_zstd_decompress(rx->z, z, t->nbytes, n, t->raw_bytes / n, rx->raw, err, errlen) != 0)
        return err;
    rx->raw_part = (struct iovec){rx->raw, t->raw_bytes};
    rx->parts = &rx->raw_part;
    rx->n = 1;
    t->offset = 0;
    t->nbytes = t->raw_bytes;
    t->data = rx->raw;
    t->encoding = SPW_WIRE_RAW;
    return NULL;
}

/* The element's bytes contiguous: in place, or gathered into the scratch buffer. NULL: out of memory. */
static const uint8_t *contiguous(struct received *rx, size_t off, size_t len)
{
    const uint8_t *p = spw_wire_view(rx->parts, rx->n, off, len, NULL);
    if (p)
        return p;
    if (rx->scratch_cap < len) {
        uint8_t *ns = realloc(rx->scratch, len);
        if (!ns)
            return NULL;
        rx->scratch = ns;
        rx->scratch_cap = len;
    }
    spw_wire_copy(rx->parts, rx->n, off, len, rx->scratch);
    return rx->scratch;
}

/* A view of element i of a received tensor, its bytes at p, as an engine value (not owned). */
static struct spw_value view_of(const struct spw_wire_tensor *t, const uint8_t *data)
{
    struct spw_value v = {.placed = true};
    const size_t eb = t->nbytes / (size_t)t->shape[0];
    uint8_t *p = (uint8_t *)data;
    if (t->dtype == SPW_DTYPE_U8 && t->ndim == 4 && t->shape[3] == 3) {
        v.img = (struct spw_image){.w = (int)t->shape[2], .h = (int)t->shape[1], .c = 3,
                                   .stride = (size_t)t->shape[2] * 3, .data = p};
    } else {
        v.is_tensor = true;
        v.t.dtype = t->dtype;
        v.t.ndim = t->ndim - 1;
        memcpy(v.t.shape, t->shape + 1, sizeof(int64_t) * (size_t)(t->ndim - 1));
        v.t.nbytes = eb;
        v.t.data = p;
    }
    return v;
}

/* An owned copy of a view. */
static int own(const struct spw_value *view, struct spw_value *out)
{
    memset(out, 0, sizeof *out);
    if (view->is_tensor) {
        if (spw_tensor_alloc(&out->t, view->t.dtype, view->t.ndim, view->t.shape) != 0)
            return -ENOMEM;
        memcpy(out->t.data, view->t.data, view->t.nbytes);
        out->is_tensor = true;
        return 0;
    }
    if (spw_image_alloc(&out->img, view->img.w, view->img.h, 3) != 0)
        return -ENOMEM;
    memcpy(out->img.data, view->img.data, (size_t)view->img.w * view->img.h * 3);
    return 0;
}

/* Whether group g's first op only reads its input (normalize / to_tensor write a new tensor), so it may run
 * on bytes it does not own. Image ops may work in place or free their input. */
static bool reads_input_only(const struct spw_element_ctx *ctx, int g)
{
    return spw_op_def(ctx->spec->ops[ctx->groups[g].first].kind)->cls == SPW_OPC_TO_TENSOR;
}

/* A sample could not be made (here, or on worker `from`): log it naming its file, and fail the job under
 * on_error fail. */
static void sample_failed(struct remote *r, int64_t sample, int rc, const char *err, const char *from)
{
    const struct spw_producer p = {.spec = r->ctx->spec, .src = r->src, .ctx = r->ctx, .component = "client",
                                   .job = r->job.job};
    char msg[1024];
    if (spw_produce_failed(&p, sample, rc, err, from, msg, sizeof msg))
        asm_fail(r->a, rc, msg);
}

/* The end of take_element: v (made by rc's run) handed to the assembler, a failure logged (an empty value parks
 * as a skipped sample). */
static bool finish_taken(struct remote *r, int64_t sample, struct asm_ticket *t, enum asm_claim c, int rc,
                         struct spw_value *v, const char *err)
{
    if (rc != 0) {
        sample_failed(r, sample, rc, rc == -ENOMEM && !err[0] ? "out of memory" : err, NULL);
        spw_value_free(v);
    }
    asm_finish(r->a, t, c, v, rc == 0, &r->stats.elements);
    spw_value_free(v);
    return true;
}

/* Finish one received element: claim it, run the suffix if any, put it in its batch (or park it).
 * Returns false for a duplicate. */
static bool take_element(struct remote *r, struct received *rx, const struct spw_wire_batch *b, size_t i)
{
    struct asm_ticket t;
    enum asm_claim c = asm_claim(r->a, b->epoch, b->positions[i], &t);
    if (c == ASM_DUP || c == ASM_DROP)
        return c == ASM_DROP;
    const enum spw_layout layout = r->ctx->spec->batch.layout;
    const struct spw_wire_tensor *wt = &b->tensors[0];
    const size_t eb = wt->nbytes / (size_t)wt->shape[0], off = wt->offset + i * eb;
    char err[256] = "";
    int rc = 0;
    struct spw_value shape_only = view_of(wt, NULL), v = {0};
    if (b->cut == r->job.groups && c == ASM_PLACE && (shape_only.is_tensor || layout == SPW_LAYOUT_HWC)) {
        /* The one copy: from the received parts straight into the batch. */
        enum spw_dtype dt;
        int ndim;
        int64_t shape[SPW_TENSOR_MAX_DIMS];
        spw_value_out_shape(&shape_only, layout, &dt, &ndim, shape);
        uint8_t *dst = asm_dst(r->a, &t, dt, ndim, shape);
        if (dst)
            spw_wire_copy(rx->parts, rx->n, off, eb, dst);
        struct spw_value written = {.placed = true};
        asm_finish(r->a, &t, c, &written, dst != NULL, &r->stats.elements);
        return true;
    }
    if (b->cut < r->job.groups && !shape_only.is_tensor && spw_element_rows_group(r->ctx, b->cut)) {
        /* What is left is the pipeline's last normalize: it reads the rows where they arrived (a 150 KB
         * image spans three of gRPC's 64 KB slices; no gather) and writes into the batch. */
        struct asm_place place;
        struct spw_element_dest dest = asm_element_dest(r->a, &t, &place);
        rc = spw_element_run_rows(r->ctx, b->cut, shape_only.img.w, shape_only.img.h, rx->parts, rx->n, off, &v,
                                  c == ASM_PLACE ? &dest : NULL, err, sizeof err);
        return finish_taken(r, b->samples[i], &t, c, rc, &v, err);
    }
    const uint8_t *bytes = contiguous(rx, off, eb);
    if (!bytes) {
        asm_finish(r->a, &t, c, &v, false, NULL);
        asm_fail(r->a, -ENOMEM, "out of memory receiving an element");
        return true;
    }
    struct spw_value view = view_of(wt, bytes);
    if (b->cut == r->job.groups && c == ASM_PLACE) {
        struct spw_value in = view;     /* copied once, into the batch; the message stays the owner */
        in.placed = false;
        asm_finish(r->a, &t, c, &in, true, &r->stats.elements);
        return true;
    }
    struct asm_place place;
    struct spw_element_dest dest = asm_element_dest(r->a, &t, &place);
    if (b->cut == 0)        /* the encoded file: the whole pipeline runs here */
        rc = spw_element_run(r->ctx, 0, r->job.groups, b->epoch, b->samples[i], view.t.data, view.t.nbytes, &v,
                             NULL, c == ASM_PLACE ? &dest : NULL, err, sizeof err);
    else if (b->cut < r->job.groups && c == ASM_PLACE && reads_input_only(r->ctx, b->cut)) {
        /* The suffix reads the element where it arrived (its first op makes a new tensor and leaves its input
         * alone): no copy. */
        v = view;
        rc = spw_element_run(r->ctx, b->cut, r->job.groups, b->epoch, b->samples[i], NULL, 0, &v, NULL, &dest, err,
                             sizeof err);
    } else if ((rc = own(&view, &v)) == 0 && b->cut < r->job.groups) {
        rc = spw_element_run(r->ctx, b->cut, r->job.groups, b->epoch, b->samples[i], NULL, 0, &v, NULL, NULL, err,
                             sizeof err);
    }
    return finish_taken(r, b->samples[i], &t, c, rc, &v, err);
}

/* Check what a worker controls before trusting it: the job, the cut, the counts and sizes, and that each
 * position's sample is the one the epoch order puts there. Returns NULL or the reason. */
static const char *check_batch(const struct remote *r, uint64_t job, const struct spw_wire_batch *b)
{
    if (b->job != job)
        return "message for another job";
    if (b->cut < 0 || b->cut > r->job.groups)
        return "cut outside the pipeline's groups";
    if (b->n_samples != b->n_positions)
        return "positions and samples differ in count";
    if (b->n_positions && (b->n_tensors < 1 || b->tensors[0].ndim < 2 ||
                           b->tensors[0].shape[0] != (int64_t)b->n_positions ||
                           b->tensors[0].raw_bytes % b->n_positions != 0))
        return "tensor does not hold one element per position";
    if (b->n_positions) {
        const struct spw_wire_tensor *t = &b->tensors[0];
        size_t elem = spw_dtype_size(t->dtype);
        for (int d = 1; d < t->ndim; d++)
            elem *= (size_t)t->shape[d];
        if (elem == 0 || t->raw_bytes / b->n_positions != elem)
            return "element size does not match its shape";
        /* Where the pipeline fixes an element's size at this cut (a crop, a two-sided resize), a worker's
         * element must have it: one the pipeline cannot have made would reach a batch of other shapes and
         * fail the job. */
        int64_t fixed;
        int op;
        const struct spw_group *last = b->cut > 0 ? &r->ctx->groups[b->cut - 1] : NULL;
        if (last && spw_element_fixed_bytes(r->ctx->spec, last->first + last->count, &fixed, &op) &&
            (int64_t)elem != fixed)
            return "element size is not what the pipeline makes at this cut";
    }
    for (size_t i = 0; i < b->n_positions; i++) {
        if (b->positions[i] < 0 || b->positions[i] >= r->job.samples)
            return "position outside the epoch";
        if (spw_order_at(r->order, b->epoch, b->positions[i]) != b->samples[i])
            return "sample does not match the epoch order (different seed or manifest?)";
    }
    for (size_t i = 0; i < b->n_tombstones; i++)
        if (b->tombstones[i] < 0 || b->tombstones[i] >= r->job.samples)
            return "tombstone outside the epoch";
    return NULL;
}

/* Tombstone i of a worker's message: the sample is skipped (or, under on_error fail, fails the job) unless
 * another producer delivered it already. */
static void take_tombstone(struct remote *r, const struct spw_wire_batch *b, size_t i, const char *from)
{
    struct asm_ticket t;
    const int64_t pos = b->tombstones[i];
    enum asm_claim c = asm_claim(r->a, b->epoch, pos, &t);
    if (c == ASM_PLACE || c == ASM_PARK) {
        const char *why = i < b->n_tombstone_errors && b->tombstone_errors[i][0] ? b->tombstone_errors[i]
                                                                                   : "no reason given";
        sample_failed(r, spw_order_at(r->order, b->epoch, pos), SPW_ESOURCE, why, from);
    }
    if (c == ASM_PLACE) {
        asm_done(r->a, &t, false);
    } else if (c == ASM_PARK) {
        struct spw_value none = {0};
        asm_park(r->a, &t, &none);
    }
}

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

/* A StreamRequest granting credit; the first one also asks for a data connection (direct), an answer to
 * the offer of one says whether it was made (state). */
static int send_request(struct spw_rpc_stream *st, const struct stream *s, int64_t credit, bool direct,
                        Spillway__V1__DirectState state)
{
    const struct remote *r = s->r;
    Spillway__V1__StreamRequest req = SPILLWAY__V1__STREAM_REQUEST__INIT;
    uint8_t buf[128];
    req.job = s->job;
    req.job_secret = s->secret;
    req.rank = r->o.rank;
    req.incarnation = r->incarnation;
    req.credit_bytes = credit;
    req.compress_level = r->o.compress_level;
    req.direct = direct;
    req.direct_state = state;
    struct iovec iov = {buf, spillway__v1__stream_request__pack(&req, buf)};
    return spw_rpc_stream_send(st, &iov, 1);
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

/* The worker's offer of a data connection (the stream's first message, when asked): connect and present its
 * ticket, and tell the worker whether that worked. Returns the connection's fd, -1 to go on with the gRPC
 * stream, or -2 when the stream failed. */
static int take_offer(struct stream *s, struct spw_rpc_stream *st, const struct spw_wire_batch *b)
{
    char err[256];
    int fd = -1;
    const int rc = spw_direct_connect(s->addr, (int)b->direct_port, b->direct_ticket, 2000, &fd, err, sizeof err);
    if (rc != 0) {
        s->no_direct = true;
        spw_log(SPW_LOG_WARN, "client", "worker=%s: %s: its elements come on the gRPC stream instead", s->addr, err);
    }
    if (send_request(st, s, 0, false, rc == 0 ? SPILLWAY__V1__DIRECT_STATE__DIRECT_CONNECTED
                                             : SPILLWAY__V1__DIRECT_STATE__DIRECT_FAILED) != 0) {
        if (fd >= 0)
            close(fd);
        return -2;
    }
    if (fd >= 0)
        spw_log(SPW_LOG_DEBUG, "client", "worker=%s: elements on a data connection to port %u", s->addr,
                b->direct_port);
    return fd;
}

/* The next message on a data connection, whole, into rx's kept buffer: 1, -ETIMEDOUT (none yet), 0 (the
 * worker closed it), -EPIPE (closed mid-message), SPW_EFORMAT / SPW_ETOOBIG (err says why), or another
 * negative code. */
static int recv_direct(struct stream *s, int fd, struct received *rx, size_t *len, char *err, size_t errlen)
{
    int rc = spw_direct_next(fd, 200, SPW_RPC_DEFAULT_MAX_MESSAGE, len, stream_stop, s, err, errlen);
    if (rc != 1)
        return rc;
    if (*len > rx->msg_cap) {           /* <= the cap, checked in spw_direct_next */
        uint8_t *nm = realloc(rx->msg, *len);
        if (!nm)
            return -ENOMEM;
        rx->msg = nm;
        rx->msg_cap = *len;
    }
    if ((rc = spw_direct_read(fd, rx->msg, *len, stream_stop, s)) != 0)
        return rc;
    rx->msg_part = (struct iovec){rx->msg, *len};
    rx->parts = &rx->msg_part;
    rx->n = 1;
    return 1;
}

static void *stream_main(void *arg)
{
    struct stream *s = arg;
    struct remote *r = s->r;
    pthread_setname_np(pthread_self(), "spw-rx");
    struct spw_rpc_channel_opts co = {.auth_token = r->o.auth_token, .tls = r->o.tls};
    struct spw_rpc_channel *ch = NULL;
    struct spw_rpc_stream *st = NULL;
    bool call_ended = false;
    struct received rx = {0};
    int fd = -1;                /* the data connection, once the worker's offer is taken */
    bool closed = false;        /* the worker closed it between messages: its call ends with a status */
    if (spw_rpc_channel_create(s->addr, &co, &ch) != 0 ||
        spw_rpc_stream_open(ch, SPW_PATH(STREAM_ELEMENTS), 0, &st) != 0)
        goto out;
    pthread_mutex_lock(&r->mu);
    s->st = st;
    s->job = r->job.job;
    s->secret = r->job.secret;
    pthread_mutex_unlock(&r->mu);
    /* A data connection is plaintext: asked for only where the stream is too. */
    const bool ask_direct = !r->o.no_direct && !s->no_direct && !spw_rpc_channel_tls(ch);
    /* outstanding: bytes this worker may still send. Kept at this stream's share of the client's budget,
     * so all streams together stay within it as workers come and go. */
    int64_t share = credit_share(r), outstanding = share;
    if (send_request(st, s, share, ask_direct, SPILLWAY__V1__DIRECT_STATE__DIRECT_UNSET) != 0) {
        call_ended = true;      /* the call failed (e.g. the worker cannot be reached): its status says why */
        goto out;
    }
    for (int64_t messages = 0; !stream_done(s);) {
        struct spw_rpc_msg *m = NULL;
        size_t len;
        char err[256];
        const char *bad = NULL;
        if (fd >= 0) {
            int rc = recv_direct(s, fd, &rx, &len, err, sizeof err);
            if (rc == -ETIMEDOUT)
                continue;
            if (rc == SPW_EFORMAT || rc == SPW_ETOOBIG || rc == -ENOMEM) {
                bad = rc == -ENOMEM ? "out of memory for a message" : err;
            } else if (rc != 1) {
                /* The worker closed it (between messages, or mid-message: it died or stopped; nothing of a
                 * message cut short is used), or stopping: the call's status says why. */
                closed = rc != -ECANCELED;
                if (closed && rc != 0)
                    spw_log(SPW_LOG_WARN, "client", "the data connection from worker=%s broke mid-message (%s): "
                            "closing its stream", s->addr, strerror(-rc));
                break;
            }
        } else {
            int rc = spw_rpc_stream_recv_parts(st, 200, &m);
            if (rc == -ETIMEDOUT)
                continue;
            if (rc != 1) {
                call_ended = true;      /* the worker finished or the call failed: its status says which */
                break;
            }
            rx.parts = spw_rpc_msg_parts(m, &rx.n, &len);
        }
        const bool first = messages++ == 0;
        struct spw_wire_batch b;
        if (!bad && spw_wire_decode_parts(rx.parts, rx.n, &b, err, sizeof err) != 0) {
            bad = err;
        } else if (!bad && b.direct_port) {
            const bool asked = first && ask_direct && fd < 0;     /* an offer comes first, once, if asked */
            if (asked)
                fd = take_offer(s, st, &b);
            spw_wire_batch_free(&b);
            if (!asked) {
                bad = "a data connection offered unasked";
            } else {
                spw_rpc_msg_free(m);
                if (fd == -2)
                    break;
                continue;
            }
        } else if (!bad && ((bad = check_batch(r, s->job, &b)) != NULL ||
                            (b.n_positions && b.tensors[0].encoding == SPW_WIRE_ZSTD &&
                             (bad = decompress_into(&rx, &b.tensors[0], err, sizeof err)) != NULL))) {
            spw_wire_batch_free(&b);
        }
        if (bad) {
            /* A worker that sends garbage is not trusted further: close its stream. Its splits complete
             * through re-leases or the head rescue; nothing is delivered from this message. */
            spw_log(SPW_LOG_ERROR, "client", "bad message from worker=%s err=\"%s\": closing its stream", s->addr,
                    bad);
            spw_rpc_msg_free(m);
            pthread_mutex_lock(&r->mu);
            r->stats.bad_messages++;
            pthread_mutex_unlock(&r->mu);
            break;
        }
        int64_t dups = 0;
        const int64_t n_elements = (int64_t)b.n_positions;
        for (size_t i = 0; i < b.n_positions; i++)
            dups += !take_element(r, &rx, &b, i);
        for (size_t i = 0; i < b.n_tombstones; i++)
            take_tombstone(r, &b, i, s->addr);
        spw_wire_batch_free(&b);
        spw_rpc_msg_free(m);
        pthread_mutex_lock(&r->mu);
        r->stats.duplicates += dups;
        r->stats.bytes += (int64_t)len;
        s->failed_opens = 0;
        s->rx_elements += n_elements;
        s->rx_bytes += (int64_t)len;
        s->rx_cpu_ns = spw_thread_cpu_ns();
        pthread_mutex_unlock(&r->mu);
        outstanding -= (int64_t)len;
        share = credit_share(r);
        if (outstanding <= share / 2) {
            /* Parked elements are memory too: hold the worker back while too many wait for the window. */
            int64_t total, delivered, parked;
            for (asm_progress(r->a, &total, &delivered, &parked); parked > r->o.park_cap_bytes && !stream_done(s);
                 asm_progress(r->a, &total, &delivered, &parked))
                usleep(20 * 1000);
            if (send_request(st, s, share - outstanding, false, SPILLWAY__V1__DIRECT_STATE__DIRECT_UNSET) != 0)
                break;
            outstanding = share;
        }
    }
    if (closed) {
        /* The worker closed the data connection and ends the call, whose status says why. */
        struct spw_rpc_msg *m;
        int rc;
        while ((rc = spw_rpc_stream_recv_parts(st, stream_done(s) ? 1 : 2000, &m)) == 1)
            spw_rpc_msg_free(m);
        call_ended = rc != -ETIMEDOUT;
    }
out:
    if (fd >= 0)
        close(fd);
    free(rx.scratch);
    free(rx.raw);
    free(rx.msg);
    spw_zstd_destroy(rx.z);
    pthread_mutex_lock(&r->mu);
    s->st = NULL;
    pthread_mutex_unlock(&r->mu);
    if (st) {
        char msg[256] = "";
        if (!call_ended)
            spw_rpc_stream_cancel(st);
        int status = spw_rpc_stream_finish(st, msg, sizeof msg);
        if (call_ended && status != SPW_RPC_OK && !stopping(r) && !note_unreachable(s, status, msg))
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

/* Start a stream thread for every listed worker that has none. Called with r->mu held. */
static void start_streams(struct remote *r)
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

/* Merge the dispatcher's worker list into the stream table. Called with r->mu held. */
static void update_workers(struct remote *r, Spillway__V1__WorkerAddress **w, size_t n)
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
    if (r->src && __atomic_load_n(&r->src->io.requests, __ATOMIC_RELAXED) > 0) {
        io.bytes = __atomic_load_n(&r->src->io.bytes, __ATOMIC_RELAXED);
        io.requests = __atomic_load_n(&r->src->io.requests, __ATOMIC_RELAXED);
        io.retries = __atomic_load_n(&r->src->io.retries, __ATOMIC_RELAXED);
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
    update_workers(r, cr->workers, cr->n_workers);   /* streams of the old job end by themselves (stream_done) */
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
        start_streams(r);
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
            update_workers(r, hr->workers, hr->n_workers);
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
    r->ctx = ctx;
    r->src = src;
    r->order = order;
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
