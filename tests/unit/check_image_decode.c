/* tests/unit/check_image_decode.c - ops/png, ops/webp, ops/image_decode and decode_image in the pipeline, on
 * files Pillow writes at test time (tests/unit/image_cases.py) with Pillow's convert("RGB") bytes as the
 * reference: every PNG colour type and depth (palette with tRNS, 1/2/4/16-bit grey, 16-bit colour, Adam7),
 * WebP lossless and lossy with alpha, EXIF orientations 1..8 in JPEG, PNG and WebP; every prefix of a file
 * judged as Pillow judges it; size caps applied before allocating; the folder/tar extension rules; the
 * fused decode_image group equal to the op-by-op one. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "tests/unit/fixture_dir.h"
#include "lib/err.h"
#include "ops/image_decode.h"
#include "ops/png.h"
#include "ops/webp.h"
#include "pipeline/element.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "pipeline/tar_index.h"

#define PIL_MAX_PIXELS 89478485

static char g_root[256];

static void setup(void)
{
    spw_fixture_make(g_root, sizeof g_root, "img", "tests/unit/image_cases.py");
}

static void teardown(void)
{
    spw_fixture_remove(g_root);
}

static uint8_t *slurp(const char *name, size_t *len)
{
    return spw_fixture_read(g_root, name, len);
}

/* FILE.ref: "W H\n" then RGB bytes. */
struct ref {
    int w, h;
    uint8_t *px, *raw;
};

static struct ref load_ref(const char *file)
{
    char name[256];
    snprintf(name, sizeof name, "%s.ref", file);
    size_t len;
    struct ref r = {0};
    r.raw = slurp(name, &len);
    r.raw[len] = '\0';
    int used = 0;
    ck_assert_int_eq(sscanf((char *)r.raw, "%d %d\n%n", &r.w, &r.h, &used), 2);
    r.px = r.raw + used;
    ck_assert_uint_eq(len - (size_t)used, (size_t)r.w * r.h * 3);
    return r;
}

static void expect_image(const struct spw_image *img, const struct ref *r, const char *what)
{
    ck_assert_msg(img->w == r->w && img->h == r->h, "%s: %dx%d, Pillow %dx%d", what, img->w, img->h, r->w, r->h);
    for (int y = 0; y < r->h; y++) {
        const uint8_t *a = img->data + (size_t)y * img->stride, *b = r->px + (size_t)y * r->w * 3;
        for (int i = 0; i < r->w * 3; i++)
            ck_assert_msg(a[i] == b[i], "%s: pixel (%d, %d) channel %d is %d, Pillow %d", what, i / 3, y, i % 3,
                          a[i], b[i]);
    }
}

