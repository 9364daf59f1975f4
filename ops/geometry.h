/* ops/geometry.h - affine warps of RGB HWC uint8 images matching torchvision 0.14 F.affine / F.rotate on
 * PIL images (Pillow 9.4 Image.transform(AFFINE) and Image.rotate, expand=False), sampling points and
 * rounding included. Not flips or crops (ops/image.*), not bicubic, not the tensor-path torchvision.
 * Pure kernels: no allocation, no globals; safe from many threads. in and out must be distinct views.
 * Areas that map outside the input get `fill` (NULL = black), truncated to int and clipped like PIL. */
#ifndef SPW_OPS_GEOMETRY_H
#define SPW_OPS_GEOMETRY_H

#include <stdint.h>

#include "ops/image.h"

/* PIL Image.transform(out size, AFFINE, m, interp): out(x, y) samples in at (m0 x' + m1 y' + m2,
 * m3 x' + m4 y' + m5) with x' = x + 0.5, y' = y + 0.5. out may differ in size from in (both c == 3).
 * Returns 0, or -EINVAL for bad views, interpolation or a non-finite matrix. */
int spw_transform_affine_run(const struct spw_image *in, const double m[6], int interpolation,
                             const double fill[3], struct spw_image *out);

/* torchvision F.affine (PIL path): the inverse of rotate(angle, clockwise degrees) * scale * shear
 * (degrees, [x, y]) about `center` (pixels from the top-left corner; NULL = (w / 2, h / 2)), then
 * translate (pixels). out has in's size. Returns 0 or -EINVAL (bad views, scale <= 0, non-finite). */
int spw_affine_run(const struct spw_image *in, double angle, const double translate[2], double scale,
                   const double shear[2], int interpolation, const double fill[3], const double center[2],
                   struct spw_image *out);

/* torchvision F.rotate (PIL path, expand=False, centre of the image): counter-clockwise degrees, with
 * PIL's exact fast paths for multiples of 90. out has in's size. Returns 0 or -EINVAL. */
int spw_rotate_run(const struct spw_image *in, double angle, int interpolation, const double fill[3],
                   struct spw_image *out);

/* torchvision's _get_perspective_coeffs(start, end): the 8 coefficients of the map from end's corners to
 * start's ([top-left, top-right, bottom-right, bottom-left], (x, y) each), solved in double and rounded to
 * float32 as torch's float32 lstsq returns them. Returns 0, or -EINVAL for corners no map takes (singular). */
int spw_perspective_coeffs(const int start[4][2], const int end[4][2], double c[8]);
/* PIL Image.transform(size, PERSPECTIVE, c, interp) (torchvision F.perspective on PIL): out(x, y) samples in at
 * ((c0 x' + c1 y' + c2) / (c6 x' + c7 y' + 1), (c3 x' + c4 y' + c5) / (c6 x' + c7 y' + 1)), x' = x + 0.5,
 * nearest (Pillow's COORD) or bilinear, fill outside. Returns 0 or -EINVAL. */
int spw_perspective_run(const struct spw_image *in, const double c[8], int interpolation, const double fill[3],
                        struct spw_image *out);

/* The inverse (output -> input) matrix torchvision's _get_inverse_affine_matrix hands to PIL, computed
 * with the same floating-point operations, for a w x h image. center NULL = (w / 2, h / 2). */
void spw_affine_inverse_matrix(int w, int h, double angle, const double translate[2], double scale,
                               const double shear[2], const double center[2], double m[6]);

/* A nearest warp worked out once, so that another device picks the same source pixels: Image.rotate's exact
 * transposes, an axis-aligned map (per-column and per-row source indices as Pillow's ImagingScaleAffine
 * accumulates them), 16.16 fixed-point stepping (Pillow's affine_fixed: exact integers, so a closed form
 * per pixel), or Pillow's float fallback for maps beyond 16.16 (accumulated doubles: not planned). */
enum spw_warp_kind { SPW_WARP_TRANSPOSE, SPW_WARP_SCALE, SPW_WARP_FIXED, SPW_WARP_FLOAT, SPW_WARP_BILINEAR };

struct spw_warp_plan {
    enum spw_warp_kind kind;
    int transpose;              /* SPW_WARP_TRANSPOSE: 0, 90, 180 or 270 degrees counter-clockwise */
    double m[6];                /* the inverse matrix */
    int64_t fx[6];              /* SPW_WARP_FIXED: 16.16 steps a0, a1, a3, a4 and a2, a5 at pixel (0, 0) */
    uint8_t ink[3];             /* the fill, as PIL takes it */
};

/* The plans of spw_rotate_run (nearest) and of spw_affine_run (nearest) on a w x h image. Return 0 or
 * -EINVAL as those functions would. */
int spw_rotate_warp_plan(int w, int h, double angle, const double fill[3], struct spw_warp_plan *p);
int spw_affine_warp_plan(int w, int h, double angle, const double translate[2], double scale,
                         const double shear[2], const double center[2], const double fill[3],
                         struct spw_warp_plan *p);
/* The same plans for bilinear sampling: every map but the rotations' exact transposes becomes
 * SPW_WARP_BILINEAR (spw_transform_affine_run's bilinear path, the matrix in m). */
void spw_warp_plan_bilinear(struct spw_warp_plan *p);
/* SPW_WARP_SCALE: the source column of each of the out_w output columns and the source row of each of the
 * out_h rows, -1 where it falls outside the in_w x in_h input. */
void spw_warp_scale_tables(const struct spw_warp_plan *p, int in_w, int in_h, int out_w, int out_h, int32_t *xi,
                           int32_t *yi);

#endif
