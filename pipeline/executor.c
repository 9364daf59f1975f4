/* pipeline/executor.c - the in-process executor (see executor.h). One mutex guards the claim cursor and the
 * batch window; element work and the copy into the batch happen outside it. The worker that finishes a
 * batch's last element compacts it (skipped samples) and marks it ready. */
#include "pipeline/executor.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "lib/err.h"
#include "lib/log.h"
#include "pipeline/element.h"
#include "pipeline/fields.h"
#include "pipeline/fusion.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/mix.h"
#include "pipeline/order.h"
#include "pipeline/produce.h"
#include "pipeline/views.h"

struct slot {
    int64_t gbatch;             /* global batch number, -1 when free */
    int n_pos;                  /* positions in this batch */
    int claimed, finished;
    int64_t *samples;           /* n_pos manifest indices */
    bool *ok;                   /* n_pos */
    struct spw_batch_fill fill; /* allocated at the first finished element */
    uint64_t dev;               /* device batches: the batch's block on the device (0: none yet) */
    bool *on_dev;               /* n_pos: made on the device, straight into dev */
    bool ready;
    bool shape_error;
};

struct spw_executor {
    const struct spw_pipeline_spec *spec;
    const struct spw_source *src;
    struct spw_element_ctx ctx;
    struct spw_producer prod;
    const struct spw_backend *gpu;  /* NULL: no GPU thread */
    const struct spw_backend *dev;  /* device batches are handed over on this backend's device; NULL: host */
    bool dev_failed;                /* ... until it failed once (atomic: the GPU thread reads it) */
    struct spw_order order;
    struct spw_rank_view view;  /* this rank's positions of each epoch (all of them for one rank) */
    int64_t per_epoch;          /* batches per epoch */
    int64_t total;              /* batches to produce; -1 = forever */
    int window;
    struct slot *slots;

    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_ready;
    int64_t next_claim_batch;   /* cursor: batch and position of the next element to claim */
    int next_claim_pos;
    int64_t next_deliver;
    bool stopping;
    int fail_rc;
    char errmsg[512];

    struct spw_exec_stats stats;
    void **pool;                /* recycled batch buffers (spw_executor_release) */
    size_t *pool_cap;
    int n_pool, pool_max;
    int threads;
    pthread_t *tids;
};

static struct slot *slot_of(struct spw_executor *ex, int64_t gbatch)
{
    return &ex->slots[gbatch % ex->window];
}

static int batch_positions(const struct spw_executor *ex, int64_t index_in_epoch)
{
    int64_t B = ex->spec->batch.size, first = index_in_epoch * B;
    int64_t n = ex->view.len - first;
    return (int)(n < B ? n : B);
}

/* Claim the next element: returns false when there is no more work. Called with mu held. */
static bool claim(struct spw_executor *ex, int64_t *gbatch, int *pos)
{
    for (;;) {
        if (ex->stopping)
            return false;
        if (ex->total >= 0 && ex->next_claim_batch >= ex->total)
            return false;
        int64_t gb = ex->next_claim_batch;
        if (gb < ex->next_deliver + ex->window) {
            struct slot *s = slot_of(ex, gb);
            if (ex->next_claim_pos == 0) {
                int64_t epoch = gb / ex->per_epoch, idx = gb % ex->per_epoch;
                s->gbatch = gb;
                s->n_pos = batch_positions(ex, idx);
                s->claimed = s->finished = 0;
                s->ready = s->shape_error = false;
                spw_batch_fill_clear(&s->fill);
                s->fill.pad = spw_fill_pad_of(ex->spec);
                for (int p = 0; p < s->n_pos; p++) {
                    s->samples[p] = spw_order_at(&ex->order, (uint64_t)epoch,
                                                 spw_rank_view_pos(&ex->view, idx * ex->spec->batch.size + p));
                    s->ok[p] = s->on_dev[p] = false;
                }
            }
            *gbatch = gb;
            *pos = ex->next_claim_pos;
            s->claimed++;
            if (++ex->next_claim_pos == s->n_pos) {
                ex->next_claim_pos = 0;
                ex->next_claim_batch++;
            }
            return true;
        }
        pthread_cond_wait(&ex->cv_work, &ex->mu);
    }
}

/* A buffer for a batch of `bytes`: this executor's recycled ones, then the process cache, then new memory.
 * Called with ex->mu held. */
