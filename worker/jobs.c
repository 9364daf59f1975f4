/* worker/jobs.c - job runtimes, producers and the StreamElements handler (see jobs.h). Each job has
 * `threads` producer threads; each (job, rank) a bounded queue of encoded messages. One mutex per job guards
 * its queues; the job list has its own mutex. A message's bytes are owned by the queue until sent. */
#include "worker/jobs.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/channel.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/heap.h"
#include "lib/log.h"
#include "lib/methods.h"
#include "pipeline/backend.h"
#include "pipeline/compress.h"
#include "pipeline/element.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/manifest.h"
#include "pipeline/mb_queue.h"
#include "pipeline/order.h"
#include "pipeline/produce.h"
#include "pipeline/python_op.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "pipeline/stream_msgs.h"
#include "pipeline/wire.h"

#define MSG_TARGET_BYTES (1u << 20)
#define MICROBATCH 16                       /* samples a backend makes at a time */
#define GPU_MB 4                            /* ... when a GPU shares the job (FusionFlow's micro-batch) */
#define MBQ_LOW 8                           /* fewer micro-batches queued than this: lease another split */
#define MBQ_CAP 16384
#define LEASE_AHEAD 2                       /* splits a producer holds: the one it works on and the next */
#define TRIM_WHILE_STOPPING (128 << 10)     /* glibc's default */
/* A queue holds about this long of what its stream sent lately (at least QUEUE_MIN_BYTES, at most
 * --buffer-mb): enough to keep a stream busy, short enough that an epoch's last elements are not stuck
 * behind seconds of the next one on a slow link while the client's own threads could make them. */
#define QUEUE_AHEAD_NS 1000000000LL
#define QUEUE_MIN_BYTES ((size_t)4 << 20)
#define DRAIN_WINDOW_NS 500000000LL         /* the drain rate is measured over windows this long */
#define MAX_THREADS 64
#define SHOW_SECRET_MS 1000                 /* a stream shows a known job's secret by then, or is closed */

struct msg {                    /* one encoded ElementBatch: iovecs over scratch + data + labels */
    struct msg *next;
    uint8_t *scratch, *data;    /* owned; data holds the elements raw or compressed */
    int64_t *labels;            /* owned */
    struct iovec iov[1 + 2 * SPW_WIRE_MAX_TENSORS];
    int iovcnt;
    size_t bytes;
    size_t elements;
};

struct queue {
    struct msg *head, *tail;
    size_t bytes;
    bool attached;              /* a client stream is draining it */
    bool direct;                /* ... on a data connection */
    int64_t credit;             /* the attached stream's unspent credit (atomic; metrics) */
    int compress_level;         /* the attached stream's zstd level, 0 = raw (atomic; read by producers) */
    size_t cap;                 /* producers wait above this (queue_drained sets it) */
    size_t window_bytes;        /* sent since window_ns */
    int64_t window_ns;
};

struct job {
    struct job *next;
    uint64_t id, manifest_hash;
    uint64_t secret;            /* a client's StreamRequest must carry it (JobTask.job_secret) */
    int cut, world;
    struct wrk_jobs *owner;
    struct spw_pipeline_spec *spec;
    struct spw_source *src;
    struct spw_element_ctx ctx;
    struct spw_producer prod;   /* reads, runs and logs failures the way every producer does */
    struct spw_order order;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct queue *queues;       /* world */
    bool stopping, finished;
    int refs;                   /* producers + streams using it */
    pthread_t tids[MAX_THREADS];
    int n_tids;
    int64_t sent_elements, sent_bytes;  /* delivered to clients (atomic) */
    int held_splits;            /* leased by its producers and not yet queued whole (atomic) */
    int64_t failures[SPW_FAIL_KINDS];   /* samples skipped or failed, by reason (atomic; prod.failures) */
    int64_t *group_ns, *group_elements; /* ctx.n_groups: time and elements per fusion group (prod's, atomic) */
    struct spw_mb_queue *mbq;   /* with a GPU producer: the micro-batches of leased splits, by encoded size */
};

struct refusal {                /* a listed job this worker cannot serve, and why */
    uint64_t job;
    char reason[256];
};

struct wrk_jobs {
    struct wrk_jobs_opts o;
    char *dispatcher, *token;
    struct spw_rpc_channel *ch;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *jobs;           /* linked and unlinked only on the registration thread, under mu */
    uint64_t worker_id, worker_secret;
    struct {                    /* final counts of stopped jobs, reported in the next heartbeat once */
        uint64_t job;
        int64_t elements, bytes;
        struct spw_shard_stats io;
    } retired[16];
    int n_retired;
    struct refusal *refused;    /* changed only on the registration thread (wrk_jobs_update), under mu */
    int n_refused;
    int draining;               /* atomic: producers lease nothing new (wrk_jobs_drain) */
    struct spw_backend *gpu;    /* --gpu: one more producer per job makes micro-batches on it (NULL: none) */
    int64_t zstd_in, zstd_out;  /* element bytes compressed for clients, all jobs, and what they became
                                   (atomic; metrics) */
};

static void msg_free(struct msg *m)
{
    if (!m)
        return;
    free(m->scratch);
    free(m->data);
    free(m->labels);
    free(m);
}

/* ---- producing ---- */

struct builder {                /* elements of one split being packed into a message */
    struct spw_wire_batch b;
    int64_t positions[SPW_WIRE_MAX_ELEMENTS / 64], samples[SPW_WIRE_MAX_ELEMENTS / 64];
    int64_t tombstones[SPW_WIRE_MAX_ELEMENTS / 64];
    char *tombstone_errors[SPW_WIRE_MAX_ELEMENTS / 64];     /* owned; freed at flush */
    uint8_t *data;              /* stacked element data (handed to the message at flush) */
    size_t data_cap;
    int64_t labels[SPW_WIRE_MAX_ELEMENTS / 64];
    size_t elem_bytes, cap_elems, n;
    enum spw_dtype dtype;
    int ndim;
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    int slot_err;               /* why element_slot last returned NULL: -ENOMEM or SPW_ETOOBIG */
    size_t slot_bytes;          /* the element size it was asked for */
    struct spw_zstd *z;         /* this producer's compression context, at level z_level */
    int z_level;
};

static void builder_release(struct builder *bd)
{
    free(bd->data);
    spw_zstd_destroy(bd->z);
}

/* The stacked elements of bd compressed at level into a new buffer (*zlen bytes), when that saves at least
 * 1/32 of them; NULL otherwise (send them raw). */
