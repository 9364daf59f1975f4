/* ops/image.h - the image view every image kernel works on: HWC uint8, c = 1 or 3, rows `stride` apart.
 * A view does not own its pixels unless made by spw_image_alloc(). Kernels take a const input view and a
 * preallocated output view; they never allocate and are safe to call from many threads. */
#ifndef SPW_OPS_IMAGE_H
#define SPW_OPS_IMAGE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* Sampling filters (resize, resized crops, warps). Values are stable: they travel in specs. */
enum spw_interp { SPW_INTERP_NEAREST = 0, SPW_INTERP_BILINEAR = 1, SPW_INTERP_BICUBIC = 2 };

struct spw_image {
    int w, h, c;
    size_t stride;      /* bytes between rows, >= w * c */
    uint8_t *data;
};

/* Allocate a tightly packed w x h x c image (malloc). Returns 0 or -ENOMEM / -EINVAL. */
int spw_image_alloc(struct spw_image *img, int w, int h, int c);
/* Free pixels made by spw_image_alloc(); accepts a zeroed view. */
void spw_image_free(struct spw_image *img);
/* Whether in and out are RGB views of the same size with data (the colour kernels' input and output):
 * 0 or -EINVAL. */
static inline int spw_image_rgb_pair(const struct spw_image *in, const struct spw_image *out)
{
    if (!in || !out || !in->data || !out->data || in->c != 3 || out->c != 3 || in->w <= 0 || in->h <= 0 ||
        in->w != out->w || in->h != out->h || in->stride < (size_t)in->w * 3 || out->stride < (size_t)out->w * 3)
        return -EINVAL;
    return 0;
}

/* Pointer to pixel (x, y). */
static inline uint8_t *spw_image_at(const struct spw_image *img, int x, int y)
{
    return img->data + (size_t)y * img->stride + (size_t)x * img->c;
}

#endif
