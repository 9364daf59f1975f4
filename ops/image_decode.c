/* ops/image_decode.c - format by content, whole-image decode through the format's module, and EXIF
 * orientation read with bounds checks on every offset (a few fields of a TIFF header and IFD0 are all it
 * needs; no EXIF library). Thread-safe: no state. */
#include "ops/image_decode.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/err.h"
#include "ops/jpeg.h"
#include "ops/png.h"
#include "ops/webp.h"

enum spw_image_format spw_image_sniff(const uint8_t *buf, size_t len)
{
    if (len >= 2 && buf[0] == 0xFF && buf[1] == 0xD8)
        return SPW_IMAGE_JPEG;
    if (len >= 4 && memcmp(buf, "\x89PNG", 4) == 0)
        return SPW_IMAGE_PNG;
    if (len >= 12 && memcmp(buf, "RIFF", 4) == 0 && memcmp(buf + 8, "WEBP", 4) == 0)
        return SPW_IMAGE_WEBP;
    return SPW_IMAGE_UNKNOWN;
}

const char *spw_image_format_name(enum spw_image_format f)
{
    switch (f) {
    case SPW_IMAGE_JPEG: return "JPEG";
    case SPW_IMAGE_PNG: return "PNG";
    case SPW_IMAGE_WEBP: return "WebP";
    case SPW_IMAGE_UNKNOWN: break;
    }
    return "unknown";
}

/* ---- EXIF ----------------------------------------------------------------------------------------- */

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]; }

/* IFD0's Orientation in a TIFF structure (what follows "Exif\0\0"); 1 when absent or unreadable. */
static int tiff_orientation(const uint8_t *t, size_t n)
{
    if (n < 8)
        return 1;
    int le;
    if (memcmp(t, "II*\0", 4) == 0)
        le = 1;
    else if (memcmp(t, "MM\0*", 4) == 0)
        le = 0;
    else
        return 1;
#define U16(p) (le ? (unsigned)((p)[0] | (p)[1] << 8) : (unsigned)((p)[0] << 8 | (p)[1]))
#define U32(p) (le ? le32(p) : be32(p))
    const uint32_t ifd = U32(t + 4);
    if (ifd > n || n - ifd < 2)
        return 1;
    const unsigned count = U16(t + ifd);
    const uint8_t *e = t + ifd + 2;
    for (unsigned i = 0; i < count && (size_t)(e - t) + 12 <= n; i++, e += 12) {
        if (U16(e) != 0x0112)
            continue;
        const unsigned type = U16(e + 2);
        if (U32(e + 4) != 1)
            return 1;
        const uint32_t v = type == 3 ? U16(e + 8) : type == 4 ? U32(e + 8) : 0;
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
#undef U16
#undef U32
}

/* Pillow keeps the first APP1 that starts "Exif\0" and reads TIFF data after "Exif\0\0"; the markers before
 * the first scan are all it looks at. */
static int jpeg_orientation(const uint8_t *b, size_t len)
{
    size_t p = 2;
    while (p + 4 <= len) {
        if (b[p] != 0xFF)
            return 1;
        const uint8_t m = b[p + 1];
        if (m == 0xFF) {                        /* fill byte */
            p++;
            continue;
        }
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
            p += 2;
            continue;
        }
        if (m == 0xDA || m == 0xD9)
            return 1;
        const size_t seg = (size_t)b[p + 2] << 8 | b[p + 3];
        if (seg < 2 || seg > len - p - 2)
            return 1;
        const uint8_t *d = b + p + 4;
        const size_t n = seg - 2;
        if (m == 0xE1 && n >= 6 && memcmp(d, "Exif\0\0", 6) == 0)
            return tiff_orientation(d + 6, n - 6);
        p += 2 + seg;
    }
    return 1;
}

/* Pillow reads the eXIf chunk wherever it is (it loads the image first). */
static int png_orientation(const uint8_t *b, size_t len)
{
    size_t p = 8;
    while (p + 8 <= len) {
        const uint32_t n = be32(b + p);
        const uint8_t *type = b + p + 4;
        if (n > len - p - 8)
            return 1;
        if (memcmp(type, "eXIf", 4) == 0)
            return tiff_orientation(b + p + 8, n);
        if (memcmp(type, "IEND", 4) == 0)
            return 1;
        if ((size_t)n + 12 > len - p)
            return 1;
        p += (size_t)n + 12;                    /* length, type, data, CRC */
    }
    return 1;
}

/* The EXIF chunk of an extended (VP8X) file; Pillow drops a leading "Exif\0\0" as it does for JPEG. */
static int webp_orientation(const uint8_t *b, size_t len)
{
    size_t p = 12;
    while (p + 8 <= len) {
        const uint32_t n = le32(b + p + 4);
        if (n > len - p - 8)
            return 1;
        const uint8_t *d = b + p + 8;
        if (memcmp(b + p, "EXIF", 4) == 0) {
            if (n >= 6 && memcmp(d, "Exif\0\0", 6) == 0)
                return tiff_orientation(d + 6, n - 6);
            return tiff_orientation(d, n);
        }
        p += 8 + (size_t)n + (n & 1);
    }
    return 1;
}