static void *pool_take(struct spw_executor *ex, size_t bytes)
{
    const size_t cap = spw_batch_buffer_size(bytes);
    for (int i = 0; i < ex->n_pool; i++) {
        if (ex->pool_cap[i] == cap) {
            void *p = ex->pool[i];
            ex->pool[i] = ex->pool[--ex->n_pool];
            ex->pool_cap[i] = ex->pool_cap[ex->n_pool];
            return p;
        }
    }
    return spw_batch_buffer_take(bytes);
}


/* Memory for position pos of slot s, allocating the slot's batch tensor at its first element. Returns NULL
 * (and flags the batch) when this element's shape differs from the batch's. Called with mu held. */
static void *pool_take_cb(void *ctx, size_t bytes)
{
    return pool_take(ctx, bytes);
}

static uint8_t *slot_memory(struct spw_executor *ex, struct slot *s, int pos, enum spw_dtype dt, int ndim,
                            const int64_t *shape)
{
    if (s->shape_error)
        return NULL;
    uint8_t *p = spw_batch_element_place(&s->fill, s->n_pos, pos, dt, ndim, shape, pool_take_cb, ex, ex->errmsg,
                                         sizeof ex->errmsg);
    s->shape_error = p == NULL;
    return p;
}

struct place_req {
    struct spw_executor *ex;
    struct slot *s;
    int pos;
};

/* spw_element_dest.place: the run's final write goes straight into the batch. */
static void *place_cb(void *opaque, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    struct place_req *rq = opaque;
    pthread_mutex_lock(&rq->ex->mu);
    void *p = slot_memory(rq->ex, rq->s, rq->pos, dt, ndim, shape);
    pthread_mutex_unlock(&rq->ex->mu);
    return p;
}

static void element_failed(struct spw_executor *ex, int64_t sample, int rc, const char *err);

/* Record a finished element, copying its value into the batch unless it was written there already, with its
 * fields (source.fields: v's, or read now for an element the GPU made): a field that cannot be read fails
 * the element. */
static void finish_element(struct spw_executor *ex, struct slot *s, int pos, struct spw_value *v, bool ok)
{
    struct spw_fields *fields = NULL;
    if (ok) {
        char err[512];
        const int rc = spw_fields_take(v, ex->src, ex->spec, s->samples[pos], &fields, err, sizeof err);
        if (rc)
            element_failed(ex, s->samples[pos], rc, err);
        ok = rc == 0;
    }
    uint8_t *dst = NULL;
    if (ok && !v->placed) {
        int ndim;
        int64_t shape[SPW_TENSOR_MAX_DIMS];
        enum spw_dtype dt;
        spw_value_out_shape(v, ex->spec->batch.layout, &dt, &ndim, shape);
        pthread_mutex_lock(&ex->mu);
        dst = slot_memory(ex, s, pos, dt, ndim, shape);
        pthread_mutex_unlock(&ex->mu);
        if (dst)
            spw_value_copy_out(v, ex->spec->batch.layout, dst);
        ok = dst != NULL;
    }
    if (ok && fields) {
        pthread_mutex_lock(&ex->mu);
        const int rc = spw_batch_fill_fields(&s->fill, s->n_pos, pos, fields);     /* takes them */
        pthread_mutex_unlock(&ex->mu);
        if (rc)
            element_failed(ex, s->samples[pos], rc, "out of memory for its fields");
        ok = rc == 0;
    } else {
        spw_fields_free(fields);
    }
    pthread_mutex_lock(&ex->mu);
    s->ok[pos] = ok;
    if (++s->finished == s->n_pos) {
        s->ready = true;
        pthread_cond_broadcast(&ex->cv_ready);
    }
    pthread_mutex_unlock(&ex->mu);
}

static void add_stats(struct spw_executor *ex, const struct spw_element_stats *st)
{
    pthread_mutex_lock(&ex->mu);
    for (int i = 0; i < ex->stats.n_steps; i++) {
        struct spw_op_stat *o = &ex->stats.steps[i];
        if (!st->ran[o->first_op])
            continue;
        o->elements++;
        o->ns_total += st->ns[o->first_op];
        o->out_bytes_total += st->out_bytes[o->first_op];
    }
    pthread_mutex_unlock(&ex->mu);
}

