/* ops/jpeg.c - libjpeg-turbo decoding with ROI (jpeg_crop_scanline / jpeg_skip_scanlines) and DCT scaling.
 * Errors longjmp back to the call that owns the decompressor; nothing is printed. Output is RGB like
 * Pillow's Image.convert("RGB") (greyscale replicated, CMYK/YCCK converted). Thread-safe. */
#include "ops/jpeg.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "lib/err.h"

struct err_mgr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
};

static void on_error_exit(j_common_ptr cinfo)
{
    struct err_mgr *e = (struct err_mgr *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->msg);
    longjmp(e->jump, 1);
}

/* Warnings (level -1) about missing data mean a damaged image: fail rather than return grey rows.
 * Extraneous bytes before a marker are harmless and are ignored, as Pillow does. */
static void on_emit_message(j_common_ptr cinfo, int level)
{
    if (level != -1)
        return;
    if (cinfo->err->msg_code == JWRN_EXTRANEOUS_DATA)
        return;
    on_error_exit(cinfo);
}

static void no_output(j_common_ptr cinfo) { (void)cinfo; }

int spw_jpeg_pick_denom(int w, int h, int out_w, int out_h)
{
    for (int d = 8; d > 1; d /= 2)
        if (2 * (w / d) >= 3 * out_w && 2 * (h / d) >= 3 * out_h)
            return d;
    return 1;
}

static int start(struct jpeg_decompress_struct *cinfo, const uint8_t *buf, size_t len, int64_t max_pixels,
                 char *err, size_t errlen)
{
    if (len == 0) {
        snprintf(err, errlen, "empty file (0 bytes)");
        return SPW_EDECODE;
    }
    if (len < 4 || buf[0] != 0xFF || buf[1] != 0xD8) {
        snprintf(err, errlen, "not a JPEG (no SOI marker)");
        return SPW_EDECODE;
    }
    jpeg_mem_src(cinfo, buf, (unsigned long)len);
    jpeg_read_header(cinfo, TRUE);
    if ((int64_t)cinfo->image_width * cinfo->image_height > max_pixels) {
        snprintf(err, errlen, "%ux%u image exceeds max_pixels %lld", cinfo->image_width, cinfo->image_height,
                 (long long)max_pixels);
        return SPW_ETOOBIG;
    }
    return 0;
}

int spw_jpeg_header(const uint8_t *buf, size_t len, int64_t max_pixels, struct spw_jpeg_info *info,
                    char *err, size_t errlen)
{
    struct jpeg_decompress_struct cinfo;
    struct err_mgr jerr;
    cinfo.err = jpeg_std_error(&jerr.pub);
    jerr.pub.error_exit = on_error_exit;
    jerr.pub.emit_message = on_emit_message;
    jerr.pub.output_message = no_output;
    jpeg_create_decompress(&cinfo);
    int rc;
    if (setjmp(jerr.jump)) {
        snprintf(err, errlen, "%s", jerr.msg);
        rc = SPW_EDECODE;
        goto out;
    }
    rc = start(&cinfo, buf, len, max_pixels, err, errlen);
    if (rc == 0) {
        info->w = (int)cinfo.image_width;
        info->h = (int)cinfo.image_height;
        info->components = cinfo.num_components;
        info->progressive = cinfo.progressive_mode ? 1 : 0;
    }
out:
    jpeg_destroy_decompress(&cinfo);
    return rc;
}

/* Pillow's CMYK -> RGB: each channel (255 - c) * (255 - k) / 255 with its MULDIV255 rounding. Adobe
 * files store inverted CMYK, which libjpeg hands back as is. */
static void cmyk_row_to_rgb(const uint8_t *in, uint8_t *out, int w, int inverted)
{
    for (int x = 0; x < w; x++) {
        int c = in[4 * x], m = in[4 * x + 1], y = in[4 * x + 2], k = in[4 * x + 3];
        if (inverted) {
            c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k;
        }
        int nk = 255 - k;
        int t;
        t = (255 - c) * nk + 128; out[3 * x] = (uint8_t)((t + (t >> 8)) >> 8);
        t = (255 - m) * nk + 128; out[3 * x + 1] = (uint8_t)((t + (t >> 8)) >> 8);
        t = (255 - y) * nk + 128; out[3 * x + 2] = (uint8_t)((t + (t >> 8)) >> 8);
    }
}

/* What a decode owns; kept in memory (not registers) so it survives the error longjmp. */
struct decode_state {
    struct jpeg_decompress_struct cinfo;
    struct err_mgr jerr;
    struct spw_image img;
    uint8_t *cmyk_row;
};

