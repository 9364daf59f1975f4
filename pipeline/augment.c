/* pipeline/augment.c - op spec -> image kernel adapter for the ops between the decode group and
 * normalize: colour ops, warps and policies (see augment.h). Allocates the output or scratch image the
 * kernel needs and hands back the result in *img. Thread-safe: state is per call. */
#include "pipeline/augment.h"

#include <errno.h>
#include <stdio.h>

#include "lib/err.h"
#include "ops/color.h"
#include "ops/geometry.h"
#include "ops/policy.h"

/* A [lo, hi] range the spec stores as {0, 0} when the jitter is off. */
static const double *jitter_range(const double r[2])
{
    return (r[0] == 0.0 && r[1] == 0.0) ? NULL : r;
}

/* Kernels that read `in` and write a second image. */
static int run_to_new(const struct spw_op_spec *op, const struct spw_image *in, struct spw_image *out)
{
    switch (op->kind) {
    case SPW_OP_ROTATE:
        return spw_rotate_run(in, op->angle, (int)op->interpolation, op->fill, out);
    case SPW_OP_AFFINE:
        return spw_affine_run(in, op->angle, op->translate, op->affine_scale, op->shear, (int)op->interpolation,
                              op->fill, NULL, out);
    case SPW_OP_ADJUST_SHARPNESS:
        return spw_adjust_sharpness_run(in, op->factor, out);
    default:
        return -EINVAL;
    }
}

int spw_augment_run(const struct spw_op_spec *op, int op_index, struct spw_rng *rng, struct spw_image *img,
                    char *err, size_t errlen)
{
    struct spw_image tmp = {0};
    int rc;
    switch (op->kind) {
    /* in place */
    case SPW_OP_ADJUST_BRIGHTNESS: rc = spw_adjust_brightness_run(img, op->factor, img); break;
    case SPW_OP_ADJUST_CONTRAST: rc = spw_adjust_contrast_run(img, op->factor, img); break;
    case SPW_OP_ADJUST_SATURATION: rc = spw_adjust_saturation_run(img, op->factor, img); break;
    case SPW_OP_ADJUST_HUE: rc = spw_adjust_hue_run(img, op->factor, img); break;
    case SPW_OP_POSTERIZE: rc = spw_posterize_run(img, op->bits, img); break;
    case SPW_OP_SOLARIZE: rc = spw_solarize_run(img, op->threshold, img); break;
    case SPW_OP_EQUALIZE: rc = spw_equalize_run(img, img); break;
    case SPW_OP_AUTOCONTRAST: rc = spw_autocontrast_run(img, img); break;
    case SPW_OP_INVERT: rc = spw_invert_run(img, img); break;
    case SPW_OP_COLOR_JITTER:
        rc = spw_color_jitter_run(img, rng, jitter_range(op->brightness), jitter_range(op->contrast),
                                  jitter_range(op->saturation), jitter_range(op->hue), NULL);
        break;
    /* into a second image, which becomes the result */
    case SPW_OP_ROTATE:
    case SPW_OP_AFFINE:
    case SPW_OP_ADJUST_SHARPNESS:
        if ((rc = spw_image_alloc(&tmp, img->w, img->h, 3)) != 0)
            break;
        if ((rc = run_to_new(op, img, &tmp)) == 0) {
            struct spw_image t = *img;
            *img = tmp;
            tmp = t;
        }
        break;
    /* policies: a scratch image of the same size; they may swap it with *img */
    case SPW_OP_RAND_AUGMENT:
    case SPW_OP_AUTO_AUGMENT:
    case SPW_OP_TRIVIAL_AUGMENT_WIDE:
        if ((rc = spw_image_alloc(&tmp, img->w, img->h, 3)) != 0)
            break;
        if (op->kind == SPW_OP_RAND_AUGMENT)
            rc = spw_rand_augment_run(img, &tmp, rng, op->num_ops, op->magnitude, op->num_magnitude_bins,
                                      op->fill, NULL);
        else if (op->kind == SPW_OP_AUTO_AUGMENT)
            rc = spw_auto_augment_run(img, &tmp, rng, SPW_AUTO_AUGMENT_IMAGENET, op->fill, NULL, NULL);
        else
            rc = spw_trivial_augment_run(img, &tmp, rng, op->num_magnitude_bins, op->fill, NULL);
        break;
    default:
        snprintf(err, errlen, "ops[%d] %s is not an image augmentation", op_index, spw_op_name(op->kind));
        return SPW_EINTERNAL;
    }
    spw_image_free(&tmp);
    if (rc)
        snprintf(err, errlen, "ops[%d] %s failed on a %dx%d image: %s", op_index, spw_op_name(op->kind), img->w,
                 img->h, spw_strerror(rc));
    return rc;
}
