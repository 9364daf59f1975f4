/* pipeline/gpu_backend.c - the GPU backend (see gpu_backend.h): per micro-batch, prepare every element on
 * the CPU, queue its uploads, kernels and download (or final write into a device batch) on the device, wait
 * once, then hand the elements over in order. Arena blocks live from the queueing to the hand-over; device
 * batches' blocks until the batch is released. Thread-safe: mu covers the device and the counters; the
 * arena has its own lock, taken last (a micro-batch's device_place allocates while mu is held). */
#include "pipeline/gpu_backend.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/arena.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "ops/gpu_load.h"
#include "pipeline/channels.h"
#include "pipeline/fields.h"
#include "pipeline/gpu_ops.h"
#include "pipeline/image_ops.h"
#include "pipeline/op_registry.h"

enum {
    BLK_REGION, BLK_BOUNDS_H, BLK_KK_H, BLK_BOUNDS_V, BLK_KK_V, BLK_TMP, BLK_MID, BLK_LUT, BLK_OUT,
    BLK_IMG_A, BLK_IMG_B, BLK_SCRATCH, N_BLK   /* the last three: pipelines with ops after the decode group */
};

struct gpu {
    struct spw_backend b;
    const struct spw_gpu_plugin *p;
    void *dev;
    int device;
    spw_dptr base;
    struct spw_arena *arena;
    pthread_mutex_t mu, arena_mu;
    bool broken;                /* the device failed once: CUDA errors stick to a context, so no more */
    struct spw_gpu_stats st;
    char describe[768], brief[64];
};

/* One element of a micro-batch on its way through the device. */
struct item {
    const struct spw_microbatch *mb;
    int k;
    bool skip, cpu, queued;
    int rc;
    size_t encoded;
    struct spw_op_call call;
    struct spw_jpeg_work work;
    bool have_work;
    struct spw_value v;         /* the output, in host memory */
    size_t off[N_BLK];
    bool held[N_BLK];
    void *hold;                 /* host memory a copy was queued from: freed once the stream is synced */
    char err[512];
};

bool spw_gpu_can_make(const struct spw_element_ctx *ctx, int cut, char *why, size_t whylen)
{
    const struct spw_pipeline_spec *spec = ctx->spec;
    char no[160] = "";
    if (spec->n_ops == 0 || spec->ops[0].kind != SPW_OP_DECODE_JPEG)
        snprintf(no, sizeof no, "it makes JPEG pipelines only");
    else if (cut != ctx->n_groups)
        snprintf(no, sizeof no, "it makes whole pipelines only (cut %d of %d groups)", cut, ctx->n_groups);
    else if (spw_out_channels(spec, spec->n_ops) == 1)
        snprintf(no, sizeof no, "it makes three-channel outputs only (a grayscale has num_output_channels 1)");
    else if (spw_fields_have_targets(&spec->source))
        snprintf(no, sizeof no, "it does not move masks or boxes (source.fields)");
    for (int gi = 1; gi < ctx->n_groups && !no[0]; gi++) {
        const struct spw_group *g = &ctx->groups[gi];
        for (int i = g->first; i < g->first + g->count && !no[0]; i++) {
            const struct spw_op_def *d = spw_op_def(spec->ops[i].kind);
            /* the last group's tensor steps: its normalize / to_tensor first (the output step), then tensor
             * ops with kernels (random_erasing) on the output */
            const bool tensor_ok = gi == ctx->n_groups - 1 &&
                                   (d->cls == SPW_OPC_TO_TENSOR ? i == g->first : d->gpu && d->cls == SPW_OPC_TENSOR);
            if (g->kind == SPW_GROUP_TENSOR ? !tensor_ok : !spw_gpu_op_has_kernel(&spec->ops[i]))
                snprintf(no, sizeof no, "ops[%d] %s has no GPU kernel%s", i, d->name,
                         g->kind == SPW_GROUP_TENSOR ? " here (after normalize / to_tensor)" : "");
        }
    }
    if (no[0] && why)
        snprintf(why, whylen, "%s", no);
    return !no[0];
}

static int arena_alloc(struct gpu *g, size_t bytes, size_t *off)
{
    pthread_mutex_lock(&g->arena_mu);
    int rc = spw_arena_alloc(g->arena, bytes, off);
    pthread_mutex_unlock(&g->arena_mu);
    return rc ? -ENOSPC : 0;
}