static void expect_decode_matches(const char *file, bool exif_transpose)
{
    size_t len;
    uint8_t *buf = slurp(file, &len);
    struct ref r = load_ref(file);
    struct spw_image img;
    char err[256] = "";
    int rc = spw_image_decode(buf, len, PIL_MAX_PIXELS, exif_transpose, &img, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: %s", file, err);
    expect_image(&img, &r, file);
    int w, h;
    ck_assert_int_eq(spw_image_header(buf, len, PIL_MAX_PIXELS, exif_transpose, &w, &h, err, sizeof err), 0);
    ck_assert(w == img.w && h == img.h);
    spw_image_free(&img);
    free(r.raw);
    free(buf);
}

START_TEST(test_image_decode_png_every_colour_type_matches_pillow)
{
    static const char *const files[] = {
        "rgb8.png", "rgba8.png", "grey8.png", "la8.png", "grey_trns.png", "rgb_trns.png", "palette.png",
        "palette_trns.png", "palette4.png", "grey1.png", "grey2.png", "grey4.png", "grey16.png", "rgb16.png",
        "rgba16.png", "la16.png", "rgb8_adam7.png", "rgba16_adam7.png", "grey16_adam7.png"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t len;
        uint8_t *buf = slurp(files[i], &len);
        ck_assert_int_eq(spw_image_sniff(buf, len), SPW_IMAGE_PNG);
        free(buf);
        expect_decode_matches(files[i], false);
    }
}
END_TEST

START_TEST(test_image_decode_webp_lossless_and_lossy_with_alpha_match_pillow)
{
    /* lossy too: the same libwebp as Pillow's, with the same (fancy) upsampling, gives the same bytes */
    static const char *const files[] = {"lossless.webp", "lossless_alpha.webp", "lossless_alpha_inexact.webp",
                                        "lossy.webp", "lossy_alpha.webp"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        size_t len;
        uint8_t *buf = slurp(files[i], &len);
        ck_assert_int_eq(spw_image_sniff(buf, len), SPW_IMAGE_WEBP);
        free(buf);
        expect_decode_matches(files[i], false);
    }
}
END_TEST

START_TEST(test_image_decode_exif_orientation_matches_pillow_exif_transpose)
{
    static const char *const ext[] = {"jpg", "png", "webp"};
    static const enum spw_image_format fmt[] = {SPW_IMAGE_JPEG, SPW_IMAGE_PNG, SPW_IMAGE_WEBP};
    for (int e = 0; e < 3; e++) {
        char one[32];
        snprintf(one, sizeof one, "exif1.%s", ext[e]);
        struct ref upright = load_ref(one);
        for (int k = 1; k <= 8; k++) {
            char file[32];
            snprintf(file, sizeof file, "exif%d.%s", k, ext[e]);
            size_t len;
            uint8_t *buf = slurp(file, &len);
            ck_assert_int_eq(spw_image_sniff(buf, len), fmt[e]);
            ck_assert_msg(spw_exif_orientation(buf, len, fmt[e]) == k, "%s: orientation %d", file,
                          spw_exif_orientation(buf, len, fmt[e]));
            free(buf);
            expect_decode_matches(file, true);
            /* off (the default): the stored pixels, whatever the tag says */
            buf = slurp(file, &len);
            struct spw_image img;
            char err[256];
            ck_assert_int_eq(spw_image_decode(buf, len, PIL_MAX_PIXELS, false, &img, err, sizeof err), 0);
            expect_image(&img, &upright, file);
            spw_image_free(&img);
            free(buf);
        }
        free(upright.raw);
    }
}
END_TEST

/* Every prefix of file: decoded exactly when Pillow decodes it (FILE.pillow_ok), and then to the whole image;
 * otherwise refused as truncated or corrupt. Never a crash (the test runs under ASan in CI). */
static void walk_prefixes(const char *file)
{
    size_t len, oklen;
    uint8_t *buf = slurp(file, &len);
    char okname[64];
    snprintf(okname, sizeof okname, "%s.pillow_ok", file);
    char *ok = (char *)slurp(okname, &oklen);
    ok[oklen] = '\0';
    uint8_t *pillow = calloc(len + 1, 1);
    for (char *p = ok, *end; (end = strchr(p, '\n')); p = end + 1)
        pillow[strtoul(p, NULL, 10)] = 1;
    ck_assert(pillow[len]);
    struct ref r = load_ref(file);
    int accepted = 0;
    for (size_t n = 0; n <= len; n++) {
        uint8_t *cut = malloc(n ? n : 1);       /* its own block, so ASan sees any read past the cut */
        memcpy(cut, buf, n);
        struct spw_image img;
        char err[256] = "";
        int rc = spw_image_decode(cut, n, PIL_MAX_PIXELS, false, &img, err, sizeof err);
        ck_assert_msg((rc == 0) == pillow[n], "%s cut at %zu of %zu: rc %d (%s), Pillow %s", file, n, len, rc,
                      err, pillow[n] ? "decodes it" : "refuses it");
        if (rc == 0) {
            char what[96];
            snprintf(what, sizeof what, "%s cut at %zu", file, n);
            expect_image(&img, &r, what);
            spw_image_free(&img);
            accepted++;
        } else {
            ck_assert_msg(rc == SPW_EDECODE, "%s cut at %zu: rc %d (%s)", file, n, rc, err);
            ck_assert_msg(strstr(err, "truncated") || strstr(err, "corrupt") || strstr(err, "empty") ||
                              strstr(err, "not a JPEG, PNG or WebP"),
                          "%s cut at %zu: unclear message '%s'", file, n, err);
        }
        free(cut);
    }
    ck_assert_int_ge(accepted, 1);
    free(r.raw);
    free(pillow);
    free(ok);
    free(buf);
}

START_TEST(test_image_decode_png_every_prefix_follows_pillow)
{
    walk_prefixes("rgb8.png");
    walk_prefixes("rgb8_adam7.png");
}
END_TEST

START_TEST(test_image_decode_webp_every_prefix_follows_pillow)
{
    walk_prefixes("lossless_alpha.webp");
    walk_prefixes("lossy.webp");
}
END_TEST

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* CRC-32 of PNG chunks (ISO 3309), bit by bit: a test needs one. */
static uint32_t crc32_png(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

START_TEST(test_image_decode_huge_header_refused_before_allocating)
{
    /* A PNG whose IHDR says 100000x100000 (30 GB of RGB) and a WebP whose VP8L header says 16384x16384:
     * refused from the header; an allocation first would fail with -ENOMEM (or succeed) instead. */
    size_t len;
    uint8_t *png = slurp("rgb8.png", &len);
    put_be32(png + 16, 100000);
    put_be32(png + 20, 100000);
    put_be32(png + 29, crc32_png(png + 12, 17));
    struct spw_image img;
    char err[256] = "";
    ck_assert_int_eq(spw_image_decode(png, len, PIL_MAX_PIXELS, false, &img, err, sizeof err), SPW_ETOOBIG);
    ck_assert_msg(strstr(err, "100000x100000 image exceeds max_pixels 89478485"), "%s", err);
    free(png);

    uint8_t *webp = slurp("lossless.webp", &len);
    ck_assert(memcmp(webp + 12, "VP8L", 4) == 0 && webp[20] == 0x2f);
    webp[21] = 0xFF;                            /* width - 1 and height - 1: 14 bits each, all ones */
    webp[22] = 0xFF;
    webp[23] = 0xFF;
    webp[24] |= 0x0F;
    ck_assert_int_eq(spw_image_decode(webp, len, PIL_MAX_PIXELS, false, &img, err, sizeof err), SPW_ETOOBIG);
    ck_assert_msg(strstr(err, "16384x16384 image exceeds max_pixels"), "%s", err);
    free(webp);
}
END_TEST

START_TEST(test_image_decode_unknown_format_is_named)
{
    static const uint8_t gif[] = "GIF89a\x01\x00\x01\x00";
    struct spw_image img;
    char err[256];
    ck_assert_int_eq(spw_image_decode(gif, sizeof gif - 1, PIL_MAX_PIXELS, false, &img, err, sizeof err),
                     SPW_EDECODE);
    ck_assert_str_eq(err, "not a JPEG, PNG or WebP image (it starts with 47 49 46 38)");
    ck_assert_int_eq(spw_image_decode(gif, 0, PIL_MAX_PIXELS, false, &img, err, sizeof err), SPW_EDECODE);
    ck_assert_str_eq(err, "empty file (0 bytes)");
}
END_TEST

START_TEST(test_image_decode_media_extensions_follow_the_decode_op)
{
    ck_assert(spw_tar_media_ext("png", SPW_MEDIA_ANY_IMAGE));
    ck_assert(spw_tar_media_ext("seg.WebP", SPW_MEDIA_ANY_IMAGE));
    ck_assert(spw_tar_media_ext("JPG", SPW_MEDIA_ANY_IMAGE));
    ck_assert(spw_tar_media_ext("jpeg", SPW_MEDIA_ANY_IMAGE));
    ck_assert(!spw_tar_media_ext("gif", SPW_MEDIA_ANY_IMAGE));
    ck_assert(!spw_tar_media_ext("wav", SPW_MEDIA_ANY_IMAGE));
    /* decode_jpeg lists JPEGs only, as before */
    ck_assert(!spw_tar_media_ext("png", SPW_MEDIA_IMAGE));
    ck_assert(!spw_tar_media_ext("webp", SPW_MEDIA_IMAGE));
    ck_assert(spw_tar_media_ext("jpg", SPW_MEDIA_IMAGE));
}
END_TEST

static struct spw_pipeline_spec *parse(const char *ops)
{
    char json[1024], err[256];
    snprintf(json, sizeof json,
             "{\"source\": {\"format\": \"image_folder\", \"path\": \"x\"}, \"ops\": [%s], \"batch\": {\"size\": 1}}",
             ops);
    struct spw_pipeline_spec *spec;
    ck_assert_msg(spw_spec_parse_json(json, &spec, err, sizeof err) == 0, "%s", err);
    return spec;
}

/* Run the whole pipeline on file; the uint8 image comes back in *out. */
static void run_pipeline(const char *ops, const char *file, struct spw_image *out)
{
    struct spw_pipeline_spec *spec = parse(ops);
    struct spw_element_ctx ctx;
    ck_assert_int_eq(spw_element_ctx_init(&ctx, spec), 0);
    size_t len;
    uint8_t *buf = slurp(file, &len);
    struct spw_value v = {0};
    char err[256];
    ck_assert_msg(spw_element_run(&ctx, 0, ctx.n_groups, 0, 5, buf, len, &v, NULL, NULL, err, sizeof err) == 0,
                  "%s on %s: %s", ops, file, err);
    ck_assert(!v.is_tensor);
    *out = v.img;
    free(buf);
    spw_element_ctx_destroy(&ctx);
    spw_spec_free(spec);
}

static void expect_same(const struct spw_image *a, const struct spw_image *b, const char *what)
{
    ck_assert_msg(a->w == b->w && a->h == b->h, "%s: %dx%d vs %dx%d", what, a->w, a->h, b->w, b->h);
    for (int y = 0; y < a->h; y++)
        ck_assert_msg(memcmp(a->data + (size_t)y * a->stride, b->data + (size_t)y * b->stride, (size_t)a->w * 3) == 0,
                      "%s: row %d differs", what, y);
}

START_TEST(test_image_decode_fused_group_equals_op_by_op)
{
    /* [decode, resize, flip, flip] runs as one fused group; [decode, flip, flip, resize] leaves the resize to
     * the op-by-op run. Both are the resize of the decoded image. */
    static const char *const files[] = {"rgb8.png", "lossy_alpha.webp", "exif6.jpg", "exif8.png"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        for (int t = 0; t < 2; t++) {
            char fused[256], separate[256], what[96];
            const char *dec = t ? "{\"op\": \"decode_image\", \"exif_transpose\": true}" : "{\"op\": \"decode_image\"}";
            snprintf(fused, sizeof fused, "%s, {\"op\": \"resize\", \"size\": [19, 29]}, {\"op\": \"horizontal_flip\"},"
                     " {\"op\": \"horizontal_flip\"}", dec);
            snprintf(separate, sizeof separate, "%s, {\"op\": \"horizontal_flip\"}, {\"op\": \"horizontal_flip\"},"
                     " {\"op\": \"resize\", \"size\": [19, 29]}", dec);
            struct spw_image a, b;
            run_pipeline(fused, files[i], &a);
            run_pipeline(separate, files[i], &b);
            snprintf(what, sizeof what, "%s exif_transpose %d", files[i], t);
            expect_same(&a, &b, what);
            ck_assert(a.w == 29 && a.h == 19);
            spw_image_free(&a);
            spw_image_free(&b);
        }
    }
}
END_TEST

START_TEST(test_image_decode_op_outputs_pillow_image_and_decode_jpeg_turns_too)
{
    static const char *const files[] = {"rgba16_adam7.png", "palette_trns.png", "lossless_alpha.webp", "exif5.jpg"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct spw_image img;
        run_pipeline("{\"op\": \"decode_image\", \"exif_transpose\": true}", files[i], &img);
        struct ref r = load_ref(files[i]);
        expect_image(&img, &r, files[i]);
        spw_image_free(&img);
        free(r.raw);
    }
    /* decode_jpeg with exif_transpose, through the crop path (decoded whole, then cropped) */
    struct spw_image img;
    run_pipeline("{\"op\": \"decode_jpeg\", \"exif_transpose\": true}, {\"op\": \"crop\", \"top\": 2, \"left\": 3,"
                 " \"height\": 30, \"width\": 17}", "exif7.jpg", &img);
    struct ref r = load_ref("exif7.jpg");
    ck_assert(r.w == 23 && r.h == 37 && img.w == 17 && img.h == 30);
    for (int y = 0; y < 30; y++)
        ck_assert(memcmp(img.data + (size_t)y * img.stride, r.px + ((size_t)(y + 2) * r.w + 3) * 3, 17 * 3) == 0);
    spw_image_free(&img);
    free(r.raw);
}
END_TEST

START_TEST(test_image_decode_spec_field_and_media)
{
    struct spw_pipeline_spec *s = parse("{\"op\": \"decode_image\", \"exif_transpose\": true}");
    ck_assert_int_eq(s->ops[0].kind, SPW_OP_DECODE_IMAGE);
    ck_assert(s->ops[0].exif_transpose);
    ck_assert_int_eq(s->source.media, SPW_MEDIA_ANY_IMAGE);
    char *json = spw_spec_to_json(s);
    ck_assert_msg(strstr(json, "\"op\": \"decode_image\", \"exif_transpose\": true") ||
                      strstr(json, "\"exif_transpose\": true"), "%s", json);
    free(json);
    /* through spillway.v1.Pipeline and back */
    Spillway__V1__Pipeline *msg;
    ck_assert_int_eq(spw_spec_to_proto(s, &msg), 0);
    ck_assert_int_eq(msg->ops[0]->op, SPILLWAY__V1__OP_KIND__OP_KIND_DECODE_IMAGE);
    struct spw_pipeline_spec *back;
    char perr[256];
    ck_assert_msg(spw_spec_from_proto(msg, &back, perr, sizeof perr) == 0, "%s", perr);
    ck_assert_int_eq(back->ops[0].kind, SPW_OP_DECODE_IMAGE);
    ck_assert(back->ops[0].exif_transpose);
    spw_spec_free(back);
    spw_spec_proto_free(msg);
    spw_spec_free(s);
    s = parse("{\"op\": \"decode_jpeg\"}");
    ck_assert(!s->ops[0].exif_transpose);
    ck_assert_int_eq(s->source.media, SPW_MEDIA_IMAGE);
    spw_spec_free(s);
    char err[256];
    ck_assert_int_eq(spw_spec_parse_json("{\"source\": {\"format\": \"image_folder\", \"path\": \"x\"}, \"ops\": "
                                         "[{\"op\": \"decode_image\"}, {\"op\": \"decode_image\"}], "
                                         "\"batch\": {\"size\": 1}}", &s, err, sizeof err), SPW_ESPEC);
    ck_assert_str_eq(err, "ops[1]: \"decode_image\" must be the first op and appear once");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("image_decode");
    TCase *tc = tcase_create("image_decode");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_image_decode_png_every_colour_type_matches_pillow);
    tcase_add_test(tc, test_image_decode_webp_lossless_and_lossy_with_alpha_match_pillow);
    tcase_add_test(tc, test_image_decode_exif_orientation_matches_pillow_exif_transpose);
    tcase_add_test(tc, test_image_decode_png_every_prefix_follows_pillow);
    tcase_add_test(tc, test_image_decode_webp_every_prefix_follows_pillow);
    tcase_add_test(tc, test_image_decode_huge_header_refused_before_allocating);
    tcase_add_test(tc, test_image_decode_unknown_format_is_named);
    tcase_add_test(tc, test_image_decode_media_extensions_follow_the_decode_op);
    tcase_add_test(tc, test_image_decode_fused_group_equals_op_by_op);
    tcase_add_test(tc, test_image_decode_op_outputs_pillow_image_and_decode_jpeg_turns_too);
    tcase_add_test(tc, test_image_decode_spec_field_and_media);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
