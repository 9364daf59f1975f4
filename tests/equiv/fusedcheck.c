/* tests/equiv/fusedcheck.c - test driver: runs a pipeline's ops on one image through the real element runner
 * (fused decode group included) and writes the result as .npy, printing the random geometry it drew so a
 * torchvision reference can redo it; or prints many RandomResizedCrop draws for a distribution test.
 *   fusedcheck run SPEC.json IN.jpg OUT.npy SAMPLE     -> stdout: {"rect":[left,top,w,h],"hflip":0|1} (rect:
 *                                                         op 1's random_resized_crop; "crop": a random_crop's,
 *                                                         in the frame the ops before it leave; "edge": a
 *                                                         random_resize's or random_shortest_size's);
 *                                                         an elastic_transform's displacement in OUT.npy.disp.npy
 *   fusedcheck rrc SPEC.json W H N                     -> N lines "left top w h" (op 1 must be rrc)
 *   fusedcheck ra SPEC.json N                          -> N lines of RandAugment's "Op magnitude" steps
 *                                                         (op 1 must be rand_augment), on a 32x24 image
 *   fusedcheck gate SPEC.json N                        -> N lines 1|0: whether op 1 (a random_<op> row, run
 *                                                         through its registry row) changed samples 0..N-1's
 *                                                         32x24 image
 *   fusedcheck plan SPEC.json N                        -> N lines: the indices of op 1's ops (a combinator)
 *                                                         that samples 0..N-1 run, in their order ("-": none)
 *   fusedcheck sigma SPEC.json N                       -> N lines: the sigma (radius) op 1 (gaussian_blur,
 *                                                         pil_gaussian_blur) draws
 *   fusedcheck persp SPEC.json N W H                   -> N lines: op 1's (random_perspective) 8 corner
 *                                                         coordinates, or "-" where its p draw skipped it
 *   fusedcheck augmix SPEC.json N                      -> N lines: op 1's (aug_mix) draws for samples 0..N-1,
 *                                                         "m0 m1 | d0 d1 ... | int draws in torchvision's order"
 *   fusedcheck elastic SPEC.json N W H                 -> N lines: op 1's (elastic_transform) displacement at a
 *                                                         W x H image's centre c: dx(c) dy(c) dx(c + 3 right)
 *                                                         dy(c + 3 down)
 *   fusedcheck mix SPEC.json N W H                     -> N lines "kind lambda x1 y1 x2 y2": batch.mix's draws
 *                                                         for batches 0..N-1 of epoch 0 (kind 0 none, 1 mixup,
 *                                                         2 cutmix) of W x H images */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/rng.h"
#include "ops/elastic.h"
#include "ops/image_decode.h"
#include "ops/policy.h"
#include "pipeline/augment.h"
#include "pipeline/combinators.h"
#include "pipeline/element.h"
#include "pipeline/mix.h"
#include "pipeline/geometry.h"
#include "pipeline/op_registry.h"
#include "pipeline/spec.h"

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* aug_mix's draws, as torchvision's forward makes them: the two Dirichlet draws (floats), then the randints
 * in order (depth when it is drawn, op index, bin when the op has a table, sign when it is signed). */
static void print_augmix(const struct spw_op_spec *op, struct spw_rng *r, const char *open, const char *close)
{
    struct spw_augmix_params p;
    struct spw_augmix_plan plan;
    spw_augment_augmix_params(op, &p);
    if (spw_augmix_plan(r, &p, &plan))
        return;
    printf("%s[%.9g, %.9g], [", open, plan.m[0], plan.m[1]);
    for (int i = 0; i < plan.width; i++)
        printf("%s%.9g", i ? ", " : "", plan.dirichlet[i]);
    printf("], [");
    const char *sep = "";
    for (int i = 0; i < plan.width; i++) {
        if (op->chain_depth <= 0)
            printf("%s%d", sep, plan.depth[i]), sep = ", ";
        for (int d = 0; d < plan.depth[i]; d++) {
            const struct spw_augmix_step *s = &plan.step[i][d];
            printf("%s%d", sep, s->index), sep = ", ";
            if (s->bin >= 0)
                printf(", %d", s->bin);
            if (s->negate >= 0)
                printf(", %d", s->negate);
        }
    }
    printf("]%s", close);
}

/* elastic_transform's displacement for the output's w x h (the op keeps the size; it must be the last that
 * changes it), drawn again from its key, into OUT.disp.npy: float32 [h, w, 2]. */
