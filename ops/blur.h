/* ops/blur.h - Gaussian blurs on RGB HWC uint8 images. torchvision's gaussian_blur: F.gaussian_blur on a PIL
 * image goes through its tensor path (a float32 kernel from torch.linspace/exp, reflect padding, conv2d, round
 * half to even), and so does this, in double precision over the same float32 kernel (separable: a column pass,
 * then a row pass). Pillow's GaussianBlur: its extended box blur, bit-exact. No I/O, no globals; thread-safe. */
#ifndef SPW_OPS_BLUR_H
#define SPW_OPS_BLUR_H

#include <stddef.h>

#include "ops/image.h"

#define SPW_BLUR_MAX_KERNEL 1023    /* the largest kernel_size (odd) a spec may ask for */

/* torchvision's _get_gaussian_kernel1d(ksize, sigma) in float32: exp(-0.5 (x / sigma)^2) over x = -(k-1)/2
 * .. (k-1)/2, divided by its sum. ksize odd in [1, SPW_BLUR_MAX_KERNEL], sigma > 0. Returns 0 or -EINVAL. */
int spw_gaussian_kernel1d(int ksize, double sigma, float *out);
/* Bytes of scratch spw_gaussian_blur_run needs for a w-wide image and a kx-wide kernel. */
size_t spw_gaussian_blur_scratch(int w, int kx);
/* out = in blurred with the kx x ky kernel of sigmas sx, sy (F.gaussian_blur(img, [kx, ky], [sx, sy])).
 * in and out distinct, same size, c == 3; reflect padding needs kx / 2 < w and ky / 2 < h (torch's own
 * condition). Returns 0, or -EINVAL (a bad view, kernel or sigma; a kernel the image is too small for). */
int spw_gaussian_blur_run(const struct spw_image *in, int kx, int ky, double sx, double sy, void *scratch,
                          struct spw_image *out);

/* Pillow 9.4's ImageFilter.GaussianBlur(radius) on RGB (image.gaussian_blur: three passes of its extended box
 * blur each way, the box radius from Gwosdek et al., in Pillow's float and 8.24 fixed-point arithmetic, edges
 * extended): what DINO's and DeiT III's GaussianBlur call. out may be in (done in place); radius >= 0.
 * Returns 0 or -EINVAL. */
int spw_pil_gaussian_blur_run(const struct spw_image *in, double radius, struct spw_image *out);

#endif