/* A sample could not be made: count it, log it, and under on_error fail stop the run with its reason. */
static void element_failed(struct spw_executor *ex, int64_t sample, int rc, const char *err)
{
    char msg[sizeof ex->errmsg];
    const bool fail_run = spw_produce_failed(&ex->prod, sample, rc, err, NULL, msg, sizeof msg);
    pthread_mutex_lock(&ex->mu);
    ex->stats.skipped++;
    if (fail_run && !ex->fail_rc) {
        ex->fail_rc = rc;
        snprintf(ex->errmsg, sizeof ex->errmsg, "%s", msg);
        ex->stopping = true;
        pthread_cond_broadcast(&ex->cv_work);
        pthread_cond_broadcast(&ex->cv_ready);
    }
    pthread_mutex_unlock(&ex->mu);
}

/* Whether claim() would hand out an element of epoch now, without waiting. Under mu. */
static bool can_claim_now(const struct spw_executor *ex, int64_t epoch)
{
    const int64_t gb = ex->next_claim_batch;
    return !ex->stopping && (ex->total < 0 || gb < ex->total) && gb < ex->next_deliver + ex->window &&
           gb / ex->per_epoch == epoch;
}

/* A CPU thread's elements in hand: one at a time, or, when a group batches (a Python op), up to
 * SPW_ELEMENT_MANY_MAX of one epoch (and of its share of the window), made together on the CPU backend. */
struct cpu_mb {
    struct spw_executor *ex;
    struct slot *s[SPW_ELEMENT_MANY_MAX];
    int pos[SPW_ELEMENT_MANY_MAX];
    int64_t samples[SPW_ELEMENT_MANY_MAX];
    struct place_req rq[SPW_ELEMENT_MANY_MAX];
    struct spw_element_dest dest[SPW_ELEMENT_MANY_MAX];
    struct spw_element_stats stats[SPW_ELEMENT_MANY_MAX];
};

static const struct spw_element_dest *cpu_dest(void *opaque, int k)
{
    struct cpu_mb *m = opaque;
    m->rq[k] = (struct place_req){m->ex, m->s[k], m->pos[k]};
    m->dest[k] = (struct spw_element_dest){place_cb, &m->rq[k], m->ex->spec->batch.layout};
    return &m->dest[k];
}

static struct spw_element_stats *cpu_stats(void *opaque, int k)
{
    struct cpu_mb *m = opaque;
    struct spw_element_stats *st = &m->stats[k];
    memset(st->ran, 0, sizeof st->ran);
    memset(st->ns, 0, sizeof(int64_t) * (size_t)m->ex->spec->n_ops);
    memset(st->out_bytes, 0, sizeof(int64_t) * (size_t)m->ex->spec->n_ops);
    return st;
}

static void cpu_done(void *opaque, int k, int rc, struct spw_value *v, const char *err)
{
    struct cpu_mb *m = opaque;
    if (rc == 0)
        add_stats(m->ex, &m->stats[k]);
    else
        element_failed(m->ex, m->samples[k], rc, err);
    finish_element(m->ex, m->s[k], m->pos[k], v, rc == 0);
    spw_value_free(v);
}

static void *worker(void *arg)
{
    struct spw_executor *ex = arg;
    struct cpu_mb *m = malloc(sizeof *m);
    const struct spw_backend *const table[] = {&spw_backend_cpu};
    /* with a group that batches: this thread's share of the window's elements, so that every thread has
     * some (one thread taking the whole window left the other idle) */
    const int share = ex->window * ex->spec->batch.size / ex->threads;
    const int batch = spw_produce_batching(&ex->prod, 1, ex->ctx.n_groups) == ex->ctx.n_groups ? 1
                      : share < 1 ? 1 : share < SPW_ELEMENT_MANY_MAX ? share : SPW_ELEMENT_MANY_MAX;
    pthread_setname_np(pthread_self(), "spw-exec");
    for (;;) {
        int n = 0;
        int64_t gb, epoch = -1;
        pthread_mutex_lock(&ex->mu);
        while (m && n < batch && (n == 0 || can_claim_now(ex, epoch)) && claim(ex, &gb, &m->pos[n])) {
            epoch = gb / ex->per_epoch;
            m->s[n] = slot_of(ex, gb);
            m->samples[n] = m->s[n]->samples[m->pos[n]];
            n++;
        }
        pthread_mutex_unlock(&ex->mu);
        if (n == 0)
            break;
        m->ex = ex;
        const struct spw_microbatch mb = {.epoch = (uint64_t)epoch, .cut = ex->ctx.n_groups, .n = n,
                                          .samples = m->samples, .opaque = m, .dest = cpu_dest,
                                          .stats = cpu_stats, .done = cpu_done};
        spw_backend_run(table, 1, &ex->prod, &mb);
    }
    free(m);
    return NULL;
}

