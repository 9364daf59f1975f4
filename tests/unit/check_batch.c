/* tests/unit/check_batch.c - the cap on batch.pad (pipeline/batch.c): the decision refuses one byte past 16x
 * the elements' bytes + 64 MiB and says so; a padded image batch just under the cap builds, zero-padded, and
 * one just over is refused with the message naming the batch, its padded shape, the bytes and the cap; the
 * 21.6 GB batch of two 90 KB elements is refused under an address-space limit far below it (nothing large
 * is allocated); masks padded with their images are capped too. One thread; Check forks each test. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tests/unit/check_run.h"
#include "lib/err.h"
#include "pipeline/batch.h"
#include "pipeline/fields.h"

static struct spw_pipeline_spec g_spec;
static struct spw_sample g_samples[2] = {{.path = "a/tall.png", .label = -1}, {.path = "a/wide.png", .label = -1}};
static struct spw_source g_src = {.samples = g_samples, .n = 2};

/* A spec of padded image batches of 2 without labels; with masks, a mask field "mask" (ignore_index 250). */
static void spec_init(bool masks)
{
    memset(&g_spec, 0, sizeof g_spec);
    g_spec.source.media = SPW_MEDIA_IMAGE;
    g_spec.source.no_labels = true;
    g_spec.batch.size = 2;
    g_spec.batch.pad = true;
    if (masks) {
        g_spec.source.n_fields = 1;
        snprintf(g_spec.source.fields[0].name, sizeof g_spec.source.fields[0].name, "mask");
        g_spec.source.fields[0].kind = SPW_SAMPLE_FIELD_MASK;
        g_spec.source.fields[0].ignore_index = 250;
    }
}

/* Place element idx of shape (3 dims) into f, each byte idx + 1. */
static void place(struct spw_batch_fill *f, int idx, enum spw_dtype dt, const int64_t *shape)
{
    char err[256];
    uint8_t *p = spw_batch_element_place(f, 2, idx, dt, 3, shape, NULL, NULL, err, sizeof err);
    ck_assert_msg(p != NULL, "place %d: %s", idx, err);
    memset(p, idx + 1, spw_dtype_size(dt) * (size_t)(shape[0] * shape[1] * shape[2]));
}

/* Element idx's mask field, w x h, each label idx + 1, into f. */
static void place_mask(struct spw_batch_fill *f, int idx, int w, int h)
{
    struct spw_fields *fl = calloc(1, sizeof *fl);
    ck_assert_ptr_nonnull(fl);
    fl->n = 1;
    fl->f[0].kind = SPW_SAMPLE_FIELD_MASK;
    ck_assert_int_eq(spw_image_alloc(&fl->f[0].mask, w, h, 3), 0);
    memset(fl->f[0].mask.data, idx + 1, fl->f[0].mask.stride * (size_t)h);
    ck_assert_int_eq(spw_batch_fill_fields(f, 2, idx, fl), 0);
}

/* Build batch 3 of epoch 1 from both positions of f. */
static int build(struct spw_batch_fill *f, struct spw_batch **out, char *err, size_t errlen)
{
    static const int64_t samples[2] = {0, 1};
    static const bool ok[2] = {true, true};
    return spw_batch_build(&g_spec, &g_src, 1, 3, 2, samples, ok, f, out, err, errlen);
}

