/* ops/png.c - libpng decoding from memory to RGB as Pillow's convert("RGB") gives it (see png.h), through
 * libpng's progressive reader: the whole buffer is pushed at once and rows arrive through a callback, so a
 * file is truncated exactly when Pillow says so: when the data ends before the last row is out (zlib's
 * checksum, the IDAT CRC and IEND after the rows may be missing, as Pillow does not read them). libpng's
 * errors longjmp back to the call that owns the decoder; everything that call allocated lives in one heap
 * state, so the jump leaks nothing. Warnings are ignored (libpng's benign errors on read are warnings).
 * Nothing is printed. Thread-safe. */
#include "ops/png.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

/* What a decode owns; kept in memory (not registers) so it survives libpng's longjmp. */
struct decode_state {
    png_structp png;
    png_infop info;
    int64_t max_pixels;
    int header_only;
    int w, h;                   /* set by on_info */
    int interlaced, grey16;
    int labels;                 /* a label map: palette indices or grey values, one byte a pixel, into lab */
    uint8_t *lab;               /* labels: w * h bytes, the rows libpng writes; spread over img's channels */
    int stop_rc;                /* on_info stopped the decode with this result (0: header only, done) */
    int stopped;
    struct spw_image img;
    png_bytep *rows;
    char msg[192];
};

static void on_error(png_structp png, png_const_charp m)
{
    struct decode_state *st = png_get_error_ptr(png);
    if (st->msg[0] == '\0')
        snprintf(st->msg, sizeof st->msg, "corrupt PNG: %s", m);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp m)
{
    (void)png;
    (void)m;
}

static void stop(struct decode_state *st, int rc)
{
    st->stop_rc = rc;
    st->stopped = 1;
    png_longjmp(st->png, 1);
}

/* The header is in: check the size before anything is allocated, set the transforms to Pillow's
 * convert("RGB"), allocate the image. */
static void on_info(png_structp png, png_infop info)
{
    struct decode_state *st = png_get_progressive_ptr(png);
    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    if ((int64_t)w * h > st->max_pixels) {
        snprintf(st->msg, sizeof st->msg, "%ux%u image exceeds max_pixels %lld", w, h, (long long)st->max_pixels);
        stop(st, SPW_ETOOBIG);
    }
    st->w = (int)w;
    st->h = (int)h;
    if (st->header_only)
        stop(st, 0);

    if (st->labels && (ctype & PNG_COLOR_MASK_COLOR ? ctype != PNG_COLOR_TYPE_PALETTE : ctype != PNG_COLOR_TYPE_GRAY || depth == 16)) {
        snprintf(st->msg, sizeof st->msg, "a label map is a palette or 8-bit greyscale PNG (this one is colour type "
                 "%d at %d bits)", ctype, depth);
        stop(st, SPW_EUNSUPPORTED);
    }
    const int grey16 = st->grey16 = depth == 16 && ctype == PNG_COLOR_TYPE_GRAY;
    if (st->labels && ctype == PNG_COLOR_TYPE_PALETTE)
        png_set_packing(png);                   /* 1/2/4-bit indices, a byte each, not scaled (Pillow's "P") */
    else if (ctype == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);            /* expands tRNS to alpha too; stripped below */
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);    /* bit replication: Pillow's "1", "L;2", "L;4" */
    if (depth == 16 && !grey16)
        png_set_strip_16(png);                  /* the high byte: Pillow's "RGB;16B", "LA;16B", "RGBA;16B" */
    png_set_strip_alpha(png);                   /* convert("RGB") drops alpha, no compositing */
    if (!(ctype & PNG_COLOR_MASK_COLOR) && !grey16 && !st->labels)
        png_set_gray_to_rgb(png);
    st->interlaced = interlace != PNG_INTERLACE_NONE;
    if (st->interlaced)
        png_set_interlace_handling(png);
    png_read_update_info(png, info);
    const size_t want = (size_t)w * (st->labels ? 1 : grey16 ? 2 : 3);
    if (png_get_rowbytes(png, info) != want) {
        snprintf(st->msg, sizeof st->msg, "PNG colour type %d at %d bits gives %zu bytes a row, not %zu", ctype,
                 depth, (size_t)png_get_rowbytes(png, info), want);
        stop(st, SPW_EINTERNAL);
    }
    int rc = spw_image_alloc(&st->img, (int)w, (int)h, 3);
    if (rc == 0 && !(st->rows = malloc((size_t)h * sizeof *st->rows)))
        rc = -ENOMEM;
    if (rc == 0 && st->labels && !(st->lab = malloc((size_t)w * h)))
        rc = -ENOMEM;
    if (rc) {
        snprintf(st->msg, sizeof st->msg, "out of memory for a %ux%u image", w, h);
        stop(st, rc);
    }
    for (png_uint_32 y = 0; y < h; y++)
        st->rows[y] = st->labels ? st->lab + (size_t)y * w : st->img.data + (size_t)y * st->img.stride;
    /* Adam7 combines each pass into what the earlier ones left: start from a defined image. */
    if (st->interlaced)
        memset(st->labels ? st->lab : st->img.data, 0, st->labels ? (size_t)w * h : st->img.stride * (size_t)h);
}

static void on_row(png_structp png, png_bytep row, png_uint_32 y, int pass)
{
    (void)pass;
    struct decode_state *st = png_get_progressive_ptr(png);
    if (row && y < (png_uint_32)st->h)
        png_progressive_combine_row(png, st->rows[y], row);
}

