/* tests/unit/check_compress.c - pipeline/compress.c: n elements compressed one frame each decompress to the
 * same bytes; the decompressor trusts nothing a payload says: every prefix, a missing frame, trailing bytes, a
 * frame declaring another size (60 MB for a small element), a frame without its size, and every one-byte
 * change are refused - or, for a change zstd cannot see (a header bit that does not alter the content),
 * give exactly the original bytes. Single-threaded. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "tests/unit/check_run.h"
#include "lib/err.h"
#include "pipeline/compress.h"

enum { N = 3, ELEM = 3000 };

/* N elements that compress (runs and a ramp) and the payload compressing them at level 1. */
static uint8_t *payload(uint8_t *raw, size_t *len)
{
    for (size_t i = 0; i < (size_t)N * ELEM; i++)
        raw[i] = (uint8_t)((i / 7) % 13 + (i % ELEM < 100 ? i : 0));
    struct spw_zstd *c;
    ck_assert_int_eq(spw_zstd_create(1, &c), 0);
    size_t cap = spw_zstd_bound(N, ELEM);
    uint8_t *z = malloc(cap);
    *len = spw_zstd_compress(c, raw, N, ELEM, z, cap);
    ck_assert_uint_gt(*len, 0);
    ck_assert_uint_lt(*len, (size_t)N * ELEM / 4);
    spw_zstd_destroy(c);
    return z;
}

START_TEST(test_compress_round_trip_one_frame_per_element)
{
    static uint8_t raw[N * ELEM], out[N * ELEM];
    size_t len;
    uint8_t *z = payload(raw, &len);
    struct spw_zstd *d;
    ck_assert_int_eq(spw_zstd_create(0, &d), 0);
    char err[256];
    ck_assert_int_eq(spw_zstd_decompress(d, z, len, N, ELEM, out, err, sizeof err), 0);
    ck_assert(memcmp(raw, out, sizeof raw) == 0);
    /* each frame alone is one element */
    size_t f0 = ZSTD_findFrameCompressedSize(z, len);
    ck_assert_int_eq(spw_zstd_decompress(d, z, f0, 1, ELEM, out, err, sizeof err), 0);
    ck_assert(memcmp(raw, out, ELEM) == 0);
    ck_assert_int_eq(spw_zstd_create(20, &d), -EINVAL);     /* d is untouched by a refused create */
    ck_assert_int_eq(spw_zstd_create(-1, &d), -EINVAL);
    spw_zstd_destroy(d);
    free(z);
}
END_TEST

START_TEST(test_compress_refuses_prefixes_missing_and_trailing_frames)
{
    static uint8_t raw[N * ELEM], out[N * ELEM];
    size_t len;
    uint8_t *z = payload(raw, &len);
    struct spw_zstd *d;
    ck_assert_int_eq(spw_zstd_create(0, &d), 0);
    char err[256];
    for (size_t l = 0; l < len; l++)
        ck_assert_int_eq(spw_zstd_decompress(d, z, l, N, ELEM, out, err, sizeof err), SPW_EFORMAT);
    ck_assert_int_eq(spw_zstd_decompress(d, z, len, N + 1, ELEM, out, err, sizeof err), SPW_EFORMAT);
    ck_assert_int_eq(spw_zstd_decompress(d, z, len, N - 1, ELEM, out, err, sizeof err), SPW_EFORMAT);
    ck_assert(strstr(err, "after its 2 frames") != NULL);
    uint8_t *more = malloc(len + 1);
    memcpy(more, z, len);
    more[len] = 0;
    ck_assert_int_eq(spw_zstd_decompress(d, more, len + 1, N, ELEM, out, err, sizeof err), SPW_EFORMAT);
    /* the frames are of ELEM bytes: another element size is refused from the header */
    ck_assert_int_eq(spw_zstd_decompress(d, z, len, N, ELEM - 1, out, err, sizeof err), SPW_EFORMAT);
    ck_assert(strstr(err, "declares another size") != NULL);
    free(more);
    spw_zstd_destroy(d);
    free(z);
}
END_TEST

START_TEST(test_compress_refuses_lying_and_sizeless_frames)
{
    static uint8_t out[64];
    struct spw_zstd *d;
    ck_assert_int_eq(spw_zstd_create(0, &d), 0);
    char err[256];
    /* a frame declaring 60 MB (all zeros compress to a few bytes) sent as a 64-byte element */
    const size_t big = (size_t)60 << 20;
    uint8_t *zeros = calloc(1, big), *z = malloc(ZSTD_compressBound(big));
    size_t zl = ZSTD_compress(z, ZSTD_compressBound(big), zeros, big, 1);
    ck_assert(!ZSTD_isError(zl));
    ck_assert_uint_lt(zl, 4096);
    ck_assert_int_eq(spw_zstd_decompress(d, z, zl, 1, sizeof out, out, err, sizeof err), SPW_EFORMAT);
    /* a frame that does not declare its size (a streaming frame) */
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
    zl = ZSTD_compress2(c, z, ZSTD_compressBound(big), zeros, sizeof out);
    ck_assert(!ZSTD_isError(zl));
    ck_assert_int_eq(spw_zstd_decompress(d, z, zl, 1, sizeof out, out, err, sizeof err), SPW_EFORMAT);
    ck_assert(strstr(err, "does not declare its size") != NULL);
    ZSTD_freeCCtx(c);
    free(zeros);
    free(z);
    spw_zstd_destroy(d);
}
END_TEST

START_TEST(test_compress_every_byte_change_is_refused_or_harmless)
{
    static uint8_t raw[N * ELEM], out[N * ELEM];
    size_t len;
    uint8_t *z = payload(raw, &len);
    uint8_t *m = malloc(len);
    struct spw_zstd *d;
    ck_assert_int_eq(spw_zstd_create(0, &d), 0);
    char err[256];
    int refused = 0;
    for (size_t i = 0; i < len; i++)
        for (int v = 1; v < 256; v += 85) {        /* three other values of each byte */
            memcpy(m, z, len);
            m[i] ^= (uint8_t)v;
            if (spw_zstd_decompress(d, m, len, N, ELEM, out, err, sizeof err) == 0)
                ck_assert_msg(memcmp(out, raw, sizeof raw) == 0, "byte %zu ^ %d gave other content", i, v);
            else
                refused++;
        }
    ck_assert_int_gt(refused, (int)(len * 3 * 9 / 10));     /* nearly all are refused outright */
    spw_zstd_destroy(d);
    free(m);
    free(z);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compress");
    TCase *tc = tcase_create("compress");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_compress_round_trip_one_frame_per_element);
    tcase_add_test(tc, test_compress_refuses_prefixes_missing_and_trailing_frames);
    tcase_add_test(tc, test_compress_refuses_lying_and_sizeless_frames);
    tcase_add_test(tc, test_compress_every_byte_change_is_refused_or_harmless);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
