/* ops/webp.h - WebP decoding to RGB (libwebp), lossy and lossless, as Pillow 9.4's convert("RGB") gives it:
 * alpha dropped without compositing, the stored colour of fully transparent pixels kept (Pillow's decoder
 * keeps it too), fancy upsampling of lossy chroma (libwebp's default, which Pillow uses). Animated files are
 * refused. Thread-safe: every call has its own decoder. */
#ifndef SPW_OPS_WEBP_H
#define SPW_OPS_WEBP_H

#include <stddef.h>
#include <stdint.h>

#include "ops/image.h"

/* Read the header only (WebPGetFeatures): the size into *w, *h. Returns 0, SPW_EDECODE (message in err),
 * SPW_EUNSUPPORTED (animated) or SPW_ETOOBIG (w*h > max_pixels). */
int spw_webp_header(const uint8_t *buf, size_t len, int64_t max_pixels, int *w, int *h, char *err,
                    size_t errlen);

/* Decode the whole image into *out (allocated here, HWC RGB; free with spw_image_free) after the header
 * checks above. Returns 0, SPW_EDECODE ("truncated WebP: ...", "corrupt WebP: ..."), SPW_EUNSUPPORTED,
 * SPW_ETOOBIG or -ENOMEM, with a message in err; *out is written only on success. */
int spw_webp_decode(const uint8_t *buf, size_t len, int64_t max_pixels, struct spw_image *out, char *err,
                    size_t errlen);

#endif
