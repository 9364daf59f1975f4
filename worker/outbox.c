/* worker/outbox.c - one job's messages for its clients (see outbox.h): builders, per-rank queues sized by
 * their streams' drain rate, credit. Threads: o->mu guards the queues; a builder is its producer's. */
#include "worker/outbox.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "pipeline/compress.h"

/* A queue holds about this long of what its stream sent lately (at least QUEUE_MIN_BYTES, at most
 * queue_bytes): enough to keep a stream busy, short enough that an epoch's last elements are not stuck
 * behind seconds of the next one on a slow link while the client's own threads could make them. */
#define QUEUE_AHEAD_NS 1000000000LL
#define QUEUE_MIN_BYTES ((size_t)4 << 20)
#define DRAIN_WINDOW_NS 500000000LL         /* the drain rate is measured over windows this long */
#define DEFAULT_QUEUE_BYTES ((size_t)256 << 20)
#define MSG_MAX_ELEMENTS 64                 /* elements in one message */

struct queue {
    struct wrk_msg *head, *tail;
    size_t bytes;
    bool attached;              /* a client stream is draining it */
    bool direct;                /* ... on a data connection */
    int64_t credit;             /* the attached stream's unspent credit (atomic; metrics) */
    int compress_level;         /* the attached stream's zstd level, 0 = raw (atomic; read by producers) */
    size_t cap;                 /* producers wait above this (drained sets it) */
    size_t window_bytes;        /* sent since window_ns */
    int64_t window_ns;
};

struct wrk_outbox {
    struct wrk_outbox_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* a message queued, room made, or stopping */
    bool stopping;
    struct queue *queues;       /* o.world */
};

void wrk_msg_free(struct wrk_msg *m)
{
    if (!m)
        return;
    free(m->scratch);
    free(m->data);
    free(m->labels);
    free(m->fields);
    free(m->field_offsets);
    free(m);
}

int wrk_outbox_create(const struct wrk_outbox_opts *o, struct wrk_outbox **out)
{
    struct wrk_outbox *ob = calloc(1, sizeof *ob);
    if (!ob || o->world <= 0 || !(ob->queues = calloc((size_t)o->world, sizeof *ob->queues))) {
        free(ob);
        return o->world <= 0 ? -EINVAL : -ENOMEM;
    }
    ob->o = *o;
    if (!ob->o.queue_bytes)
        ob->o.queue_bytes = DEFAULT_QUEUE_BYTES;
    pthread_mutex_init(&ob->mu, NULL);
    pthread_cond_init(&ob->cv, NULL);
    *out = ob;
    return 0;
}

void wrk_outbox_destroy(struct wrk_outbox *o)
{
    if (!o)
        return;
    for (int r = 0; r < o->o.world; r++)
        while (o->queues[r].head) {
            struct wrk_msg *m = o->queues[r].head;
            o->queues[r].head = m->next;
            wrk_msg_free(m);
        }
    free(o->queues);
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    free(o);
}

