/* ops/png.h - PNG decoding to RGB (libpng), as Pillow 9.4's Image.open(...).convert("RGB") gives it:
 * palette expanded (tRNS ignored), alpha dropped without compositing, grey replicated, 1/2/4-bit grey
 * scaled to 8 bits, 16-bit colour reduced to its high byte, 16-bit grey clipped to 255 (Pillow opens it as
 * mode "I" and converts with clipping), Adam7 interlacing undone. No gamma or colour management (Pillow
 * applies none). Thread-safe: every call has its own decoder. */
#ifndef SPW_OPS_PNG_H
#define SPW_OPS_PNG_H

#include <stddef.h>
#include <stdint.h>

#include "ops/image.h"

/* Read the header only: the size into *w, *h. Returns 0, SPW_EDECODE (message in err) or SPW_ETOOBIG
 * (w*h > max_pixels). */
int spw_png_header(const uint8_t *buf, size_t len, int64_t max_pixels, int *w, int *h, char *err,
                   size_t errlen);

/* Decode the whole image into *out (allocated here, HWC RGB; free with spw_image_free), the size checked
 * against max_pixels before any pixel memory is allocated. Returns 0, SPW_EDECODE ("truncated PNG: ...",
 * "corrupt PNG: ..."), SPW_ETOOBIG or -ENOMEM, with a message in err; *out is written only on success. */
int spw_png_decode(const uint8_t *buf, size_t len, int64_t max_pixels, struct spw_image *out, char *err,
                   size_t errlen);

/* Decode a label map (a segmentation mask) as np.array(Image.open(...)) reads it: a palette PNG's indices
 * (1/2/4-bit unpacked, not scaled; tRNS ignored), an 8-bit or 1/2/4-bit grey PNG's values (bit replication,
 * as Pillow's "L"). Into *out as HWC with three equal channels (the image kernels' layout). Colour, grey with
 * alpha and 16-bit grey PNGs are SPW_EUNSUPPORTED; otherwise as spw_png_decode. */
int spw_png_decode_labels(const uint8_t *buf, size_t len, int64_t max_pixels, struct spw_image *out, char *err,
                          size_t errlen);

#endif
