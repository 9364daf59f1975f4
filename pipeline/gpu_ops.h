/* pipeline/gpu_ops.h - the op registry's GPU runs: each queues on the device what the op's CPU run does to
 * an element's uint8 HWC image: the crops (whole-pixel warps into the op's size, fill outside), the flips and
 * warps (rotate, affine, the policies' shears, translations and rotations) as nearest warps planned on the
 * host by ops/geometry.c, the colour ops as tables (made on the host, or on the device from the image's
 * histogram or mean luma) and per-pixel blends, and the policies as their planned steps; random_erasing
 * writes the values the CPU draws into the output tensor. Random parameters come from the op's own RNG, as on
 * the CPU, and the arithmetic is the CPU's (ops/color_px.h, ops/cuda/pixel.h), so the image equals the
 * CPU's byte for byte. Thread-safe: a call is one element's; img and tmp hold the largest image of the
 * pipeline (spw_gpu_op_size). */
#ifndef SPW_PIPELINE_GPU_OPS_H
#define SPW_PIPELINE_GPU_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "ops/cuda/gpu_plugin.h"
#include "pipeline/op_registry.h"

struct spw_gpu_call {
    const struct spw_gpu_plugin *p;
    void *dev;
    struct spw_op_call *op;             /* the op, its index and its RNG */
    struct spw_gpu_image img, tmp;      /* the image and a scratch of its size; a run may swap them */
    spw_dptr lut, stats, tables;        /* scratch: uint8[3][256]; uint64[3 * 256 + 1]; int32[w + h] */
    struct {                            /* tensor ops (after normalize / to_tensor): the output, C x H x W */
        spw_dptr data;
        enum spw_dtype dtype;
        int c, h, w;
    } out;
    void *hold;                         /* host memory a run queued a copy from: the caller frees it once
                                           the stream is synced */
};

/* The image size after op (a crop's own size; the rest keep it): the scratch and images are sized for the
 * largest of a pipeline. */
void spw_gpu_op_size(const struct spw_op_spec *op, int *w, int *h);
/* Bytes of the scratch a w x h image's calls need, and c's lut, stats and tables laid out from base. */
size_t spw_gpu_call_scratch_bytes(int w, int h);
void spw_gpu_call_scratch(struct spw_gpu_call *c, spw_dptr base);

/* A run returns 0, -ENOTSUP (this instance has no kernel, e.g. a bicubic warp or Pillow's float warp:
 * the element is made on the CPU), -EINVAL (as the CPU op would refuse) or a device error. */
int spw_gpu_op_crop(struct spw_gpu_call *c);
int spw_gpu_op_center_crop(struct spw_gpu_call *c);
int spw_gpu_op_random_crop(struct spw_gpu_call *c);
int spw_gpu_op_flip(struct spw_gpu_call *c);
int spw_gpu_op_rotate(struct spw_gpu_call *c);
int spw_gpu_op_affine(struct spw_gpu_call *c);
int spw_gpu_op_brightness(struct spw_gpu_call *c);
int spw_gpu_op_contrast(struct spw_gpu_call *c);
int spw_gpu_op_saturation(struct spw_gpu_call *c);
int spw_gpu_op_sharpness(struct spw_gpu_call *c);
int spw_gpu_op_hue(struct spw_gpu_call *c);
int spw_gpu_op_color_jitter(struct spw_gpu_call *c);
int spw_gpu_op_posterize(struct spw_gpu_call *c);
int spw_gpu_op_solarize(struct spw_gpu_call *c);
int spw_gpu_op_equalize(struct spw_gpu_call *c);
int spw_gpu_op_autocontrast(struct spw_gpu_call *c);
int spw_gpu_op_invert(struct spw_gpu_call *c);
int spw_gpu_op_rand_augment(struct spw_gpu_call *c);
int spw_gpu_op_auto_augment(struct spw_gpu_call *c);
int spw_gpu_op_trivial_augment(struct spw_gpu_call *c);
int spw_gpu_op_random_erasing(struct spw_gpu_call *c);
/* grayscale (three channels): the saturation blend at factor 0, which is PIL's convert('L') grey exactly. */
int spw_gpu_op_grayscale(struct spw_gpu_call *c);
/* The random_<colour op> rows: the CPU's draw, then their op's kernel. */
int spw_gpu_op_random(struct spw_gpu_call *c);
/* The combinators: the CPU's plan (spw_combinator_plan), then each op's GPU run with the CPU's stream. */
int spw_gpu_op_combinator(struct spw_gpu_call *c);
/* Whether op has a GPU run, and (a combinator) so do all its ops. */
bool spw_gpu_op_has_kernel(const struct spw_op_spec *op);

#endif