static uint8_t *compress_elements(struct job *jb, struct builder *bd, int level, size_t *zlen)
{
    if (bd->z_level != level) {
        spw_zstd_destroy(bd->z);
        bd->z = NULL;
        bd->z_level = 0;
        if (spw_zstd_create(level, &bd->z) != 0)
            return NULL;
        bd->z_level = level;
    }
    const size_t raw = bd->n * bd->elem_bytes, cap = spw_zstd_bound(bd->n, bd->elem_bytes);
    uint8_t *z = malloc(cap);
    *zlen = z ? spw_zstd_compress(bd->z, bd->data, bd->n, bd->elem_bytes, z, cap) : 0;
    if (!*zlen || *zlen > raw - raw / 32) {
        free(z);
        return NULL;
    }
    __atomic_add_fetch(&jb->owner->zstd_in, (int64_t)raw, __ATOMIC_RELAXED);
    __atomic_add_fetch(&jb->owner->zstd_out, (int64_t)*zlen, __ATOMIC_RELAXED);
    return z;
}

/* A stream sent `bytes` from q: re-measure its drain rate once a window has passed, and size the queue to
 * QUEUE_AHEAD_NS of it. Under jb->mu. */
static void queue_drained(struct job *jb, struct queue *q, size_t bytes)
{
    const int64_t now = spw_now_ns();
    if (!q->window_ns)
        q->window_ns = now;
    q->window_bytes += bytes;
    if (now - q->window_ns < DRAIN_WINDOW_NS)
        return;
    const double ahead = (double)q->window_bytes * QUEUE_AHEAD_NS / (double)(now - q->window_ns);
    const double limit = (double)jb->owner->o.queue_bytes;
    q->cap = ahead < (double)QUEUE_MIN_BYTES ? QUEUE_MIN_BYTES : ahead > limit ? (size_t)limit : (size_t)ahead;
    q->window_bytes = 0;
    q->window_ns = now;
}

/* The bytes producers may queue for q now: cap 0 is before any stream drained it (the client is
 * connecting); --buffer-mb bounds it in any case. Under jb->mu. */
static size_t queue_cap(const struct job *jb, const struct queue *q)
{
    const size_t cap = q->cap ? q->cap : QUEUE_MIN_BYTES;
    return cap < jb->owner->o.queue_bytes ? cap : jb->owner->o.queue_bytes;
}

static void queue_push(struct job *jb, int rank, struct msg *m)
{
    pthread_mutex_lock(&jb->mu);
    struct queue *q = &jb->queues[rank];
    while (!jb->stopping && q->bytes > queue_cap(jb, q))
        pthread_cond_wait(&jb->cv, &jb->mu);
    if (jb->stopping) {
        pthread_mutex_unlock(&jb->mu);
        msg_free(m);
        return;
    }
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    q->bytes += m->bytes;
    pthread_cond_broadcast(&jb->cv);
    pthread_mutex_unlock(&jb->mu);
}

/* Encode what the builder holds as one message for its split's rank, and reset it. The message takes the
 * builder's data buffer (the builder starts a new one), so element bytes are written once on this side. */
static int flush(struct job *jb, struct builder *bd, bool end)
{
    struct spw_wire_batch *b = &bd->b;
    b->n_positions = b->n_samples = bd->n;
    b->tombstone_errors = bd->tombstone_errors;
    b->n_tombstone_errors = b->n_tombstones;
    b->end_of_split = end;
    b->n_tensors = 0;
    struct msg *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    if (bd->n) {
        const int level = __atomic_load_n(&jb->queues[b->split % (uint64_t)jb->world].compress_level,
                                          __ATOMIC_RELAXED);
        size_t zlen = 0;
        if (level > 0 && (m->data = compress_elements(jb, bd, level, &zlen)) != NULL) {
            /* the builder keeps its raw buffer for the next message */
        } else {
            m->data = bd->data;
            bd->data = NULL;
        }
        m->labels = malloc(bd->n * 8);
        if (!m->labels) {
            msg_free(m);
            return -ENOMEM;
        }
        memcpy(m->labels, bd->labels, bd->n * 8);
        b->n_tensors = 2;
        b->tensors[0] = (struct spw_wire_tensor){.dtype = bd->dtype, .ndim = bd->ndim + 1, .data = m->data,
                                                 .nbytes = zlen ? zlen : bd->n * bd->elem_bytes,
                                                 .encoding = zlen ? SPW_WIRE_ZSTD : SPW_WIRE_RAW};
        b->tensors[0].shape[0] = (int64_t)bd->n;
        memcpy(b->tensors[0].shape + 1, bd->shape, sizeof(int64_t) * (size_t)bd->ndim);
        b->tensors[1] = (struct spw_wire_tensor){.dtype = SPW_DTYPE_I64, .ndim = 1, .shape = {(int64_t)bd->n},
                                                 .data = (uint8_t *)m->labels, .nbytes = bd->n * 8};
    }
    size_t sc = spw_wire_scratch_size(b);
    if (!(m->scratch = malloc(sc + 1))) {
        msg_free(m);
        return -ENOMEM;
    }
    m->iovcnt = spw_wire_encode(b, m->scratch, sc, m->iov, 1 + 2 * SPW_WIRE_MAX_TENSORS);
    if (m->iovcnt < 0) {
        msg_free(m);
        return -EINVAL;
    }
    m->bytes = spw_wire_encoded_size(b);
    m->elements = bd->n;
    for (size_t i = 0; i < b->n_tombstones; i++) {     /* encoded: the scratch holds their copies */
        free(bd->tombstone_errors[i]);
        bd->tombstone_errors[i] = NULL;
    }
    queue_push(jb, (int)(b->split % (uint64_t)jb->world), m);
    bd->n = 0;
    b->n_tombstones = 0;
    return 0;
}

/* Room in the builder for one more element of that dtype and shape, flushing first when it is full or the
 * shape changes. Returns where the element's bytes go, or NULL (out of memory). */
static uint8_t *element_slot(struct job *jb, struct builder *bd, enum spw_dtype dt, int ndim, const int64_t *shape_in)
{
    int64_t shape[SPW_TENSOR_MAX_DIMS] = {0};
    memcpy(shape, shape_in, sizeof(int64_t) * (size_t)ndim);
    size_t eb = spw_dtype_size(dt);
    for (int i = 0; i < ndim; i++)
        eb *= (size_t)shape[i];
    if (eb > SPW_WIRE_MAX_ELEMENT_BYTES) {
        bd->slot_err = SPW_ETOOBIG;
        bd->slot_bytes = eb;
        return NULL;
    }
    bd->slot_err = -ENOMEM;
    bd->slot_bytes = eb;
    bool same = bd->n && bd->dtype == dt && bd->ndim == ndim && !memcmp(bd->shape, shape, sizeof shape);
    if (bd->n && (!same || (bd->n + 1) * eb > MSG_TARGET_BYTES || bd->n == bd->cap_elems) &&
        flush(jb, bd, false) != 0)
        return NULL;
    if (!bd->n) {
        bd->dtype = dt;
        bd->ndim = ndim;
        memcpy(bd->shape, shape, sizeof shape);
        bd->elem_bytes = eb;
        size_t want = MSG_TARGET_BYTES / (eb ? eb : 1) + 1;
        bd->cap_elems = want > 64 ? 64 : want;
        if (bd->data && bd->data_cap < bd->cap_elems * eb + 1) {
            free(bd->data);
            bd->data = NULL;
        }
        if (!bd->data) {
            bd->data_cap = bd->cap_elems * eb + 1;
            if (!(bd->data = malloc(bd->data_cap)))
                return NULL;
        }
    }
    return bd->data + bd->n * eb;
}