/* ---- the GPU's thread: micro-batches ---- */

#define GPU_MB 4

struct gpu_mb {
    struct spw_executor *ex;
    struct slot *s[GPU_MB];
    int pos[GPU_MB];
    int64_t samples[GPU_MB];
};

static void gpu_done(void *opaque, int k, int rc, struct spw_value *v, const char *err)
{
    struct gpu_mb *m = opaque;
    if (rc)
        element_failed(m->ex, m->samples[k], rc, err);
    else if (v->placed)
        m->s[k]->on_dev[m->pos[k]] = true;     /* read by next() once the slot is ready */
    finish_element(m->ex, m->s[k], m->pos[k], v, rc == 0);
    spw_value_free(v);
}

/* microbatch.device_place: element k's row of its batch's device block (allocated at the slot's first). */
static uint64_t gpu_device_place(void *opaque, int k, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    struct gpu_mb *m = opaque;
    struct spw_executor *ex = m->ex;
    struct slot *s = m->s[k];
    pthread_mutex_lock(&ex->mu);
    const bool placed = !s->fill.pad && slot_memory(ex, s, m->pos[k], dt, ndim, shape) != NULL;
    const size_t row = s->fill.elem_bytes;
    pthread_mutex_unlock(&ex->mu);
    if (!placed || (!s->dev && spw_gpu_backend_block_alloc(ex->dev, row * (size_t)s->n_pos, &s->dev) != 0))
        return 0;               /* host memory: the arena is full (of the trainer's batches, say) */
    return s->dev + row * (size_t)m->pos[k];
}

/* Claims up to GPU_MB elements of one epoch (waiting for the first only) and makes them on [GPU, CPU]. */
static void *gpu_worker(void *arg)
{
    struct spw_executor *ex = arg;
    const struct spw_backend *const table[] = {ex->gpu, &spw_backend_cpu};
    pthread_setname_np(pthread_self(), "spw-exec-gpu");
    for (;;) {
        struct gpu_mb m = {.ex = ex};
        int n = 0;
        int64_t gb, epoch = -1;
        pthread_mutex_lock(&ex->mu);
        while (n < GPU_MB && (n == 0 || can_claim_now(ex, epoch)) && claim(ex, &gb, &m.pos[n])) {
            epoch = gb / ex->per_epoch;
            m.s[n] = slot_of(ex, gb);
            m.samples[n] = m.s[n]->samples[m.pos[n]];
            n++;
        }
        pthread_mutex_unlock(&ex->mu);
        if (n == 0)
            break;
        const struct spw_microbatch mb = {.epoch = (uint64_t)epoch, .cut = ex->ctx.n_groups, .n = n,
                                          .samples = m.samples, .opaque = &m, .done = gpu_done,
                                          .device_place = ex->dev && !__atomic_load_n(&ex->dev_failed, __ATOMIC_ACQUIRE)
                                                              ? gpu_device_place : NULL};
        spw_backend_run(table, 2, &ex->prod, &mb);
    }
    return NULL;
}

