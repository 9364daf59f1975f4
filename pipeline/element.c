/* pipeline/element.c - the per-element runner: each group's ops through their rows in the op registry: a
 * decode group's decode op runs as much of its group as it fuses (jpeg_group.c), every other op runs one by
 * one after a check of what it takes. Thread-safe: the context is read-only, all other state is per call. */
#include "pipeline/element.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/rng.h"
#include "ops/image_decode.h"
#include "pipeline/audio.h"
#include "pipeline/channels.h"
#include "pipeline/fields.h"
#include "pipeline/geometry.h"
#include "pipeline/image_ops.h"
#include "pipeline/op_registry.h"
#include "pipeline/wire.h"

int spw_element_ctx_init(struct spw_element_ctx *ctx, const struct spw_pipeline_spec *spec)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->spec = spec;
    if (spec->n_ops > 256)
        return -EINVAL;
    ctx->n_groups = spw_fusion_groups(spec, ctx->groups);
    ctx->out_channels = spw_out_channels(spec, spec->n_ops);
    ctx->luts = calloc(spec->n_ops ? (size_t)spec->n_ops : 1, sizeof *ctx->luts);
    ctx->mel_banks = calloc(spec->n_ops ? (size_t)spec->n_ops : 1, sizeof *ctx->mel_banks);
    if (!ctx->luts || !ctx->mel_banks || spw_audio_banks_init(spec, ctx->mel_banks) != 0) {
        spw_element_ctx_destroy(ctx);
        return -ENOMEM;
    }
    for (int i = 0; i < spec->n_ops; i++)     /* to_tensor is normalize with mean 0, std 1 */
        if (spw_op_def(spec->ops[i].kind)->cls == SPW_OPC_TO_TENSOR)
            spw_normalize_lut_init(&ctx->luts[i], spec->ops[i].mean, spec->ops[i].std);
    if (spec->n_views && !(ctx->views = calloc((size_t)spec->n_views, sizeof *ctx->views))) {
        spw_element_ctx_destroy(ctx);
        return -ENOMEM;
    }
    for (int v = 0; v < spec->n_views; v++) {
        const int rc = spw_element_ctx_init(&ctx->views[v], spec->views[v].ops);
        if (rc) {
            spw_element_ctx_destroy(ctx);
            return rc;
        }
    }
    return 0;
}

void spw_element_ctx_destroy(struct spw_element_ctx *ctx)
{
    if (!ctx)
        return;
    free(ctx->luts);
    ctx->luts = NULL;
    if (ctx->mel_banks)
        spw_audio_banks_free(ctx->spec, ctx->mel_banks);
    free(ctx->mel_banks);
    ctx->mel_banks = NULL;
    for (int v = 0; ctx->views && v < ctx->spec->n_views; v++)
        spw_element_ctx_destroy(&ctx->views[v]);
    free(ctx->views);
    ctx->views = NULL;
}

void spw_element_rng(const struct spw_element_ctx *ctx, uint64_t epoch, int64_t sample, uint32_t op,
                     struct spw_rng *r)
{
    spw_rng_init(r, ctx->spec->source.seed, epoch, (uint64_t)sample, (uint32_t)op);
}

/* ---- ops one by one ---- */

/* What op i may take: image ops an image, tensor ops a tensor (audio ops check their own input); a borrowed
 * value is made owned first, except for the ops that take their input where it lies (a stage). */