static int write_displacement(const struct spw_op_spec *op, struct spw_rng *r, int w, int h, const char *out)
{
    struct spw_tensor t = {.dtype = SPW_DTYPE_F32, .ndim = 3, .shape = {h, w, 2},
                           .nbytes = (size_t)w * (size_t)h * 2 * sizeof(float)};
    char path[4096], err[256];
    if (!(t.data = malloc(t.nbytes)) || spw_elastic_displacement(r, op->elastic_alpha, op->sigma, w, h, t.data, err,
                                                                 sizeof err)) {
        free(t.data);
        return 1;
    }
    snprintf(path, sizeof path, "%s.disp.npy", out);
    const int rc = spw_tensor_write_npy(&t, path);
    free(t.data);
    return rc ? 1 : 0;
}

static int cmd_run(const struct spw_pipeline_spec *spec, const char *in, const char *out, int64_t sample)
{
    size_t len;
    uint8_t *buf = read_file(in, &len);
    if (!buf) {
        fprintf(stderr, "cannot read %s\n", in);
        return 1;
    }
    struct spw_element_ctx ctx;
    struct spw_value v = {0};
    char err[512];
    if (spw_element_ctx_init(&ctx, spec) != 0)
        return 1;
    int rc = spw_element_run(&ctx, 0, ctx.n_groups, 0, sample, buf, len, &v, NULL, NULL, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", in, spw_strerror(rc), err);
        return 1;
    }
    struct spw_tensor t = v.t;
    if (!v.is_tensor) {
        t.dtype = SPW_DTYPE_U8;
        t.ndim = 3;
        t.shape[0] = v.img.h;
        t.shape[1] = v.img.w;
        t.shape[2] = v.img.c;
        t.nbytes = (size_t)v.img.w * v.img.h * (size_t)v.img.c;
        t.data = v.img.data;
    }
    rc = spw_tensor_write_npy(&t, out);
    /* Report the random choices the ops made, drawn again from the same keys. */
    int W = 0, H = 0;       /* the decoded (and, with exif_transpose, turned) image's size */
    spw_image_header(buf, len, spec->max_pixels, spec->ops[0].exif_transpose, &W, &H, err, sizeof err);
    bool h = false, vf = false;
    int fw = W, fh = H;     /* the frame the draws see, through the ops that size it (resizes, pad, crop) */
    printf("{");
    for (int i = 0; i < spec->n_ops; i++) {
        struct spw_rng r;
        spw_rng_init(&r, spec->source.seed, 0, (uint64_t)sample, (uint32_t)i);
        const struct spw_op_spec *op = &spec->ops[i];
        if (op->kind == SPW_OP_RANDOM_RESIZED_CROP && i == 1) {
            struct spw_rect c = spw_rrc_params(op, &r, W, H);
            printf("\"rect\": [%d, %d, %d, %d], ", c.x, c.y, c.w, c.h);
        }
        int end[4][2];
        if (op->kind == SPW_OP_RANDOM_PERSPECTIVE && i == 1 && spw_perspective_draw(op, &r, W, H, end))
            printf("\"perspective\": [[%d, %d], [%d, %d], [%d, %d], [%d, %d]], ", end[0][0], end[0][1], end[1][0],
                   end[1][1], end[2][0], end[2][1], end[3][0], end[3][1]);
        if (op->kind == SPW_OP_RANDOM_CROP) {    /* in the unpadded frame: negative in the padding */
            struct spw_rect c = spw_random_crop_rect(op, &r, fw, fh);
            printf("\"crop\": [%d, %d, %d, %d], ", c.x, c.y, c.w, c.h);
            fw = c.w, fh = c.h;
        }
        if (op->kind == SPW_OP_PAD_IF_SMALLER)
            spw_pad_if_smaller_size(op, fw, fh, &fw, &fh);
        if (op->kind == SPW_OP_RANDOM_RESIZE || op->kind == SPW_OP_RANDOM_SHORTEST_SIZE) {
            const int edge = spw_random_resize_draw(op, &r);
            printf("\"edge\": %d, ", edge);
            spw_random_resize_size(op, edge, fw, fh, &fw, &fh);
        }
        if (op->kind == SPW_OP_AUG_MIX)
            print_augmix(op, &r, "\"augmix\": [", "], ");
        if (op->kind == SPW_OP_ELASTIC_TRANSFORM && write_displacement(op, &r, (int)t.shape[1], (int)t.shape[0], out))
            rc = 1;
        spw_flip_decision(op, &r, &h, &vf);
    }
    printf("\"hflip\": %d, \"vflip\": %d}\n", h, vf);
    spw_value_free(&v);
    spw_element_ctx_destroy(&ctx);
    free(buf);
    return rc ? 1 : 0;
}