/* Record the element just written at element_slot's address. */
static void element_added(struct job *jb, struct builder *bd, int64_t pos, int64_t sample)
{
    bd->labels[bd->n] = jb->src->samples[sample].label;
    bd->positions[bd->n] = pos;
    bd->samples[bd->n] = sample;
    bd->n++;
}

/* Add one element's value (data + label) to the builder, unless the run already wrote it there. */
static int add_element(struct job *jb, struct builder *bd, int64_t pos, int64_t sample, const struct spw_value *v)
{
    if (!v->placed) {
        enum spw_dtype dt;
        int ndim;
        int64_t shape[SPW_TENSOR_MAX_DIMS];
        spw_value_out_shape(v, SPW_LAYOUT_HWC, &dt, &ndim, shape);
        uint8_t *dst = element_slot(jb, bd, dt, ndim, shape);
        if (!dst)
            return bd->slot_err;
        spw_value_copy_out(v, SPW_LAYOUT_HWC, dst);
    }
    element_added(jb, bd, pos, sample);
    return 0;
}

struct place_ctx {
    struct job *jb;
    struct builder *bd;
};

/* spw_element_dest.place: a run that ends the pipeline writes its output straight into the message. */
static void *place_cb(void *opaque, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    struct place_ctx *pc = opaque;
    return element_slot(pc->jb, pc->bd, dt, ndim, shape);
}

/* A producer with nothing to lease waits before asking again: 50 ms for its first IDLE_POLLS_FLAT empty
 * polls (a split freed now and then is picked up at once), then doubling to 800 ms while the job stays empty,
 * back to 50 ms once a lease comes. Every producer thread of a worker polls every job it serves, so at a flat
 * 50 ms idle polls were most of a dispatcher's load (bench-dispatcher.sh: 10-17 k/s from 100-1000 workers of
 * small jobs); a busy producer asks as soon as it has room, so only surplus ones wait longer. *idle counts the
 * empty polls in a row. */
#define IDLE_POLL_MIN_MS 50
#define IDLE_POLL_MAX_MS 800
#define IDLE_POLLS_FLAT 4
static void idle_wait(struct job *jb, int *idle)
{
    int wait_ms = IDLE_POLL_MIN_MS;
    for (int k = IDLE_POLLS_FLAT; k < *idle && wait_ms < IDLE_POLL_MAX_MS; k++)
        wait_ms *= 2;
    if (wait_ms > IDLE_POLL_MAX_MS)
        wait_ms = IDLE_POLL_MAX_MS;
    (*idle)++;
    for (int waited = 0; waited < wait_ms; waited += IDLE_POLL_MIN_MS) {     /* a stop is seen within 50 ms */
        usleep(IDLE_POLL_MIN_MS * 1000);
        pthread_mutex_lock(&jb->mu);
        const bool stop = jb->stopping;
        pthread_mutex_unlock(&jb->mu);
        if (stop || __atomic_load_n(&jb->owner->draining, __ATOMIC_ACQUIRE))
            return;
    }
}

/* Lease up to `want` splits into out. Returns how many (>= 0), LEASE_FINISHED when the job has nothing left,
 * or -1 on an RPC failure. Leases outside the job (positions, cut) are refused, with a log line. */
#define LEASE_FINISHED -2
static int lease(struct job *jb, Spillway__V1__Lease *out, int want)
{
    Spillway__V1__LeaseSplitRequest req = SPILLWAY__V1__LEASE_SPLIT_REQUEST__INIT;
    pthread_mutex_lock(&jb->owner->mu);
    req.worker_id = jb->owner->worker_id;
    req.worker_secret = jb->owner->worker_secret;
    pthread_mutex_unlock(&jb->owner->mu);
    req.job = jb->id;
    req.job_secret = jb->secret;    /* a job of this id with another secret (a dispatcher restarted without a
                                       journal numbers jobs anew) is not this one: its leases are refused */
    req.max_splits = want;
    req.manifest_hash = jb->manifest_hash;
    uint8_t *resp = NULL;
    size_t len = 0;
    char msg[256];
    int st = spw_rpc_call_msg(jb->owner->ch, SPW_PATH(LEASE_SPLIT), &req.base, 3000, &resp, &len,
                              msg, sizeof msg);
    if (st != SPW_RPC_OK) {
        free(resp);
        return -1;
    }
    Spillway__V1__LeaseSplitResponse *r = spillway__v1__lease_split_response__unpack(NULL, len, resp);
    free(resp);
    if (!r)
        return -1;
    int got = 0;
    for (size_t i = 0; i < r->n_leases && got < want; i++) {
        const Spillway__V1__Lease *l = r->leases[i];
        if (l->first_position < 0 || l->count <= 0 || l->first_position + l->count > jb->src->n || l->cut < 0 ||
            l->cut > jb->ctx.n_groups) {
            spw_log(SPW_LOG_ERROR, "worker", "refused lease job=%llu epoch=%llu split=%llu: positions [%lld, +%d) or "
                    "cut %d outside the job", (unsigned long long)jb->id, (unsigned long long)l->epoch,
                    (unsigned long long)l->split, (long long)l->first_position, l->count, l->cut);
            continue;
        }
        out[got++] = *l;
    }
    if (!got && r->finished)
        got = LEASE_FINISHED;
    spillway__v1__lease_split_response__free_unpacked(r, NULL);
    return got;
}

/* Why element_slot refused the element just made at `cut`, into err. */
static void slot_error(const struct job *jb, const struct builder *bd, int cut, char *err, size_t errlen)
{
    const char *what = "the encoded file";
    if (cut > 0) {
        const struct spw_group *g = &jb->ctx.groups[cut - 1];
        what = spw_op_name(jb->spec->ops[g->first + g->count - 1].kind);
    }
    if (bd->slot_err == SPW_ETOOBIG)
        snprintf(err, errlen, "an element of %zu bytes (after %s) exceeds the message cap of %zu bytes: a smaller "
                 "output or a later cut", bd->slot_bytes, what, SPW_WIRE_MAX_ELEMENT_BYTES);
    else
        snprintf(err, errlen, "out of memory on the worker for an element of %zu bytes (after %s)", bd->slot_bytes,
                 what);
}

/* The sample at pos cannot be made: log it (with the job's on_error policy's severity) and send a tombstone
 * with the reason, which the client logs too and, under on_error fail, fails the job with. */
