/* pipeline/augment.c - op fields -> image kernel adapters for the ops between the decode group and
 * normalize: colour ops, warps and policies (see augment.h). Allocates the output or scratch image a kernel
 * needs and hands back the result in v. Thread-safe: state is per call. */
#include "pipeline/augment.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/err.h"
#include "lib/rng.h"
#include "ops/augmix.h"
#include "ops/blur.h"
#include "ops/color.h"
#include "ops/elastic.h"
#include "ops/geometry.h"
#include "ops/policy.h"
#include "pipeline/geometry.h"

/* A kernel's result, explained in the call's err. */
static int done(struct spw_op_call *c, const struct spw_image *img, int rc)
{
    if (rc)
        snprintf(c->err, c->errlen, "ops[%d] %s failed on a %dx%d image: %s", c->index, spw_op_name(c->op->kind),
                 img->w, img->h, spw_strerror(rc));
    return rc;
}

int spw_augment_brightness(struct spw_op_call *c, struct spw_value *v)
{
    return done(c, &v->img, spw_adjust_brightness_run(&v->img, c->op->factor, &v->img));
}

int spw_augment_contrast(struct spw_op_call *c, struct spw_value *v)
{
    return done(c, &v->img, spw_adjust_contrast_run(&v->img, c->op->factor, &v->img));
}

int spw_augment_saturation(struct spw_op_call *c, struct spw_value *v)
{
    return done(c, &v->img, spw_adjust_saturation_run(&v->img, c->op->factor, &v->img));
}

int spw_augment_hue(struct spw_op_call *c, struct spw_value *v)
{
    return done(c, &v->img, spw_adjust_hue_run(&v->img, c->op->factor, &v->img));
}

int spw_augment_posterize(struct spw_op_call *c, struct spw_value *v)
{
    return done(c, &v->img, spw_posterize_run(&v->img, c->op->bits, &v->img));
}

int spw_augment_solarize(struct spw_op_call *c, struct spw_value *v)
{
    return done(c, &v->img, spw_solarize_run(&v->img, c->op->threshold, &v->img));
}

int spw_augment_equalize(struct spw_op_call *c, struct spw_value *v)
{
    return done(c, &v->img, spw_equalize_run(&v->img, &v->img));
}

int spw_augment_autocontrast(struct spw_op_call *c, struct spw_value *v)
{
    return done(c, &v->img, spw_autocontrast_run(&v->img, &v->img));
}

int spw_augment_invert(struct spw_op_call *c, struct spw_value *v)
{
    return done(c, &v->img, spw_invert_run(&v->img, &v->img));
}

int spw_augment_grayscale(struct spw_op_call *c, struct spw_value *v)
{
    return done(c, &v->img, spw_grayscale_run(&v->img, &v->img));
}

double spw_augment_blur_sigma(const struct spw_op_spec *op, struct spw_rng *r)
{
    /* GaussianBlur.get_params: torch.empty(1).uniform_(min, max), a float32, used for both axes */
    return (float)spw_rng_range(r, op->sigma[0], op->sigma[1]);
}

int spw_augment_gaussian_blur(struct spw_op_call *c, struct spw_value *v)
{
    const struct spw_op_spec *op = c->op;
    const double sigma = spw_augment_blur_sigma(op, &c->rng);
    struct spw_image *img = &v->img, out = {0};
    if (op->kernel_size[0] / 2 >= img->w || op->kernel_size[1] / 2 >= img->h) {
        snprintf(c->err, c->errlen, "ops[%d] gaussian_blur: kernel_size [%d, %d] needs an image over %d x %d "
                 "(reflect padding, as torch), got %d x %d", c->index, op->kernel_size[0], op->kernel_size[1],
                 op->kernel_size[0] / 2, op->kernel_size[1] / 2, img->w, img->h);
        return SPW_EUNSUPPORTED;
    }
    void *scratch = malloc(spw_gaussian_blur_scratch(img->w, op->kernel_size[0]));
    int rc = scratch ? spw_image_alloc(&out, img->w, img->h, 3) : -ENOMEM;
    if (rc == 0)
        rc = spw_gaussian_blur_run(img, op->kernel_size[0], op->kernel_size[1], sigma, sigma, scratch, &out);
    if (rc == 0) {
        struct spw_image t = *img;
        *img = out;
        out = t;
    }
    spw_image_free(&out);
    free(scratch);
    return done(c, img, rc);
}

