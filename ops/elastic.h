/* ops/elastic.h - torchvision 0.14's ElasticTransform(alpha, sigma, interpolation, fill) on an RGB image:
 * get_params' displacement (uniform noise in [-1, 1) per pixel for each of x and y, each field blurred by
 * F.gaussian_blur's float32 kernel with reflect padding, then scaled by alpha / size: x by the height and y by
 * the width, as torchvision does) and F.elastic_transform on the tensor path (ops/tensor_path.h). The noise
 * comes from a caller-owned spw_rng; the warp given a displacement is byte-equal to torchvision's. Thread-safe. */
#ifndef SPW_OPS_ELASTIC_H
#define SPW_OPS_ELASTIC_H

#include <stddef.h>

#include "lib/rng.h"
#include "ops/image.h"

#define SPW_ELASTIC_MAX_SIGMA 100.0     /* kernels up to 801 taps */

/* get_params' kernel size for a sigma: int(8 sigma + 1), made odd; 0 when sigma is 0 (no blur). */
int spw_elastic_kernel_size(double sigma);

/* The displacement for a w x h image into disp (h x w x 2 floats: x, y). sigma: both > 0, or both 0 (no blur;
 * torchvision's blur refuses one 0). Returns 0, -ENOMEM, or -EINVAL with err saying why (an image too small for
 * the blur's reflect padding, as torch refuses it). */
int spw_elastic_displacement(struct spw_rng *rng, const double alpha[2], const double sigma[2], int w, int h,
                             float *disp, char *err, size_t errlen);

/* Draw a displacement and warp: *img becomes the result. fill: 3 values (torchvision always blends one in).
 * Returns 0, -ENOMEM or -EINVAL (err says why). */
int spw_elastic_run(struct spw_image *img, struct spw_rng *rng, const double alpha[2], const double sigma[2],
                    int interp, const double fill[3], char *err, size_t errlen);

#endif