void wrk_outbox_stop(struct wrk_outbox *o)
{
    pthread_mutex_lock(&o->mu);
    o->stopping = true;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

/* ---- queues ---- */

/* A stream sent `bytes` from q: re-measure its drain rate once a window has passed, and size the queue to
 * QUEUE_AHEAD_NS of it. Under o->mu. */
static void drained(struct wrk_outbox *o, struct queue *q, size_t bytes)
{
    const int64_t now = spw_now_ns();
    if (!q->window_ns)
        q->window_ns = now;
    q->window_bytes += bytes;
    if (now - q->window_ns < DRAIN_WINDOW_NS)
        return;
    const double ahead = (double)q->window_bytes * QUEUE_AHEAD_NS / (double)(now - q->window_ns);
    const double limit = (double)o->o.queue_bytes;
    q->cap = ahead < (double)QUEUE_MIN_BYTES ? QUEUE_MIN_BYTES : ahead > limit ? (size_t)limit : (size_t)ahead;
    q->window_bytes = 0;
    q->window_ns = now;
}

/* The bytes producers may queue for q now: cap 0 is before any stream drained it (the client is
 * connecting); queue_bytes bounds it in any case. Under o->mu. */
static size_t queue_cap(const struct wrk_outbox *o, const struct queue *q)
{
    const size_t cap = q->cap ? q->cap : QUEUE_MIN_BYTES;
    return cap < o->o.queue_bytes ? cap : o->o.queue_bytes;
}

static void push(struct wrk_outbox *o, int rank, struct wrk_msg *m)
{
    pthread_mutex_lock(&o->mu);
    struct queue *q = &o->queues[rank];
    while (!o->stopping && q->bytes > queue_cap(o, q))
        pthread_cond_wait(&o->cv, &o->mu);
    if (o->stopping) {
        pthread_mutex_unlock(&o->mu);
        wrk_msg_free(m);
        return;
    }
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    q->bytes += m->bytes;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

int wrk_outbox_attach(struct wrk_outbox *o, int rank, int compress_level)
{
    if (rank < 0 || rank >= o->o.world)
        return -EINVAL;
    pthread_mutex_lock(&o->mu);
    struct queue *q = &o->queues[rank];
    const int rc = q->attached ? -EBUSY : 0;
    if (rc == 0) {
        q->attached = true;
        __atomic_store_n(&q->compress_level, compress_level, __ATOMIC_RELAXED);    /* messages made from now on */
    }
    pthread_mutex_unlock(&o->mu);
    return rc;
}

void wrk_outbox_set_direct(struct wrk_outbox *o, int rank, bool direct)
{
    pthread_mutex_lock(&o->mu);
    o->queues[rank].direct = direct;
    pthread_mutex_unlock(&o->mu);
}

struct wrk_msg *wrk_outbox_take(struct wrk_outbox *o, int rank, int64_t credit, int wait_ms, bool *stopped)
{
    struct queue *q = &o->queues[rank];
    struct wrk_msg *m = NULL;
    pthread_mutex_lock(&o->mu);
    if (!o->stopping && !q->head && wait_ms > 0) {     /* wait a little for producers; then look at credit */
        struct timespec t = spw_deadline_in_ms(wait_ms);
        pthread_cond_timedwait(&o->cv, &o->mu, &t);
    }
    if (!o->stopping && q->head &&
        (credit >= (int64_t)q->head->bytes || (q->head->elements <= 1 && credit >= (int64_t)WRK_MSG_TARGET_BYTES))) {
        m = q->head;
        q->head = m->next;
        if (!q->head)
            q->tail = NULL;
        m->next = NULL;
        q->bytes -= m->bytes;
        drained(o, q, m->bytes);
        pthread_cond_broadcast(&o->cv);       /* room for producers */
    }
    *stopped = o->stopping;
    pthread_mutex_unlock(&o->mu);
    return m;
}

void wrk_outbox_put_back(struct wrk_outbox *o, int rank, struct wrk_msg *m)
{
    pthread_mutex_lock(&o->mu);
    struct queue *q = &o->queues[rank];
    m->next = q->head;
    q->head = m;
    if (!q->tail)
        q->tail = m;
    q->bytes += m->bytes;
    pthread_mutex_unlock(&o->mu);
}

void wrk_outbox_credit(struct wrk_outbox *o, int rank, int64_t credit)
{
    __atomic_store_n(&o->queues[rank].credit, credit, __ATOMIC_RELAXED);
}

void wrk_outbox_detach(struct wrk_outbox *o, int rank)
{
    pthread_mutex_lock(&o->mu);
    o->queues[rank].attached = o->queues[rank].direct = false;
    __atomic_store_n(&o->queues[rank].credit, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&o->mu);
}

void wrk_outbox_stats(struct wrk_outbox *o, struct wrk_outbox_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&o->mu);
    for (int r = 0; r < o->o.world; r++) {
        const struct queue *q = &o->queues[r];
        out->queue_bytes += (int64_t)q->bytes;
        out->streams += q->attached;
        out->direct_streams += q->attached && q->direct;
        out->credit_bytes += __atomic_load_n(&q->credit, __ATOMIC_RELAXED);
        out->busy_queues += q->head != NULL;
    }
    pthread_mutex_unlock(&o->mu);
}

/* ---- builders ---- */

void wrk_builder_init(struct wrk_builder *bd)
{
    memset(bd, 0, sizeof *bd);
    bd->b.positions = bd->positions;
    bd->b.samples = bd->samples;
    bd->b.tombstones = bd->tombstones;
}

void wrk_builder_release(struct wrk_builder *bd)
{
    free(bd->data);
    bd->data = NULL;
    free(bd->fields);
    bd->fields = NULL;
    bd->fields_len = bd->fields_cap = 0;
    spw_zstd_destroy(bd->z);
    bd->z = NULL;
    for (size_t i = 0; i < bd->b.n_tombstones; i++)
        free(bd->tombstone_errors[i]);
    bd->b.n_tombstones = 0;
}

void wrk_builder_begin(struct wrk_builder *bd, uint64_t job, uint64_t epoch, uint64_t split, uint64_t generation,
                       int cut)
{
    bd->b.job = job;
    bd->b.epoch = epoch;
    bd->b.split = split;
    bd->b.generation = generation;
    bd->b.cut = cut;
    bd->n = 0;
    bd->fields_len = 0;
    bd->b.n_tombstones = 0;
}

/* The stacked elements of bd compressed at level into a new buffer (*zlen bytes), when that saves at least
 * 1/32 of them; NULL otherwise (send them raw). */
static uint8_t *compress_elements(struct wrk_outbox *o, struct wrk_builder *bd, int level, size_t *zlen)
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
        *zlen = 0;          /* sent raw: the message must not say zstd */
        return NULL;
    }
    if (o->o.zstd_in)
        __atomic_add_fetch(o->o.zstd_in, (int64_t)raw, __ATOMIC_RELAXED);
    if (o->o.zstd_out)
        __atomic_add_fetch(o->o.zstd_out, (int64_t)*zlen, __ATOMIC_RELAXED);
    return z;
}

