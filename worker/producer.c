/* worker/producer.c - a job's producer threads (see jobs_internal.h): each leases splits from the
 * dispatcher (two at hand), makes them a micro-batch at a time on the first backend that takes each (the
 * CPU's; a GPU's for the job's GPU producer, which takes the largest queued micro-batches while the CPU's
 * take the smallest) and packs the elements into the job's outbox; a sample that cannot be made becomes a
 * tombstone. Threads: its own; jb->mu for the job's stop flag and shared micro-batch counts. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/log.h"
#include "lib/methods.h"
#include "worker/jobs_internal.h"

#define MICROBATCH 16                       /* samples a backend makes at a time */
#define GPU_MB 4                            /* ... when a GPU shares the job (FusionFlow's micro-batch) */
#define MBQ_LOW 8                           /* fewer micro-batches queued than this: lease another split */
#define LEASE_AHEAD 2                       /* splits a producer holds: the one it works on and the next */

struct place_ctx {
    struct job *jb;
    struct wrk_builder *bd;
};

/* spw_element_dest.place: a run that ends the pipeline writes its output straight into the message. */
static void *place_cb(void *opaque, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    struct place_ctx *pc = opaque;
    return wrk_builder_slot(pc->jb->out, pc->bd, dt, ndim, shape);
}

/* A producer with nothing to lease waits before asking again: 50 ms for its first IDLE_POLLS_FLAT empty
 * polls (a split freed now and then is picked up at once), then doubling to 800 ms while the job stays empty,
 * back to 50 ms once a lease comes. Every producer thread of a worker polls every job it serves, so at a flat
 * 50 ms idle polls were most of a dispatcher's load (bench/dispatcher.sh: 10-17 k/s from 100-1000 workers of
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
static void slot_error(const struct job *jb, const struct wrk_builder *bd, int cut, char *err, size_t errlen)
{
    const char *what = "the encoded file";
    if (cut > 0) {
        const struct spw_group *g = &jb->ctx.groups[cut - 1];
        what = spw_op_name(jb->spec->ops[g->first + g->count - 1].kind);
    }
    if (bd->slot_err == SPW_ETOOBIG && bd->slot_bytes <= SPW_WIRE_MAX_ELEMENT_BYTES)
        snprintf(err, errlen, "an element of %zu bytes (after %s) with its fields exceeds the message cap of %zu "
                 "bytes", bd->slot_bytes, what, SPW_WIRE_MAX_ELEMENT_BYTES);
    else if (bd->slot_err == SPW_ETOOBIG)
        snprintf(err, errlen, "an element of %zu bytes (after %s) exceeds the message cap of %zu bytes: a smaller "
                 "output or a later cut", bd->slot_bytes, what, SPW_WIRE_MAX_ELEMENT_BYTES);
    else
        snprintf(err, errlen, "out of memory on the worker for an element of %zu bytes (after %s)", bd->slot_bytes,
                 what);
}

/* The sample at pos cannot be made: log it (with the job's on_error policy's severity) and send a tombstone
 * with the reason, which the client logs too and, under on_error fail, fails the job with. */
static void tombstone(struct job *jb, struct wrk_builder *bd, int64_t pos, int64_t sample, int rc, const char *err)
{
    spw_produce_failed(&jb->prod, sample, rc, err, NULL, NULL, 0);
    wrk_builder_tombstone(jb->out, bd, pos, err);
}

/* Positions [first, first + n) of a split: where their elements go (spw_backend_run_all's sink). */
struct split_run {
    struct job *jb;
    struct wrk_builder *bd;
    int cut;
    uint64_t epoch;
    int64_t first;
    int k0;                     /* the micro-batch running now: run indexes k0 ... */
    const int64_t *samples;     /* ... and their samples */
    struct spw_element_dest dest;
    struct place_ctx pc;
};

static int64_t run_sample(void *opaque, int i)
{
    struct split_run *m = opaque;
    return spw_order_at(&m->jb->order, m->epoch, m->first + i);
}

static void run_begin(void *opaque, int k0, int n, const int64_t *samples)
{
    struct split_run *m = opaque;
    m->k0 = k0;
    m->samples = samples;
}

