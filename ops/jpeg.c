/* ops/jpeg.c - libjpeg-turbo decoding with ROI (jpeg_crop_scanline / jpeg_skip_scanlines) and DCT scaling.
 * Errors longjmp back to the call that owns the decompressor; nothing is printed. Output is RGB like
 * Pillow's Image.convert("RGB") (greyscale replicated, CMYK/YCCK converted), and a file is corrupt exactly
 * when Pillow says so, whatever rows a crop reads (see finish_tail). Thread-safe. */
#include "ops/jpeg.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "lib/err.h"

/* What running out of data means depends on where the decoder is. Pillow feeds libjpeg from a suspending
 * source and raises "image file is truncated" when libjpeg asks for bytes past the end of the file while
 * reading the header or any row; once every row is out it calls jpeg_finish_decompress and accepts a
 * suspension there (JpegDecode.c: "if (state->y < state->ysize) break;"). jpeg_mem_src asks at the same
 * points, with the warning JWRN_JPEG_EOF. */
enum phase {
    PHASE_HEADER,           /* jpeg_read_header: running out is a truncated header */
    PHASE_DATA,             /* jpeg_start_decompress and the rows: running out is a truncated image */
    PHASE_TAIL,             /* every row decoded (or none left to matter): running out is accepted */
};

struct err_mgr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    enum phase phase;
    size_t len;             /* of the buffer, for messages */
    char msg[JMSG_LENGTH_MAX + 64];
};

static void on_error_exit(j_common_ptr cinfo)
{
    struct err_mgr *e = (struct err_mgr *)cinfo->err;
    char m[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, m);
    snprintf(e->msg, sizeof e->msg, "%s%s", e->phase == PHASE_HEADER ? "" : "corrupt JPEG: ", m);
    longjmp(e->jump, 1);
}

/* Warnings (level -1) are ignored as Pillow ignores them: a corrupt Huffman code, a marker inside the
 * entropy-coded data or extraneous bytes leave grey or garbled blocks, not an error. The one exception is
 * the data running out before the image is complete, Pillow's "image file is truncated". */
static void on_emit_message(j_common_ptr cinfo, int level)
{
    struct err_mgr *e = (struct err_mgr *)cinfo->err;
    if (level != -1 || cinfo->err->msg_code != JWRN_JPEG_EOF || e->phase == PHASE_TAIL)
        return;
    if (e->phase == PHASE_HEADER)
        snprintf(e->msg, sizeof e->msg, "truncated JPEG: the data ends inside the header (%zu bytes)", e->len);
    else
        snprintf(e->msg, sizeof e->msg,
                 "truncated JPEG: the data ends after %zu bytes, before the image does (no end-of-image marker)",
                 e->len);
    longjmp(e->jump, 1);
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
    struct err_mgr *e = (struct err_mgr *)cinfo->err;
    e->phase = PHASE_HEADER;
    e->len = len;
    jpeg_mem_src(cinfo, buf, (unsigned long)len);
    jpeg_read_header(cinfo, TRUE);
    e->phase = PHASE_DATA;
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
    uint8_t *tail_row;      /* rows below a crop, decoded only to judge a damaged tail */
};

/* Whether the bytes the decoder has not read yet hold entropy-coded data (stuffed FF 00 bytes, fill FFs,
 * restart markers) up to an end-of-image marker. The rows below a crop then cannot run out of data (the
 * decoder stops at the marker) and the first marker jpeg_finish_decompress would read is EOI, so Pillow,
 * which decodes every row, accepts the file as a crop that stops early does. The markers are found as
 * jdmarker.c's next_marker finds them; one memchr per FF byte (about one per 256 bytes of entropy data). */
static int rest_ends_at_eoi(const struct jpeg_decompress_struct *cinfo)
{
    int m = cinfo->unread_marker;           /* the decoder already stopped at this marker */
    if (m != 0 && (m < 0xD0 || m > 0xD7))
        return m == 0xD9;
    const uint8_t *p = cinfo->src->next_input_byte, *end = p + cinfo->src->bytes_in_buffer;
    while (p < end && (p = memchr(p, 0xFF, (size_t)(end - p))) != NULL) {
        do
            p++;
        while (p < end && *p == 0xFF);
        if (p == end)
            return 0;
        m = *p++;
        if (m == 0x00 || (m >= 0xD0 && m <= 0xD7))
            continue;
        return m == 0xD9;
    }
    return 0;
}

/* After the rows a crop needs: reach Pillow's verdict on the whole file. A multi-scan image (progressive,
 * or one scan per component) was read to its EOI by jpeg_start_decompress already; a single-scan one whose
 * unread rest is plain entropy data up to EOI needs nothing more. Otherwise (a truncated or damaged tail,
 * or markers between the scan and EOI) decode the remaining rows and read the trailing markers exactly as
 * Pillow does, so running out of data there is a truncated image and a bad marker is an error. */
static int finish_tail(struct decode_state *st, int multi_scan)
{
    struct jpeg_decompress_struct *cinfo = &st->cinfo;
    if (cinfo->output_scanline < cinfo->output_height && !multi_scan && !rest_ends_at_eoi(cinfo)) {
        st->tail_row = malloc((size_t)cinfo->output_width * (size_t)cinfo->output_components);
        if (!st->tail_row)
            return -ENOMEM;
        JSAMPROW rp = st->tail_row;
        while (cinfo->output_scanline < cinfo->output_height)
            jpeg_read_scanlines(cinfo, &rp, 1);
    }
    st->jerr.phase = PHASE_TAIL;
    if (cinfo->output_scanline < cinfo->output_height)
        jpeg_abort_decompress(cinfo);
    else
        jpeg_finish_decompress(cinfo);
    return 0;
}

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
    rc = finish_tail(st, cinfo->progressive_mode || cinfo->comps_in_scan < cinfo->num_components);
    if (rc) {
        snprintf(err, errlen, "out of memory for a %u-pixel row", cinfo->output_width);
        return rc;
    }
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
    free(st->tail_row);
    spw_image_free(&st->img);
    jpeg_destroy_decompress(&st->cinfo);
    free(st);
    return rc;
}
