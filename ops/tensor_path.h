/* ops/tensor_path.h - torchvision 0.14's tensor path (transforms/functional_tensor.py on a uint8 tensor, as
 * torch 1.13's CPU kernels compute it) for the ops AugMix applies: it converts a PIL image to a tensor first,
 * so its warps are grid_sample (not Pillow's transform) and its colour ops _blend in float32 and truncate
 * (not Pillow's rounding). Byte-equal to torchvision on RGB images; the contrast mean is exact up to 65,793
 * pixels (torch's float32 sum, see tensor_path.c). Pure functions over caller-owned views, no allocation;
 * thread-safe. */
#ifndef SPW_OPS_TENSOR_PATH_H
#define SPW_OPS_TENSOR_PATH_H

#include "ops/image.h"

/* F_t.affine / F_t.rotate (expand false) with the inverse matrix torchvision's F.affine / F.rotate build for
 * a tensor (centre-relative: see spw_affine_inverse_matrix with center {0, 0}): the sampling grid of
 * _gen_affine_grid, grid_sample (align_corners false, zeros padding), interp SPW_INTERP_NEAREST or
 * SPW_INTERP_BILINEAR, then round half to even. fill NULL is torchvision's fill=None (outside is 0); else
 * the mask-channel blend _apply_grid_transform does. in and out must not overlap. Returns 0 or -EINVAL. */
int spw_tensor_affine_run(const struct spw_image *in, const double matrix[6], int interp, const double *fill,
                          struct spw_image *out);

/* F_t.elastic_transform: grid_sample (as spw_tensor_affine_run samples) at _create_identity_grid + disp, disp
 * h x w x 2 floats (x, y) in grid units ([-1, 1] spans the image). Returns 0 or -EINVAL. */
int spw_tensor_displace_run(const struct spw_image *in, const float *disp, int interp, const double *fill,
                            struct spw_image *out);

/* adjust_brightness / adjust_saturation / adjust_contrast / adjust_sharpness: _blend(img, other, factor) =
 * (factor * img + (1 - factor) * other).clamp(0, 255), truncated to uint8, where other is zeros, the
 * truncated grey (0.2989 r + 0.587 g + 0.114 b), the grey's mean, or the rounded 3x3 smoothing ([1 1 1; 1 5
 * 1; 1 1 1] / 13, the border kept). In place allowed except for sharpness. Return 0 or -EINVAL. */
int spw_tensor_brightness_run(const struct spw_image *in, double factor, struct spw_image *out);
int spw_tensor_saturation_run(const struct spw_image *in, double factor, struct spw_image *out);
int spw_tensor_contrast_run(const struct spw_image *in, double factor, struct spw_image *out);
int spw_tensor_sharpness_run(const struct spw_image *in, double factor, struct spw_image *out);

/* F_t.autocontrast: per channel (v - min) * (1 / (max - min) * 255) in float32, clamped and truncated; a
 * one-level channel is left as it is. In place allowed. Returns 0 or -EINVAL. */
int spw_tensor_autocontrast_run(const struct spw_image *in, struct spw_image *out);

#endif