int spw_augment_pil_gaussian_blur(struct spw_op_call *c, struct spw_value *v)
{
    /* DINO / DeiT III: ImageFilter.GaussianBlur(radius=random.uniform(min, max)), Pillow taking a float */
    const double radius = spw_augment_blur_sigma(c->op, &c->rng);
    return done(c, &v->img, spw_pil_gaussian_blur_run(&v->img, radius, &v->img));
}

int spw_augment_random_perspective(struct spw_op_call *c, struct spw_value *v)
{
    struct spw_image *img = &v->img, out = {0};
    int end[4][2];
    if (!spw_perspective_draw(c->op, &c->rng, img->w, img->h, end))
        return 0;
    const int start[4][2] = {{0, 0}, {img->w - 1, 0}, {img->w - 1, img->h - 1}, {0, img->h - 1}};
    double coeffs[8];
    int rc = spw_perspective_coeffs(start, end, coeffs);
    if (rc)     /* torchvision's lstsq would answer anyway; no exact equal here, so the sample is refused */
        return spw_fail(c->err, c->errlen, SPW_EUNSUPPORTED, "ops[%d] random_perspective: the corners drawn for a "
                        "%dx%d image make a singular map (torchvision solves it by least squares)", c->index,
                        img->w, img->h);
    rc = spw_image_alloc(&out, img->w, img->h, 3);
    if (rc == 0)
        rc = spw_perspective_run(img, coeffs, (int)c->op->interpolation, c->op->fill, &out);
    if (rc == 0) {
        struct spw_image t = *img;
        *img = out;
        out = t;
    }
    spw_image_free(&out);
    return done(c, img, rc);
}

int spw_augment_random(struct spw_op_call *c, struct spw_value *v)
{
    if (!(spw_rng_uniform(&c->rng) < c->op->p))    /* torchvision: torch.rand(1) < p, then the op */
        return 0;
    return spw_op_def(spw_op_def(c->op->kind)->gated)->cpu(c, v);  /* its fields are the row's own */
}

const double *spw_augment_jitter_range(const double r[2])
{
    return (r[0] == 0.0 && r[1] == 0.0) ? NULL : r;
}

int spw_augment_color_jitter(struct spw_op_call *c, struct spw_value *v)
{
    const struct spw_op_spec *op = c->op;
    const double *b = spw_augment_jitter_range(op->brightness), *k = spw_augment_jitter_range(op->contrast);
    const double *s = spw_augment_jitter_range(op->saturation), *h = spw_augment_jitter_range(op->hue);
    return done(c, &v->img, spw_color_jitter_run(&v->img, &c->rng, b, k, s, h, NULL));
}

/* Kernels that read the image and write a second one, which becomes the result. */
enum to_new { TO_NEW_ROTATE, TO_NEW_AFFINE, TO_NEW_SHARPNESS };

static int run_to_new(struct spw_op_call *c, struct spw_value *v, enum to_new k)
{
    const struct spw_op_spec *op = c->op;
    struct spw_image *img = &v->img, out = {0};
    int rc = spw_image_alloc(&out, img->w, img->h, 3);
    if (rc == 0) {
        if (k == TO_NEW_ROTATE)
            rc = spw_rotate_run(img, op->angle, (int)op->interpolation, op->fill, &out);
        else if (k == TO_NEW_AFFINE)
            rc = spw_affine_run(img, op->angle, op->translate, op->affine_scale, op->shear, (int)op->interpolation,
                                op->fill, NULL, &out);
        else
            rc = spw_adjust_sharpness_run(img, op->factor, &out);
    }
    if (rc == 0) {
        struct spw_image t = *img;
        *img = out;
        out = t;
    }
    spw_image_free(&out);
    return done(c, img, rc);
}