static void arena_free(struct gpu *g, size_t off)
{
    pthread_mutex_lock(&g->arena_mu);
    spw_arena_free(g->arena, off);
    pthread_mutex_unlock(&g->arena_mu);
}

static int blk(struct gpu *g, struct item *it, int which, size_t bytes)
{
    if (arena_alloc(g, bytes, &it->off[which]) != 0)
        return -ENOSPC;
    it->held[which] = true;
    return 0;
}

static spw_dptr at(const struct gpu *g, const struct item *it, int which)
{
    return g->base + it->off[which];
}

static void release(struct gpu *g, struct item *it)
{
    for (int i = 0; i < N_BLK; i++)
        if (it->held[i])
            arena_free(g, it->off[i]);
    memset(it->held, 0, sizeof it->held);
    free(it->hold);
    it->hold = NULL;
}

static enum spw_gpu_out out_kind(enum spw_sink_kind k)
{
    switch (k) {
    case SPW_SINK_F32_CHW: return SPW_GPU_OUT_F32_CHW;
    case SPW_SINK_F16_CHW: return SPW_GPU_OUT_F16_CHW;
    case SPW_SINK_U8_CHW: return SPW_GPU_OUT_U8_CHW;
    default: return SPW_GPU_OUT_U8_HWC;
    }
}

/* The ops after the decode group, on the device image held in blocks A/B. */
static int queue_ops(struct gpu *g, struct item *it, struct spw_gpu_image *img, struct spw_gpu_image *tmp)
{
    const struct spw_element_ctx *ctx = it->call.ctx;
    const spw_dptr scratch = at(g, it, BLK_SCRATCH);
    int rc = 0;
    for (int gi = 1; gi < ctx->n_groups && rc == 0; gi++) {
        const struct spw_group *grp = &ctx->groups[gi];
        if (grp->kind == SPW_GROUP_TENSOR)
            break;              /* the output step and the ops on its tensor: queue_tensor_ops */
        for (int i = grp->first; i < grp->first + grp->count && rc == 0; i++) {
            const struct spw_op_def *d = spw_op_def(ctx->spec->ops[i].kind);
            struct spw_op_call oc = {.ctx = ctx, .op = &ctx->spec->ops[i], .index = i, .epoch = it->call.epoch,
                                     .sample = it->call.sample, .err = it->err, .errlen = sizeof it->err};
            spw_element_rng(ctx, oc.epoch, oc.sample, i, &oc.rng);
            struct spw_gpu_call gc = {.p = g->p, .dev = g->dev, .op = &oc, .img = *img, .tmp = *tmp};
            spw_gpu_call_scratch(&gc, scratch);
            rc = d->gpu(&gc);
            *img = gc.img;
            *tmp = gc.tmp;
        }
    }
    return rc;
}

/* The last group's ops on the output tensor (3 x h x w at out), after its normalize / to_tensor. */
static int queue_tensor_ops(struct gpu *g, struct item *it, spw_dptr out, int w, int h)
{
    const struct spw_element_ctx *ctx = it->call.ctx;
    const struct spw_group *grp = &ctx->groups[ctx->n_groups - 1];
    int rc = 0;
    for (int i = grp->first; i < grp->first + grp->count && rc == 0; i++) {
        const struct spw_op_def *d = spw_op_def(ctx->spec->ops[i].kind);
        if (d->cls == SPW_OPC_TO_TENSOR)
            continue;           /* the output step itself */
        struct spw_op_call oc = {.ctx = ctx, .op = &ctx->spec->ops[i], .index = i, .epoch = it->call.epoch,
                                 .sample = it->call.sample, .err = it->err, .errlen = sizeof it->err};
        spw_element_rng(ctx, oc.epoch, oc.sample, i, &oc.rng);
        struct spw_gpu_call gc = {.p = g->p, .dev = g->dev, .op = &oc, .hold = it->hold};
        gc.out.data = out;
        gc.out.dtype = it->v.t.dtype;
        gc.out.c = 3;
        gc.out.h = h;
        gc.out.w = w;
        rc = d->gpu(&gc);
        it->hold = gc.hold;
    }
    return rc;
}

