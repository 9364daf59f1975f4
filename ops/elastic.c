/* ops/elastic.c - ElasticTransform (see elastic.h): the displacement in float32 (the blur separable, summed in
 * double: the noise is random, so only its distribution has to be torchvision's), then the tensor-path warp.
 * Allocates per call; thread-safe. */
#include "ops/elastic.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "lib/err.h"
#include "ops/blur.h"
#include "ops/tensor_path.h"

int spw_elastic_kernel_size(double sigma)
{
    if (!(sigma > 0.0))
        return 0;
    const int k = (int)(8 * sigma + 1);
    return k % 2 ? k : k + 1;
}

/* torch's reflect padding: index -1 is 1, n is n - 2 (valid for |overhang| < n). */
static int reflect(int i, int n)
{
    return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
}

/* f (h x w, one field of disp's pairs at stride 2) blurred with the kx-tap kernel across and the ky-tap one
 * down (F.gaussian_blur(f, [k, k], [sx, sy]): kernel2d = outer(k_y, k_x)), through tmp (h x w floats). */
static void blur_field(float *f, int w, int h, const float *kx, const float *ky, int k, float *tmp)
{
    const int half = k / 2;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double s = 0;
            for (int t = 0; t < k; t++)
                s += (double)kx[t] * f[2 * ((size_t)y * w + (size_t)reflect(x + t - half, w))];
            tmp[(size_t)y * w + x] = (float)s;
        }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double s = 0;
            for (int t = 0; t < k; t++)
                s += (double)ky[t] * tmp[(size_t)reflect(y + t - half, h) * w + x];
            f[2 * ((size_t)y * w + x)] = (float)s;
        }
}

int spw_elastic_displacement(struct spw_rng *rng, const double alpha[2], const double sigma[2], int w, int h,
                             float *disp, char *err, size_t errlen)
{
    const size_t n = (size_t)w * (size_t)h;
    struct spw_fastrng noise;
    spw_fastrng_seed(&noise, rng);
    float *tmp = NULL, *kx = NULL, *ky = NULL;
    int rc = 0;
    for (int axis = 0; axis < 2 && rc == 0; axis++) {      /* torch.rand(...) * 2 - 1: dx, then dy */
        float *f = disp + axis;
        for (size_t i = 0; i < n; i++) {
            const uint64_t u = spw_fastrng_u64(&noise);
            f[2 * i] = (float)(u >> 40) * 0x1p-24f * 2.0f - 1.0f;
        }
        const int k = spw_elastic_kernel_size(sigma[axis]);
        if (k > 0) {
            if (k / 2 >= w || k / 2 >= h) {
                rc = spw_fail(err, errlen, -EINVAL, "sigma %g blurs with a %d-tap kernel; its reflect padding "
                              "needs the image larger than %d pixels each way (it is %dx%d)", sigma[axis], k, k / 2,
                              w, h);
                break;
            }
            free(tmp), free(kx), free(ky);
            tmp = malloc(n * sizeof *tmp), kx = malloc((size_t)k * sizeof *kx), ky = malloc((size_t)k * sizeof *ky);
            if (!tmp || !kx || !ky) {
                rc = spw_fail(err, errlen, -ENOMEM, "out of memory for a %dx%d displacement", w, h);
                break;
            }
            /* both fields use [k, k] with sigma [sx, sy]: across from sx, down from sy */
            if ((rc = spw_gaussian_kernel1d(k, sigma[0], kx)) == 0)
                rc = spw_gaussian_kernel1d(k, sigma[1], ky);
            if (rc) {
                rc = spw_fail(err, errlen, rc, "sigma %g: no Gaussian kernel of %d taps", sigma[axis], k);
                break;
            }
            blur_field(f, w, h, kx, ky, k, tmp);
        }
        const float a = (float)alpha[axis], size = (float)(axis == 0 ? h : w);     /* dx / height, dy / width */
        for (size_t i = 0; i < n; i++)
            f[2 * i] = f[2 * i] * a / size;
    }
    free(tmp), free(kx), free(ky);
    return rc;
}

int spw_elastic_run(struct spw_image *img, struct spw_rng *rng, const double alpha[2], const double sigma[2],
                    int interp, const double fill[3], char *err, size_t errlen)
{
    float *disp = malloc((size_t)img->w * (size_t)img->h * 2 * sizeof *disp);
    struct spw_image out = {0};
    int rc = disp ? spw_image_alloc(&out, img->w, img->h, 3) : -ENOMEM;
    if (rc)
        rc = spw_fail(err, errlen, rc, "out of memory for a %dx%d elastic transform", img->w, img->h);
    if (rc == 0)
        rc = spw_elastic_displacement(rng, alpha, sigma, img->w, img->h, disp, err, errlen);
    if (rc == 0 && (rc = spw_tensor_displace_run(img, disp, interp, fill, &out)) != 0)
        rc = spw_fail(err, errlen, rc, "a bad image or interpolation");
    if (rc == 0) {
        struct spw_image t = *img;
        *img = out;
        out = t;
    }
    spw_image_free(&out);
    free(disp);
    return rc;
}