/* Every row is out once libpng has finished the last row of the last pass (png_read_push_finish_row moves
 * the pass to 7, or for a plain image the row number to the height). */
static int rows_out(struct decode_state *st)
{
    return st->img.data && (png_get_current_pass_number(st->png) >= 7 ||
                            (!st->interlaced && png_get_current_row_number(st->png) >= (png_uint_32)st->h));
}

/* Pillow's "I" -> "RGB": each 16-bit grey value clipped to 255. In place: the 16-bit row (2w bytes) sits at
 * the start of the RGB row (3w bytes); walking from the right, pixel x's output (3x..3x+2) never overlaps
 * an input pixel not yet read (2x' + 1 < 3x for x' < x). */
static void grey16_row_to_rgb(uint8_t *row, int w)
{
    for (int x = w - 1; x >= 0; x--) {
        const unsigned v = (unsigned)row[2 * x] << 8 | row[2 * x + 1];
        const uint8_t g = v > 255 ? 255 : (uint8_t)v;
        row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = g;
    }
}

/* A label row (w bytes) to three equal channels (not in place, so it vectorizes). */
static void labels_row_to_rgb(const uint8_t *restrict lab, int w, uint8_t *restrict out)
{
    for (int x = 0; x < w; x++)
        out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = lab[x];
}

/* Push the whole buffer; 0 when the header (header_only) or every row is in, else an error with st->msg. */
static int run(struct decode_state *st, const uint8_t *buf, size_t len)
{
    if (len == 0) {
        snprintf(st->msg, sizeof st->msg, "empty file (0 bytes)");
        return SPW_EDECODE;
    }
    if (len < 8 || png_sig_cmp(buf, 0, 8) != 0) {
        if (len < 8)
            snprintf(st->msg, sizeof st->msg, "truncated PNG: %zu bytes, less than the signature", len);
        else
            snprintf(st->msg, sizeof st->msg, "not a PNG (no PNG signature)");
        return SPW_EDECODE;
    }
    png_set_progressive_read_fn(st->png, st, on_info, on_row, NULL);
    /* The caller's max_pixels is the limit, not libpng's default of a million pixels a side. */
    png_set_user_limits(st->png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_process_data(st->png, st->info, (png_bytep)(uintptr_t)buf, len);
    if (!st->img.data) {
        snprintf(st->msg, sizeof st->msg, "truncated PNG: the data ends after %zu bytes, inside the header", len);
        return SPW_EDECODE;
    }
    if (!rows_out(st)) {
        snprintf(st->msg, sizeof st->msg, "truncated PNG: the data ends after %zu bytes, before the image does",
                 len);
        return SPW_EDECODE;
    }
    return 0;
}

static int decode(const uint8_t *buf, size_t len, int64_t max_pixels, int header_only, int labels,
                  struct spw_image *out, int *w, int *h, char *err, size_t errlen)
{
    struct decode_state *st = calloc(1, sizeof *st);
    if (!st)
        return spw_fail(err, errlen, -ENOMEM, "out of memory for a PNG decoder");
    st->max_pixels = max_pixels;
    st->header_only = header_only;
    st->labels = labels;
    int rc;
    st->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st, on_error, on_warning);
    if (!st->png || !(st->info = png_create_info_struct(st->png))) {
        rc = spw_fail(err, errlen, -ENOMEM, "out of memory for a PNG decoder");
        goto out;
    }
    if (setjmp(png_jmpbuf(st->png))) {
        /* an error after the last row (a damaged checksum or trailing chunk) does not matter to Pillow */
        if (st->stopped)
            rc = st->stop_rc;
        else
            rc = rows_out(st) ? 0 : SPW_EDECODE;
    } else {
        rc = run(st, buf, len);
    }
    if (rc) {
        spw_fail(err, errlen, rc, "%s", st->msg);
        goto out;
    }
    *w = st->w;
    *h = st->h;
    if (!header_only) {
        for (int y = 0; st->grey16 && y < st->img.h; y++)
            grey16_row_to_rgb(st->rows[y], st->img.w);
        for (int y = 0; st->labels && y < st->img.h; y++)
            labels_row_to_rgb(st->rows[y], st->img.w, st->img.data + (size_t)y * st->img.stride);
        *out = st->img;
        st->img.data = NULL;
    }
out:
    if (st->png)
        png_destroy_read_struct(&st->png, st->info ? &st->info : NULL, NULL);
    free(st->rows);
    free(st->lab);
    spw_image_free(&st->img);
    free(st);
    return rc;
}

int spw_png_header(const uint8_t *buf, size_t len, int64_t max_pixels, int *w, int *h, char *err,
                   size_t errlen)
{
    return decode(buf, len, max_pixels, 1, 0, NULL, w, h, err, errlen);
}

int spw_png_decode(const uint8_t *buf, size_t len, int64_t max_pixels, struct spw_image *out, char *err,
                   size_t errlen)
{
    int w, h;
    return decode(buf, len, max_pixels, 0, 0, out, &w, &h, err, errlen);
}

int spw_png_decode_labels(const uint8_t *buf, size_t len, int64_t max_pixels, struct spw_image *out, char *err,
                          size_t errlen)
{
    int w, h;
    return decode(buf, len, max_pixels, 0, 1, out, &w, &h, err, errlen);
}