/* spw_element_dest.place for the output step: the micro-batch's device address as a pointer. */
static void *device_place(void *opaque, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    const struct item *it = opaque;
    return (void *)(uintptr_t)it->mb->device_place(it->mb->opaque, it->k, dt, ndim, shape);
}

/* Arena blocks, uploads, kernels and the download for a prepared element. -ENOSPC when it does not fit
 * (nothing queued), -ENOTSUP / -EINVAL when an op has no kernel for this instance (the CPU makes it), another
 * error for the device. */
static int queue_item(struct gpu *g, struct item *it)
{
    const struct spw_element_ctx *ctx = it->call.ctx;
    const struct spw_jpeg_work *w = &it->work;
    const struct spw_resample_plan *pl = &w->plan;
    const bool resample = w->how == SPW_JPEG_RESAMPLE, more = ctx->n_groups > 1;
    const struct spw_group *last = &ctx->groups[ctx->n_groups - 1];
    /* The output step: the decode group's normalize, or the last group's when it is a tensor group. */
    const bool tensor_last = more && last->kind == SPW_GROUP_TENSOR;
    const int norm = tensor_last && spw_op_def(ctx->spec->ops[last->first].kind)->cls == SPW_OPC_TO_TENSOR
                         ? last->first : w->norm;
    /* The image's sizes through the other groups' ops (crops change it): the output's, and the largest. */
    int fw = w->out_w, fh = w->out_h, mw = fw, mh = fh;
    size_t max_px = (size_t)fw * (size_t)fh;
    for (int i = ctx->groups[0].first + ctx->groups[0].count; i < ctx->spec->n_ops && more; i++) {
        spw_gpu_op_size(&ctx->spec->ops[i], &fw, &fh);
        if ((int64_t)fw * fh > ctx->spec->max_pixels)
            return -ENOTSUP;    /* the CPU refuses it as its op would */
        mw = fw > mw ? fw : mw;
        mh = fh > mh ? fh : mh;
        max_px = (size_t)fw * (size_t)fh > max_px ? (size_t)fw * (size_t)fh : max_px;
    }
    struct spw_sink s;
    const struct spw_element_dest dest = {device_place, it, ctx->spec->batch.layout};
    int rc = spw_image_sink(ctx, norm, fw, fh, !more && w->hflip, !more && w->vflip,
                            it->mb->device_place ? &dest : NULL, &it->v, &s, it->err, sizeof it->err);
    if (rc)
        return rc;
    const bool placed = it->v.placed;   /* the final write goes into a device batch: no download */
    const size_t region = w->reg.img.stride * (size_t)w->reg.img.h, out = spw_value_bytes(&it->v);
    const size_t w3 = (size_t)w->out_w * 3, lut = s.kind == SPW_SINK_F16_CHW ? 3 * 256 * 2 : 3 * 256 * 4;
    if (blk(g, it, BLK_REGION, region) || (!placed && blk(g, it, BLK_OUT, out)) ||
        (s.lut && blk(g, it, BLK_LUT, lut)) ||
        (resample && (blk(g, it, BLK_TMP, (size_t)pl->row_count * w3) ||
                      blk(g, it, BLK_MID, (size_t)pl->out_h * w3))) ||
        (resample && pl->need_h && (blk(g, it, BLK_BOUNDS_H, sizeof(int32_t) * 2 * (size_t)pl->out_w) ||
                                    blk(g, it, BLK_KK_H, sizeof(int32_t) * (size_t)pl->out_w * pl->ksize_h))) ||
        (resample && pl->need_v && (blk(g, it, BLK_BOUNDS_V, sizeof(int32_t) * 2 * (size_t)pl->out_h) ||
                                    blk(g, it, BLK_KK_V, sizeof(int32_t) * (size_t)pl->out_h * pl->ksize_v))) ||
        (more && (blk(g, it, BLK_IMG_A, 3 * max_px) || blk(g, it, BLK_IMG_B, 3 * max_px) ||
                  blk(g, it, BLK_SCRATCH, spw_gpu_call_scratch_bytes(mw, mh))))) {
        release(g, it);
        spw_value_free(&it->v);
        return -ENOSPC;
    }
    const struct spw_gpu_plugin *p = g->p;
    it->queued = true;          /* from here the blocks stay held until the stream is synced */
    rc = p->upload(g->dev, at(g, it, BLK_REGION), w->reg.img.data, region);
    if (rc == 0 && s.lut)
        rc = p->upload(g->dev, at(g, it, BLK_LUT), s.kind == SPW_SINK_F16_CHW ? (const void *)s.lut->h
                                                                              : (const void *)s.lut->v, lut);
    /* The decode group's image on the device: the resample's output, or the crop of the region. */
    struct spw_gpu_image img = {.w = w->out_w, .h = w->out_h};
    if (rc == 0 && resample) {
        struct spw_gpu_resample a = {
            .src = at(g, it, BLK_REGION), .src_stride = w->reg.img.stride, .src_x0 = w->reg.x0,
            .src_y0 = w->reg.y0, .row_first = pl->row_first, .row_count = pl->row_count, .out_w = pl->out_w,
            .out_h = pl->out_h, .need_h = pl->need_h, .need_v = pl->need_v, .ksize_h = pl->ksize_h,
            .ksize_v = pl->ksize_v, .src_x_first = pl->src_x0, .tmp = at(g, it, BLK_TMP), .dst = at(g, it, BLK_MID)};
        if (pl->need_h) {
            a.bounds_h = at(g, it, BLK_BOUNDS_H);
            a.kk_h = at(g, it, BLK_KK_H);
            rc = p->upload(g->dev, a.bounds_h, pl->bounds_h, sizeof(int32_t) * 2 * (size_t)pl->out_w);
            if (rc == 0)
                rc = p->upload(g->dev, a.kk_h, pl->kk_h, sizeof(int32_t) * (size_t)pl->out_w * pl->ksize_h);
        }
        if (rc == 0 && pl->need_v) {
            a.bounds_v = at(g, it, BLK_BOUNDS_V);
            a.kk_v = at(g, it, BLK_KK_V);
            rc = p->upload(g->dev, a.bounds_v, pl->bounds_v, sizeof(int32_t) * 2 * (size_t)pl->out_h);
            if (rc == 0)
                rc = p->upload(g->dev, a.kk_v, pl->kk_v, sizeof(int32_t) * (size_t)pl->out_h * pl->ksize_v);
        }
        if (rc == 0)
            rc = p->resample(g->dev, &a);
        img.data = at(g, it, BLK_MID);
        img.stride = w3;
    } else if (rc == 0) {
        img.data = at(g, it, BLK_REGION) + (size_t)(w->crop.y - w->reg.y0) * w->reg.img.stride +
                   3 * (size_t)(w->crop.x - w->reg.x0);
        img.stride = w->reg.img.stride;
    }
    if (rc == 0 && more) {
        /* The decode group's flips first (into a tight image A), then the other groups' ops. */
        const struct spw_gpu_sink flip = {.src = img.data, .src_stride = img.stride, .w = img.w, .h = img.h,
                                          .hflip = w->hflip, .vflip = w->vflip, .kind = SPW_GPU_OUT_U8_HWC,
                                          .dst = at(g, it, BLK_IMG_A)};
        struct spw_gpu_image tmp = {.data = at(g, it, BLK_IMG_B), .stride = w3, .w = img.w, .h = img.h};
        rc = p->sink(g->dev, &flip);
        img = (struct spw_gpu_image){.data = at(g, it, BLK_IMG_A), .stride = w3, .w = img.w, .h = img.h};
        if (rc == 0)
            rc = queue_ops(g, it, &img, &tmp);
    }
    struct spw_gpu_sink sk = {.src = img.data, .src_stride = img.stride, .w = img.w, .h = img.h,
                              .hflip = !more && w->hflip, .vflip = !more && w->vflip, .kind = out_kind(s.kind),
                              .lut = s.lut ? at(g, it, BLK_LUT) : 0,
                              .dst = placed ? (spw_dptr)(uintptr_t)s.data : at(g, it, BLK_OUT)};
    if (rc == 0)
        rc = p->sink(g->dev, &sk);
    if (rc == 0 && tensor_last)
        rc = queue_tensor_ops(g, it, sk.dst, fw, fh);
    if (rc == 0 && !placed)
        rc = p->download(g->dev, s.data, at(g, it, BLK_OUT), out);
    return rc;
}

