/* tests/equiv/opcheck.c - test tool: run one Spillway image kernel on a binary PPM and write the result
 * as a uint8 HWC .npy, so tests/equiv/check_ops.py can compare it with torchvision on the same image.
 *   opcheck IN.ppm OUT.npy '{"op":"rotate","angle":30,"interpolation":"bilinear"}'
 * Policy ops ("rand_augment", "auto_augment", "trivial_augment", "color_jitter") also print what they drew
 * as one JSON line on stdout. Not a general image tool; single-threaded; exits 0 on success, 1 on error. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/rng.h"
#include "ops/blur.h"
#include "ops/color.h"
#include "ops/geometry.h"
#include "ops/image.h"
#include "ops/policy.h"

#define MAX_SIDE 65536   /* refuse absurd PPM headers before allocating */

/* Next whitespace-separated header token of a PPM, skipping '#' comments. */
static int ppm_token(FILE *f, char *buf, size_t cap)
{
    int ch;
    size_t n = 0;
    for (;;) {
        ch = fgetc(f);
        if (ch == '#') {
            while (ch != EOF && ch != '\n')
                ch = fgetc(f);
        }
        if (ch == EOF)
            return -1;
        if (ch != ' ' && ch != '\t' && ch != '\r' && ch != '\n' && ch != '#')
            break;
    }
    while (ch != EOF && ch != ' ' && ch != '\t' && ch != '\r' && ch != '\n') {
        if (n + 1 >= cap)
            return -1;
        buf[n++] = (char)ch;
        ch = fgetc(f);
    }
    buf[n] = '\0';
    return 0;   /* the single whitespace after the token has been consumed */
}

static int read_ppm(const char *path, struct spw_image *img)
{
    char tok[32];
    int rc = SPW_EFORMAT;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    if (ppm_token(f, tok, sizeof tok) || strcmp(tok, "P6"))
        goto out;
    long v[3];
    for (int i = 0; i < 3; i++) {
        char *end;
        if (ppm_token(f, tok, sizeof tok))
            goto out;
        v[i] = strtol(tok, &end, 10);
        if (*end || v[i] <= 0)
            goto out;
    }
    if (v[0] > MAX_SIDE || v[1] > MAX_SIDE || v[2] != 255)
        goto out;
    rc = spw_image_alloc(img, (int)v[0], (int)v[1], 3);
    if (rc)
        goto out;
    const size_t n = (size_t)img->w * (size_t)img->h * 3;
    if (fread(img->data, 1, n, f) != n) {
        spw_image_free(img);
        rc = SPW_EFORMAT;
        goto out;
    }
    rc = 0;
out:
    fclose(f);
    return rc;
}

/* NumPy .npy v1.0: magic, version, little-endian header length, dict padded to 64 bytes, raw data. */
static int write_npy(const char *path, const struct spw_image *img)
{
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, %d, 3), }",
                       img->h, img->w);
    const int total = (10 + len + 1 + 63) / 64 * 64;
    const int hlen = total - 10;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hlen & 0xff, f);
    fputc(hlen >> 8, f);
    fputs(dict, f);
    for (int i = 10 + len; i < total - 1; i++)
        fputc(' ', f);
    fputc('\n', f);
    for (int y = 0; y < img->h; y++)
        fwrite(img->data + (size_t)y * img->stride, 1, (size_t)img->w * 3, f);
    return fclose(f) ? -EIO : 0;
}