static int cmd_rrc(const struct spw_pipeline_spec *spec, int W, int H, int n)
{
    if (spec->n_ops < 2 || spec->ops[1].kind != SPW_OP_RANDOM_RESIZED_CROP) {
        fprintf(stderr, "rrc: ops[1] must be random_resized_crop\n");
        return 1;
    }
    for (int s = 0; s < n; s++) {
        struct spw_rng r;
        spw_rng_init(&r, spec->source.seed, 0, (uint64_t)s, 1);
        struct spw_rect c = spw_rrc_params(&spec->ops[1], &r, W, H);
        printf("%d %d %d %d\n", c.x, c.y, c.w, c.h);
    }
    return 0;
}

static int cmd_ra(const struct spw_pipeline_spec *spec, int n)
{
    if (spec->n_ops < 2 || spec->ops[1].kind != SPW_OP_RAND_AUGMENT) {
        fprintf(stderr, "ra: ops[1] must be rand_augment\n");
        return 1;
    }
    const struct spw_op_spec *op = &spec->ops[1];
    struct spw_image img, tmp;
    if (spw_image_alloc(&img, 32, 24, 3) || spw_image_alloc(&tmp, 32, 24, 3))
        return 1;
    struct spw_aug_step steps[64];
    for (int s = 0; s < n; s++) {
        for (int i = 0; i < 32 * 24 * 3; i++)
            img.data[i] = (uint8_t)(i * 13 + s);
        struct spw_rng r;
        spw_rng_init(&r, spec->source.seed, 0, (uint64_t)s, 1);
        if (spw_rand_augment_run(&img, &tmp, &r, op->num_ops, op->magnitude, op->num_magnitude_bins, op->fill,
                                 (int)op->interpolation, steps) != 0)
            return 1;
        for (int k = 0; k < op->num_ops && k < 64; k++)
            printf("%s %.6f\n", spw_augment_op_name(steps[k].op), steps[k].magnitude);
    }
    spw_image_free(&img);
    spw_image_free(&tmp);
    return 0;
}

static int cmd_gate(const struct spw_pipeline_spec *spec, int n)
{
    struct spw_element_ctx ctx;
    if (spec->n_ops < 2 || spw_element_ctx_init(&ctx, spec) != 0)
        return 1;
    const struct spw_op_def *def = spw_op_def(spec->ops[1].kind);
    enum { W = 32, H = 24 };   /* 768 pixels: PIL equalize is the identity under 256 */
    int rc = 0;
    for (int s = 0; s < n && rc == 0; s++) {
        struct spw_value v = {0};
        uint8_t before[W * H * 3];
        if (spw_image_alloc(&v.img, W, H, 3) != 0)
            return 1;
        for (int i = 0; i < W * H * 3; i++) {   /* colours in [40, 215], skewed: every op tested changes them */
            const int k = (i * 37 + (i / 3) * 11) % 176;
            before[i] = v.img.data[i] = (uint8_t)(40 + k * k / 176);
        }
        char err[256];
        struct spw_op_call c = {.ctx = &ctx, .op = &spec->ops[1], .index = 1, .sample = s, .err = err,
                                .errlen = sizeof err};
        spw_element_rng(&ctx, 0, s, 1, &c.rng);
        rc = def->cpu(&c, &v);
        if (rc)
            fprintf(stderr, "gate: %s\n", err);
        else
            printf("%d\n", memcmp(before, v.img.data, sizeof before) != 0);
        spw_value_free(&v);
    }
    spw_element_ctx_destroy(&ctx);
    return rc ? 1 : 0;
}

static int cmd_plan(const struct spw_pipeline_spec *spec, int n)
{
    struct spw_element_ctx ctx;
    if (spec->n_ops < 2 || spw_element_ctx_init(&ctx, spec) != 0)
        return 1;
    int order[SPW_OP_MAX_NESTED], rc = 0;
    for (int s = 0; s < n && rc == 0; s++) {
        struct spw_rng r;
        spw_element_rng(&ctx, 0, s, 1, &r);
        const int k = spw_combinator_plan(&spec->ops[1], &r, order);
        rc = k < 0;
        for (int i = 0; i < k; i++)
            printf("%s%d", i ? " " : "", order[i]);
        printf("%s\n", k == 0 ? "-" : "");
    }
    spw_element_ctx_destroy(&ctx);
    return rc;
}

static int cmd_sigma(const struct spw_pipeline_spec *spec, int n)
{
    if (spec->n_ops < 2 || (spec->ops[1].kind != SPW_OP_GAUSSIAN_BLUR && spec->ops[1].kind !=
                                                                        SPW_OP_PIL_GAUSSIAN_BLUR)) {
        fprintf(stderr, "sigma: ops[1] must be gaussian_blur or pil_gaussian_blur\n");
        return 1;
    }
    for (int s = 0; s < n; s++) {
        struct spw_rng r;
        spw_rng_init(&r, spec->source.seed, 0, (uint64_t)s, 1);
        printf("%.9g\n", spw_augment_blur_sigma(&spec->ops[1], &r));
    }
    return 0;
}