/* Prepare element k on the CPU and queue it on the device, or mark it for the CPU. */
static void start_item(struct gpu *g, const struct spw_producer *p, const struct spw_microbatch *mb, int k,
                       struct item *it)
{
    const struct spw_element_ctx *ctx = p->ctx;
    it->mb = mb;
    it->k = k;
    it->call = (struct spw_op_call){.ctx = ctx, .op = &ctx->spec->ops[0], .index = 0, .epoch = mb->epoch,
                                    .sample = mb->samples[k], .err = it->err, .errlen = sizeof it->err};
    spw_element_rng(ctx, mb->epoch, mb->samples[k], 0, &it->call.rng);
    uint8_t *buf;
    size_t len;
    if ((it->rc = spw_produce_read(p, mb->samples[k], &buf, &len, it->err, sizeof it->err)) != 0)
        return;
    it->encoded = len;
    it->rc = spw_jpeg_group_prepare(&it->call, &ctx->groups[0], buf, len, &it->work);
    it->have_work = true;
    free(buf);
    if (it->rc)
        return;
    const bool nearest = it->work.how == SPW_JPEG_RESAMPLE && it->work.plan.nearest;
    if (it->work.how == SPW_JPEG_SEPARATE || nearest) {
        it->cpu = true;         /* a crop that pads runs op by op; nearest sampling has no kernel yet */
        return;
    }
    int rc = queue_item(g, it);
    if (rc == -ENOSPC || rc == -ENOTSUP || (rc == -EINVAL && it->queued)) {
        it->cpu = true;         /* does not fit in the arena now, or an op without a kernel for it */
    } else if (rc && !it->queued) {
        it->rc = rc;            /* the element itself: an output over max_pixels, no host memory */
    } else if (rc) {
        it->cpu = true;
        g->st.device_errors++;
        g->broken = true;
        spw_log(SPW_LOG_ERROR, "gpu", "queueing sample=%lld failed (%s): making it, and every element from now "
                "on, on the CPU", (long long)mb->samples[k], g->p->last_error(g->dev));
    }
}

