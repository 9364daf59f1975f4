/* ops/image_decode.h - still images of any supported format by content: the format from the magic bytes
 * (JPEG FF D8, PNG 89 50 4E 47, WebP RIFF....WEBP), whole-image decode to HWC RGB through ops/jpeg, ops/png
 * or ops/webp, and EXIF orientation (the tag PIL.ImageOps.exif_transpose reads, and the transpose it
 * applies). Not the region-of-interest JPEG path: that is ops/jpeg.h. Thread-safe. */
#ifndef SPW_OPS_IMAGE_DECODE_H
#define SPW_OPS_IMAGE_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/image.h"

enum spw_image_format { SPW_IMAGE_UNKNOWN = 0, SPW_IMAGE_JPEG, SPW_IMAGE_PNG, SPW_IMAGE_WEBP };

/* The format by the magic bytes; SPW_IMAGE_UNKNOWN when none matches. */
enum spw_image_format spw_image_sniff(const uint8_t *buf, size_t len);
/* "JPEG", "PNG", "WebP", "unknown". */
const char *spw_image_format_name(enum spw_image_format f);

/* The EXIF Orientation (1..8) of a file of format f: the first Exif APP1 segment (JPEG), the eXIf chunk
 * (PNG) or the EXIF chunk (WebP), IFD0 tag 0x0112 as a SHORT or LONG of count 1. 1 when there is none or
 * it is damaged or out of range (exif_transpose then leaves the image as it is, as Pillow does). Reads
 * only within [buf, buf + len). */
int spw_exif_orientation(const uint8_t *buf, size_t len, enum spw_image_format f);

/* The size of the image an orientation gives: w x h, or h x w for 5..8 (the transposing ones). */
void spw_exif_oriented_size(int orientation, int w, int h, int *ow, int *oh);
/* Pillow's exif_transpose of in into out (out preallocated at spw_exif_oriented_size, same c): 2 mirror,
 * 3 rotate 180, 4 flip, 5 transpose, 6 rotate 90 clockwise, 7 transverse, 8 rotate 90 anticlockwise; any
 * other value copies. Pure kernel: no allocation. */
void spw_exif_orient_run(const struct spw_image *in, int orientation, struct spw_image *out);

/* The image's size (after orientation when exif_transpose) without decoding pixels. Returns 0, SPW_EDECODE,
 * SPW_EUNSUPPORTED or SPW_ETOOBIG (w*h > max_pixels) with a message in err. */
int spw_image_header(const uint8_t *buf, size_t len, int64_t max_pixels, bool exif_transpose, int *w, int *h,
                     char *err, size_t errlen);

/* Decode the whole image, whatever its format, into *out (allocated here; free with spw_image_free), the
 * size checked against max_pixels before pixel memory is allocated, oriented when exif_transpose. Returns
 * 0, SPW_EDECODE (an unknown format included: "not a JPEG, PNG or WebP image ..."), SPW_EUNSUPPORTED,
 * SPW_ETOOBIG or -ENOMEM with a message in err; *out is written only on success. */
int spw_image_decode(const uint8_t *buf, size_t len, int64_t max_pixels, bool exif_transpose,
                     struct spw_image *out, char *err, size_t errlen);

#endif