int spw_exif_orientation(const uint8_t *buf, size_t len, enum spw_image_format f)
{
    switch (f) {
    case SPW_IMAGE_JPEG: return jpeg_orientation(buf, len);
    case SPW_IMAGE_PNG: return png_orientation(buf, len);
    case SPW_IMAGE_WEBP: return webp_orientation(buf, len);
    case SPW_IMAGE_UNKNOWN: break;
    }
    return 1;
}

void spw_exif_oriented_size(int orientation, int w, int h, int *ow, int *oh)
{
    const int swap = orientation >= 5 && orientation <= 8;
    *ow = swap ? h : w;
    *oh = swap ? w : h;
}

void spw_exif_orient_run(const struct spw_image *in, int orientation, struct spw_image *out)
{
    const int W = in->w, H = in->h, c = in->c;
    for (int y = 0; y < out->h; y++) {
        uint8_t *dst = out->data + (size_t)y * out->stride;
        for (int x = 0; x < out->w; x++, dst += c) {
            int sx, sy;
            switch (orientation) {
            case 2: sx = W - 1 - x; sy = y; break;
            case 3: sx = W - 1 - x; sy = H - 1 - y; break;
            case 4: sx = x; sy = H - 1 - y; break;
            case 5: sx = y; sy = x; break;                      /* TRANSPOSE */
            case 6: sx = y; sy = H - 1 - x; break;              /* ROTATE_270: 90 degrees clockwise */
            case 7: sx = W - 1 - y; sy = H - 1 - x; break;      /* TRANSVERSE */
            case 8: sx = W - 1 - y; sy = x; break;              /* ROTATE_90: 90 degrees anticlockwise */
            default: sx = x; sy = y; break;
            }
            memcpy(dst, spw_image_at(in, sx, sy), (size_t)c);
        }
    }
}

/* ---- decode --------------------------------------------------------------------------------------- */

static int unknown_format(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    if (len == 0)
        return spw_fail(err, errlen, SPW_EDECODE, "empty file (0 bytes)");
    char hex[16] = "";
    for (size_t i = 0, n = 0; i < len && i < 4; i++)
        n += (size_t)snprintf(hex + n, sizeof hex - n, "%s%02X", i ? " " : "", buf[i]);
    return spw_fail(err, errlen, SPW_EDECODE, "not a JPEG, PNG or WebP image (it starts with %s)", hex);
}

int spw_image_header(const uint8_t *buf, size_t len, int64_t max_pixels, bool exif_transpose, int *w, int *h,
                     char *err, size_t errlen)
{
    const enum spw_image_format f = spw_image_sniff(buf, len);
    int rc, W = 0, H = 0;
    struct spw_jpeg_info info;
    switch (f) {
    case SPW_IMAGE_JPEG:
        rc = spw_jpeg_header(buf, len, max_pixels, &info, err, errlen);
        W = info.w;
        H = info.h;
        break;
    case SPW_IMAGE_PNG:
        rc = spw_png_header(buf, len, max_pixels, &W, &H, err, errlen);
        break;
    case SPW_IMAGE_WEBP:
        rc = spw_webp_header(buf, len, max_pixels, &W, &H, err, errlen);
        break;
    default:
        return unknown_format(buf, len, err, errlen);
    }
    if (rc)
        return rc;
    spw_exif_oriented_size(exif_transpose ? spw_exif_orientation(buf, len, f) : 1, W, H, w, h);
    return 0;
}

int spw_image_decode(const uint8_t *buf, size_t len, int64_t max_pixels, bool exif_transpose,
                     struct spw_image *out, char *err, size_t errlen)
{
    const enum spw_image_format f = spw_image_sniff(buf, len);
    struct spw_image img = {0};
    struct spw_jpeg_region reg;
    int rc;
    switch (f) {
    case SPW_IMAGE_JPEG:
        if ((rc = spw_jpeg_decode_region(buf, len, max_pixels, 0, 0, 0, 0, 1, &reg, err, errlen)) == 0)
            img = reg.img;
        break;
    case SPW_IMAGE_PNG:
        rc = spw_png_decode(buf, len, max_pixels, &img, err, errlen);
        break;
    case SPW_IMAGE_WEBP:
        rc = spw_webp_decode(buf, len, max_pixels, &img, err, errlen);
        break;
    default:
        return unknown_format(buf, len, err, errlen);
    }
    if (rc)
        return rc;
    const int o = exif_transpose ? spw_exif_orientation(buf, len, f) : 1;
    if (o == 1) {
        *out = img;
        return 0;
    }
    struct spw_image t;
    int ow, oh;
    spw_exif_oriented_size(o, img.w, img.h, &ow, &oh);
    if ((rc = spw_image_alloc(&t, ow, oh, img.c))) {
        spw_image_free(&img);
        return spw_fail(err, errlen, rc, "out of memory for a %dx%d image", ow, oh);
    }
    spw_exif_orient_run(&img, o, &t);
    spw_image_free(&img);
    *out = t;
    return 0;
}