int spw_augment_rotate(struct spw_op_call *c, struct spw_value *v) { return run_to_new(c, v, TO_NEW_ROTATE); }
int spw_augment_affine(struct spw_op_call *c, struct spw_value *v) { return run_to_new(c, v, TO_NEW_AFFINE); }
int spw_augment_sharpness(struct spw_op_call *c, struct spw_value *v) { return run_to_new(c, v, TO_NEW_SHARPNESS); }

/* The policies get a scratch image of the same size; they may swap it with the image. */
typedef int (*policy_fn)(const struct spw_op_spec *op, struct spw_rng *r, struct spw_image *img,
                         struct spw_image *tmp);

static int run_policy(struct spw_op_call *c, struct spw_value *v, policy_fn run)
{
    struct spw_image tmp = {0};
    int rc = spw_image_alloc(&tmp, v->img.w, v->img.h, 3);
    if (rc == 0)
        rc = run(c->op, &c->rng, &v->img, &tmp);
    spw_image_free(&tmp);
    return done(c, &v->img, rc);
}

static int rand_augment(const struct spw_op_spec *op, struct spw_rng *r, struct spw_image *img,
                        struct spw_image *tmp)
{
    return spw_rand_augment_run(img, tmp, r, op->num_ops, op->magnitude, op->num_magnitude_bins, op->fill,
                                (int)op->interpolation, NULL);
}

static int auto_augment(const struct spw_op_spec *op, struct spw_rng *r, struct spw_image *img,
                        struct spw_image *tmp)
{
    return spw_auto_augment_run(img, tmp, r, SPW_AUTO_AUGMENT_IMAGENET, op->fill, (int)op->interpolation, NULL, NULL);
}

static int trivial_augment(const struct spw_op_spec *op, struct spw_rng *r, struct spw_image *img,
                           struct spw_image *tmp)
{
    return spw_trivial_augment_run(img, tmp, r, op->num_magnitude_bins, op->fill, (int)op->interpolation, NULL);
}

int spw_augment_rand(struct spw_op_call *c, struct spw_value *v) { return run_policy(c, v, rand_augment); }
int spw_augment_auto(struct spw_op_call *c, struct spw_value *v) { return run_policy(c, v, auto_augment); }
int spw_augment_trivial(struct spw_op_call *c, struct spw_value *v) { return run_policy(c, v, trivial_augment); }

int spw_augment_elastic(struct spw_op_call *c, struct spw_value *v)
{
    char why[200];
    const int rc = spw_elastic_run(&v->img, &c->rng, c->op->elastic_alpha, c->op->sigma, (int)c->op->interpolation,
                                   c->op->fill, why, sizeof why);
    if (rc)
        snprintf(c->err, c->errlen, "ops[%d] elastic_transform failed on a %dx%d image: %s", c->index, v->img.w,
                 v->img.h, why);
    return rc;
}

void spw_augment_augmix_params(const struct spw_op_spec *op, struct spw_augmix_params *p)
{
    *p = (struct spw_augmix_params){.severity = op->severity, .mixture_width = op->mixture_width,
                                    .chain_depth = op->chain_depth, .alpha = op->alpha, .all_ops = op->all_ops,
                                    .interp = (int)op->interpolation, .fill = op->has_fill ? op->fill : NULL};
}

int spw_augment_aug_mix(struct spw_op_call *c, struct spw_value *v)
{
    struct spw_augmix_params p;
    struct spw_augmix_plan plan;
    spw_augment_augmix_params(c->op, &p);
    int rc = spw_augmix_plan(&c->rng, &p, &plan);
    if (rc == 0)
        rc = spw_augmix_apply(&v->img, &p, &plan);
    return done(c, &v->img, rc);
}
