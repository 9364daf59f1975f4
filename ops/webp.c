/* ops/webp.c - libwebp decoding from memory to RGB (see webp.h): WebPGetFeatures checks the size against
 * max_pixels before anything is allocated, then WebPDecode writes RGB straight into the output image, so
 * its status tells a truncated file from a corrupt one. Thread-safe. */
#include "ops/webp.h"

#include <errno.h>
#include <stdio.h>
#include <webp/decode.h>

#include "lib/err.h"

static const char *status_text(VP8StatusCode s)
{
    switch (s) {
    case VP8_STATUS_OK: return "ok";
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "not enough data";
    }
    return "unknown status";
}

static int refuse(VP8StatusCode s, const char *where, size_t len, char *err, size_t errlen)
{
    if (s == VP8_STATUS_NOT_ENOUGH_DATA)
        return spw_fail(err, errlen, SPW_EDECODE, "truncated WebP: the data ends after %zu bytes, inside the %s",
                        len, where);
    if (s == VP8_STATUS_OUT_OF_MEMORY)
        return spw_fail(err, errlen, -ENOMEM, "out of memory decoding a WebP %s", where);
    return spw_fail(err, errlen, SPW_EDECODE, "corrupt WebP: %s in the %s", status_text(s), where);
}

static int features(const uint8_t *buf, size_t len, int64_t max_pixels, WebPBitstreamFeatures *f, char *err,
                    size_t errlen)
{
    if (len == 0)
        return spw_fail(err, errlen, SPW_EDECODE, "empty file (0 bytes)");
    VP8StatusCode s = WebPGetFeatures(buf, len, f);
    if (s != VP8_STATUS_OK)
        return refuse(s, "header", len, err, errlen);
    if (f->has_animation)
        return spw_fail(err, errlen, SPW_EUNSUPPORTED, "animated WebP (%dx%d) is not supported", f->width,
                        f->height);
    if (f->width <= 0 || f->height <= 0)
        return spw_fail(err, errlen, SPW_EDECODE, "corrupt WebP: size %dx%d", f->width, f->height);
    if ((int64_t)f->width * f->height > max_pixels)
        return spw_fail(err, errlen, SPW_ETOOBIG, "%dx%d image exceeds max_pixels %lld", f->width, f->height,
                        (long long)max_pixels);
    return 0;
}

int spw_webp_header(const uint8_t *buf, size_t len, int64_t max_pixels, int *w, int *h, char *err,
                    size_t errlen)
{
    WebPBitstreamFeatures f;
    int rc = features(buf, len, max_pixels, &f, err, errlen);
    if (rc == 0) {
        *w = f.width;
        *h = f.height;
    }
    return rc;
}

int spw_webp_decode(const uint8_t *buf, size_t len, int64_t max_pixels, struct spw_image *out, char *err,
                    size_t errlen)
{
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config))
        return spw_fail(err, errlen, SPW_EINTERNAL, "libwebp version mismatch");
    int rc = features(buf, len, max_pixels, &config.input, err, errlen);
    if (rc)
        return rc;
    struct spw_image img;
    if ((rc = spw_image_alloc(&img, config.input.width, config.input.height, 3)))
        return spw_fail(err, errlen, rc, "out of memory for a %dx%d image", config.input.width,
                        config.input.height);
    config.output.colorspace = MODE_RGB;
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = img.data;
    config.output.u.RGBA.stride = (int)img.stride;
    config.output.u.RGBA.size = img.stride * (size_t)img.h;
    VP8StatusCode s = WebPDecode(buf, len, &config);
    WebPFreeDecBuffer(&config.output);          /* external memory: frees nothing of ours */
    if (s != VP8_STATUS_OK) {
        spw_image_free(&img);
        return refuse(s, "image data", len, err, errlen);
    }
    *out = img;
    return 0;
}