static int check_input(const struct spw_op_call *c, const struct spw_op_def *def, struct spw_value *v)
{
    if (v->borrowed && !def->stage && spw_value_own(v) != 0) {
        snprintf(c->err, c->errlen, "ops[%d] %s: out of memory for its input", c->index, def->name);
        return -ENOMEM;
    }
    if (!def->cpu) {
        snprintf(c->err, c->errlen, "ops[%d] %s can only be the first op", c->index, def->name);
        return SPW_EUNSUPPORTED;
    }
    if ((def->cls == SPW_OPC_IMAGE || def->cls == SPW_OPC_TO_TENSOR) && v->is_tensor) {
        snprintf(c->err, c->errlen, "ops[%d] %s needs an image but got a tensor", c->index, def->name);
        return SPW_EUNSUPPORTED;
    }
    if (def->cls == SPW_OPC_TENSOR && !v->is_tensor) {
        snprintf(c->err, c->errlen, "ops[%d] %s needs a tensor (put it after normalize)", c->index, def->name);
        return SPW_EUNSUPPORTED;
    }
    return 0;
}

/* key: 0 for the spec's own ops (op i draws from stream i), else a view instance's base (stream key | i). */
static void call_init(struct spw_op_call *c, const struct spw_element_ctx *ctx, int i, uint32_t key,
                      uint64_t epoch, int64_t sample, const struct spw_element_dest *dest, char *err, size_t errlen)
{
    *c = (struct spw_op_call){.ctx = ctx, .op = &ctx->spec->ops[i], .index = i, .key = key ? key | (uint32_t)i : 0,
                              .epoch = epoch, .sample = sample, .dest = dest, .err = err, .errlen = errlen};
    spw_element_rng(ctx, epoch, sample, key ? key | (uint32_t)i : (uint32_t)i, &c->rng);
}

/* Op i on *v: 0, SPW_OP_RAN_NEXT or an error. */
static int run_op(const struct spw_element_ctx *ctx, int i, uint32_t key, uint64_t epoch, int64_t sample,
                  struct spw_value *v, const struct spw_element_dest *dest, char *err, size_t errlen)
{
    const struct spw_op_def *def = spw_op_def(ctx->spec->ops[i].kind);
    struct spw_op_call c;
    call_init(&c, ctx, i, key, epoch, sample, dest, err, errlen);
    int rc = check_input(&c, def, v);
    return rc ? rc : def->cpu(&c, v);
}

/* Ops i .. i + n as one resize-and-crop (image_ops.h spw_resize_crop_span), each op's draws from its own
 * stream as its run takes them, then tensor_op (>= 0: a normalize / to_tensor) into dest; a mask: nearest,
 * with ignore where pad_if_smaller pads. */
static int resize_crop(const struct spw_element_ctx *ctx, int i, int n, uint32_t key, uint64_t epoch,
                       int64_t sample, const struct spw_sample_field_spec *mask, int tensor_op,
                       const struct spw_element_dest *dest, struct spw_value *v, char *err, size_t errlen)
{
    const struct spw_op_spec *ops = ctx->spec->ops;
    struct spw_op_call c;
    struct spw_resize_crop f = {.interp = mask ? SPW_INTERP_NEAREST : (int)ops[i].interpolation,
                                .antialias = ops[i].antialias};
    call_init(&c, ctx, i, key, epoch, sample, NULL, err, errlen);
    spw_random_resize_size(c.op, spw_random_resize_draw(c.op, &c.rng), v->img.w, v->img.h, &f.ow, &f.oh);
    f.pw = f.ow, f.ph = f.oh;
    f.crop = (struct spw_rect){0, 0, f.ow, f.oh};       /* no crop: the whole (padded) frame */
    for (int k = i + 1; k <= i + n; k++) {
        call_init(&c, ctx, k, key, epoch, sample, NULL, err, errlen);
        if (ops[k].kind == SPW_OP_PAD_IF_SMALLER) {
            spw_pad_if_smaller_size(c.op, f.pw, f.ph, &f.pw, &f.ph);
            f.crop = (struct spw_rect){0, 0, f.pw, f.ph};
            for (int ch = 0; ch < 3; ch++) {
                const double x = mask ? mask->ignore_index : ops[k].fill[ch];
                f.fill[ch] = (uint8_t)(x < 0 ? 0 : x > 255 ? 255 : x);
            }
        } else if (ops[k].kind == SPW_OP_RANDOM_CROP) {
            f.crop = spw_random_crop_rect(c.op, &c.rng, f.pw, f.ph);
        } else {
            spw_flip_decision(c.op, &c.rng, &f.hflip, &f.vflip);
        }
    }
    f.tensor_op = tensor_op;
    return spw_image_resize_crop(ctx, v, &f, dest, err, errlen);
}