START_TEST(test_batch_pad_check_refuses_one_byte_past_the_cap)
{
    char err[512] = "";
    const size_t cap = 1000 * 16 + ((size_t)64 << 20);      /* 67124864 */
    int64_t at[2] = {1, (int64_t)cap}, past[2] = {1, (int64_t)cap + 1};
    ck_assert_int_eq(spw_batch_pad_check(SPW_DTYPE_U8, 2, at, 1000, err, sizeof err), 0);
    ck_assert_str_eq(err, "");
    ck_assert_int_eq(spw_batch_pad_check(SPW_DTYPE_U8, 2, past, 1000, err, sizeof err), SPW_ETOOBIG);
    ck_assert_msg(strstr(err, "makes [1, 67124865] uint8, 67124865 bytes, from 1000 bytes of elements: past the "
                              "cap of 16 x those + 64 MiB (67124864 bytes); resize or crop the images to a common "
                              "size first") && strstr(err, "or use smaller batches"), "%s", err);
    /* float32 counts 4 bytes an element: a quarter of the cap in floats fits, one more does not */
    at[1] = (int64_t)cap / 4;
    past[1] = (int64_t)cap / 4 + 1;
    ck_assert_int_eq(spw_batch_pad_check(SPW_DTYPE_F32, 2, at, 1000, err, sizeof err), 0);
    ck_assert_int_eq(spw_batch_pad_check(SPW_DTYPE_F32, 2, past, 1000, err, sizeof err), SPW_ETOOBIG);
    /* a shape whose bytes overflow size_t is past any cap, and says so */
    const int64_t huge[4] = {2, (int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31};
    ck_assert_int_eq(spw_batch_pad_check(SPW_DTYPE_F32, 4, huge, SIZE_MAX / 2, err, sizeof err), SPW_ETOOBIG);
    ck_assert_msg(strstr(err, "over 2^64 bytes") != NULL, "%s", err);
    /* elements so large that the cap saturates: the cap is no smaller than their bytes */
    const int64_t big[2] = {2, (int64_t)1 << 40};
    ck_assert_int_eq(spw_batch_pad_check(SPW_DTYPE_U8, 2, big, SIZE_MAX / 8, err, sizeof err), 0);
}
END_TEST

/* [1, n, 1] and [1, 1, n] uint8 pad to [2, 1, n, n]: elements 2n bytes, padded 2n^2 against 32n + 64 MiB,
 * which n = 5800 meets (67280000 <= 67294464) and n = 5801 does not (67303202 > 67294496). */
START_TEST(test_batch_pad_images_just_under_the_cap_build_padded)
{
    spec_init(false);
    struct spw_batch_fill f = {.pad = spw_fill_pad_of(&g_spec)};
    ck_assert_int_eq(f.pad, SPW_FILL_PAD_ALL);
    const int64_t tall[3] = {1, 5800, 1}, wide[3] = {1, 1, 5800};
    place(&f, 0, SPW_DTYPE_U8, tall);
    place(&f, 1, SPW_DTYPE_U8, wide);
    struct spw_batch *b = NULL;
    char err[512] = "";
    ck_assert_msg(build(&f, &b, err, sizeof err) == 0, "%s", err);
    const struct spw_tensor *d = &b->tensors[0];
    ck_assert_int_eq(d->ndim, 4);
    ck_assert(d->shape[0] == 2 && d->shape[1] == 1 && d->shape[2] == 5800 && d->shape[3] == 5800);
    const uint8_t *px = d->data;
    const size_t plane = (size_t)5800 * 5800;
    /* element 0: its column, zeros right of it; element 1: its row, zeros below it */
    ck_assert(px[0] == 1 && px[5800] == 1 && px[plane - 5800] == 1 && px[1] == 0 && px[plane - 1] == 0);
    ck_assert(px[plane] == 2 && px[plane + 5799] == 2 && px[plane + 5800] == 0 && px[2 * plane - 1] == 0);
    const int s = spw_batch_find(b, "shapes");
    ck_assert_int_ge(s, 0);
    const int64_t *shapes = b->tensors[s].data;
    ck_assert(shapes[0] == 1 && shapes[1] == 5800 && shapes[2] == 1 && shapes[3] == 1 && shapes[4] == 1 &&
              shapes[5] == 5800);
    spw_batch_free(b);
    spw_batch_fill_clear(&f);
}
END_TEST

START_TEST(test_batch_pad_images_just_over_the_cap_are_refused_naming_the_batch)
{
    spec_init(false);
    struct spw_batch_fill f = {.pad = spw_fill_pad_of(&g_spec)};
    const int64_t tall[3] = {1, 5801, 1}, wide[3] = {1, 1, 5801};
    place(&f, 0, SPW_DTYPE_U8, tall);
    place(&f, 1, SPW_DTYPE_U8, wide);
    struct spw_batch *b = NULL;
    char err[512] = "";
    ck_assert_int_eq(build(&f, &b, err, sizeof err), SPW_ETOOBIG);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(err, "batch 3 of epoch 1: batch.pad: padding the elements to the largest size in each "
                              "dimension makes [2, 1, 5801, 5801] uint8, 67303202 bytes, from 11602 bytes of "
                              "elements: past the cap of 16 x those + 64 MiB (67294496 bytes); resize or crop") ==
                      err, "%s", err);
    ck_assert(!spw_batch_fill_started(&f));             /* the rows are freed */
    spw_batch_fill_clear(&f);
}
END_TEST