/* Hand element k over: from the device, or made on the CPU from its prepared region. */
static void finish_item(struct gpu *g, const struct spw_producer *p, const struct spw_microbatch *mb, int k,
                        struct item *it)
{
    if (it->rc == 0 && it->cpu) {
        g->st.cpu_elements++;
        spw_value_free(&it->v);
        if (it->work.how == SPW_JPEG_SEPARATE) {
            it->rc = spw_produce(p, mb->epoch, mb->samples[k], mb->cut, &it->v, NULL, NULL, it->err,
                                 sizeof it->err);
        } else {                /* from the prepared region: no second read or decode */
            int consumed;
            it->rc = spw_jpeg_group_finish(&it->call, &p->ctx->groups[0], &it->work, &it->v, &consumed);
            if (it->rc == 0 && p->ctx->n_groups > 1)
                it->rc = spw_element_run(p->ctx, 1, p->ctx->n_groups, mb->epoch, mb->samples[k], NULL, 0, &it->v,
                                         NULL, NULL, it->err, sizeof it->err);
        }
    } else if (it->rc == 0) {
        g->st.elements++;
        g->st.encoded_bytes += (int64_t)it->encoded;
    }
    if (it->have_work)
        spw_jpeg_work_free(&it->work);
    mb->done(mb->opaque, k, it->rc, &it->v, it->err);
}

static int gpu_run(const struct spw_backend *b, const struct spw_producer *p, const struct spw_microbatch *mb)
{
    struct gpu *g = b->impl;
    pthread_mutex_lock(&g->mu);
    const bool broken = g->broken;
    pthread_mutex_unlock(&g->mu);
    if (broken || !spw_gpu_can_make(p->ctx, mb->cut, NULL, 0)) {
        pthread_mutex_lock(&g->mu);
        g->st.declined++;
        pthread_mutex_unlock(&g->mu);
        return broken ? -ENODEV : -ENOTSUP;
    }
    struct item *items = calloc((size_t)(mb->n > 0 ? mb->n : 1), sizeof *items);
    if (!items)
        return -ENOMEM;
    for (int k = 0; k < mb->n; k++)      /* want may wait (a client's prefetch window): not under the lock */
        items[k].skip = mb->want && !mb->want(mb->opaque, k);
    pthread_mutex_lock(&g->mu);
    bool queued = false;
    for (int k = 0; k < mb->n; k++) {
        if (!items[k].skip)
            start_item(g, p, mb, k, &items[k]);
        queued |= items[k].queued;
    }
    if (queued && g->p->sync(g->dev) != 0) {
        g->st.device_errors++;
        g->broken = true;
        spw_log(SPW_LOG_ERROR, "gpu", "the device failed a micro-batch (%s): making its elements, and every "
                "element from now on, on the CPU", g->p->last_error(g->dev));
        for (int k = 0; k < mb->n; k++)
            items[k].cpu |= items[k].queued;
    }
    for (int k = 0; k < mb->n; k++) {
        release(g, &items[k]);
        if (!items[k].skip)
            finish_item(g, p, mb, k, &items[k]);
    }
    g->st.microbatches++;
    pthread_mutex_unlock(&g->mu);
    free(items);
    return 0;
}