/* ---- targets (masks, boxes): moved by each geometric op with its same draws ---- */

/* Ops i .. i + n (n > 0: a resize-and-crop run as one, resize_crop) on the element's targets, the image having
 * been tw x th before them (updated to its size after): each mask gets the ops' runs on it as on an image,
 * with each op's rng stream (so the same draws: they depend on the size alone, which the mask shares), nearest
 * sampling and ignore_index where it fills; boxes go through each op's point map in turn (pipeline/geometry.h
 * spw_geo_map, the same draws again). Ops that are not geometric leave them. */
static int move_targets(const struct spw_element_ctx *ctx, int i, int n, uint32_t key, uint64_t epoch,
                        int64_t sample, struct spw_fields *fields, int *tw, int *th, char *err, size_t errlen)
{
    const struct spw_op_def *def = spw_op_def(ctx->spec->ops[i].kind);
    if (!fields || def->targets != SPW_TARGET_GEOMETRIC)
        return 0;
    struct spw_op_call c;
    int ow = *tw, oh = *th;
    for (int k = 0; k < fields->n; k++) {
        struct spw_field *f = &fields->f[k];
        const struct spw_sample_field_spec *fs = &ctx->spec->source.fields[k];
        if (f->kind == SPW_SAMPLE_FIELD_BOXES) {
            int w = *tw, h = *th;
            for (int j = i; j <= i + n; j++) {
                double m[9];
                call_init(&c, ctx, j, key, epoch, sample, NULL, err, errlen);
                if (spw_geo_map(c.op, &c.rng, w, h, m, &ow, &oh) != 0)
                    return spw_fail(err, errlen, SPW_EUNSUPPORTED, "ops[%d] %s: no map for the boxes of a %dx%d "
                                    "image", j, spw_op_def(c.op->kind)->name, w, h);
                spw_geo_boxes(m, ow, oh, fs->min_size, f->boxes, f->box_labels, &f->n_boxes);
                w = ow, h = oh;
            }
            continue;
        }
        if (f->kind != SPW_SAMPLE_FIELD_MASK)
            continue;
        struct spw_value mv = {.img = f->mask};
        f->mask = (struct spw_image){0};
        int rc;
        if (n > 0) {
            rc = resize_crop(ctx, i, n, key, epoch, sample, fs, -1, NULL, &mv, err, errlen);
        } else {
            struct spw_op_spec op = ctx->spec->ops[i];
            op.interpolation = SPW_INTERP_NEAREST;
            for (int ch = 0; ch < 3; ch++)
                op.fill[ch] = fs->ignore_index;
            call_init(&c, ctx, i, key, epoch, sample, NULL, err, errlen);
            c.op = &op;
            rc = def->cpu(&c, &mv);
        }
        f->mask = mv.img;           /* the op replaced it (or left it), owned */
        if (rc) {
            spw_value_free(&mv);
            f->mask = (struct spw_image){0};
            return rc;
        }
        ow = f->mask.w, oh = f->mask.h;
    }
    *tw = ow, *th = oh;
    return 0;
}

/* Before the decode: the size its draws see (the file's, after orientation) into *w, *h when the element has
 * masks or boxes; a mask must have that size. */
