/* pipeline/mix.c - MixUp and CutMix (see mix.h). Float32 arithmetic as the reference's in-place tensor ops
 * (x * lambda, then + rolled * (1 - lambda), each rounded; the build has -ffp-contract=off), so a batch is
 * byte-equal to theirs at the same draws. Thread-safe: no state. */
#include "pipeline/mix.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/rng.h"

#define MIX_RNG_OP 0x7fffffffu          /* the batch's stream: no op's key (indices < 256; nested ones >= 2^31) */

void spw_mix_plan(const struct spw_mix_spec *m, uint64_t seed, int64_t epoch, int64_t index, int w, int h,
                  struct spw_mix_draw *d)
{
    struct spw_rng r;
    spw_rng_init(&r, seed, (uint64_t)epoch, (uint64_t)index, MIX_RNG_OP);
    *d = (struct spw_mix_draw){SPW_MIX_NONE, 1.0, 0, 0, 0, 0};
    const bool both = m->mixup_alpha > 0 && m->cutmix_alpha > 0;
    const bool cutmix = both ? spw_rng_uniform(&r) < m->switch_prob : m->cutmix_alpha > 0;
    if (!(spw_rng_uniform(&r) < m->p))  /* the reference: torch.rand(1) >= p leaves the batch */
        return;
    const double alpha = cutmix ? m->cutmix_alpha : m->mixup_alpha;
    d->lambda = spw_rng_beta(&r, alpha, alpha);
    d->kind = cutmix ? SPW_MIX_CUTMIX : SPW_MIX_MIXUP;
    if (!cutmix)
        return;
    const int rx = (int)spw_rng_below(&r, (uint32_t)w), ry = (int)spw_rng_below(&r, (uint32_t)h);
    const double rr = 0.5 * sqrt(1.0 - d->lambda);
    const int hw = (int)(rr * w), hh = (int)(rr * h);
    d->x1 = rx - hw < 0 ? 0 : rx - hw;
    d->y1 = ry - hh < 0 ? 0 : ry - hh;
    d->x2 = rx + hw > w ? w : rx + hw;
    d->y2 = ry + hh > h ? h : ry + hh;
    d->lambda = 1.0 - (double)(d->x2 - d->x1) * (d->y2 - d->y1) / ((double)w * h);
}

/* out[i] = out[i] * a + rolled[i] * b over the n elements of e floats (rolled = the batch rolled by one), in
 * place: from the last element down, each reads the one before it unchanged; element 0 reads the copy of the
 * last one. box (x1..x2, y1..y2 in a C x h x w element) limits CutMix's copy; NULL: the whole element. */
static void mix_rows(float *x, int n, size_t e, float a, float b, const float *last)
{
    for (int i = n - 1; i >= 0; i--) {
        float *o = x + (size_t)i * e;
        const float *s = i ? o - e : last;
        for (size_t k = 0; k < e; k++) {
            const float p = o[k] * a, q = s[k] * b;
            o[k] = p + q;
        }
    }
}

static void cut_rows(float *x, int n, int c, int h, int w, const struct spw_mix_draw *d, const float *last)
{
    const size_t e = (size_t)c * h * w, span = (size_t)(d->x2 - d->x1);
    for (int i = n - 1; i >= 0; i--) {
        float *o = x + (size_t)i * e;
        const float *s = i ? o - e : last;
        for (int ch = 0; ch < c; ch++)
            for (int y = d->y1; y < d->y2; y++) {
                const size_t at = ((size_t)ch * h + (size_t)y) * w + (size_t)d->x1;
                memcpy(o + at, s + at, span * sizeof(float));
            }
    }
}

int spw_batch_mix(const struct spw_mix_spec *m, const struct spw_mix_draw *d, struct spw_tensor *data,
                  struct spw_tensor *labels)
{
    const int n = labels->ndim == 1 ? (int)labels->shape[0] : -1;
    if (labels->dtype != SPW_DTYPE_I64 || n < 0 || (n > 0 && (data->dtype != SPW_DTYPE_F32 || data->ndim != 4 ||
                                                              data->shape[0] != n)))
        return -EINVAL;
    const int64_t *cls = labels->data;
    for (int i = 0; i < n; i++)
        if (cls[i] < 0 || cls[i] >= m->num_classes)
            return -EINVAL;
    struct spw_tensor t;
    const int64_t shape[2] = {n, m->num_classes};
    if (spw_tensor_alloc(&t, SPW_DTYPE_F32, 2, shape) != 0)
        return -ENOMEM;
    float *y = t.data;
    memset(y, 0, t.nbytes);
    for (int i = 0; i < n; i++)         /* one_hot(target).to(float32) */
        y[(size_t)i * m->num_classes + (size_t)cls[i]] = 1.0f;
    if (d->kind != SPW_MIX_NONE && n > 0) {
        const int c = (int)data->shape[1], h = (int)data->shape[2], w = (int)data->shape[3];
        const size_t e = (size_t)c * h * w;
        float *last = malloc(e * sizeof(float) > (size_t)m->num_classes * sizeof(float) ? e * sizeof(float)
                                                                                          : (size_t)m->num_classes *
                                                                                                sizeof(float));
        if (!last) {
            spw_tensor_free(&t);
            return -ENOMEM;
        }
        float *x = data->data;
        memcpy(last, x + (size_t)(n - 1) * e, e * sizeof(float));
        const float a = (float)d->lambda, b = (float)(1.0 - d->lambda);
        if (d->kind == SPW_MIX_MIXUP)
            mix_rows(x, n, e, a, b, last);
        else
            cut_rows(x, n, c, h, w, d, last);
        memcpy(last, y + (size_t)(n - 1) * m->num_classes, (size_t)m->num_classes * sizeof(float));
        mix_rows(y, n, (size_t)m->num_classes, a, b, last);
        free(last);
    }
    spw_tensor_free(labels);
    *labels = t;
    return 0;
}

int spw_mix_check_source(const struct spw_mix_spec *m, const struct spw_source *src, char *err, size_t errlen)
{
    int64_t top = -1;
    for (int64_t i = 0; m->num_classes && i < src->n; i++)
        if (src->samples[i].label > top)
            top = src->samples[i].label;
    if (top >= m->num_classes)
        return spw_fail(err, errlen, SPW_ESPEC, "batch.mix.num_classes: %d, but the source has labels up to %lld "
                        "(one-hot needs num_classes above every label)", m->num_classes, (long long)top);
    return 0;
}
