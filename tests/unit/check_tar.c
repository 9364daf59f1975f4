/* tests/unit/check_tar.c - tar_shards sources (pipeline/tar_index.c, pipeline/brace.c, pipeline/source.c):
 * shards written by Python's tarfile (tests/unit/tar_cases.py) with pax, GNU long-name and ustar-prefix
 * headers read exactly like short names; WebDataset keys and labels (.cls, .txt, .json with label_key);
 * gzip shards; brace patterns and their cap; every prefix of a shard fails cleanly or lists a prefix. The
 * dispatcher's packed listing (pipeline/manifest.c) rebuilds the same source, and any cut, changed byte,
 * other hash, other format or oversized frame is refused. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "tests/unit/fixture_dir.h"
#include "lib/err.h"
#include "pipeline/brace.h"
#include "pipeline/coco.h"
#include "pipeline/fields.h"
#include "pipeline/geometry.h"
#include "pipeline/manifest.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"

static char g_root[256];

static void setup(void)
{
    spw_fixture_make(g_root, sizeof g_root, "tar", "tests/unit/tar_cases.py");
}

static void teardown(void)
{
    spw_fixture_remove(g_root);
}

/* Open root/name (a pattern) as a tar_shards source of images; rc as spw_source_open. */
static int open_tar(const char *name, const char *label_key, struct spw_source **src, char *err, size_t errlen)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_root, name);
    struct spw_source_spec ss = {.format = SPW_SOURCE_TAR_SHARDS, .path = path, .media = SPW_MEDIA_IMAGE,
                                 .label_key = (char *)label_key};
    return spw_source_open(&ss, src, err, errlen);
}