static int targets_begin(const struct spw_element_ctx *ctx, const struct spw_fields *fields, const uint8_t *buf,
                         size_t len, int *w, int *h, char *err, size_t errlen)
{
    bool any = false;
    for (int k = 0; fields && k < fields->n; k++)
        any |= fields->f[k].kind == SPW_SAMPLE_FIELD_MASK || fields->f[k].kind == SPW_SAMPLE_FIELD_BOXES;
    if (!any)
        return 0;
    int rc = spw_image_header(buf, len, ctx->spec->max_pixels, ctx->spec->ops[0].exif_transpose, w, h, err, errlen);
    for (int k = 0; k < fields->n && rc == 0; k++) {
        const struct spw_image *m = &fields->f[k].mask;
        if (fields->f[k].kind == SPW_SAMPLE_FIELD_MASK && (m->w != *w || m->h != *h))
            rc = spw_fail(err, errlen, SPW_EDECODE, "field %s: a %dx%d mask for a %dx%d image",
                          ctx->spec->source.fields[k].name, m->w, m->h, *w, *h);
    }
    return rc;
}

static void note_ns(struct spw_element_stats *stats, int i, int64_t ns, const struct spw_value *v)
{
    if (!stats)
        return;
    stats->ns[i] += ns;
    stats->out_bytes[i] += (int64_t)spw_value_bytes(v);
    stats->ran[i] = true;
}

/* The pipeline's image output in one channel where a grayscale made it so (pipeline/channels.h): the grey
 * RGB image's first channel. Outputs a sink wrote (tensors, placed images) are one channel already. */
static int one_channel_output(const struct spw_element_ctx *ctx, struct spw_value *v, char *err, size_t errlen)
{
    if (v->is_tensor || v->placed || v->img.c != 3 || !v->img.data || ctx->out_channels != 1)
        return 0;
    struct spw_image grey;
    if (spw_image_alloc(&grey, v->img.w, v->img.h, 1))
        return spw_fail(err, errlen, -ENOMEM, "out of memory for a %dx%d grey image", v->img.w, v->img.h);
    for (int y = 0; y < grey.h; y++) {
        const uint8_t *s = spw_image_at(&v->img, 0, y);
        uint8_t *d = spw_image_at(&grey, 0, y);
        for (int x = 0; x < grey.w; x++)
            d[x] = s[3 * x];
    }
    spw_value_free(v);
    v->img = grey;
    return 0;
}