static void tombstone(struct job *jb, struct builder *bd, int64_t pos, int64_t sample, int rc, const char *err)
{
    spw_produce_failed(&jb->prod, sample, rc, err, NULL, NULL, 0);
    if (bd->b.n_tombstones == sizeof bd->tombstones / sizeof bd->tombstones[0])
        flush(jb, bd, false);                                   /* a split of thousands of broken files */
    if (bd->b.n_tombstones == sizeof bd->tombstones / sizeof bd->tombstones[0])
        return;                                                 /* no memory to flush: the split stays open */
    bd->tombstone_errors[bd->b.n_tombstones] = strdup(err);    /* NULL (no memory): sent without a reason */
    bd->tombstones[bd->b.n_tombstones++] = pos;
}

/* A micro-batch of a split: where its elements go. */
struct split_mb {
    struct job *jb;
    struct builder *bd;
    int cut;
    struct spw_element_dest dest;
    struct place_ctx pc;
    int64_t pos[MICROBATCH], samples[MICROBATCH];
};

/* A run of the whole pipeline writes its output straight into the message. */
static const struct spw_element_dest *mb_dest(void *opaque, int k)
{
    struct split_mb *m = opaque;
    return m->cut == m->jb->ctx.n_groups ? &m->dest : NULL;
}

static void mb_done(void *opaque, int k, int rc, struct spw_value *v, const char *why)
{
    struct split_mb *m = opaque;
    char err[512];
    snprintf(err, sizeof err, "%s", rc ? why : "");
    if (rc == 0 && (rc = add_element(m->jb, m->bd, m->pos[k], m->samples[k], v)) != 0)
        slot_error(m->jb, m->bd, m->cut, err, sizeof err);
    if (rc != 0)
        tombstone(m->jb, m->bd, m->pos[k], m->samples[k], rc, err);
    spw_value_free(v);
}

/* Lease splits and make them, a micro-batch at a time, on the first backend of table that takes each. */
static void produce_splits(struct job *jb, const struct spw_backend *const *table, int n_table)
{
    struct builder bd;
    memset(&bd, 0, sizeof bd);
    bd.b.positions = bd.positions;
    bd.b.samples = bd.samples;
    bd.b.tombstones = bd.tombstones;
    Spillway__V1__Lease held[LEASE_AHEAD];     /* leased, not started: the next split is at hand */
    int n_held = 0, idle = 0;
    for (;;) {
        pthread_mutex_lock(&jb->mu);
        bool stop = jb->stopping;
        pthread_mutex_unlock(&jb->mu);
        if (stop)
            break;
        const bool draining = __atomic_load_n(&jb->owner->draining, __ATOMIC_ACQUIRE);
        if (n_held < LEASE_AHEAD && !draining) {
            int got = lease(jb, held + n_held, LEASE_AHEAD - n_held);
            if (got == LEASE_FINISHED && n_held == 0)
                break;                               /* the job has nothing left */
            if (got > 0) {
                n_held += got;
                __atomic_add_fetch(&jb->held_splits, got, __ATOMIC_RELEASE);
            }
        }
        if (n_held == 0) {
            idle_wait(jb, &idle);
            continue;
        }
        idle = 0;
        Spillway__V1__Lease l = held[0];
        memmove(held, held + 1, sizeof held[0] * (size_t)--n_held);
        bd.b.job = jb->id;
        bd.b.epoch = l.epoch;
        bd.b.split = l.split;
        bd.b.generation = l.generation;
        bd.b.cut = l.cut;
        bd.n = 0;
        bd.b.n_tombstones = 0;
        /* The split in micro-batches, each made by the first backend that takes it. */
        struct split_mb m = {jb, &bd, l.cut, {place_cb, &m.pc, SPW_LAYOUT_HWC}, {jb, &bd}, {0}, {0}};
        for (int32_t k0 = 0; k0 < l.count; k0 += MICROBATCH) {
            const int n = l.count - k0 < MICROBATCH ? l.count - k0 : MICROBATCH;
            for (int k = 0; k < n; k++) {
                m.pos[k] = l.first_position + k0 + k;
                m.samples[k] = spw_order_at(&jb->order, l.epoch, m.pos[k]);
            }
            const struct spw_microbatch mb = {.epoch = l.epoch, .cut = l.cut, .n = n, .samples = m.samples,
                                              .opaque = &m, .dest = mb_dest, .done = mb_done};
            spw_backend_run(table, n_table, &jb->prod, &mb);
        }
        flush(jb, &bd, true);
        __atomic_sub_fetch(&jb->held_splits, 1, __ATOMIC_RELEASE);
    }
    builder_release(&bd);
}

/* ---- a job shared with a GPU: micro-batches by size ---- */

/* A leased split whose micro-batches wait in the job's queue; the thread making its last one ends it. */
struct split_work {
    Spillway__V1__Lease lease;
    int left;                   /* micro-batches not made yet, under jb->mu */
};

/* Lease a split and queue its micro-batches with their encoded bytes (FusionFlow's cost proxy). Returns 1,
 * 0 (nothing now), LEASE_FINISHED or -1. */
static int lease_into_queue(struct job *jb)
{
    Spillway__V1__Lease l;
    int got = lease(jb, &l, 1);
    if (got <= 0)
        return got;
    struct split_work *sw = malloc(sizeof *sw);
    if (!sw)
        return 0;               /* its lease expires and the dispatcher gives the split to another producer */
    __atomic_add_fetch(&jb->held_splits, 1, __ATOMIC_RELEASE);
    sw->lease = l;
    sw->left = (l.count + GPU_MB - 1) / GPU_MB;
    for (int32_t k0 = 0; k0 < l.count; k0 += GPU_MB) {
        struct spw_mb_entry e = {.epoch = l.epoch, .first = l.first_position + k0, .tag = sw,
                                 .n = l.count - k0 < GPU_MB ? l.count - k0 : GPU_MB};
        for (int k = 0; k < e.n; k++)
            e.bytes += jb->src->samples[spw_order_at(&jb->order, l.epoch, e.first + k)].size;
        while (spw_mb_queue_put(jb->mbq, &e) != 0)
            usleep(1000);       /* MBQ_CAP queued: the others are draining it */
    }
    return 1;
}