/* A run of the whole pipeline writes its output straight into the message. */
static const struct spw_element_dest *run_dest(void *opaque, int k)
{
    struct split_run *m = opaque;
    return m->cut == m->jb->ctx.n_groups ? &m->dest : NULL;
}

static void run_done(void *opaque, int k, int rc, struct spw_value *v, const char *why)
{
    struct split_run *m = opaque;
    const int64_t pos = m->first + m->k0 + k, sample = m->samples[k];
    char err[512];
    snprintf(err, sizeof err, "%s", rc ? why : "");
    struct spw_fields *fields = NULL;
    if (rc == 0)
        rc = spw_fields_take(v, m->jb->src, m->jb->spec, sample, &fields, err, sizeof err);
    if (rc == 0 && (rc = wrk_builder_add(m->jb->out, m->bd, pos, sample, m->jb->src->samples[sample].label, v,
                                         fields)) != 0)
        slot_error(m->jb, m->bd, m->cut, err, sizeof err);
    spw_fields_free(fields);
    if (rc != 0)
        tombstone(m->jb, m->bd, pos, sample, rc, err);
    spw_value_free(v);
}

/* Make positions [first, first + n) of lease l's epoch into the builder's messages, mb_max at a time. */
static void make_positions(struct job *jb, struct wrk_builder *bd, const struct spw_backend *const *table,
                           int n_table, const Spillway__V1__Lease *l, int64_t first, int n, int mb_max)
{
    struct split_run m = {.jb = jb, .bd = bd, .cut = l->cut, .epoch = l->epoch, .first = first,
                          .dest = {place_cb, &m.pc, SPW_LAYOUT_HWC}, .pc = {jb, bd}};
    const struct spw_run run = {.epoch = l->epoch, .cut = l->cut, .n = n, .mb_max = mb_max, .opaque = &m,
                                .sample_of = run_sample, .begin = run_begin, .dest = run_dest,
                                .done = run_done};
    spw_backend_run_all(table, n_table, &jb->prod, &run);
}

/* Lease splits and make them, a micro-batch at a time, on the first backend of table that takes each. */
static void produce_splits(struct job *jb, const struct spw_backend *const *table, int n_table)
{
    struct wrk_builder bd;
    wrk_builder_init(&bd);
    bd.with_fields = jb->spec->source.n_fields > 0;
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
        wrk_builder_begin(&bd, jb->id, l.epoch, l.split, l.generation, l.cut);
        make_positions(jb, &bd, table, n_table, &l, l.first_position, l.count, MICROBATCH);
        wrk_builder_flush(jb->out, &bd, true);
        __atomic_sub_fetch(&jb->held_splits, 1, __ATOMIC_RELEASE);
    }
    wrk_builder_release(&bd);
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
static void make_entry(struct job *jb, struct wrk_builder *bd, const struct spw_backend *const *table, int n_table,
                       const struct spw_mb_entry *e)
{
    struct split_work *sw = e->tag;
    const Spillway__V1__Lease *l = &sw->lease;
    wrk_builder_begin(bd, jb->id, l->epoch, l->split, l->generation, l->cut);
    make_positions(jb, bd, table, n_table, l, e->first, e->n, GPU_MB);
    pthread_mutex_lock(&jb->mu);
    const bool last = --sw->left == 0;
    pthread_mutex_unlock(&jb->mu);
    wrk_builder_flush(jb->out, bd, last);
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
    struct wrk_builder bd;
    wrk_builder_init(&bd);
    bd.with_fields = jb->spec->source.n_fields > 0;
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
    wrk_builder_release(&bd);
}

void wrk_producer_drop_queued(struct job *jb)
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

void *wrk_producer_main(void *arg)
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

void *wrk_gpu_producer_main(void *arg)
{
    struct job *jb = arg;
    const struct spw_backend *const table[] = {jb->owner->gpu, &spw_backend_cpu};
    pthread_setname_np(pthread_self(), "spw-produce-gpu");
    produce_shared(jb, table, 2, SPW_MB_LARGEST);
    return NULL;
}