static int run_groups(const struct spw_element_ctx *ctx, int g_from, int g_to, uint32_t key, uint64_t epoch,
                      int64_t sample, const uint8_t *buf, size_t len, struct spw_value *v,
                      struct spw_element_stats *stats, const struct spw_element_dest *dest, char *err, size_t errlen)
{
    struct spw_fields *fields = v->fields;     /* held here while the ops run: none of them sees it */
    v->fields = NULL;
    int tw = 0, th = 0;                         /* the targets' frame: the image's size before an op */
    /* the run's last write is the one that may go to the destination */
    const int last_op = g_to > g_from ? ctx->groups[g_to - 1].first + ctx->groups[g_to - 1].count - 1 : -1;
    int rc = 0, done_op = -1;                   /* done_op: a later group's first op, run by a fusion */
    for (int gi = g_from; gi < g_to && rc == 0; gi++) {
        const struct spw_group *g = &ctx->groups[gi];
        const bool decode = g->kind == SPW_GROUP_DECODE;     /* reported as one step, on its first op */
        const int end = g->first + g->count;
        int i = g->first == done_op ? g->first + 1 : g->first;
        int64_t t0 = stats ? spw_now_ns() : 0;
        if (decode) {
            /* The decode runs as much of its group as it fuses; the rest runs one by one. */
            int consumed = 1;
            struct spw_op_call c;
            call_init(&c, ctx, i, key, epoch, sample, end - 1 == last_op ? dest : NULL, err, errlen);
            rc = targets_begin(ctx, fields, buf, len, &tw, &th, err, errlen);
            if (rc == 0)
                rc = spw_op_def(ctx->spec->ops[i].kind)->decode(&c, g, buf, len, v, &consumed);
            for (int k = i + 1; k < i + consumed && rc == 0; k++)     /* the ops it fused, on the targets */
                rc = move_targets(ctx, k, 0, key, epoch, sample, fields, &tw, &th, err, errlen);
            i += consumed;
        }
        for (; i < end && rc == 0; i++) {
            if (!decode && stats)
                t0 = spw_now_ns();
            if (!v->is_tensor && v->img.data)
                tw = v->img.w, th = v->img.h;       /* the size the op's draws see */
            /* a resize drawn at run time and the crop after it, as one resample of the crop's window */
            const int fused = spw_resize_crop_span(ctx->spec, i, end);
            if (fused) {
                /* the next group's normalize / to_tensor too, when it runs here: one write of the output */
                const struct spw_group *ng = i + fused == end - 1 && gi + 1 < g_to ? g + 1 : NULL;
                const int tensor_op = ng && ng->kind == SPW_GROUP_TENSOR &&
                                      spw_op_def(ctx->spec->ops[ng->first].kind)->cls == SPW_OPC_TO_TENSOR
                                          ? ng->first : -1;
                struct spw_op_call c;
                call_init(&c, ctx, i, key, epoch, sample, NULL, err, errlen);
                rc = check_input(&c, spw_op_def(c.op->kind), v);
                rc = rc ? rc : resize_crop(ctx, i, fused, key, epoch, sample, NULL, tensor_op,
                                           tensor_op == last_op ? dest : NULL, v, err, errlen);
                done_op = tensor_op;
            } else {
                rc = run_op(ctx, i, key, epoch, sample, v, i == last_op ? dest : NULL, err, errlen);
            }
            const int ran = fused ? fused : rc == SPW_OP_RAN_NEXT;    /* stft+mel as one: on the stft */
            rc = rc == SPW_OP_RAN_NEXT ? 0 : rc;
            if (rc == 0)
                rc = move_targets(ctx, i, fused, key, epoch, sample, fields, &tw, &th, err, errlen);
            if (!decode && rc == 0)
                note_ns(stats, i, stats ? spw_now_ns() - t0 : 0, v);
            if (fused && done_op >= 0 && rc == 0 && stats && v->is_tensor) {
                /* the time on op i; the sizes as the ops one by one make them (uint8 before the tensor) */
                const int64_t bytes = (int64_t)spw_value_bytes(v);
                stats->out_bytes[i] -= bytes - bytes / (int64_t)spw_dtype_size(v->t.dtype);
                stats->out_bytes[done_op] += bytes;
                stats->ran[done_op] = true;
            }
            i += ran;
        }
        if (decode && rc == 0)
            note_ns(stats, g->first, stats ? spw_now_ns() - t0 : 0, v);
    }
    if (rc == 0 && g_to == ctx->n_groups)
        rc = one_channel_output(ctx, v, err, errlen);
    if (rc) {
        spw_value_free(v);
        spw_fields_free(fields);
    } else {
        v->fields = fields;
    }
    return rc;
}

int spw_element_run(const struct spw_element_ctx *ctx, int g_from, int g_to, uint64_t epoch, int64_t sample,
                    const uint8_t *buf, size_t len, struct spw_value *v, struct spw_element_stats *stats,
                    const struct spw_element_dest *dest, char *err, size_t errlen)
{
    return run_groups(ctx, g_from, g_to, 0, epoch, sample, buf, len, v, stats, dest, err, errlen);
}

int spw_element_run_keyed(const struct spw_element_ctx *ctx, uint32_t key, uint64_t epoch, int64_t sample,
                          struct spw_value *v, char *err, size_t errlen)
{
    return run_groups(ctx, 0, ctx->n_groups, key, epoch, sample, NULL, 0, v, NULL, NULL, err, errlen);
}