/* Make one queued micro-batch into the builder's messages; the last of its split ends the split. */
static void make_entry(struct job *jb, struct builder *bd, const struct spw_backend *const *table, int n_table,
                       const struct spw_mb_entry *e)
{
    struct split_work *sw = e->tag;
    const Spillway__V1__Lease *l = &sw->lease;
    bd->b.job = jb->id;
    bd->b.epoch = l->epoch;
    bd->b.split = l->split;
    bd->b.generation = l->generation;
    bd->b.cut = l->cut;
    bd->n = 0;
    bd->b.n_tombstones = 0;
    struct split_mb m = {jb, bd, l->cut, {place_cb, &m.pc, SPW_LAYOUT_HWC}, {jb, bd}, {0}, {0}};
    for (int k = 0; k < e->n; k++) {
        m.pos[k] = e->first + k;
        m.samples[k] = spw_order_at(&jb->order, l->epoch, m.pos[k]);
    }
    const struct spw_microbatch mb = {.epoch = l->epoch, .cut = l->cut, .n = e->n, .samples = m.samples,
                                      .opaque = &m, .dest = mb_dest, .done = mb_done};
    spw_backend_run(table, n_table, &jb->prod, &mb);
    pthread_mutex_lock(&jb->mu);
    const bool last = --sw->left == 0;
    pthread_mutex_unlock(&jb->mu);
    flush(jb, bd, last);
    if (last) {
        __atomic_sub_fetch(&jb->held_splits, 1, __ATOMIC_RELEASE);
        free(sw);
    }
}

/* A producer of a job shared with a GPU: the GPU's takes the largest queued micro-batch, the CPU's the
 * smallest, each leasing another split when the queue runs low, so heavy images go to the GPU and both
 * sides drain at their own pace. */
static void produce_shared(struct job *jb, const struct spw_backend *const *table, int n_table,
                           enum spw_mb_end end)
{
    struct builder bd;
    memset(&bd, 0, sizeof bd);
    bd.b.positions = bd.positions;
    bd.b.samples = bd.samples;
    bd.b.tombstones = bd.tombstones;
    bool finished = false;
    int idle = 0;
    for (;;) {
        pthread_mutex_lock(&jb->mu);
        const bool stop = jb->stopping;
        pthread_mutex_unlock(&jb->mu);
        if (stop)
            break;
        const bool draining = __atomic_load_n(&jb->owner->draining, __ATOMIC_ACQUIRE);
        if (!finished && !draining && spw_mb_queue_len(jb->mbq) < MBQ_LOW)
            finished = lease_into_queue(jb) == LEASE_FINISHED;
        struct spw_mb_entry e;
        if (spw_mb_queue_take(jb->mbq, end, &e)) {
            make_entry(jb, &bd, table, n_table, &e);
            idle = 0;
        } else if (finished || draining) {
            break;              /* nothing left to lease, and nothing queued */
        } else {
            idle_wait(jb, &idle);
        }
    }
    builder_release(&bd);
}

/* The micro-batches a stopped job's producers left in its queue. */
static void drop_queued(struct job *jb)
{
    struct spw_mb_entry e;
    while (jb->mbq && spw_mb_queue_take(jb->mbq, SPW_MB_SMALLEST, &e)) {
        struct split_work *sw = e.tag;
        if (--sw->left == 0)
            free(sw);
    }
    spw_mb_queue_destroy(jb->mbq);
    jb->mbq = NULL;
}

static void *producer(void *arg)
{
    static const struct spw_backend *const cpu[] = {&spw_backend_cpu};
    struct job *jb = arg;
    pthread_setname_np(pthread_self(), "spw-produce");
    if (jb->mbq)
        produce_shared(jb, cpu, 1, SPW_MB_SMALLEST);
    else
        produce_splits(jb, cpu, 1);
    return NULL;
}

/* The GPU's producer: the largest micro-batches of the job's queue; what the device declines or cannot
 * fit is made by this thread on the CPU. */
static void *gpu_producer(void *arg)
{
    struct job *jb = arg;
    const struct spw_backend *const table[] = {jb->owner->gpu, &spw_backend_cpu};
    pthread_setname_np(pthread_self(), "spw-produce-gpu");
    produce_shared(jb, table, 2, SPW_MB_LARGEST);
    return NULL;
}

/* ---- job lifecycle ---- */

static void job_release(struct job *jb)
{
    drop_queued(jb);
    for (int r = 0; jb->queues && r < jb->world; r++)
        while (jb->queues[r].head) {
            struct msg *m = jb->queues[r].head;
            jb->queues[r].head = m->next;
            msg_free(m);
        }
    free(jb->queues);
    free(jb->group_ns);
    free(jb->group_elements);
    spw_element_ctx_destroy(&jb->ctx);
    spw_source_close(jb->src);
    spw_spec_free(jb->spec);
    pthread_mutex_destroy(&jb->mu);
    pthread_cond_destroy(&jb->cv);
    free(jb);
}

/* The job's source from the listing the dispatcher made (GetManifest), so that a folder or remote shards are
 * not listed again by every worker; listed here when the dispatcher keeps none (too big) or is an older one. */
static int open_source(struct wrk_jobs *w, struct job *jb, char *err, size_t errlen)
{
    uint8_t *packed = NULL;
    size_t len = 0;
    uint64_t hash = 0;
    char why[512] = "";
    const int64_t t0 = spw_now_ms();
    if (spw_manifest_fetch(w->ch, jb->id, NULL, -1, 600000, &packed, &len, &hash, why, sizeof why) == 0 &&
        spw_manifest_open(&jb->spec->source, packed, len, jb->manifest_hash, &jb->src, why, sizeof why) == 0) {
        free(packed);
        spw_log(SPW_LOG_INFO, "worker", "source from the dispatcher's listing job=%llu samples=%lld bytes=%zu ms=%lld",
                (unsigned long long)jb->id, (long long)jb->src->n, len, (long long)(spw_now_ms() - t0));
        return 0;
    }
    free(packed);
    spw_log(SPW_LOG_WARN, "worker", "listing the source here job=%llu: the dispatcher's listing: %s",
            (unsigned long long)jb->id, why);
    return spw_source_open(&jb->spec->source, &jb->src, err, errlen);
}

/* Start serving a task. NULL when this worker cannot serve it, with the reason in why. */
/* Every Python op of the job's part on this worker imports here (--python, --python-path): else the job is
 * refused with the reason, as with a missing mount, rather than failing each of its elements. */
static int python_ops_import(const struct job *jb, char *why, size_t whylen)
{
    const int n_groups = jb->cut < jb->ctx.n_groups ? jb->cut : jb->ctx.n_groups;
    const int last = n_groups > 0 ? jb->ctx.groups[n_groups - 1].first + jb->ctx.groups[n_groups - 1].count : 0;
    for (int i = 0; i < last; i++) {
        const struct spw_op_spec *op = &jb->spec->ops[i];
        bool seen = op->kind != SPW_OP_PYTHON;
        for (int k = 0; k < i && !seen; k++)
            seen = jb->spec->ops[k].kind == SPW_OP_PYTHON && !strcmp(jb->spec->ops[k].function, op->function);
        char err[400];
        if (!seen && spw_python_op_check(op->function, err, sizeof err) != 0) {
            snprintf(why, whylen, "ops[%d] python: %.200s", i, err);
            return -1;
        }
    }
    return 0;
}