static struct spw_source *open_ok(const char *name, const char *label_key)
{
    struct spw_source *src = NULL;
    char err[1024];
    int rc = open_tar(name, label_key, &src, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: %s", name, err);
    return src;
}

static void read_sample(const struct spw_source *src, int64_t i, uint8_t **buf, size_t *len)
{
    int rc = spw_source_read(src, i, 1 << 20, buf, len);
    ck_assert_msg(rc == 0, "sample %lld: %s", (long long)i, spw_strerror(rc));
}

static void *file_bytes(const char *path, size_t *len)
{
    return spw_fixture_read(NULL, path, len);
}

/* The member part of a sample path ("shard:member"). */
static const char *member_of(const struct spw_sample *s)
{
    return strrchr(s->path, ':') + 1;
}

/* a and b hold the same samples: count, labels, bytes, and member names up to the directory part. */
static void assert_same_samples(const struct spw_source *a, const struct spw_source *b)
{
    ck_assert_int_eq(a->n, b->n);
    ck_assert_int_eq(a->ignored, b->ignored);
    for (int64_t i = 0; i < a->n; i++) {
        ck_assert_int_eq(a->samples[i].label, b->samples[i].label);
        ck_assert_int_eq(a->samples[i].size, b->samples[i].size);
        const char *ma = strrchr(member_of(&a->samples[i]), '/'), *mb = strrchr(member_of(&b->samples[i]), '/');
        ck_assert_str_eq(ma ? ma + 1 : member_of(&a->samples[i]), mb ? mb + 1 : member_of(&b->samples[i]));
        uint8_t *x, *y;
        size_t nx, ny;
        read_sample(a, i, &x, &nx);
        read_sample(b, i, &y, &ny);
        ck_assert_uint_eq(nx, ny);
        ck_assert(memcmp(x, y, nx) == 0);
        free(x);
        free(y);
    }
}

START_TEST(test_tar_long_names_read_like_short_names)
{
    struct spw_source *s = open_ok("short.tar", NULL);
    ck_assert_int_eq(s->n, 3);
    const int64_t labels[] = {3, 7, 1};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(s->samples[i].label, labels[i]);
    size_t n;
    uint8_t *want = file_bytes("tests/data/fixtures/gray.jpg", &n), *got;
    size_t len;
    read_sample(s, 1, &got, &len);
    ck_assert_uint_eq(len, n);
    ck_assert(memcmp(got, want, n) == 0);
    free(got);
    free(want);
    const char *longs[] = {"pax.tar", "gnu.tar", "ustar.tar"};
    for (int k = 0; k < 3; k++) {
        struct spw_source *l = open_ok(longs[k], NULL);
        assert_same_samples(s, l);
        ck_assert_uint_eq(strlen(member_of(&l->samples[0])), 150);     /* the whole name, not 100 bytes */
        spw_source_close(l);
    }
    spw_source_close(s);
}
END_TEST

START_TEST(test_tar_member_name_over_cap_is_an_error)
{
    struct spw_source *src;
    char err[1024];
    ck_assert_int_eq(open_tar("long-name.tar", NULL, &src, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "long-name.tar") && strstr(err, "cap of 4096"), "%s", err);
}
END_TEST

START_TEST(test_tar_webdataset_keys_and_json_label_key)
{
    struct spw_source *s = open_ok("wds.tar", "label");
    ck_assert_int_eq(s->n, 2);
    ck_assert_str_eq(member_of(&s->samples[0]), "a/b/x.y.jpg");     /* key a/b/x, extension y.jpg */
    ck_assert_int_eq(s->samples[0].label, 5);
    ck_assert_str_eq(member_of(&s->samples[1]), "s1.jpg");          /* "jpg" wins over "seg.jpg" */
    ck_assert_int_eq(s->samples[1].label, 0);
    ck_assert_int_eq(s->ignored, 3);                                /* nolabel, .hidden.jpg, README */
    size_t n, len;
    uint8_t *want = file_bytes("tests/data/fixtures/rgb444.jpg", &n), *got;
    read_sample(s, 1, &got, &len);
    ck_assert_uint_eq(len, n);
    ck_assert(memcmp(got, want, n) == 0);
    free(got);
    free(want);
    spw_source_close(s);
    /* Without label_key, a/b/x's label would be its .txt, a caption: refused with the member named. */
    char err[1024];
    ck_assert_int_eq(open_tar("wds.tar", NULL, &s, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "a/b/x.txt") && strstr(err, "not a class index"), "%s", err);
}
END_TEST

START_TEST(test_tar_cls_and_txt_labels)
{
    struct spw_source *s = open_ok("labels.tar", NULL);
    ck_assert_int_eq(s->n, 3);
    ck_assert_int_eq(s->samples[0].label, 4);      /* c.cls */
    ck_assert_int_eq(s->samples[1].label, 9);      /* t.txt, before its jpg */
    ck_assert_int_eq(s->samples[2].label, 2);      /* both: .cls over a caption .txt */
    ck_assert_str_eq(member_of(&s->samples[1]), "t.jpg");
    spw_source_close(s);
    char err[1024];
    ck_assert_int_eq(open_tar("bad-txt.tar", NULL, &s, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "bad-txt.tar: member x.txt"), "%s", err);
    ck_assert_int_eq(open_tar("bad-json.tar", "label", &s, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "bad-json.tar: member x.json") && strstr(err, "\"label\""), "%s", err);
}
END_TEST

/* tar_shards with source.fields and labels false: keys need their media and every field member (case
 * ignored); each field reads its member, text checked, a .json's string field taken out; what cannot be read
 * says why; the packed listing carries the members and is refused by a source without them. */
START_TEST(test_tar_fields_list_read_and_pack)
{
    char path[512], err[1024];
    snprintf(path, sizeof path, "%s/fields.tar", g_root);
    struct spw_sample_field_spec fields[2] = {{.name = "caption", .from = (char *)"txt"},
                                              {.name = "title", .from = (char *)"json", .key = (char *)"caption"}};
    struct spw_pipeline_spec ps = {.source = {.format = SPW_SOURCE_TAR_SHARDS, .path = path,
                                              .media = SPW_MEDIA_IMAGE, .no_labels = true, .n_fields = 2},
                                   .max_pixels = 1 << 20, .max_file_bytes = 1 << 24};
    struct spw_source_spec *ss = &ps.source;
    memcpy(ss->fields, fields, sizeof fields);
    struct spw_source *s = NULL;
    ck_assert_msg(spw_source_open(ss, &s, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(s->n, 4);                     /* k3 has no .txt: not a sample */
    ck_assert_int_eq(s->ignored, 1);
    const char *want_member[] = {"k1.jpg", "k2.jpg", "k4.jpg", "k5.jpg"};
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(member_of(&s->samples[i]), want_member[i]);
        ck_assert_int_eq(s->samples[i].label, -1);
    }
    struct spw_fields *f = NULL;
    ck_assert_msg(spw_fields_read(s, &ps, 0, &f, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(f->n, 2);
    ck_assert_uint_eq(f->f[0].len, 10);
    ck_assert(memcmp(f->f[0].data, "h\xc3\xa9llo \xe2\x9c\x93", 10) == 0);
    ck_assert_uint_eq(f->f[1].len, 2);
    ck_assert(memcmp(f->f[1].data, "c1", 2) == 0);
    /* packed and unpacked: the same; every cut or a length past what is there refused */
    uint8_t packed[64];
    const size_t n = spw_fields_packed_size(f);
    ck_assert_uint_eq(n, 4 + 10 + 4 + 2);
    spw_fields_pack(f, packed);
    struct spw_fields *g = NULL;
    ck_assert_int_eq(spw_fields_unpack(&ps, packed, n, &g, err, sizeof err), 0);
    ck_assert(g->f[0].len == 10 && !memcmp(g->f[0].data, f->f[0].data, 10) && g->f[1].len == 2);
    spw_fields_free(g);
    for (size_t cut = 0; cut < n; cut++)
        ck_assert_int_eq(spw_fields_unpack(&ps, packed, cut, &g, err, sizeof err), SPW_EFORMAT);
    packed[n] = 0;
    ck_assert_int_eq(spw_fields_unpack(&ps, packed, n + 1, &g, err, sizeof err), SPW_EFORMAT);
    ck_assert_msg(strstr(err, "1 bytes left over"), "%s", err);
    packed[3] = 0x7f;                               /* a length of 2 GiB */
    ck_assert_int_eq(spw_fields_unpack(&ps, packed, n, &g, err, sizeof err), SPW_EFORMAT);
    ck_assert_msg(strstr(err, "field caption: a length past the cap of 1 MiB"), "%s", err);
    packed[3] = 0;
    packed[5] = 0xc3, packed[6] = 0x28;             /* not UTF-8 */
    ck_assert_int_eq(spw_fields_unpack(&ps, packed, n, &g, err, sizeof err), SPW_EFORMAT);
    ck_assert_msg(strstr(err, "field caption: not UTF-8 text"), "%s", err);
    spw_fields_free(f);
    ck_assert_int_eq(spw_fields_read(s, &ps, 1, &f, err, sizeof err), SPW_EFORMAT);
    ck_assert_msg(strstr(err, "field title: the .json member has no such key"), "%s", err);
    ck_assert_int_eq(spw_fields_read(s, &ps, 2, &f, err, sizeof err), SPW_EFORMAT);
    ck_assert_msg(strstr(err, "field caption: not UTF-8 text"), "%s", err);
    ck_assert_int_eq(spw_fields_read(s, &ps, 3, &f, err, sizeof err), SPW_ETOOBIG);
    ck_assert_msg(strstr(err, "field caption: a member of 1048577 bytes, over the cap of 1048576"), "%s", err);
    ss->fields[0].kind = SPW_SAMPLE_FIELD_RAW;       /* raw: any bytes; a .json value that is no string refused */
    ss->n_fields = 1;
    ck_assert_msg(spw_fields_read(s, &ps, 2, &f, err, sizeof err) == 0, "%s", err);
    ck_assert(f->f[0].len == 2 && f->f[0].data[0] == 0xff);
    spw_fields_free(f);
    ss->n_fields = 2;
    ss->fields[0].kind = SPW_SAMPLE_FIELD_TEXT;
    /* the listing, packed: rebuilt with the same members and hash; a source without fields refuses it */
    uint8_t *man;
    size_t len;
    ck_assert_int_eq(spw_manifest_pack(s, &man, &len), 0);
    struct spw_source *b = NULL;
    ck_assert_msg(spw_manifest_open(ss, man, len, s->manifest_hash, &b, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(b->n_fields, 2);
    ck_assert(memcmp(b->field_locs, s->field_locs, sizeof *s->field_locs * 8) == 0);
    assert_same_samples(s, b);
    spw_source_close(b);
    for (size_t i = 0; i < len; i++) {      /* every byte changed: refused, or (bits zstd does not use) the same */
        man[i] ^= 0x5a;
        b = NULL;
        const int rc = spw_manifest_open(ss, man, len, 0, &b, err, sizeof err);
        ck_assert_msg(rc == SPW_ESOURCE || (rc == 0 && b->manifest_hash == s->manifest_hash &&
                                            !memcmp(b->field_locs, s->field_locs, sizeof *s->field_locs * 8)),
                      "a manifest with byte %zu of %zu changed was taken as another listing", i, len);
        spw_source_close(b);
        man[i] ^= 0x5a;
    }
    ss->n_fields = 1;
    ck_assert_int_eq(spw_manifest_open(ss, man, len, 0, &b, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "a listing with 2 fields per sample, for a source with 1"), "%s", err);
    free(man);
    /* the hash covers the fields: the same samples without them hash otherwise */
    ss->n_fields = 0;
    struct spw_source *plain = NULL;
    ck_assert_msg(spw_source_open(ss, &plain, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(plain->n, 5);
    ck_assert_uint_ne(plain->manifest_hash, s->manifest_hash);
    spw_source_close(plain);
    spw_source_close(s);
}
END_TEST

/* A mask's packed form: w, h and one byte a pixel, back as three equal channels; a peer's lies about its size
 * (zero, past max_pixels, other than the bytes sent) refused before allocating. */
START_TEST(test_fields_mask_pack_and_lies)
{
    struct spw_pipeline_spec ps = {.source = {.n_fields = 1}, .max_pixels = 100};
    ps.source.fields[0] = (struct spw_sample_field_spec){.name = "m", .kind = SPW_SAMPLE_FIELD_MASK};
    struct spw_fields *f = calloc(1, sizeof *f), *g = NULL;
    ck_assert_ptr_nonnull(f);
    f->n = 1;
    f->f[0].kind = SPW_SAMPLE_FIELD_MASK;
    ck_assert_int_eq(spw_image_alloc(&f->f[0].mask, 5, 3, 3), 0);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 5; x++)
            memset(spw_image_at(&f->f[0].mask, x, y), 10 * y + x, 3);
    uint8_t packed[64];
    const size_t n = spw_fields_packed_size(f);
    ck_assert_uint_eq(n, 4 + 8 + 15);
    spw_fields_pack(f, packed);
    char err[256];
    ck_assert_int_eq(spw_fields_unpack(&ps, packed, n, &g, err, sizeof err), 0);
    ck_assert(g->f[0].mask.w == 5 && g->f[0].mask.h == 3);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 5; x++) {
            const uint8_t *px = spw_image_at(&g->f[0].mask, x, y);
            ck_assert(px[0] == 10 * y + x && px[1] == px[0] && px[2] == px[0]);
        }
    spw_fields_free(g);
    const uint32_t lies[][3] = {{0, 3, 8}, {5, 0, 8}, {11, 10, 8 + 110}, {5, 3, 8 + 14}, {0xffffffffu, 0xffffffffu, 8}};
    for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
        uint8_t bad[4 + 8 + 120] = {0};
        const uint32_t len = lies[i][2];
        memcpy(bad, &len, 4);
        memcpy(bad + 4, &lies[i][0], 4);
        memcpy(bad + 8, &lies[i][1], 4);
        ck_assert_int_eq(spw_fields_unpack(&ps, bad, 4 + len, &g, err, sizeof err), SPW_EFORMAT);
        ck_assert_msg(strstr(err, "field m: a mask of"), "%s", err);
    }
    spw_fields_free(f);
}
END_TEST

/* Boxes out of a .json member: xyxy or COCO's xywh, with their class ids; what is malformed fails its sample
 * naming the field; packed and unpacked the same; a peer's counts, sizes and non-finite corners refused. */
START_TEST(test_fields_boxes_read_pack_and_lies)
{
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/boxes.tar", g_root);
    struct spw_pipeline_spec ps = {.source = {.format = SPW_SOURCE_TAR_SHARDS, .path = path, .media = SPW_MEDIA_IMAGE,
                                              .no_labels = true, .n_fields = 1},
                                   .max_pixels = 1 << 20, .max_file_bytes = 1 << 24};
    ps.source.fields[0] = (struct spw_sample_field_spec){.name = "b", .kind = SPW_SAMPLE_FIELD_BOXES,
                                                          .from = (char *)"json", .key = (char *)"bb",
                                                          .labels_key = (char *)"cat"};
    struct spw_source *s = NULL;
    ck_assert_msg(spw_source_open(&ps.source, &s, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(s->n, 5);
    struct spw_fields *f = NULL, *g = NULL;
    ck_assert_msg(spw_fields_read(s, &ps, 0, &f, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(f->f[0].n_boxes, 2);
    const float want[8] = {1, 2, 3, 4, 0, 0.5f, 10, 5};
    ck_assert(memcmp(f->f[0].boxes, want, sizeof want) == 0);
    ck_assert(f->f[0].box_labels[0] == 7 && f->f[0].box_labels[1] == 9);
    uint8_t packed[128];
    const size_t n = spw_fields_packed_size(f);
    ck_assert_uint_eq(n, 4 + 4 + 2 * 24);
    spw_fields_pack(f, packed);
    ck_assert_int_eq(spw_fields_unpack(&ps, packed, n, &g, err, sizeof err), 0);
    ck_assert(g->f[0].n_boxes == 2 && !memcmp(g->f[0].boxes, want, sizeof want) && g->f[0].box_labels[1] == 9);
    spw_fields_free(g);
    for (size_t cut = 0; cut < n; cut++)
        ck_assert_int_eq(spw_fields_unpack(&ps, packed, cut, &g, err, sizeof err), SPW_EFORMAT);
    uint32_t lie = 5000;                            /* over the cap, and more than the bytes say */
    memcpy(packed + 4, &lie, 4);
    ck_assert_int_eq(spw_fields_unpack(&ps, packed, n, &g, err, sizeof err), SPW_EFORMAT);
    ck_assert_msg(strstr(err, "field b: 5000 boxes in 52 bytes"), "%s", err);
    lie = 2;
    memcpy(packed + 4, &lie, 4);
    const float nan = NAN;
    memcpy(packed + 8 + 4, &nan, 4);
    ck_assert_int_eq(spw_fields_unpack(&ps, packed, n, &g, err, sizeof err), SPW_EFORMAT);
    ck_assert_msg(strstr(err, "field b: box 0 is not finite"), "%s", err);
    spw_fields_free(f);
    ps.source.fields[0].box_format = SPW_BOX_XYWH;  /* COCO: [x, y, w, h] */
    ck_assert_msg(spw_fields_read(s, &ps, 0, &f, err, sizeof err) == 0, "%s", err);
    ck_assert(f->f[0].boxes[2] == 4 && f->f[0].boxes[3] == 6 && f->f[0].boxes[6] == 10 && f->f[0].boxes[7] == 5.5f);
    spw_fields_free(f);
    ps.source.fields[0].box_format = SPW_BOX_XYXY;
    const char *why[] = {"box 0 is not 4 finite numbers with an integer class id",
                         "box 0 is not 4 finite numbers with an integer class id (its far corner is before its "
                         "near one)", NULL, "boxes and class ids differ in count"};
    for (int i = 1; i < 5; i++) {
        const int rc = spw_fields_read(s, &ps, i, &f, err, sizeof err);
        if (!why[i - 1]) {
            ck_assert_msg(rc == 0 && f->f[0].n_boxes == 0, "sample %d: %s", i, err);
            spw_fields_free(f);
            continue;
        }
        ck_assert_int_eq(rc, SPW_EFORMAT);
        ck_assert_msg(strstr(err, why[i - 1]) && strstr(err, "field b: "), "sample %d: %s", i, err);
    }
    spw_source_close(s);
    /* through a map: a crop moves, clips and drops; a flip mirrors; labels follow their boxes */
    float boxes[12] = {5, 5, 15, 15, 18, 2, 30, 9, 0, 0, 3, 3};
    int64_t labels[3] = {1, 2, 3};
    int k = 3;
    const double crop[9] = {1, 0, -4, 0, 1, -1, 0, 0, 1};      /* a 12 x 10 crop at (4, 1) */
    spw_geo_boxes(crop, 12, 10, 0, boxes, labels, &k);
    ck_assert_int_eq(k, 1);                         /* (18, 2) starts past the crop; (0, 0, 3, 3) ends before */
    ck_assert(boxes[0] == 1 && boxes[1] == 4 && boxes[2] == 11 && boxes[3] == 10 && labels[0] == 1);
    const double flip[9] = {-1, 0, 12, 0, 1, 0, 0, 0, 1};
    spw_geo_boxes(flip, 12, 10, 0, boxes, labels, &k);
    ck_assert(k == 1 && boxes[0] == 1 && boxes[2] == 11);
    spw_geo_boxes(crop, 12, 10, 6.0, boxes, labels, &k);   /* (0, 3, 7, 9): 7 x 6, kept at min_size 6 */
    ck_assert(k == 1 && boxes[0] == 0 && boxes[1] == 3 && boxes[2] == 7 && boxes[3] == 9);
    const double same[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    spw_geo_boxes(same, 12, 10, 6.5, boxes, labels, &k);    /* 6 high: dropped at min_size 6.5 */
    ck_assert_int_eq(k, 0);
}
END_TEST

/* Fields of a folder source: each sample's file in the field's folder under the same relative name; a sample
 * without one is not a sample; the packed listing carries the files' sizes, and a worker whose file differs
 * refuses it. */
START_TEST(test_folder_fields_parallel_folder)
{
    char cmd[8192], img[512], seg[512], err[512];
    snprintf(img, sizeof img, "%s/voc/img", g_root);
    snprintf(seg, sizeof seg, "%s/voc/seg", g_root);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/a %s/a && cp tests/data/fixtures/rgb444.jpg %s/x.jpg && "
             "cp %s/x.jpg %s/a/y.jpg && cp %s/x.jpg %s/z.jpg && printf mask-x > %s/x.png && printf mask-y! > %s/a/y.png",
             img, seg, img, img, img, img, img, seg, seg);
    ck_assert_int_eq(system(cmd), 0);
    struct spw_pipeline_spec ps = {.source = {.format = SPW_SOURCE_IMAGE_FOLDER, .path = img,
                                              .media = SPW_MEDIA_IMAGE, .no_labels = true, .n_fields = 1},
                                   .max_pixels = 1 << 20, .max_file_bytes = 1 << 24};
    ps.source.fields[0] = (struct spw_sample_field_spec){.name = "m", .kind = SPW_SAMPLE_FIELD_RAW,
                                                          .from = (char *)"png", .path = seg};
    char path[600];
    ps.source.path = (char *)"/r/img";
    ck_assert_int_eq(spw_source_field_path(&ps.source, 0, "/r/img/a/b.c.jpg", path, sizeof path), 0);
    ck_assert_str_eq(path + strlen(seg), "/a/b.c.png");        /* the last extension replaced */
    ck_assert_int_eq(spw_source_field_path(&ps.source, 0, "/r/img/a/b.c.jpg", path, 8), -ENAMETOOLONG);
    ps.source.path = img;
    struct spw_source *s = NULL, *b = NULL;
    ck_assert_msg(spw_source_open(&ps.source, &s, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(s->n, 2);                      /* z.jpg has no mask */
    ck_assert_int_eq(s->ignored, 1);
    struct spw_fields *f = NULL;
    ck_assert_msg(spw_fields_read(s, &ps, 0, &f, err, sizeof err) == 0, "%s", err);
    ck_assert(f->f[0].len == 6 && !memcmp(f->f[0].data, "mask-x", 6));
    spw_fields_free(f);
    ck_assert_msg(spw_fields_read(s, &ps, 1, &f, err, sizeof err) == 0, "%s", err);
    ck_assert(f->f[0].len == 7 && !memcmp(f->f[0].data, "mask-y!", 7));
    spw_fields_free(f);
    uint8_t *man;
    size_t len;
    ck_assert_int_eq(spw_manifest_pack(s, &man, &len), 0);
    ck_assert_msg(spw_manifest_open(&ps.source, man, len, s->manifest_hash, &b, err, sizeof err) == 0, "%s", err);
    ck_assert(b->n == 2 && b->field_locs[1].offset == -1 && b->field_locs[1].size == 7);
    spw_source_close(b);
    snprintf(cmd, sizeof cmd, "printf longer-now > %s/a/y.png", seg);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(spw_manifest_open(&ps.source, man, len, s->manifest_hash, &b, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "field m of") && strstr(err, "a/y.jpg"), "%s", err);
    free(man);
    spw_source_close(s);
}
END_TEST

/* A COCO annotations file that lies or breaks: each refused with the reason; crowds and empty boxes dropped
 * and counted, the rest clamped to the image. */
START_TEST(test_coco_annotations_refused_or_kept)
{
    static const struct {
        const char *json, *why;
    } cases[] = {
        {"{\"images\": [", "source.annotations: "},
        {"{\"images\": {}, \"annotations\": []}", "not COCO's layout"},
        {"{\"images\": [{\"id\": 1, \"file_name\": \"../x.jpg\", \"width\": 9, \"height\": 9}], \"annotations\": []}",
         "images[0]: expected id"},
        {"{\"images\": [{\"id\": 1, \"file_name\": \"a.jpg\", \"width\": 9, \"height\": 9}, {\"id\": 1, "
         "\"file_name\": \"b.jpg\", \"width\": 9, \"height\": 9}], \"annotations\": []}", "image id 1 twice"},
        {"{\"images\": [{\"id\": 1, \"file_name\": \"a.jpg\", \"width\": 9, \"height\": 9}], \"annotations\": "
         "[{\"image_id\": 2, \"bbox\": [0, 0, 1, 1], \"category_id\": 3}]}", "image_id 2 is no image's"},
        {"{\"images\": [{\"id\": 1, \"file_name\": \"a.jpg\", \"width\": 9, \"height\": 9}], \"annotations\": "
         "[{\"image_id\": 1, \"bbox\": [0, 0, \"1\", 1], \"category_id\": 3}]}", "annotations[0]: expected"},
    };
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/ann.json", g_root);
    struct spw_coco_image *ims = NULL;
    int64_t n = 0, dropped = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs(cases[i].json, f);
        fclose(f);
        ck_assert_int_eq(spw_coco_read(path, &ims, &n, &dropped, err, sizeof err), SPW_ESOURCE);
        ck_assert_msg(strstr(err, cases[i].why), "case %zu: %s", i, err);
    }
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"images\": [{\"id\": 5, \"file_name\": \"b.jpg\", \"width\": 10, \"height\": 8}, {\"id\": 2, "
          "\"file_name\": \"a.jpg\", \"width\": 10, \"height\": 8}], \"annotations\": ["
          "{\"image_id\": 5, \"bbox\": [-2, 1, 5, 20], \"category_id\": 7},"
          "{\"image_id\": 5, \"bbox\": [1, 1, 3, 3], \"category_id\": 8, \"iscrowd\": 1},"
          "{\"image_id\": 5, \"bbox\": [12, 1, 3, 3], \"category_id\": 9}]}", f);
    fclose(f);
    ck_assert_msg(spw_coco_read(path, &ims, &n, &dropped, err, sizeof err) == 0, "%s", err);
    ck_assert(n == 2 && dropped == 2);              /* the crowd, and the box past the right edge */
    ck_assert_str_eq(ims[0].file_name, "a.jpg");    /* sorted by file_name */
    ck_assert_int_eq(ims[0].n_boxes, 0);
    ck_assert_int_eq(ims[1].n_boxes, 1);
    ck_assert(ims[1].boxes[0] == 0 && ims[1].boxes[1] == 1 && ims[1].boxes[2] == 3 && ims[1].boxes[3] == 8 &&
              ims[1].labels[0] == 7);               /* [-2, 1, 5, 20] clamped to 10 x 8 */
    spw_coco_free(ims, n);
}
END_TEST

START_TEST(test_tar_gz_shard_reads_like_plain)
{
    struct spw_source *p = open_ok("short.tar", NULL), *z = open_ok("short.tar.gz", NULL);
    ck_assert(!p->streamed[0]);
    ck_assert(z->streamed[0]);
    assert_same_samples(p, z);
    for (int64_t i = 0; i < p->n; i++)             /* offsets are the same in the decompressed stream */
        ck_assert_int_eq(p->samples[i].offset, z->samples[i].offset);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(spw_source_read(z, 0, 10, &buf, &len), SPW_ETOOBIG);
    spw_source_close(p);
    spw_source_close(z);
}
END_TEST

static void expect_items(const char *pattern, const char *const *want, int64_t n)
{
    char **items = NULL, err[512];
    int64_t count = 0;
    int rc = spw_brace_expand(pattern, 1000, &items, &count, err, sizeof err);
    ck_assert_msg(rc == 0, "%s: %s", pattern, err);
    ck_assert_int_eq(count, n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_str_eq(items[i], want[i]);
    spw_brace_free(items, count);
}

START_TEST(test_brace_expand_ranges_padding_and_lists)
{
    expect_items("s-{000..003}.tar", (const char *const[]){"s-000.tar", "s-001.tar", "s-002.tar", "s-003.tar"}, 4);
    expect_items("{8..11}", (const char *const[]){"8", "9", "10", "11"}, 4);
    expect_items("{3..1}", (const char *const[]){"3", "2", "1"}, 3);
    expect_items("{08..10}", (const char *const[]){"08", "09", "10"}, 3);
    expect_items("{a,b}-{1..2}", (const char *const[]){"a-1", "a-2", "b-1", "b-2"}, 4);
    expect_items("x{a,{b,c}d}", (const char *const[]){"xa", "xbd", "xcd"}, 3);
    expect_items("/d/*.tar", (const char *const[]){"/d/*.tar"}, 1);
    expect_items("{a}{1..x}{", (const char *const[]){"{a}{1..x}{"}, 1);     /* not groups: literal */
    expect_items("{,b}", (const char *const[]){"", "b"}, 2);
}
END_TEST

START_TEST(test_brace_expand_cap_refused_before_allocating)
{
    char **items = NULL, err[512];
    int64_t n = 0;
    ck_assert_int_eq(spw_brace_expand("s-{0..1000}", 1000, &items, &n, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "more than 1000 shards"), "%s", err);
    ck_assert_int_eq(spw_brace_expand("{0..99999999999}", SPW_BRACE_MAX_ITEMS, &items, &n, err, sizeof err),
                     SPW_ESOURCE);
    ck_assert_int_eq(spw_brace_expand("{0..9}{0..9}{0..9}", 999, &items, &n, err, sizeof err), SPW_ESOURCE);
    ck_assert_ptr_null(items);
    ck_assert_int_eq(spw_brace_expand("{0..9}{0..9}{0..9}", 1000, &items, &n, err, sizeof err), 0);
    ck_assert_int_eq(n, 1000);
    ck_assert_str_eq(items[999], "999");
    spw_brace_free(items, n);
}
END_TEST

START_TEST(test_tar_brace_pattern_reads_shards_in_order_and_names_a_missing_one)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && cp short.tar s-08.tar && cp labels.tar s-09.tar && cp short.tar s-10.tar",
             g_root);
    ck_assert_int_eq(system(cmd), 0);
    struct spw_source *s = open_ok("s-{08..10}.tar", NULL);
    ck_assert_int_eq(s->n, 9);
    ck_assert_int_eq(s->n_shards, 3);
    ck_assert(strstr(s->samples[3].path, "/s-09.tar:c.jpg"));
    ck_assert(strstr(s->samples[8].path, "/s-10.tar:k002.jpg"));
    spw_source_close(s);
    s = open_ok("{labels,short}.tar", NULL);
    ck_assert(strstr(s->samples[0].path, "/labels.tar:c.jpg"));
    ck_assert(strstr(s->samples[3].path, "/short.tar:k000.jpg"));
    spw_source_close(s);
    char err[1024];
    ck_assert_int_eq(open_tar("s-{08..11}.tar", NULL, &s, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "s-11.tar") && strstr(err, "No such file"), "%s", err);
    ck_assert_int_eq(open_tar("{s,t}-*.tar", NULL, &s, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "no tar shards match") && strstr(err, "/t-*.tar"), "%s", err);
    ck_assert_int_eq(open_tar("s-{0..100000}.tar", NULL, &s, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "more than 100000 shards"), "%s", err);
}
END_TEST

/* Every prefix of name either fails with SPW_ESOURCE and a message naming the shard, or lists a prefix of
 * the whole shard's samples, each read back with the same bytes; some prefixes list (min_listed). */
static void walk_prefixes(const char *name, const char *cut_name, int min_listed)
{
    char path[512], cut[512];
    snprintf(path, sizeof path, "%s/%s", g_root, name);
    snprintf(cut, sizeof cut, "%s/%s", g_root, cut_name);
    size_t n;
    uint8_t *whole = file_bytes(path, &n);
    struct spw_source *full = open_ok(name, NULL);
    int listed = 0;
    for (size_t len = 0; len < n; len++) {
        FILE *f = fopen(cut, "wb");
        ck_assert(f != NULL);
        ck_assert_uint_eq(fwrite(whole, 1, len, f), len);
        fclose(f);
        struct spw_source *s = NULL;
        char err[1024] = "";
        int rc = open_tar(cut_name, NULL, &s, err, sizeof err);
        if (rc != 0) {
            ck_assert_msg(rc == SPW_ESOURCE, "prefix %zu: rc %d", len, rc);
            ck_assert_msg(strstr(err, cut_name), "prefix %zu: %s", len, err);
            continue;
        }
        listed++;
        ck_assert_int_le(s->n, full->n);
        for (int64_t i = 0; i < s->n; i++) {
            ck_assert_str_eq(member_of(&s->samples[i]), member_of(&full->samples[i]));
            ck_assert_int_eq(s->samples[i].label, full->samples[i].label);
            uint8_t *a, *b;
            size_t na, nb;
            read_sample(s, i, &a, &na);
            read_sample(full, i, &b, &nb);
            ck_assert_uint_eq(na, nb);
            ck_assert(memcmp(a, b, na) == 0);
            free(a);
            free(b);
        }
        spw_source_close(s);
    }
    ck_assert_int_ge(listed, min_listed);
    spw_source_close(full);
    free(whole);
}

START_TEST(test_tar_every_prefix_fails_cleanly_or_lists_a_prefix)
{
    walk_prefixes("pax.tar", "cut.tar", 3);     /* cut after each sample's last member: no end blocks */
}
END_TEST

START_TEST(test_tar_gz_every_prefix_fails_cleanly_or_lists_a_prefix)
{
    walk_prefixes("short.tar.gz", "cut.tar.gz", 0);     /* a cut gzip stream is always truncated */
}
END_TEST

/* The source rebuilt from name's packed listing: the same samples, bytes, shards and streamed flags. */
static void assert_manifest_round_trip(const char *name)
{
    struct spw_source *a = open_ok(name, NULL), *b = NULL;
    uint8_t *packed;
    size_t len;
    char err[1024] = "", path[512];
    ck_assert_int_eq(spw_manifest_pack(a, &packed, &len), 0);
    snprintf(path, sizeof path, "%s/%s", g_root, name);
    const struct spw_source_spec ss = {.format = SPW_SOURCE_TAR_SHARDS, .path = path, .media = SPW_MEDIA_IMAGE};
    ck_assert_msg(spw_manifest_open(&ss, packed, len, a->manifest_hash, &b, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(b->manifest_hash, a->manifest_hash);
    ck_assert_int_eq(b->n_shards, a->n_shards);
    for (int i = 0; i < a->n_shards; i++)
        ck_assert_int_eq(b->streamed[i], a->streamed[i]);
    for (int64_t i = 0; i < a->n; i++) {
        ck_assert_str_eq(b->samples[i].path, a->samples[i].path);
        ck_assert_int_eq(b->samples[i].offset, a->samples[i].offset);
        ck_assert_int_eq(b->samples[i].file, a->samples[i].file);
    }
    assert_same_samples(a, b);
    free(packed);
    spw_source_close(a);
    spw_source_close(b);
}

START_TEST(test_manifest_rebuilds_the_listed_source)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd '%s' && cp short.tar m-1.tar && cp labels.tar m-2.tar", g_root);
    ck_assert_int_eq(system(cmd), 0);
    assert_manifest_round_trip("short.tar");
    assert_manifest_round_trip("short.tar.gz");
    assert_manifest_round_trip("m-{1..2}.tar");
}
END_TEST

static int open_packed(const uint8_t *p, size_t len, enum spw_source_format format, uint64_t hash, char *err,
                       size_t errlen)
{
    char path[512];
    snprintf(path, sizeof path, "%s/short.tar", g_root);
    const struct spw_source_spec ss = {.format = format, .path = path, .media = SPW_MEDIA_IMAGE};
    struct spw_source *src = NULL;
    const int rc = spw_manifest_open(&ss, p, len, hash, &src, err, errlen);
    spw_source_close(src);
    return rc;
}

START_TEST(test_manifest_refuses_cuts_changes_and_other_listings)
{
    struct spw_source *a = open_ok("short.tar", NULL);
    uint8_t *packed;
    size_t len;
    char err[1024];
    ck_assert_int_eq(spw_manifest_pack(a, &packed, &len), 0);
    for (size_t n = 0; n < len; n++)        /* every cut */
        ck_assert_msg(open_packed(packed, n, SPW_SOURCE_TAR_SHARDS, 0, err, sizeof err) == SPW_ESOURCE,
                      "a manifest cut to %zu of %zu bytes was taken", n, len);
    for (size_t i = 0; i < len; i++) {      /* every byte changed */
        packed[i] ^= 0x5a;
        ck_assert_msg(open_packed(packed, len, SPW_SOURCE_TAR_SHARDS, 0, err, sizeof err) == SPW_ESOURCE,
                      "a manifest with byte %zu of %zu changed was taken", i, len);
        packed[i] ^= 0x5a;
    }
    ck_assert_int_eq(open_packed(packed, len, SPW_SOURCE_TAR_SHARDS, a->manifest_hash ^ 1, err, sizeof err),
                     SPW_ESOURCE);
    ck_assert_msg(strstr(err, "hashes to"), "%s", err);
    ck_assert_int_eq(open_packed(packed, len, SPW_SOURCE_IMAGE_FOLDER, 0, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "another source kind"), "%s", err);
    ck_assert_int_eq(open_packed(packed, len, SPW_SOURCE_TAR_SHARDS, a->manifest_hash, err, sizeof err), 0);
    /* A frame header that claims 2 GiB unpacked is refused from the header, before anything is allocated. */
    const uint8_t huge[] = {0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0x80, 0, 0, 0, 0, 1, 0, 0};
    ck_assert_int_eq(open_packed(huge, sizeof huge, SPW_SOURCE_TAR_SHARDS, 0, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "MiB unpacked"), "%s", err);
    free(packed);
    spw_source_close(a);
    /* A shard here shorter than the one listed (another copy of the data) is refused, naming the member. */
    char cmd[512], path[512];
    snprintf(cmd, sizeof cmd, "cd '%s' && cp short.tar cut-here.tar", g_root);
    ck_assert_int_eq(system(cmd), 0);
    a = open_ok("cut-here.tar", NULL);
    ck_assert_int_eq(spw_manifest_pack(a, &packed, &len), 0);
    snprintf(path, sizeof path, "%s/cut-here.tar", g_root);
    ck_assert_int_eq(truncate(path, a->samples[a->n - 1].offset + 1), 0);
    const struct spw_source_spec ss = {.format = SPW_SOURCE_TAR_SHARDS, .path = path, .media = SPW_MEDIA_IMAGE};
    struct spw_source *b = NULL;
    ck_assert_int_eq(spw_manifest_open(&ss, packed, len, 0, &b, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, "cut-here.tar:") && strstr(err, "of a shard of"), "%s", err);
    free(packed);
    spw_source_close(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tar");
    TCase *tc = tcase_create("tar");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_tar_long_names_read_like_short_names);
    tcase_add_test(tc, test_tar_member_name_over_cap_is_an_error);
    tcase_add_test(tc, test_tar_webdataset_keys_and_json_label_key);
    tcase_add_test(tc, test_tar_cls_and_txt_labels);
    tcase_add_test(tc, test_tar_fields_list_read_and_pack);
    tcase_add_test(tc, test_fields_mask_pack_and_lies);
    tcase_add_test(tc, test_fields_boxes_read_pack_and_lies);
    tcase_add_test(tc, test_folder_fields_parallel_folder);
    tcase_add_test(tc, test_coco_annotations_refused_or_kept);
    tcase_add_test(tc, test_tar_gz_shard_reads_like_plain);
    tcase_add_test(tc, test_brace_expand_ranges_padding_and_lists);
    tcase_add_test(tc, test_brace_expand_cap_refused_before_allocating);
    tcase_add_test(tc, test_tar_brace_pattern_reads_shards_in_order_and_names_a_missing_one);
    tcase_add_test(tc, test_tar_every_prefix_fails_cleanly_or_lists_a_prefix);
    tcase_add_test(tc, test_tar_gz_every_prefix_fails_cleanly_or_lists_a_prefix);
    tcase_add_test(tc, test_manifest_rebuilds_the_listed_source);
    tcase_add_test(tc, test_manifest_refuses_cuts_changes_and_other_listings);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