static double num(const json_t *spec, const char *key, double dflt)
{
    const json_t *v = json_object_get(spec, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* Reads an array of n numbers into out; returns 1 if present, 0 if absent, -1 if malformed.
 * A bare number x is accepted as {x, 0} (torchvision's shear=x) or {x, x, x} (fill=x). */
static int vec(const json_t *spec, const char *key, double *out, size_t n)
{
    const json_t *v = json_object_get(spec, key);
    if (!v || json_is_null(v))
        return 0;
    if (json_is_number(v)) {
        for (size_t i = 0; i < n; i++)
            out[i] = n == 3 || i == 0 ? json_number_value(v) : 0.0;
        return 1;
    }
    if (!json_is_array(v) || json_array_size(v) != n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_number(e))
            return -1;
        out[i] = json_number_value(e);
    }
    return 1;
}

static int interp(const json_t *spec)
{
    const char *s = json_string_value(json_object_get(spec, "interpolation"));
    if (!s || !strcmp(s, "nearest"))
        return SPW_INTERP_NEAREST;
    return !strcmp(s, "bilinear") ? SPW_INTERP_BILINEAR : -1;
}

static json_t *steps_json(const struct spw_aug_step *steps, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        const char *name = spw_augment_op_name(steps[i].op);
        json_array_append_new(a, json_pack("{s:s?,s:f}", "name", name, "magnitude", steps[i].magnitude));
    }
    return a;
}

/* Policy ops: run with rng (seed, epoch 0, sample, op 0) and report what was drawn. */
static int run_policy(const char *op, const json_t *spec, struct spw_image *img, struct spw_image *tmp,
                      const double *fill, json_t **report)
{
    struct spw_rng rng;
    spw_rng_init(&rng, (uint64_t)num(spec, "seed", 0), 0, (uint64_t)num(spec, "sample", 0), 0);
    if (!strcmp(op, "rand_augment")) {
        struct spw_aug_step steps[64];
        const int n = (int)num(spec, "num_ops", 2);
        if (n < 0 || n > 64)
            return -EINVAL;
        int rc = spw_rand_augment_run(img, tmp, &rng, n, (int)num(spec, "magnitude", 9),
                                      (int)num(spec, "num_bins", 31), fill, interp(spec), steps);
        if (!rc)
            *report = json_pack("{s:o}", "steps", steps_json(steps, n));
        return rc;
    }
    if (!strcmp(op, "trivial_augment")) {
        struct spw_aug_step step;
        int rc = spw_trivial_augment_run(img, tmp, &rng, (int)num(spec, "num_bins", 31), fill, interp(spec),
                                         &step);
        if (!rc)
            *report = json_pack("{s:o}", "steps", steps_json(&step, 1));
        return rc;
    }
    if (!strcmp(op, "auto_augment")) {
        static const char *const names[] = {"imagenet", "cifar10", "svhn"};
        const char *p = json_string_value(json_object_get(spec, "policy"));
        int policy = p ? -1 : SPW_AUTO_AUGMENT_IMAGENET, sub;
        for (int i = 0; p && i < 3; i++)
            if (!strcmp(p, names[i]))
                policy = i;
        struct spw_aug_step steps[2];
        int rc = spw_auto_augment_run(img, tmp, &rng, policy, fill, interp(spec), &sub, steps);
        if (!rc)
            *report = json_pack("{s:i,s:o}", "subpolicy", sub, "steps", steps_json(steps, 2));
        return rc;
    }
    if (!strcmp(op, "color_jitter")) {
        static const char *const keys[4] = {"brightness", "contrast", "saturation", "hue"};
        double r[4][2];
        const double *rp[4];
        for (int k = 0; k < 4; k++) {
            int got = vec(spec, keys[k], r[k], 2);
            if (got < 0)
                return -EINVAL;
            rp[k] = got ? r[k] : NULL;
        }
        struct spw_color_jitter_draw d;
        int rc = spw_color_jitter_run(img, &rng, rp[0], rp[1], rp[2], rp[3], &d);
        if (!rc) {
            json_t *order = json_array(), *factors = json_array();
            for (int k = 0; k < 4; k++) {
                json_array_append_new(order, json_integer(d.order[k]));
                json_array_append_new(factors, d.enabled[k] ? json_real(d.factor[k]) : json_null());
            }
            *report = json_pack("{s:o,s:o}", "order", order, "factors", factors);
        }
        return rc;
    }
    return -ENOENT;
}

/* Deterministic kernels: returns 0 with the result in *out (which may be *img itself). */
static int run_kernel(const char *op, const json_t *spec, struct spw_image *img, struct spw_image *tmp,
                      const double *fill)
{
    const double factor = num(spec, "factor", 1.0);
    if (!strcmp(op, "brightness"))
        return spw_adjust_brightness_run(img, factor, img);
    if (!strcmp(op, "contrast"))
        return spw_adjust_contrast_run(img, factor, img);
    if (!strcmp(op, "saturation"))
        return spw_adjust_saturation_run(img, factor, img);
    if (!strcmp(op, "hue"))
        return spw_adjust_hue_run(img, num(spec, "factor", 0.0), img);
    if (!strcmp(op, "posterize"))
        return spw_posterize_run(img, (int)num(spec, "bits", 8), img);
    if (!strcmp(op, "solarize"))
        return spw_solarize_run(img, num(spec, "threshold", 128), img);
    if (!strcmp(op, "equalize"))
        return spw_equalize_run(img, img);
    if (!strcmp(op, "autocontrast"))
        return spw_autocontrast_run(img, img);
    if (!strcmp(op, "invert"))
        return spw_invert_run(img, img);
    if (!strcmp(op, "grayscale"))
        return spw_grayscale_run(img, img);
    if (!strcmp(op, "pil_gaussian_blur"))
        return spw_pil_gaussian_blur_run(img, num(spec, "radius", 2.0), img);

    int rc;
    if (!strcmp(op, "sharpness")) {
        rc = spw_adjust_sharpness_run(img, factor, tmp);
    } else if (!strcmp(op, "rotate")) {
        rc = spw_rotate_run(img, num(spec, "angle", 0), interp(spec), fill, tmp);
    } else if (!strcmp(op, "affine")) {
        double translate[2] = {0, 0}, shear[2] = {0, 0}, center[2];
        int has_center = vec(spec, "center", center, 2);
        if (vec(spec, "translate", translate, 2) < 0 || vec(spec, "shear", shear, 2) < 0 || has_center < 0)
            return -EINVAL;
        rc = spw_affine_run(img, num(spec, "angle", 0), translate, num(spec, "scale", 1.0), shear,
                            interp(spec), fill, has_center ? center : NULL, tmp);
    } else if (!strcmp(op, "augment_op")) {
        /* One torchvision _apply_op by name, for replaying what a policy drew. */
        const char *name = json_string_value(json_object_get(spec, "name"));
        int which = -1;
        for (int i = 0; name && i < SPW_AUG_OP_COUNT; i++)
            if (!strcmp(name, spw_augment_op_name(i)))
                which = i;
        return spw_augment_op_run(img, tmp, which, num(spec, "magnitude", 0), fill, interp(spec));
    } else {
        return -ENOENT;
    }
    if (!rc) {
        struct spw_image t = *img;
        *img = *tmp;
        *tmp = t;
    }
    return rc;
}

int main(int argc, char **argv)
{
    struct spw_image img = {0}, tmp = {0};
    json_t *spec = NULL, *report = NULL;
    json_error_t jerr;
    double fill[3];
    int rc = 1;

    if (argc != 4) {
        fprintf(stderr, "usage: %s IN.ppm OUT.npy JSON\n", argv[0]);
        return 2;
    }
    spec = json_loads(argv[3], 0, &jerr);
    const char *op = json_string_value(json_object_get(spec, "op"));
    if (!spec || !op) {
        fprintf(stderr, "opcheck: bad JSON spec (need an object with \"op\"): %s\n", spec ? "" : jerr.text);
        goto out;
    }
    int has_fill = vec(spec, "fill", fill, 3);
    if (has_fill < 0) {
        fprintf(stderr, "opcheck: fill must be a number or 3 numbers\n");
        goto out;
    }
    int err = read_ppm(argv[1], &img);
    if (err) {
        fprintf(stderr, "opcheck: %s: %s\n", argv[1], spw_strerror(err));
        goto out;
    }
    err = spw_image_alloc(&tmp, img.w, img.h, 3);
    if (!err) {
        err = run_policy(op, spec, &img, &tmp, has_fill ? fill : NULL, &report);
        if (err == -ENOENT)
            err = run_kernel(op, spec, &img, &tmp, has_fill ? fill : NULL);
    }
    if (err) {
        fprintf(stderr, "opcheck: op %s: %s\n", op, err == -ENOENT ? "unknown op" : spw_strerror(err));
        goto out;
    }
    err = write_npy(argv[2], &img);
    if (err) {
        fprintf(stderr, "opcheck: %s: %s\n", argv[2], spw_strerror(err));
        goto out;
    }
    if (report) {
        char *s = json_dumps(report, JSON_COMPACT | JSON_REAL_PRECISION(17));
        if (s)
            puts(s);
        free(s);
    }
    rc = 0;
out:
    json_decref(report);
    json_decref(spec);
    spw_image_free(&tmp);
    spw_image_free(&img);
    return rc;
}