static struct job *job_start(struct wrk_jobs *w, const Spillway__V1__JobTask *t, char *why, size_t whylen)
{
    struct job *jb = calloc(1, sizeof *jb);
    char err[512];
    if (!jb) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    jb->id = t->job;
    jb->manifest_hash = t->manifest_hash;
    jb->secret = t->job_secret;
    jb->cut = t->cut;
    jb->world = t->world_size > 0 ? t->world_size : 1;
    jb->owner = w;
    pthread_mutex_init(&jb->mu, NULL);
    pthread_cond_init(&jb->cv, NULL);
    if (spw_spec_from_proto(t->pipeline, &jb->spec, err, sizeof err) != 0 ||
        open_source(w, jb, err, sizeof err) != 0) {
        snprintf(why, whylen, "%.255s", err);
        goto fail;
    }
    if (jb->src->manifest_hash != t->manifest_hash) {
        snprintf(why, whylen, "the dataset listing differs from the dispatcher's (%lld samples, manifest %016llx "
                 "here; %016llx there)", (long long)jb->src->n, (unsigned long long)jb->src->manifest_hash,
                 (unsigned long long)t->manifest_hash);
        goto fail;
    }
    jb->queues = calloc((size_t)jb->world, sizeof *jb->queues);
    if (!jb->queues || spw_element_ctx_init(&jb->ctx, jb->spec) != 0 ||
        !(jb->group_ns = calloc((size_t)jb->ctx.n_groups + 1, sizeof(int64_t))) ||
        !(jb->group_elements = calloc((size_t)jb->ctx.n_groups + 1, sizeof(int64_t)))) {
        snprintf(why, whylen, "out of memory");
        goto fail;
    }
    if (python_ops_import(jb, why, whylen) != 0)
        goto fail;
    jb->prod = (struct spw_producer){.spec = jb->spec, .src = jb->src, .ctx = &jb->ctx, .component = "worker",
                                     .job = jb->id, .failures = jb->failures, .group_ns = jb->group_ns,
                                     .group_elements = jb->group_elements};
    spw_order_init(&jb->order, jb->src->n, jb->spec->source.shuffle, jb->spec->source.seed);
    int n = w->o.threads > MAX_THREADS - 1 ? MAX_THREADS - 1 : w->o.threads;
    char no_gpu[256] = "";
    bool on_gpu = w->gpu && spw_gpu_can_make(&jb->ctx, jb->cut, no_gpu, sizeof no_gpu);
    if (on_gpu && spw_mb_queue_create(MBQ_CAP, &jb->mbq) != 0) {
        on_gpu = false;
        snprintf(no_gpu, sizeof no_gpu, "no memory for its queue");
    }
    for (int i = 0; i < n; i++)
        if (pthread_create(&jb->tids[jb->n_tids], NULL, producer, jb) == 0)
            jb->n_tids++;
    if (on_gpu && pthread_create(&jb->tids[jb->n_tids], NULL, gpu_producer, jb) != 0) {
        on_gpu = false;         /* the CPU producers still drain the queue */
        snprintf(no_gpu, sizeof no_gpu, "no thread for the GPU");
    }
    if (on_gpu)
        jb->n_tids++;
    else if (w->gpu)
        spw_log(SPW_LOG_INFO, "worker", "job=%llu is made on the CPU only: %s", (unsigned long long)jb->id, no_gpu);
    spw_log(SPW_LOG_INFO, "worker", "serving job=%llu samples=%lld cut=%d threads=%d%s", (unsigned long long)jb->id,
            (long long)jb->src->n, jb->cut, jb->n_tids, on_gpu ? " (one on the GPU)" : "");
    return jb;
fail:
    job_release(jb);
    return NULL;
}

static void job_stop(struct job *jb)
{
    pthread_mutex_lock(&jb->mu);
    jb->stopping = true;
    pthread_cond_broadcast(&jb->cv);
    pthread_mutex_unlock(&jb->mu);
    for (int i = 0; i < jb->n_tids; i++)
        pthread_join(jb->tids[i], NULL);
    jb->n_tids = 0;
}

int wrk_jobs_create(const struct wrk_jobs_opts *o, struct wrk_jobs **out)
{
    struct wrk_jobs *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->o = *o;
    w->gpu = o->gpu;
    if (!w->o.queue_bytes)
        w->o.queue_bytes = (size_t)256 << 20;
    if (w->o.threads <= 0)
        w->o.threads = 1;
    w->dispatcher = strdup(o->dispatcher);
    w->token = o->auth_token ? strdup(o->auth_token) : NULL;
    w->o.dispatcher = w->dispatcher;
    w->o.auth_token = w->token;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    struct spw_rpc_channel_opts co = {.auth_token = w->token};
    if (!w->dispatcher || spw_rpc_channel_create(w->dispatcher, &co, &w->ch) != 0) {
        wrk_jobs_destroy(w);
        return -ENOMEM;
    }
    *out = w;
    return 0;
}

void wrk_jobs_set_worker_id(struct wrk_jobs *w, uint64_t id, uint64_t secret)
{
    pthread_mutex_lock(&w->mu);
    w->worker_id = id;
    w->worker_secret = secret;
    pthread_mutex_unlock(&w->mu);
}

/* A job is its id and its secret: a dispatcher restarted without a journal may give the id to another job. */
static bool is_job(const struct job *jb, uint64_t id, uint64_t secret)
{
    return jb->id == id && jb->secret == secret;
}

/* The job (id, secret), or NULL with *same_id a job of that id and another secret (or NULL). Call with mu held. */
static struct job *find_job(struct wrk_jobs *w, uint64_t id, uint64_t secret, struct job **same_id)
{
    *same_id = NULL;
    for (struct job *jb = w->jobs; jb; jb = jb->next) {
        if (is_job(jb, id, secret))
            return jb;
        if (jb->id == id)
            *same_id = jb;
    }
    return NULL;
}