/* The case: [3, 30000, 1] and [3, 1, 30000] float32 (90 KB each) would pad to 21.6 GB. Under an
 * address-space limit 1 GiB above what the process maps now, a build that tried to allocate the batch would
 * fail with -ENOMEM; the cap refuses it first. (Not under the sanitizers, which map terabytes of shadow.) */
START_TEST(test_batch_pad_refuses_the_huge_batch_without_allocating_it)
{
    spec_init(false);
    struct spw_batch_fill f = {.pad = spw_fill_pad_of(&g_spec)};
    const int64_t tall[3] = {3, 30000, 1}, wide[3] = {3, 1, 30000};
    place(&f, 0, SPW_DTYPE_F32, tall);
    place(&f, 1, SPW_DTYPE_F32, wide);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    FILE *statm = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    ck_assert(statm && fscanf(statm, "%lu", &pages) == 1);
    fclose(statm);
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_AS, &old), 0);
    lim = old;
    lim.rlim_cur = pages * 4096 + ((rlim_t)1 << 30);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
    void *probe = malloc((size_t)2 << 30);              /* the limit holds: 2 GiB cannot be had */
    ck_assert_ptr_null(probe);
#endif
    struct spw_batch *b = NULL;
    char err[512] = "";
    const int rc = build(&f, &b, err, sizeof err);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
#endif
    ck_assert_msg(rc == SPW_ETOOBIG, "rc %d: %s", rc, err);
    ck_assert_msg(strstr(err, "makes [2, 3, 30000, 30000] float32, 21600000000 bytes, from 720000 bytes of "
                              "elements: past the cap of 16 x those + 64 MiB (78628864 bytes)") != NULL, "%s", err);
    spw_batch_fill_clear(&f);
}
END_TEST

/* Masks are padded with their images (to the largest, with ignore_index) and may differ from them in size:
 * small images with masks of 5801x1 and 1x5801 are refused by the masks' cap, 5800 pass, padded with 250. */
START_TEST(test_batch_pad_masks_past_the_cap_are_refused)
{
    spec_init(true);
    const int64_t small[3] = {1, 2, 2};
    for (int n = 5800; n <= 5801; n++) {
        struct spw_batch_fill f = {.pad = spw_fill_pad_of(&g_spec)};
        place(&f, 0, SPW_DTYPE_U8, small);
        place(&f, 1, SPW_DTYPE_U8, small);
        place_mask(&f, 0, 1, n);
        place_mask(&f, 1, n, 1);
        struct spw_batch *b = NULL;
        char err[512] = "";
        const int rc = build(&f, &b, err, sizeof err);
        if (n == 5800) {
            ck_assert_msg(rc == 0, "%s", err);
            const struct spw_tensor *m = &b->tensors[spw_batch_find(b, "mask")];
            const uint8_t *px = m->data;
            ck_assert(m->ndim == 3 && m->shape[1] == 5800 && m->shape[2] == 5800);
            ck_assert(px[0] == 1 && px[5800] == 1 && px[1] == 250 && px[(size_t)5800 * 5800] == 2);
            spw_batch_free(b);
        } else {
            ck_assert_int_eq(rc, SPW_ETOOBIG);
            ck_assert_msg(strstr(err, "batch 3 of epoch 1: field mask's masks: batch.pad: padding the elements to "
                                      "the largest size in each dimension makes [2, 5801, 5801] uint8, 67303202 "
                                      "bytes, from 11602 bytes of elements") == err, "%s", err);
        }
        spw_batch_fill_clear(&f);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("batch");
    TCase *tc = tcase_create("pad_cap");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_batch_pad_check_refuses_one_byte_past_the_cap);
    tcase_add_test(tc, test_batch_pad_images_just_under_the_cap_build_padded);
    tcase_add_test(tc, test_batch_pad_images_just_over_the_cap_are_refused_naming_the_batch);
    tcase_add_test(tc, test_batch_pad_refuses_the_huge_batch_without_allocating_it);
    tcase_add_test(tc, test_batch_pad_masks_past_the_cap_are_refused);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