int spw_executor_create(const struct spw_pipeline_spec *spec, const struct spw_source *src,
                        const struct spw_executor_opts *opts, struct spw_executor **out, char *err, size_t errlen)
{
    struct spw_executor *ex = calloc(1, sizeof *ex);
    if (!ex)
        return -ENOMEM;
    ex->spec = spec;
    ex->src = src;
    int B = spec->batch.size;
    const int world = opts->world_size > 1 ? opts->world_size : 1;
    if (spw_rank_view_init(&ex->view, src->n, world > 1 ? opts->rank : 0, world,
                           opts->split_size > 0 ? opts->split_size : SPW_DEFAULT_SPLIT,
                           !spec->batch.drop_remainder) != 0) {
        snprintf(err, errlen, "rank %d of %d: needs 0 <= rank < world_size and at least one split of %d samples "
                 "per rank (%lld samples)", opts->rank, world, opts->split_size > 0 ? opts->split_size :
                 SPW_DEFAULT_SPLIT, (long long)src->n);
        free(ex);
        return SPW_ESPEC;
    }
    const int64_t n = ex->view.len;             /* this rank's positions per epoch */
    ex->per_epoch = spec->batch.drop_remainder ? n / B : (n + B - 1) / B;
    if (ex->per_epoch == 0) {
        snprintf(err, errlen, "batch.size: %d is larger than the dataset (%lld samples%s) with drop_remainder", B,
                 (long long)n, world > 1 ? " for this rank" : "");
        free(ex);
        return SPW_ESPEC;
    }
    ex->total = spec->source.epochs > 0 ? spec->source.epochs * ex->per_epoch : -1;
    if (opts->first_batch < 0 || (ex->total >= 0 && opts->first_batch > ex->total)) {
        snprintf(err, errlen, "resume at batch %lld: the run has %lld", (long long)opts->first_batch,
                 (long long)ex->total);
        free(ex);
        return SPW_ESPEC;
    }
    if (spw_mix_check_source(&spec->batch.mix, src, err, errlen) != 0) {
        free(ex);
        return SPW_ESPEC;
    }
    ex->next_claim_batch = ex->next_deliver = opts->first_batch;
    if (opts->max_batches > 0 && (ex->total < 0 || opts->first_batch + opts->max_batches < ex->total))
        ex->total = opts->first_batch + opts->max_batches;
    ex->threads = opts->threads > 0 ? opts->threads : 1;
    /* Threads share each batch (they claim elements, not batches), so two batches in flight keep every
     * thread busy while the previous one is handed over; more only costs memory. */
    ex->window = opts->window_batches > 0 ? opts->window_batches : 2;
    spw_order_init(&ex->order, src->n, spec->source.shuffle, spec->source.seed);
    int rc = spw_element_ctx_init(&ex->ctx, spec);
    ex->prod = (struct spw_producer){.spec = spec, .src = src, .ctx = &ex->ctx, .component = "executor"};
    ex->slots = calloc((size_t)ex->window, sizeof *ex->slots);
    ex->gpu = opts->gpu;
    ex->dev = opts->device_batches ? opts->gpu : NULL;
    if (ex->dev && (spec->batch.mix.num_classes || spec->n_views)) {
        spw_log(SPW_LOG_INFO, "executor", "batches are handed over in host memory: %s there",
                spec->n_views ? "the views are split into their tensors" : "batch.mix mixes them");
        ex->dev = NULL;
    }
    char why[256];
    if (rc == 0 && ex->gpu && !spw_gpu_can_make(&ex->ctx, ex->ctx.n_groups, why, sizeof why)) {
        spw_log(SPW_LOG_INFO, "executor", "the job is made on the CPU only: %s", why);
        ex->gpu = NULL;
    }
    ex->tids = calloc((size_t)ex->threads + 1, sizeof *ex->tids);
    ex->pool_max = ex->window + 1;
    ex->pool = calloc((size_t)ex->pool_max, sizeof *ex->pool);
    ex->pool_cap = calloc((size_t)ex->pool_max, sizeof *ex->pool_cap);
    if (rc || !ex->slots || !ex->tids || !ex->pool || !ex->pool_cap)
        goto nomem;
    for (int i = 0; i < ex->window; i++) {
        ex->slots[i].gbatch = -1;
        ex->slots[i].samples = calloc((size_t)B, sizeof(int64_t));
        ex->slots[i].ok = calloc((size_t)B, sizeof(bool));
        ex->slots[i].on_dev = calloc((size_t)B, sizeof(bool));
        if (!ex->slots[i].samples || !ex->slots[i].ok || !ex->slots[i].on_dev)
            goto nomem;
    }
    /* One stats row per step: a fused decode group, or a single op. */
    for (int g = 0; g < ex->ctx.n_groups; g++) {
        const struct spw_group *gr = &ex->ctx.groups[g];
        int steps = gr->kind == SPW_GROUP_DECODE ? 1 : gr->count;
        for (int k = 0; k < steps; k++) {
            struct spw_op_stat *o = &ex->stats.steps[ex->stats.n_steps++];
            o->first_op = gr->first + k;
            o->n_ops = gr->kind == SPW_GROUP_DECODE ? gr->count : 1;
            size_t off = 0;
            for (int i = 0; i < o->n_ops; i++)
                off += (size_t)snprintf(o->name + off, sizeof o->name - off, "%s%s", i ? "+" : "",
                                        spw_op_name(spec->ops[o->first_op + i].kind));
        }
    }
    pthread_mutex_init(&ex->mu, NULL);
    pthread_cond_init(&ex->cv_work, NULL);
    pthread_cond_init(&ex->cv_ready, NULL);
    for (int i = 0; i < ex->threads + (ex->gpu != NULL); i++) {
        if (pthread_create(&ex->tids[i], NULL, i < ex->threads ? worker : gpu_worker, ex) != 0) {
            ex->gpu = NULL;
            ex->threads = i;
            spw_executor_destroy(ex);
            snprintf(err, errlen, "cannot start worker threads");
            return -EAGAIN;
        }
    }
    *out = ex;
    return 0;
nomem:
    spw_element_ctx_destroy(&ex->ctx);
    for (int i = 0; ex->slots && i < ex->window; i++) {
        free(ex->slots[i].samples);
        free(ex->slots[i].ok);
        free(ex->slots[i].on_dev);
    }
    free(ex->slots);
    free(ex->tids);
    free(ex->pool);
    free(ex->pool_cap);
    free(ex);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

const char *spw_executor_errmsg(const struct spw_executor *ex)
{
    return ex->errmsg;
}

/* Keep b's data buffer for the next batches (when there is room). Under mu. */
static void give_back_buffer(struct spw_executor *ex, struct spw_batch *b)
{
    if (b->data_capacity && ex->n_pool < ex->pool_max) {
        ex->pool[ex->n_pool] = b->tensors[0].data;
        ex->pool_cap[ex->n_pool++] = b->data_capacity;
        b->tensors[0].data = NULL;
        b->data_capacity = 0;
    }
}

/* A ready slot's batch on the device: its block with the host-made rows uploaded and the gaps closed.
 * Returns the block (the slot's no more), or 0 for a host batch: the arena has no room now, or the device
 * failed (then the rows it made are made again on the CPU, and every later batch is a host one). */
static uint64_t device_batch(struct spw_executor *ex, struct slot *s)
{
    const size_t row = s->fill.elem_bytes;
    const bool failed = __atomic_load_n(&ex->dev_failed, __ATOMIC_ACQUIRE);
    if (!s->dev && (failed || spw_gpu_backend_block_alloc(ex->dev, row * (size_t)s->n_pos, &s->dev)))
        return 0;
    char err[512];
    uint64_t dev = s->dev;
    s->dev = 0;
    if (spw_gpu_backend_batch_finish(ex->dev, dev, s->fill.data.data, row, s->n_pos, s->ok, s->on_dev, err,
                                     sizeof err) == 0)
        return dev;
    spw_gpu_backend_block_free(ex->dev, dev);
    if (!failed)
        spw_log(SPW_LOG_ERROR, "executor", "%s; batches are handed over in host memory from now on, and the "
                "elements the device made for this one are made again on the CPU", err);
    __atomic_store_n(&ex->dev_failed, true, __ATOMIC_RELEASE);
    const int64_t epoch = s->gbatch / ex->per_epoch;
    for (int p = 0; p < s->n_pos; p++) {
        if (!s->ok[p] || !s->on_dev[p])
            continue;
        struct spw_value v;
        const int rc = spw_produce(&ex->prod, (uint64_t)epoch, s->samples[p], ex->ctx.n_groups, &v, NULL, NULL,
                                   err, sizeof err);
        if (rc == 0)
            spw_value_copy_out(&v, ex->spec->batch.layout, (uint8_t *)s->fill.data.data + row * (size_t)p);
        else
            element_failed(ex, s->samples[p], rc, err);
        s->ok[p] = rc == 0;
        s->on_dev[p] = false;
        spw_value_free(&v);
    }
    return 0;
}

int spw_executor_next(struct spw_executor *ex, struct spw_batch **out)
{
    pthread_mutex_lock(&ex->mu);
    if (ex->total >= 0 && ex->next_deliver >= ex->total) {
        pthread_mutex_unlock(&ex->mu);
        return SPW_ECLOSED;
    }
    struct slot *s = slot_of(ex, ex->next_deliver);
    while (!ex->fail_rc && !(s->gbatch == ex->next_deliver && s->ready))
        pthread_cond_wait(&ex->cv_ready, &ex->mu);
    if (ex->fail_rc) {
        int rc = ex->fail_rc;
        pthread_mutex_unlock(&ex->mu);
        return rc;
    }
    if (s->shape_error) {
        ex->fail_rc = SPW_ESPEC;
        ex->stopping = true;
        pthread_cond_broadcast(&ex->cv_work);
        pthread_mutex_unlock(&ex->mu);
        return SPW_ESPEC;
    }
    pthread_mutex_unlock(&ex->mu);

    /* The slot is ours until next_deliver moves: build the batch without the lock. */
    const uint64_t dev = ex->dev && spw_batch_fill_started(&s->fill) && !s->fill.pad ? device_batch(ex, s) : 0;
    struct spw_batch *b;
    char err[sizeof ex->errmsg];
    int rc = spw_batch_build(ex->spec, ex->src, s->gbatch / ex->per_epoch, s->gbatch % ex->per_epoch, s->n_pos,
                             s->samples, s->ok, &s->fill, &b, err, sizeof err);
    if (rc) {
        if (dev)
            spw_gpu_backend_block_free(ex->dev, dev);
        /* The slot's fill is spent: the run stops here, and this call and every later one say why. */
        pthread_mutex_lock(&ex->mu);
        if (!ex->fail_rc) {
            ex->fail_rc = rc;
            snprintf(ex->errmsg, sizeof ex->errmsg, "%s", err);
        }
        ex->stopping = true;
        pthread_cond_broadcast(&ex->cv_work);
        pthread_cond_broadcast(&ex->cv_ready);
        pthread_mutex_unlock(&ex->mu);
        return rc;
    }
    if (dev) {                  /* the host rows were staging: the batch's data is the device block */
        pthread_mutex_lock(&ex->mu);
        give_back_buffer(ex, b);
        pthread_mutex_unlock(&ex->mu);
        if (b->data_capacity)
            spw_batch_buffer_put(b->tensors[0].data, b->data_capacity);
        b->data_capacity = 0;
        b->tensors[0].data = (void *)(uintptr_t)dev;
        b->device_block = dev;
        spw_gpu_backend_dlpack_device(ex->dev, &b->device_type, &b->device_id);
    }
    const int n_ok = b->n;
    pthread_mutex_lock(&ex->mu);
    s->gbatch = -1;
    ex->next_deliver++;
    ex->stats.batches++;
    ex->stats.device_batches += dev != 0;
    ex->stats.elements += n_ok;
    pthread_cond_broadcast(&ex->cv_work);
    pthread_mutex_unlock(&ex->mu);
    *out = b;
    return 0;
}

void spw_executor_stats(struct spw_executor *ex, struct spw_exec_stats *out)
{
    pthread_mutex_lock(&ex->mu);
    *out = ex->stats;
    pthread_mutex_unlock(&ex->mu);
}

void spw_executor_destroy(struct spw_executor *ex)
{
    if (!ex)
        return;
    pthread_mutex_lock(&ex->mu);
    ex->stopping = true;
    pthread_cond_broadcast(&ex->cv_work);
    pthread_cond_broadcast(&ex->cv_ready);
    pthread_mutex_unlock(&ex->mu);
    for (int i = 0; i < ex->threads + (ex->gpu != NULL); i++)
        pthread_join(ex->tids[i], NULL);
    for (int i = 0; i < ex->window; i++) {
        free(ex->slots[i].samples);
        free(ex->slots[i].ok);
        free(ex->slots[i].on_dev);
        if (ex->slots[i].dev)
            spw_gpu_backend_block_free(ex->dev, ex->slots[i].dev);
        spw_batch_fill_clear(&ex->slots[i].fill);
    }
    for (int i = 0; i < ex->n_pool; i++)
        spw_batch_buffer_put(ex->pool[i], ex->pool_cap[i]);
    free(ex->pool);
    free(ex->pool_cap);
    spw_element_ctx_destroy(&ex->ctx);
    pthread_mutex_destroy(&ex->mu);
    pthread_cond_destroy(&ex->cv_work);
    pthread_cond_destroy(&ex->cv_ready);
    free(ex->slots);
    free(ex->tids);
    free(ex);
}

void spw_executor_release(struct spw_executor *ex, struct spw_batch *b)
{
    if (!b)
        return;
    if (b->device_block) {
        spw_gpu_backend_block_free(ex->dev, b->device_block);
        b->tensors[0].data = NULL;
        b->device_block = 0;
    }
    pthread_mutex_lock(&ex->mu);
    give_back_buffer(ex, b);
    pthread_mutex_unlock(&ex->mu);
    spw_batch_free(b);
}