/* The message takes the builder's data buffer (the builder starts a new one), so element bytes are written
 * once on this side. */
int wrk_builder_flush(struct wrk_outbox *o, struct wrk_builder *bd, bool end)
{
    struct spw_wire_batch *b = &bd->b;
    const int rank = (int)(b->split % (uint64_t)o->o.world);
    b->n_positions = b->n_samples = bd->n;
    b->tombstone_errors = bd->tombstone_errors;
    b->n_tombstone_errors = b->n_tombstones;
    b->end_of_split = end;
    b->n_tensors = 0;
    struct wrk_msg *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    if (bd->n) {
        const int level = __atomic_load_n(&o->queues[rank].compress_level, __ATOMIC_RELAXED);
        size_t zlen = 0;
        if (level > 0 && (m->data = compress_elements(o, bd, level, &zlen)) != NULL) {
            /* the builder keeps its raw buffer for the next message */
        } else {
            m->data = bd->data;
            bd->data = NULL;
        }
        m->labels = malloc(bd->n * 8);
        if (!m->labels) {
            wrk_msg_free(m);
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
        if (bd->with_fields) {          /* the fields' bytes, and where each element's start: [n + 1] */
            const size_t offs = (bd->n + 1) * 8;
            if (!(m->field_offsets = malloc(offs)) || !(m->fields = malloc(bd->fields_len + 1))) {
                wrk_msg_free(m);
                return -ENOMEM;
            }
            memcpy(m->field_offsets, bd->field_offsets, offs);
            memcpy(m->fields, bd->fields, bd->fields_len);
            b->n_tensors = 4;
            b->tensors[2] = (struct spw_wire_tensor){.dtype = SPW_DTYPE_U8, .ndim = 1,
                                                     .shape = {(int64_t)bd->fields_len}, .data = m->fields,
                                                     .nbytes = bd->fields_len};
            b->tensors[3] = (struct spw_wire_tensor){.dtype = SPW_DTYPE_I64, .ndim = 1,
                                                     .shape = {(int64_t)bd->n + 1},
                                                     .data = (uint8_t *)m->field_offsets, .nbytes = offs};
        }
    }
    size_t sc = spw_wire_scratch_size(b);
    if (!(m->scratch = malloc(sc + 1))) {
        wrk_msg_free(m);
        return -ENOMEM;
    }
    m->iovcnt = spw_wire_encode(b, m->scratch, sc, m->iov, 1 + 2 * SPW_WIRE_MAX_TENSORS);
    if (m->iovcnt < 0) {
        wrk_msg_free(m);
        return -EINVAL;
    }
    m->bytes = spw_wire_encoded_size(b);
    m->elements = bd->n;
    for (size_t i = 0; i < b->n_tombstones; i++) {     /* encoded: the scratch holds their copies */
        free(bd->tombstone_errors[i]);
        bd->tombstone_errors[i] = NULL;
    }
    push(o, rank, m);
    bd->n = 0;
    bd->fields_len = 0;
    b->n_tombstones = 0;
    return 0;
}

uint8_t *wrk_builder_slot(struct wrk_outbox *o, struct wrk_builder *bd, enum spw_dtype dt, int ndim,
                          const int64_t *shape_in)
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
    if (bd->n && (!same || (bd->n + 1) * eb + bd->fields_len > WRK_MSG_TARGET_BYTES || bd->n == bd->cap_elems) &&
        wrk_builder_flush(o, bd, false) != 0)
        return NULL;
    if (!bd->n) {
        bd->dtype = dt;
        bd->ndim = ndim;
        memcpy(bd->shape, shape, sizeof shape);
        bd->elem_bytes = eb;
        size_t want = WRK_MSG_TARGET_BYTES / (eb ? eb : 1) + 1;
        bd->cap_elems = want > MSG_MAX_ELEMENTS ? MSG_MAX_ELEMENTS : want;
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

int wrk_builder_added(struct wrk_builder *bd, int64_t pos, int64_t sample, int64_t label,
                      const struct spw_fields *fields)
{
    if (bd->with_fields) {
        const size_t need = fields ? spw_fields_packed_size(fields) : 0;
        bd->slot_bytes = bd->elem_bytes;
        if (need > SPW_WIRE_MAX_ELEMENT_BYTES - bd->elem_bytes)
            return bd->slot_err = SPW_ETOOBIG;
        if (bd->fields_len + need > bd->fields_cap) {
            size_t cap = bd->fields_cap ? bd->fields_cap : 4096;
            while (cap < bd->fields_len + need)
                cap *= 2;
            uint8_t *p = realloc(bd->fields, cap);
            if (!p)
                return bd->slot_err = -ENOMEM;
            bd->fields = p;
            bd->fields_cap = cap;
        }
        if (fields)
            spw_fields_pack(fields, bd->fields + bd->fields_len);
        bd->field_offsets[bd->n] = (int64_t)bd->fields_len;
        bd->fields_len += need;
        bd->field_offsets[bd->n + 1] = (int64_t)bd->fields_len;
    }
    bd->labels[bd->n] = label;
    bd->positions[bd->n] = pos;
    bd->samples[bd->n] = sample;
    bd->n++;
    return 0;
}

int wrk_builder_add(struct wrk_outbox *o, struct wrk_builder *bd, int64_t pos, int64_t sample, int64_t label,
                    const struct spw_value *v, const struct spw_fields *fields)
{
    if (!v->placed) {
        enum spw_dtype dt;
        int ndim;
        int64_t shape[SPW_TENSOR_MAX_DIMS];
        spw_value_out_shape(v, SPW_LAYOUT_HWC, &dt, &ndim, shape);
        uint8_t *dst = wrk_builder_slot(o, bd, dt, ndim, shape);
        if (!dst)
            return bd->slot_err;
        spw_value_copy_out(v, SPW_LAYOUT_HWC, dst);
    }
    return wrk_builder_added(bd, pos, sample, label, fields);
}

void wrk_builder_tombstone(struct wrk_outbox *o, struct wrk_builder *bd, int64_t pos, const char *err)
{
    if (bd->b.n_tombstones == WRK_BUILDER_MAX)
        wrk_builder_flush(o, bd, false);                       /* a split of thousands of broken files */
    if (bd->b.n_tombstones == WRK_BUILDER_MAX)
        return;                                                 /* no memory to flush: the split stays open */
    bd->tombstone_errors[bd->b.n_tombstones] = strdup(err);    /* NULL (no memory): sent without a reason */
    bd->tombstones[bd->b.n_tombstones++] = pos;
}