static int cmd_persp(const struct spw_pipeline_spec *spec, int n, int w, int h)
{
    if (spec->n_ops < 2 || spec->ops[1].kind != SPW_OP_RANDOM_PERSPECTIVE)
        return 1;
    for (int s = 0; s < n; s++) {
        struct spw_rng r;
        int e[4][2];
        spw_rng_init(&r, spec->source.seed, 0, (uint64_t)s, 1);
        if (spw_perspective_draw(&spec->ops[1], &r, w, h, e))
            printf("%d %d %d %d %d %d %d %d\n", e[0][0], e[0][1], e[1][0], e[1][1], e[2][0], e[2][1], e[3][0], e[3][1]);
        else
            printf("-\n");
    }
    return 0;
}

static int cmd_augmix(const struct spw_pipeline_spec *spec, int n)
{
    if (spec->n_ops < 2 || spec->ops[1].kind != SPW_OP_AUG_MIX)
        return 1;
    for (int s = 0; s < n; s++) {
        struct spw_rng r;
        spw_rng_init(&r, spec->source.seed, 0, (uint64_t)s, 1);
        print_augmix(&spec->ops[1], &r, "", "\n");
    }
    return 0;
}

static int cmd_elastic(const struct spw_pipeline_spec *spec, int n, int w, int h)
{
    if (spec->n_ops < 2 || spec->ops[1].kind != SPW_OP_ELASTIC_TRANSFORM || w < 8 || h < 8)
        return 1;
    float *d = malloc((size_t)w * (size_t)h * 2 * sizeof *d);
    char err[256];
    for (int s = 0; d && s < n; s++) {
        struct spw_rng r;
        spw_rng_init(&r, spec->source.seed, 0, (uint64_t)s, 1);
        if (spw_elastic_displacement(&r, spec->ops[1].elastic_alpha, spec->ops[1].sigma, w, h, d, err, sizeof err))
            break;
        const size_t c = (size_t)(h / 2) * w + (size_t)(w / 2);
        printf("%.9g %.9g %.9g %.9g\n", d[2 * c], d[2 * c + 1], d[2 * (c + 3)], d[2 * (c + 3 * (size_t)w) + 1]);
    }
    free(d);
    return 0;
}

static int cmd_mix(const struct spw_pipeline_spec *spec, int n, int w, int h)
{
    for (int b = 0; b < n; b++) {
        struct spw_mix_draw d;
        spw_mix_plan(&spec->batch.mix, spec->source.seed, 0, b, w, h, &d);
        printf("%d %.17g %d %d %d %d\n", (int)d.kind, d.lambda, d.x1, d.y1, d.x2, d.y2);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: fusedcheck run SPEC.json IN.jpg OUT.npy SAMPLE | rrc SPEC.json W H N | "
                        "ra SPEC.json N | gate SPEC.json N | plan SPEC.json N | sigma SPEC.json N | "
                        "mix SPEC.json N W H | persp SPEC.json N W H | augmix SPEC.json N | elastic SPEC.json N W H\n");
        return 2;
    }
    struct spw_pipeline_spec *spec;
    char err[512];
    if (spw_spec_load_file(argv[2], &spec, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", argv[2], err);
        return 2;
    }
    int rc = 2;
    if (!strcmp(argv[1], "run") && argc == 6)
        rc = cmd_run(spec, argv[3], argv[4], atoll(argv[5]));
    else if (!strcmp(argv[1], "ra") && argc == 4)
        rc = cmd_ra(spec, atoi(argv[3]));
    else if (!strcmp(argv[1], "persp") && argc == 6)
        rc = cmd_persp(spec, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    else if (!strcmp(argv[1], "elastic") && argc == 6)
        rc = cmd_elastic(spec, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    else if (!strcmp(argv[1], "augmix") && argc == 4)
        rc = cmd_augmix(spec, atoi(argv[3]));
    else if (!strcmp(argv[1], "mix") && argc == 6)
        rc = cmd_mix(spec, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    else if (!strcmp(argv[1], "sigma") && argc == 4)
        rc = cmd_sigma(spec, atoi(argv[3]));
    else if (!strcmp(argv[1], "plan") && argc == 4)
        rc = cmd_plan(spec, atoi(argv[3]));
    else if (!strcmp(argv[1], "gate") && argc == 4)
        rc = cmd_gate(spec, atoi(argv[3]));
    else if (!strcmp(argv[1], "rrc") && argc == 6)
        rc = cmd_rrc(spec, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    else
        fprintf(stderr, "bad arguments\n");
    spw_spec_free(spec);
    return rc;
}
