/* ops/jpeg.h - JPEG decoding to RGB with region-of-interest and DCT scaling (libjpeg-turbo).
 * Decodes only the rows and iMCU columns a crop needs, at 1/1, 1/2, 1/4 or 1/8 scale (the scales with SIMD
 * IDCTs). A file is corrupt exactly when Pillow (same libjpeg) says so on a full decode, whatever region is
 * decoded: libjpeg's warnings are ignored, data that ends before the image does is a truncated file, a bad
 * marker after the scan is an error. Thread-safe: every call has its own decompressor. */
#ifndef SPW_OPS_JPEG_H
#define SPW_OPS_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "ops/image.h"

struct spw_jpeg_info {
    int w, h;               /* full-resolution size */
    int components;         /* 1, 3 or 4 */
    int progressive;
};

/* The decoded part of an image: pixels of scaled-image columns [x0, x0 + img.w) and rows
 * [y0, y0 + img.h), where the scaled image is the full one times 1/denom. */
struct spw_jpeg_region {
    struct spw_image img;   /* owned: free with spw_image_free */
    int x0, y0;
    int denom;
};

/* Read the header only. Returns 0, SPW_EDECODE (message in err) or SPW_ETOOBIG (w*h > max_pixels). */
int spw_jpeg_header(const uint8_t *buf, size_t len, int64_t max_pixels, struct spw_jpeg_info *info,
                    char *err, size_t errlen);

/* Decode the full-resolution rectangle (x, y, w, h) at scale 1/denom (1, 2, 4 or 8) into out->img
 * (allocated here; columns may extend left/right to iMCU boundaries). w = 0 decodes the whole image.
 * Rows below the rectangle are decoded only when the unread data is not plain entropy data up to an EOI
 * marker (a truncated or damaged file), to give Pillow's verdict. Returns 0, SPW_EDECODE / SPW_ETOOBIG /
 * SPW_EUNSUPPORTED with a message in err ("truncated JPEG: ...", "corrupt JPEG: ..."), or -ENOMEM. */
int spw_jpeg_decode_region(const uint8_t *buf, size_t len, int64_t max_pixels, int x, int y, int w, int h,
                           int denom, struct spw_jpeg_region *out, char *err, size_t errlen);

/* Largest denom in {8, 4, 2, 1} at which a (w x h) crop still has 1.5x the output size (out_w x out_h):
 * closer to the output, the DCT-domain downscale differs from Pillow's filter by over a level on sharp photos. */
int spw_jpeg_pick_denom(int w, int h, int out_w, int out_h);

#endif
