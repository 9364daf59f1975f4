/* ops/color.h - per-pixel colour kernels on RGB HWC uint8 images, bit-exact with torchvision 0.14's PIL
 * path (Pillow 9.4 ImageEnhance / ImageOps / HSV convert). Not tensor-path torchvision: where the two
 * differ (equalize, hue, rounding) these follow PIL. Pure kernels: no allocation, no I/O, no globals;
 * safe to call from many threads on distinct outputs. */
#ifndef SPW_OPS_COLOR_H
#define SPW_OPS_COLOR_H

#include "ops/image.h"

/* All kernels take an input view and a preallocated output view of the same w/h with c == 3 and return
 * 0, or -EINVAL for a NULL/mismatched/non-RGB view or an out-of-range parameter (out untouched then).
 * Every kernel except spw_adjust_sharpness_run() accepts in == out (same view, in place); partially
 * overlapping views are not allowed. */

/* ImageEnhance.Brightness: blend with black by `factor` (>= 0; 1 = identity). In place allowed. */
int spw_adjust_brightness_run(const struct spw_image *in, double factor, struct spw_image *out);

/* ImageEnhance.Contrast: blend with the rounded mean of convert('L') by `factor` (>= 0). In place allowed. */
int spw_adjust_contrast_run(const struct spw_image *in, double factor, struct spw_image *out);

/* ImageEnhance.Color (torchvision adjust_saturation): blend with convert('L') grey by `factor` (>= 0).
 * In place allowed. */
int spw_adjust_saturation_run(const struct spw_image *in, double factor, struct spw_image *out);

/* ImageEnhance.Sharpness: blend with ImageFilter.SMOOTH (3x3 [1 1 1;1 5 1;1 1 1]/13, border pixels kept)
 * by `factor` (>= 0). in and out must be distinct views. */
int spw_adjust_sharpness_run(const struct spw_image *in, double factor, struct spw_image *out);

/* torchvision F.adjust_hue on PIL: RGB->HSV (PIL), H += uint8(hue_factor * 255) with wrap, HSV->RGB.
 * hue_factor in [-0.5, 0.5]; note 0 is not an identity (PIL's HSV round trip is lossy). In place allowed. */
int spw_adjust_hue_run(const struct spw_image *in, double hue_factor, struct spw_image *out);

/* torchvision F.rgb_to_grayscale on PIL with num_output_channels=3: convert('L') (ITU-R 601-2 luma, PIL's
 * fixed-point rounding) in all three channels. In place allowed. */
int spw_grayscale_run(const struct spw_image *in, struct spw_image *out);

/* ImageOps.posterize: keep the top `bits` (0..8) bits of every channel. In place allowed. */
int spw_posterize_run(const struct spw_image *in, int bits, struct spw_image *out);

/* ImageOps.solarize: v >= threshold becomes 255 - v. In place allowed. */
/* The first value solarize inverts for that threshold (256: none). */
int spw_solarize_first(double threshold);
int spw_solarize_run(const struct spw_image *in, double threshold, struct spw_image *out);

/* ImageOps.equalize (no mask): per-channel histogram equalisation, PIL's step/rounding. In place allowed. */
int spw_equalize_run(const struct spw_image *in, struct spw_image *out);

/* ImageOps.autocontrast (cutoff 0, no ignore): per-channel stretch of [min, max] to [0, 255].
 * In place allowed. */
int spw_autocontrast_run(const struct spw_image *in, struct spw_image *out);

/* ImageOps.invert: v -> 255 - v. In place allowed. */
int spw_invert_run(const struct spw_image *in, struct spw_image *out);

#endif