void wrk_jobs_update(struct wrk_jobs *w, const Spillway__V1__WorkerHeartbeatResponse *tasks)
{
    struct job *stop = NULL;
    pthread_mutex_lock(&w->mu);
    /* Jobs no longer listed: unlink; stopped below (outside the lock) once no stream uses them. */
    for (struct job **pp = &w->jobs; *pp;) {
        bool listed = false;
        for (size_t i = 0; i < tasks->n_tasks; i++)
            listed = listed || is_job(*pp, tasks->tasks[i]->job, tasks->tasks[i]->job_secret);
        if (!listed && (*pp)->refs == 0) {
            struct job *jb = *pp;
            *pp = jb->next;
            jb->next = stop;
            stop = jb;
        } else {
            pp = &(*pp)->next;
        }
    }
    /* Refusals of jobs no longer listed are done with: the dispatcher heard them. */
    int kept = 0;
    for (int r = 0; r < w->n_refused; r++)
        for (size_t i = 0; i < tasks->n_tasks; i++)
            if (tasks->tasks[i]->job == w->refused[r].job) {
                w->refused[kept++] = w->refused[r];
                break;
            }
    w->n_refused = kept;
    for (size_t i = 0; i < tasks->n_tasks; i++) {
        const uint64_t id = tasks->tasks[i]->job;
        bool known = false;
        for (struct job *jb = w->jobs; jb; jb = jb->next)
            known = known || is_job(jb, id, tasks->tasks[i]->job_secret);
        for (int r = 0; r < w->n_refused; r++)
            known = known || w->refused[r].job == id;
        if (known)
            continue;
        char why[256];
        /* Not under the lock: starting a job may fetch its listing and check its Python ops (seconds), and
         * streams wait on the lock. Only this thread (the registration's) changes the job list. */
        pthread_mutex_unlock(&w->mu);
        struct job *jb = job_start(w, tasks->tasks[i], why, sizeof why);
        pthread_mutex_lock(&w->mu);
        if (jb) {
            jb->next = w->jobs;
            w->jobs = jb;
            pthread_cond_broadcast(&w->cv);
            continue;
        }
        /* Log once and tell the dispatcher (wrk_jobs_refusals), which stops giving this worker the job. */
        spw_log(SPW_LOG_ERROR, "worker", "cannot serve job=%llu: %s", (unsigned long long)id, why);
        struct refusal *more = realloc(w->refused, sizeof *more * (size_t)(w->n_refused + 1));
        if (more) {
            w->refused = more;
            w->refused[w->n_refused].job = id;
            snprintf(w->refused[w->n_refused++].reason, sizeof more->reason, "%s", why);
        }
    }
    pthread_mutex_unlock(&w->mu);
    bool stopped = stop != NULL;
    if (stopped)    /* while a job's memory is freed, let each heap's top go back to the system too */
        mallopt(M_TRIM_THRESHOLD, TRIM_WHILE_STOPPING);
    while (stop) {
        struct job *jb = stop;
        stop = jb->next;
        spw_log(SPW_LOG_INFO, "worker", "stopping job=%llu (no longer a task)", (unsigned long long)jb->id);
        job_stop(jb);
        pthread_mutex_lock(&w->mu);
        if (w->n_retired < (int)(sizeof w->retired / sizeof w->retired[0])) {
            w->retired[w->n_retired].job = jb->id;
            w->retired[w->n_retired].elements = __atomic_load_n(&jb->sent_elements, __ATOMIC_RELAXED);
            w->retired[w->n_retired].io = jb->src->io;      /* its producers have ended */
            w->retired[w->n_retired++].bytes = __atomic_load_n(&jb->sent_bytes, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&w->mu);
        job_release(jb);
    }
    if (stopped) {
        malloc_trim(0);             /* hand the job's buffers back to the system, not just to malloc */
        mallopt(M_TRIM_THRESHOLD, SPW_HEAP_TRIM_THRESHOLD);   /* main() set it (lib/heap.h) */
    }
}

void wrk_jobs_destroy(struct wrk_jobs *w)
{
    if (!w)
        return;
    while (w->jobs) {
        struct job *jb = w->jobs;
        w->jobs = jb->next;
        job_stop(jb);
        job_release(jb);
    }
    spw_rpc_channel_destroy(w->ch);
    free(w->refused);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->dispatcher);
    free(w->token);
    free(w);
}

/* ---- streaming ---- */

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
    struct job *jb = find_job(w, job, secret, &same_id);
    if (!jb && w->o.want_tasks) {
        pthread_mutex_unlock(&w->mu);
        w->o.want_tasks(w->o.want_tasks_ctx);
        pthread_mutex_lock(&w->mu);
    }
    for (;;) {
        jb = find_job(w, job, secret, &same_id);
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
    pthread_mutex_lock(&jb->mu);
    if (rank < 0 || rank >= jb->world || jb->queues[rank].attached) {
        snprintf(msg, msglen, "rank %d is outside the job's world of %d or already streaming", rank, jb->world);
        status = SPW_RPC_INVALID_ARGUMENT;
        pthread_mutex_unlock(&jb->mu);
        goto out;
    }
    struct queue *q = &jb->queues[rank];
    q->attached = true;
    __atomic_store_n(&q->compress_level, level, __ATOMIC_RELAXED);     /* messages made from now on */
    pthread_mutex_unlock(&jb->mu);
    char peer[64];
    snprintf(peer, sizeof peer, "job=%llu rank=%d", (unsigned long long)job, rank);
    const struct spw_stream_request rq = {.job = job};
    const struct spw_channel_opts co = {.call = st, .peer = peer, .stop = job_stopping, .stop_ctx = jb,
                                        .codec = &spw_stream_codec, .codec_ctx = (void *)&rq};
    struct spw_channel *chan = NULL;
    if (spw_channel_accept(&co, w->o.direct, want_direct, &credit, &chan, msg, msglen) != 0)
        status = SPW_RPC_UNAVAILABLE;
    pthread_mutex_lock(&jb->mu);
    q->direct = chan && !strcmp(spw_channel_kind(chan), "direct");
    pthread_mutex_unlock(&jb->mu);
    while (chan) {
        struct msg *m = NULL;
        pthread_mutex_lock(&jb->mu);
        if (!jb->stopping && !q->head) {           /* wait a little for producers; then look at credit */
            struct timespec t = spw_deadline_in_ms(100);
            pthread_cond_timedwait(&jb->cv, &jb->mu, &t);
        }
        /* Only against credit; a single element bigger than the client's whole grant still goes once the
         * client has room for a full-size message (else it could never be sent), overdrawing the credit. */
        if (q->head && (credit >= (int64_t)q->head->bytes ||
                        (q->head->elements <= 1 && credit >= (int64_t)MSG_TARGET_BYTES))) {
            m = q->head;
            q->head = m->next;
            if (!q->head)
                q->tail = NULL;
            q->bytes -= m->bytes;
            queue_drained(jb, q, m->bytes);
            pthread_cond_broadcast(&jb->cv);           /* room for producers */
        }
        bool stopping = jb->stopping;
        pthread_mutex_unlock(&jb->mu);
        if (stopping)
            break;
        if (m) {
            if (spw_channel_send(chan, m->iov, m->iovcnt) != 0) {
                /* The client is gone: put the message back at the head for its next stream. */
                pthread_mutex_lock(&jb->mu);
                m->next = q->head;
                q->head = m;
                if (!q->tail)
                    q->tail = m;
                q->bytes += m->bytes;
                pthread_mutex_unlock(&jb->mu);
                break;
            }
            credit -= (int64_t)m->bytes;
            __atomic_store_n(&q->credit, credit, __ATOMIC_RELAXED);
            __atomic_add_fetch(&jb->sent_elements, (int64_t)m->elements, __ATOMIC_RELAXED);
            __atomic_add_fetch(&jb->sent_bytes, (int64_t)m->bytes, __ATOMIC_RELAXED);
            msg_free(m);
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
            __atomic_store_n(&q->credit, credit, __ATOMIC_RELAXED);
            spillway__v1__stream_request__free_unpacked(more, NULL);
        }
    }
    spw_channel_destroy(chan);     /* a data connection's client reads its end, then this call's status */
    pthread_mutex_lock(&jb->mu);
    q->attached = q->direct = false;
    __atomic_store_n(&q->credit, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&jb->mu);
out:
    pthread_mutex_lock(&w->mu);
    jb->refs--;
    pthread_mutex_unlock(&w->mu);
    return status;
}