int spw_gpu_backend_open(const struct spw_gpu_opts *o, struct spw_backend **out, char *err, size_t errlen)
{
    const struct spw_gpu_plugin *p;
    char path[512];
    int rc = spw_gpu_load(&p, path, sizeof path, err, errlen);
    if (rc)
        return rc;
    struct gpu *g = calloc(1, sizeof *g);
    if (!g)
        return spw_fail(err, errlen, -ENOMEM, "out of memory");
    g->p = p;
    g->device = o->device;
    if ((rc = p->open(o->device, &g->dev, err, errlen)) != 0) {
        free(g);
        return rc;
    }
    size_t free_bytes = 0, total = 0, budget = 0;
    if ((rc = p->mem_info(g->dev, &free_bytes, &total)) != 0) {
        rc = spw_fail(err, errlen, rc, "device %d: %s", o->device, p->last_error(g->dev));
    } else if ((rc = spw_arena_budget(o->mem_budget ? o->mem_budget : SPW_GPU_DEFAULT_BUDGET, free_bytes, &budget,
                                      err, errlen)) == 0 &&
               (rc = spw_arena_create(budget, &g->arena)) != 0) {
        rc = spw_fail(err, errlen, rc, "gpu_mem_budget gives %zu bytes, less than the arena's unit", budget);
    } else if (rc == 0 && (rc = p->reserve(g->dev, budget, &g->base)) != 0) {
        rc = spw_fail(err, errlen, rc, "device %d: %s", o->device, p->last_error(g->dev));
    }
    if (rc) {
        spw_arena_destroy(g->arena);
        p->close(g->dev);
        free(g);
        return rc;
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_mutex_init(&g->arena_mu, NULL);
    g->st.arena_bytes = budget;
    snprintf(g->describe, sizeof g->describe, "device %d (%s, %s), arena %zu MiB of %zu MiB free", o->device,
             p->version(), path, budget >> 20, free_bytes >> 20);
    snprintf(g->brief, sizeof g->brief, "device %d, arena %zu MiB", o->device, budget >> 20);
    g->b = (struct spw_backend){.name = "gpu", .run = gpu_run, .impl = g};
    *out = &g->b;
    return 0;
}

void spw_gpu_backend_close(struct spw_backend *b)
{
    if (!b)
        return;
    struct gpu *g = b->impl;
    g->p->close(g->dev);
    spw_arena_destroy(g->arena);
    pthread_mutex_destroy(&g->mu);
    pthread_mutex_destroy(&g->arena_mu);
    free(g);
}

void spw_gpu_backend_stats(const struct spw_backend *b, struct spw_gpu_stats *st)
{
    struct gpu *g = b->impl;
    pthread_mutex_lock(&g->mu);
    *st = g->st;
    struct spw_arena_stats as;
    pthread_mutex_lock(&g->arena_mu);
    spw_arena_stats(g->arena, &as);
    pthread_mutex_unlock(&g->arena_mu);
    st->arena_peak = as.peak;
    st->arena_used = as.used;
    pthread_mutex_unlock(&g->mu);
}

void spw_gpu_backend_summary(const struct spw_backend *b, char *buf, size_t n)
{
    struct spw_gpu_stats st;
    spw_gpu_backend_stats(b, &st);
    snprintf(buf, n, "%lld elements made on the device (%lld encoded bytes each on average), %lld handed to the "
             "CPU (did not fit, a padding crop, a device error: %lld errors); arena peak %zu of %zu bytes",
             (long long)st.elements, st.elements ? (long long)(st.encoded_bytes / st.elements) : 0LL,
             (long long)st.cpu_elements, (long long)st.device_errors, st.arena_peak, st.arena_bytes);
}

int spw_gpu_backend_mem_info(const struct spw_backend *b, size_t *free_bytes, size_t *total_bytes)
{
    struct gpu *g = b->impl;
    pthread_mutex_lock(&g->mu);
    int rc = g->p->mem_info(g->dev, free_bytes, total_bytes);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

const char *spw_gpu_backend_brief(const struct spw_backend *b)
{
    return ((const struct gpu *)b->impl)->brief;
}

const char *spw_gpu_backend_describe(const struct spw_backend *b)
{
    return ((const struct gpu *)b->impl)->describe;
}

int spw_gpu_backend_block_alloc(const struct spw_backend *b, size_t bytes, uint64_t *addr)
{
    struct gpu *g = b->impl;
    size_t off;
    if (arena_alloc(g, bytes, &off) != 0)
        return -ENOSPC;
    *addr = g->base + off;
    return 0;
}

void spw_gpu_backend_block_free(const struct spw_backend *b, uint64_t addr)
{
    struct gpu *g = b->impl;
    arena_free(g, (size_t)(addr - g->base));
}

int spw_gpu_backend_batch_finish(const struct spw_backend *b, uint64_t dev, const uint8_t *host, size_t row,
                                 int n_pos, const bool *ok, const bool *on_dev, char *err, size_t errlen)
{
    struct gpu *g = b->impl;
    pthread_mutex_lock(&g->mu);
    int rc = g->broken ? -ENODEV : 0;
    for (int p = 0, j = 0; p < n_pos && rc == 0; p++) {
        if (!ok[p])
            continue;
        const spw_dptr to = dev + (size_t)j * row;
        if (!on_dev[p])
            rc = g->p->upload(g->dev, to, host + (size_t)p * row, row);
        else if (j != p)
            rc = g->p->copy(g->dev, to, dev + (size_t)p * row, row);
        j++;
    }
    if (rc == 0)
        rc = g->p->sync(g->dev);
    if (rc) {
        if (!g->broken)
            g->st.device_errors++;
        g->broken = true;
        spw_fail(err, errlen, -EIO, "gpu: handing a device batch over failed: %s", g->p->last_error(g->dev));
        rc = -EIO;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void spw_gpu_backend_dlpack_device(const struct spw_backend *b, int *type, int *id)
{
    const struct gpu *g = b->impl;
    *type = g->p->dlpack_device_type;
    *id = g->device;
}

static void count_made(void *opaque, int k, int rc, struct spw_value *v, const char *err)
{
    *(int64_t *)opaque += rc == 0;
    spw_value_free(v);
}

int spw_gpu_backend_measure(const struct spw_backend *b, const struct spw_producer *p, int samples, double *rate,
                            double *cpu_ns, char *err, size_t errlen)
{
    char why[160];
    if (!spw_gpu_can_make(p->ctx, p->ctx->n_groups, why, sizeof why))
        return spw_fail(err, errlen, -ENOTSUP, "%s", why);
    const struct spw_backend *const table[] = {b, &spw_backend_cpu};
    const int n = (int)(samples < p->src->n ? samples : p->src->n);
    int64_t made = 0, t0 = 0, cpu0 = 0;
    for (int first = 0; first < n; first += 4) {
        if (first == 4 || (first == 0 && n <= 4)) {     /* after the warm-up (or with nothing else) */
            made = 0;
            t0 = spw_now_ns();
            cpu0 = spw_thread_cpu_ns();
        }
        int64_t s[4];
        const int m = n - first < 4 ? n - first : 4;
        for (int k = 0; k < m; k++)
            s[k] = first + k;
        const struct spw_microbatch mb = {.epoch = 0, .cut = p->ctx->n_groups, .n = m, .samples = s,
                                          .opaque = &made, .done = count_made};
        spw_backend_run(table, 2, p, &mb);
    }
    const double secs = (double)(spw_now_ns() - t0) / 1e9;
    if (made == 0 || !(secs > 0))
        return spw_fail(err, errlen, -EIO, "the GPU made no element of the %d it was given", n);
    *rate = (double)made / secs;
    *cpu_ns = (double)(spw_thread_cpu_ns() - cpu0) / (double)made;
    return 0;
}