static int decode_rows(struct decode_state *st, const uint8_t *buf, size_t len, int64_t max_pixels, int x,
                       int y, int w, int h, int denom, struct spw_jpeg_region *out, char *err, size_t errlen)
{
    struct jpeg_decompress_struct *cinfo = &st->cinfo;
    if (setjmp(st->jerr.jump)) {
        snprintf(err, errlen, "%s", st->jerr.msg);
        return SPW_EDECODE;
    }
    int rc = start(cinfo, buf, len, max_pixels, err, errlen);
    if (rc)
        return rc;
    int cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
    if (cinfo->num_components != 1 && cinfo->num_components != 3 && !cmyk) {
        snprintf(err, errlen, "unsupported JPEG with %d components", cinfo->num_components);
        return SPW_EUNSUPPORTED;
    }
    cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    cinfo->scale_num = 1;
    cinfo->scale_denom = (unsigned)denom;
    cinfo->dct_method = JDCT_ISLOW;
    cinfo->do_fancy_upsampling = TRUE;
    jpeg_start_decompress(cinfo);

    const int sw = (int)cinfo->output_width, sh = (int)cinfo->output_height;
    int sx0 = 0, sx1 = sw, sy0 = 0, sy1 = sh;
    if (w > 0 && h > 0) {
        /* floor/ceil of the scaled rectangle, kept inside the scaled image */
        sx0 = x / denom;
        sy0 = y / denom;
        sx1 = (x + w + denom - 1) / denom;
        sy1 = (y + h + denom - 1) / denom;
        if (sx1 > sw) sx1 = sw;
        if (sy1 > sh) sy1 = sh;
        if (sx0 >= sx1) sx0 = sx1 - 1;
        if (sy0 >= sy1) sy0 = sy1 - 1;
        if (sx0 < 0) sx0 = 0;
        if (sy0 < 0) sy0 = 0;
    }
    JDIMENSION xoff = (JDIMENSION)sx0, cw = (JDIMENSION)(sx1 - sx0);
    if (xoff != 0 || (int)cw != sw)
        jpeg_crop_scanline(cinfo, &xoff, &cw);
    int rows = sy1 - sy0;
    rc = spw_image_alloc(&st->img, (int)cw, rows, 3);
    if (rc) {
        snprintf(err, errlen, "out of memory for %ux%d image", cw, rows);
        return rc;
    }
    if (cmyk && !(st->cmyk_row = malloc((size_t)cw * 4)))
        return -ENOMEM;
    if (sy0 > 0)
        jpeg_skip_scanlines(cinfo, (JDIMENSION)sy0);
    for (int row = 0; row < rows; row++) {
        uint8_t *dst = st->img.data + (size_t)row * st->img.stride;
        JSAMPROW rp = cmyk ? st->cmyk_row : dst;
        if (jpeg_read_scanlines(cinfo, &rp, 1) != 1) {
            snprintf(err, errlen, "decoder returned no row %d", sy0 + row);
            return SPW_EDECODE;
        }
        if (cmyk)
            cmyk_row_to_rgb(st->cmyk_row, dst, (int)cw, cinfo->saw_Adobe_marker);
    }
    /* Stop after the last needed row: the rest of the entropy-coded data is never read. */
    if ((int)cinfo->output_scanline < sh)
        jpeg_abort_decompress(cinfo);
    else
        jpeg_finish_decompress(cinfo);
    out->img = st->img;
    out->x0 = (int)xoff;
    out->y0 = sy0;
    out->denom = denom;
    st->img.data = NULL;
    return 0;
}

int spw_jpeg_decode_region(const uint8_t *buf, size_t len, int64_t max_pixels, int x, int y, int w, int h,
                           int denom, struct spw_jpeg_region *out, char *err, size_t errlen)
{
    struct decode_state *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    if (denom != 1 && denom != 2 && denom != 4 && denom != 8)
        denom = 1;
    st->cinfo.err = jpeg_std_error(&st->jerr.pub);
    st->jerr.pub.error_exit = on_error_exit;
    st->jerr.pub.emit_message = on_emit_message;
    st->jerr.pub.output_message = no_output;
    jpeg_create_decompress(&st->cinfo);
    int rc = decode_rows(st, buf, len, max_pixels, x, y, w, h, denom, out, err, errlen);
    free(st->cmyk_row);
    spw_image_free(&st->img);
    jpeg_destroy_decompress(&st->cinfo);
    free(st);
    return rc;
}