/* A job's remote shard reads into its progress entry (nothing when it read none). */
static void source_io(const struct spw_shard_stats *s, Spillway__V1__ProducerProgress *out, Spillway__V1__SourceIo *io)
{
    if (__atomic_load_n(&s->requests, __ATOMIC_RELAXED) <= 0)
        return;
    spillway__v1__source_io__init(io);
    io->bytes = __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
    io->requests = __atomic_load_n(&s->requests, __ATOMIC_RELAXED);
    io->retries = __atomic_load_n(&s->retries, __ATOMIC_RELAXED);
    out->source = io;
}

int wrk_jobs_progress(struct wrk_jobs *w, Spillway__V1__ProducerProgress *out, Spillway__V1__SourceIo *io, int cap)
{
    int n = 0;
    pthread_mutex_lock(&w->mu);
    /* The whole process's CPU, sending included: a cost per element only while it serves one job. */
    const int64_t cpu_ns = w->jobs && !w->jobs->next ? spw_process_cpu_ns() : 0;
    for (struct job *jb = w->jobs; jb && n < cap; jb = jb->next) {
        spillway__v1__producer_progress__init(&out[n]);
        out[n].job = jb->id;
        out[n].elements = __atomic_load_n(&jb->sent_elements, __ATOMIC_RELAXED);
        out[n].bytes = __atomic_load_n(&jb->sent_bytes, __ATOMIC_RELAXED);
        out[n].cpu_ns = cpu_ns;
        source_io(&jb->src->io, &out[n], &io[n]);
        n++;
    }
    for (int i = 0; i < w->n_retired && n < cap; i++) {
        spillway__v1__producer_progress__init(&out[n]);
        out[n].job = w->retired[i].job;
        out[n].elements = w->retired[i].elements;
        out[n].bytes = w->retired[i].bytes;
        source_io(&w->retired[i].io, &out[n], &io[n]);
        n++;
    }
    w->n_retired = 0;
    pthread_mutex_unlock(&w->mu);
    return n;
}

int wrk_jobs_refusals(struct wrk_jobs *w, Spillway__V1__JobRefusal *out, int cap)
{
    int n = 0;
    pthread_mutex_lock(&w->mu);
    for (; n < w->n_refused && n < cap; n++) {
        spillway__v1__job_refusal__init(&out[n]);
        out[n].job = w->refused[n].job;
        out[n].reason = w->refused[n].reason;
    }
    pthread_mutex_unlock(&w->mu);
    return n;
}

int wrk_jobs_drain(struct wrk_jobs *w, int64_t timeout_ms)
{
    __atomic_store_n(&w->draining, 1, __ATOMIC_RELEASE);
    const int64_t deadline = spw_now_ms() + timeout_ms;
    for (;;) {
        int left = 0;       /* splits held, and messages queued, over every job */
        pthread_mutex_lock(&w->mu);
        for (struct job *jb = w->jobs; jb; jb = jb->next) {
            left += __atomic_load_n(&jb->held_splits, __ATOMIC_ACQUIRE);
            pthread_mutex_lock(&jb->mu);
            for (int r = 0; r < jb->world && !jb->stopping; r++)
                left += jb->queues[r].head != NULL;
            pthread_mutex_unlock(&jb->mu);
        }
        pthread_mutex_unlock(&w->mu);
        if (!left || spw_now_ms() >= deadline)
            return left;
        usleep(50 * 1000);
    }
}

int64_t wrk_jobs_direct_refused(struct wrk_jobs *w)
{
    return w->o.direct ? spw_direct_refused(w->o.direct) : -1;
}

void wrk_jobs_compressed(struct wrk_jobs *w, int64_t *in, int64_t *out)
{
    *in = __atomic_load_n(&w->zstd_in, __ATOMIC_RELAXED);
    *out = __atomic_load_n(&w->zstd_out, __ATOMIC_RELAXED);
}

int wrk_jobs_stats(struct wrk_jobs *w, struct wrk_job_stat *out, int cap)
{
    int n = 0;
    pthread_mutex_lock(&w->mu);
    for (struct job *jb = w->jobs; jb && n < cap; jb = jb->next, n++) {
        struct wrk_job_stat *o = &out[n];
        memset(o, 0, sizeof *o);
        o->job = jb->id;
        o->elements = __atomic_load_n(&jb->sent_elements, __ATOMIC_RELAXED);
        o->bytes = __atomic_load_n(&jb->sent_bytes, __ATOMIC_RELAXED);
        o->held_splits = __atomic_load_n(&jb->held_splits, __ATOMIC_RELAXED);
        o->skip = jb->spec->on_error != SPW_ON_ERROR_FAIL;
        for (int k = 0; k < SPW_FAIL_KINDS; k++)
            o->failures[k] = __atomic_load_n(&jb->failures[k], __ATOMIC_RELAXED);
        pthread_mutex_lock(&jb->mu);
        for (int r = 0; r < jb->world; r++) {
            o->queue_bytes += (int64_t)jb->queues[r].bytes;
            o->streams += jb->queues[r].attached;
            o->direct_streams += jb->queues[r].attached && jb->queues[r].direct;
            o->credit_bytes += __atomic_load_n(&jb->queues[r].credit, __ATOMIC_RELAXED);
        }
        o->n_groups = jb->ctx.n_groups < WRK_MAX_GROUPS ? jb->ctx.n_groups : WRK_MAX_GROUPS;
        for (int g = 0; g < o->n_groups; g++) {
            o->group_ns[g] = __atomic_load_n(&jb->group_ns[g], __ATOMIC_RELAXED);
            o->group_elements[g] = __atomic_load_n(&jb->group_elements[g], __ATOMIC_RELAXED);
            const struct spw_group *gr = &jb->ctx.groups[g];
            size_t off = 0;
            for (int i = gr->first; i < gr->first + gr->count && off < sizeof o->group_ops[g]; i++)
                off += (size_t)snprintf(o->group_ops[g] + off, sizeof o->group_ops[g] - off, "%s%s",
                                        i > gr->first ? "+" : "", spw_op_name(jb->spec->ops[i].kind));
        }
        pthread_mutex_unlock(&jb->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return n;
}