bool spw_element_group_batches(const struct spw_element_ctx *ctx, int g)
{
    const struct spw_group *grp = &ctx->groups[g];
    for (int i = grp->first; grp->kind == SPW_GROUP_USER && i < grp->first + grp->count; i++)
        if (spw_op_def(ctx->spec->ops[i].kind)->cpu_many)
            return true;
    return false;
}

void spw_element_run_many(const struct spw_element_ctx *ctx, int g, uint64_t epoch, const int64_t *samples, int n,
                          struct spw_value *const *vs, int *rcs, struct spw_element_stats *const *stats, char *errs,
                          size_t errlen)
{
    const struct spw_group *grp = &ctx->groups[g];
    struct spw_op_call calls[SPW_ELEMENT_MANY_MAX];
    struct spw_value *live[SPW_ELEMENT_MANY_MAX];
    struct spw_fields *fields[SPW_ELEMENT_MANY_MAX];
    int at[SPW_ELEMENT_MANY_MAX], got[SPW_ELEMENT_MANY_MAX];
    n = n < SPW_ELEMENT_MANY_MAX ? n : SPW_ELEMENT_MANY_MAX;
    for (int k = 0; k < n; k++) {               /* held here while the ops run, as run_groups does */
        fields[k] = vs[k]->fields;
        vs[k]->fields = NULL;
    }
    for (int i = grp->first; i < grp->first + grp->count; i++) {
        const struct spw_op_def *def = spw_op_def(ctx->spec->ops[i].kind);
        int m = 0;
        for (int k = 0; k < n; k++) {
            if (rcs[k] != 0)
                continue;
            call_init(&calls[m], ctx, i, 0, epoch, samples[k], NULL, errs + (size_t)k * errlen, errlen);
            if ((rcs[k] = check_input(&calls[m], def, vs[k])) != 0) {
                spw_value_free(vs[k]);
                continue;
            }
            at[m] = k;
            live[m++] = vs[k];
        }
        const int64_t t0 = spw_now_ns();
        if (def->cpu_many && m > 1)
            def->cpu_many(calls, live, got, m);
        else
            for (int j = 0; j < m; j++)
                got[j] = def->cpu(&calls[j], live[j]);
        const int64_t each = m ? (spw_now_ns() - t0) / m : 0;
        for (int j = 0; j < m; j++) {
            const int k = at[j];
            rcs[k] = got[j];
            if (rcs[k] == 0)
                note_ns(stats ? stats[k] : NULL, i, each, vs[k]);
            else
                spw_value_free(vs[k]);
        }
    }
    for (int k = 0; k < n; k++) {
        if (rcs[k] == 0)
            vs[k]->fields = fields[k];
        else
            spw_fields_free(fields[k]);
    }
}

bool spw_element_rows_group(const struct spw_element_ctx *ctx, int g)
{
    return g == ctx->n_groups - 1 && ctx->groups[g].count == 1 &&
           spw_op_def(ctx->spec->ops[ctx->groups[g].first].kind)->cls == SPW_OPC_TO_TENSOR;
}

int spw_element_run_rows(const struct spw_element_ctx *ctx, int g, int w, int h, const struct iovec *parts, int n,
                         size_t off, struct spw_value *out, const struct spw_element_dest *dest, char *err,
                         size_t errlen)
{
    const size_t row_bytes = (size_t)w * 3;
    uint8_t *spill = malloc(row_bytes ? row_bytes : 1);
    if (!spill) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    struct spw_sink s;
    int rc = spw_image_sink(ctx, ctx->groups[g].first, w, h, false, false, dest, out, &s, err, errlen);
    for (int y = 0; y < h && rc == 0; y++) {
        const uint8_t *row = spw_wire_view(parts, n, off + (size_t)y * row_bytes, row_bytes, spill);
        if (row)
            spw_sink_put_row(&s, y, row);
        else
            rc = spw_fail(err, errlen, -EINVAL, "a %dx%d image does not fit in its message", w, h);
    }
    if (rc)
        spw_value_free(out);
    free(spill);
    return rc;
}
