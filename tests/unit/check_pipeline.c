/* tests/unit/check_pipeline.c - pipeline/: epoch order (a bijection per epoch), sources (image folder labels,
 * WebDataset tar shards), fusion groups, and the executor (same bytes for any thread count, skip and fail
 * policies for corrupt samples, epochs and partial batches), one element through spw_produce and a
 * micro-batch through the CPU backend, the size-sorted micro-batch queue, and a profile's time budget.
 * Datasets are built in a temp dir from the committed fixtures. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "lib/err.h"
#include "lib/rng.h"
#include "pipeline/backend.h"
#include "pipeline/element.h"
#include "pipeline/executor.h"
#include "pipeline/mb_queue.h"
#include "pipeline/fusion.h"
#include "pipeline/order.h"
#include "pipeline/profile.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "pipeline/views.h"
#include "pipeline/audio.h"
#include "pipeline/op_registry.h"

#define FIX "tests/data/fixtures/"

static char g_root[256];

static void copy_file(const char *from, const char *to)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    ck_assert_int_eq(system(cmd), 0);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    if (n)
        ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* root/cat: 5 images, root/dog: 4 images (+ a README that is not a sample). */
static void make_folder(const char *root)
{
    char p[512];
    const char *imgs[] = {"rgb420.jpg", "rgb444.jpg", "gray.jpg", "progressive.jpg", "cmyk.jpg"};
    mkdir(root, 0755);
    snprintf(p, sizeof p, "%s/cat", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/dog", root);
    mkdir(p, 0755);
    for (int i = 0; i < 5; i++) {
        char from[256];
        snprintf(from, sizeof from, FIX "%s", imgs[i]);
        snprintf(p, sizeof p, "%s/cat/c%d.jpg", root, i);
        copy_file(from, p);
        if (i < 4) {
            snprintf(p, sizeof p, "%s/dog/d%d.JPEG", root, i);
            copy_file(from, p);
        }
    }
    snprintf(p, sizeof p, "%s/dog/README.txt", root);
    write_bytes(p, "hi", 2);
}

static struct spw_pipeline_spec *spec_of(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static struct spw_pipeline_spec *spec_of(const char *fmt, ...)
{
    char json[4096], err[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(json, sizeof json, fmt, ap);
    va_end(ap);
    struct spw_pipeline_spec *s = NULL;
    int rc = spw_spec_parse_json(json, &s, err, sizeof err);
    ck_assert_msg(rc == 0, "spec: %s", err);
    return s;
}

static void setup(void)
{
    snprintf(g_root, sizeof g_root, "/tmp/spw-pipe-XXXXXX");
    ck_assert(mkdtemp(g_root) != NULL);
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", g_root);
}

START_TEST(test_order_is_bijection_per_epoch)
{
    const int64_t sizes[] = {1, 2, 3, 7, 64, 1000, 4097};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int64_t n = sizes[k];
        struct spw_order o;
        spw_order_init(&o, n, true, 42);
        char *seen = calloc((size_t)n, 1);
        for (int64_t pos = 0; pos < n; pos++) {
            int64_t v = spw_order_at(&o, 3, pos);
            ck_assert(v >= 0 && v < n);
            ck_assert_msg(!seen[v], "n=%lld: %lld twice", (long long)n, (long long)v);
            seen[v] = 1;
        }
        free(seen);
    }
}
END_TEST

START_TEST(test_order_epochs_differ_and_repeat)
{
    struct spw_order o;
    spw_order_init(&o, 1000, true, 42);
    int same01 = 0, same00 = 0;
    for (int64_t pos = 0; pos < 1000; pos++) {
        same01 += spw_order_at(&o, 0, pos) == spw_order_at(&o, 1, pos);
        same00 += spw_order_at(&o, 0, pos) == spw_order_at(&o, 0, pos);
    }
    ck_assert_int_eq(same00, 1000);
    ck_assert_int_lt(same01, 20);
    struct spw_order id;
    spw_order_init(&id, 1000, false, 42);
    for (int64_t pos = 0; pos < 1000; pos++)
        ck_assert_int_eq(spw_order_at(&id, 5, pos), pos);
}
END_TEST

START_TEST(test_source_image_folder_labels_sorted)
{
    make_folder(g_root);
    struct spw_source_spec ss = {.format = SPW_SOURCE_IMAGE_FOLDER, .path = g_root};
    struct spw_source *src;
    char err[512];
    ck_assert_int_eq(spw_source_open(&ss, &src, err, sizeof err), 0);
    ck_assert_int_eq(src->n, 9);
    ck_assert_int_eq(src->ignored, 1);
    ck_assert_int_eq(src->n_classes, 2);
    ck_assert_str_eq(src->classes[0], "cat");
    ck_assert_int_eq(src->samples[0].label, 0);
    ck_assert_int_eq(src->samples[8].label, 1);
    ck_assert(strstr(src->samples[5].path, "dog/d0.JPEG") != NULL);
    uint64_t h = src->manifest_hash;
    spw_source_close(src);
    ck_assert_int_eq(spw_source_open(&ss, &src, err, sizeof err), 0);
    ck_assert_uint_eq(src->manifest_hash, h);
    spw_source_close(src);
}
END_TEST

START_TEST(test_source_missing_dir_is_clear_error)
{
    struct spw_source_spec ss = {.format = SPW_SOURCE_IMAGE_FOLDER, .path = "/nonexistent/spw"};
    struct spw_source *src;
    char err[512];
    ck_assert_int_eq(spw_source_open(&ss, &src, err, sizeof err), SPW_ESOURCE);
    ck_assert(strstr(err, "/nonexistent/spw") != NULL);
}
END_TEST

START_TEST(test_source_tar_shards_pairs_jpg_and_cls)
{
    char cmd[1024], p[512];
    snprintf(p, sizeof p, "%s/w", g_root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/w/a.jpg", g_root);
    copy_file(FIX "rgb420.jpg", p);
    snprintf(p, sizeof p, "%s/w/a.cls", g_root);
    write_bytes(p, "3\n", 2);
    snprintf(p, sizeof p, "%s/w/b.jpg", g_root);
    copy_file(FIX "gray.jpg", p);
    snprintf(p, sizeof p, "%s/w/b.cls", g_root);
    write_bytes(p, "7", 1);
    snprintf(p, sizeof p, "%s/w/c.jpg", g_root);                 /* no .cls: not a sample */
    copy_file(FIX "gray.jpg", p);
    snprintf(cmd, sizeof cmd, "cd '%s/w' && tar cf ../s-0.tar a.jpg a.cls b.cls b.jpg c.jpg && tar cf ../s-1.tar a.cls a.jpg",
             g_root);
    ck_assert_int_eq(system(cmd), 0);
    char glob[512];
    snprintf(glob, sizeof glob, "%s/s-*.tar", g_root);
    struct spw_source_spec ss = {.format = SPW_SOURCE_TAR_SHARDS, .path = glob};
    struct spw_source *src;
    char err[512];
    ck_assert_int_eq(spw_source_open(&ss, &src, err, sizeof err), 0);
    ck_assert_int_eq(src->n, 3);
    ck_assert_int_eq(src->samples[0].label, 3);
    ck_assert_int_eq(src->samples[1].label, 7);
    ck_assert_int_eq(src->samples[2].label, 3);
    ck_assert_int_eq(src->ignored, 1);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(spw_source_read(src, 1, 1 << 20, &buf, &len), 0);
    ck_assert_uint_gt(len, 100);
    ck_assert(buf[0] == 0xFF && buf[1] == 0xD8);
    free(buf);
    ck_assert_int_eq(spw_source_read(src, 1, 10, &buf, &len), SPW_ETOOBIG);
    spw_source_close(src);
}
END_TEST

START_TEST(test_fusion_groups_train_pipeline)
{
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"x\"},\"ops\":[{\"op\":\"decode_jpeg\"},{\"op\":\"random_resized_crop\",\"size\":32},"
        "{\"op\":\"random_horizontal_flip\"},{\"op\":\"rand_augment\"},{\"op\":\"invert\"},"
        "{\"op\":\"normalize\",\"mean\":[0.5,0.5,0.5],\"std\":[0.5,0.5,0.5]},{\"op\":\"random_erasing\"}],"
        "\"batch\":{\"size\":2}}");
    struct spw_group g[16];
    ck_assert_int_eq(spw_fusion_groups(s, g), 3);
    ck_assert(g[0].kind == SPW_GROUP_DECODE && g[0].first == 0 && g[0].count == 3);
    ck_assert(g[1].kind == SPW_GROUP_AUGMENT && g[1].first == 3 && g[1].count == 2);
    ck_assert(g[2].kind == SPW_GROUP_TENSOR && g[2].first == 5 && g[2].count == 2);
    spw_spec_free(s);
}
END_TEST

/* spw_element_run_rows: the last normalize read from a message's parts (rows split across parts, parts of one
 * byte, an offset into the first) writes the same bytes as the run on the gathered image, into its own tensor
 * and through a destination; parts that end early are refused; only a lone last normalize qualifies. */
static void *place_into(void *opaque, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    (void)dt, (void)ndim, (void)shape;
    return opaque;
}

START_TEST(test_rows_from_parts_same_bytes)
{
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"x\"},\"ops\":[{\"op\":\"decode_jpeg\"},{\"op\":\"invert\"},"
        "{\"op\":\"normalize\",\"mean\":[0.485,0.456,0.406],\"std\":[0.229,0.224,0.225]}],\"batch\":{\"size\":2}}");
    struct spw_element_ctx ctx;
    ck_assert_int_eq(spw_element_ctx_init(&ctx, s), 0);
    ck_assert_int_eq(ctx.n_groups, 3);     /* decode | invert | normalize */
    ck_assert(spw_element_rows_group(&ctx, 2) && !spw_element_rows_group(&ctx, 1));
    const int w = 37, h = 23;
    const size_t img_bytes = (size_t)w * h * 3, pre = 11;
    uint8_t *msg = malloc(pre + img_bytes + 5);
    struct spw_rng rng;
    spw_rng_init(&rng, 9, 0, 0, 0);
    for (size_t k = 0; k < pre + img_bytes + 5; k++)
        msg[k] = (uint8_t)spw_rng_u32(&rng);
    /* the reference: the gathered image through spw_element_run */
    struct spw_value ref = {0};
    ck_assert_int_eq(spw_image_alloc(&ref.img, w, h, 3), 0);
    memcpy(ref.img.data, msg + pre, img_bytes);
    char err[256];
    ck_assert_int_eq(spw_element_run(&ctx, 2, 3, 0, 0, NULL, 0, &ref, NULL, NULL, err, sizeof err), 0);
    ck_assert(ref.is_tensor && ref.t.nbytes == img_bytes * 4);
    for (int split = 0; split < 3; split++) {       /* parts of random sizes; of one byte; one part */
        struct iovec parts[4096];
        int n = 0;
        for (size_t at = 0; at < pre + img_bytes + 5; n++) {
            size_t len = split == 0 ? 1 + spw_rng_u32(&rng) % 300 : split == 1 ? 1 : pre + img_bytes + 5;
            if (at + len > pre + img_bytes + 5)
                len = pre + img_bytes + 5 - at;
            ck_assert_int_lt(n, 4096);
            parts[n] = (struct iovec){msg + at, len};
            at += len;
        }
        struct spw_value out = {0};
        ck_assert_int_eq(spw_element_run_rows(&ctx, 2, w, h, parts, n, pre, &out, NULL, err, sizeof err), 0);
        ck_assert(out.is_tensor && !out.placed && out.t.nbytes == ref.t.nbytes);
        ck_assert_int_eq(memcmp(out.t.data, ref.t.data, ref.t.nbytes), 0);
        spw_value_free(&out);
        uint8_t *slot = malloc(ref.t.nbytes);
        struct spw_element_dest dest = {.place = place_into, .opaque = slot};
        ck_assert_int_eq(spw_element_run_rows(&ctx, 2, w, h, parts, n, pre, &out, &dest, err, sizeof err), 0);
        ck_assert(out.placed);
        ck_assert_int_eq(memcmp(slot, ref.t.data, ref.t.nbytes), 0);
        spw_value_free(&out);
        free(slot);
        /* the parts end one byte before the image does */
        struct iovec cut = {msg, pre + img_bytes - 1};
        ck_assert_int_eq(spw_element_run_rows(&ctx, 2, w, h, &cut, 1, pre, &out, NULL, err, sizeof err), -EINVAL);
        ck_assert_msg(strstr(err, "does not fit") != NULL, "%s", err);
        ck_assert(!out.is_tensor && out.t.data == NULL);
    }
    spw_value_free(&ref);
    free(msg);
    spw_element_ctx_destroy(&ctx);
    spw_spec_free(s);
    s = spec_of("{\"source\":{\"format\":\"image_folder\",\"path\":\"x\"},\"ops\":[{\"op\":\"decode_jpeg\"},{\"op\":\"invert\"},"
                "{\"op\":\"normalize\",\"mean\":[0.5,0.5,0.5],\"std\":[0.5,0.5,0.5]},{\"op\":\"random_erasing\"}],"
                "\"batch\":{\"size\":2}}");
    ck_assert_int_eq(spw_element_ctx_init(&ctx, s), 0);
    ck_assert(!spw_element_rows_group(&ctx, 2));     /* an op after normalize: the gathered path */
    spw_element_ctx_destroy(&ctx);
    spw_spec_free(s);
}
END_TEST

/* Run a pipeline to the end; returns all batch bytes concatenated (labels included) and counts. */
static uint8_t *run_all(const struct spw_pipeline_spec *s, int threads, size_t *bytes, int64_t *batches,
                        int64_t *elements, int *rc_out)
{
    struct spw_source *src;
    char err[512];
    ck_assert_int_eq(spw_source_open(&s->source, &src, err, sizeof err), 0);
    struct spw_executor *ex;
    struct spw_executor_opts o = {.threads = threads};
    ck_assert_int_eq(spw_executor_create(s, src, &o, &ex, err, sizeof err), 0);
    uint8_t *all = NULL;
    size_t n = 0;
    struct spw_batch *b;
    int rc;
    *batches = *elements = 0;
    while ((rc = spw_executor_next(ex, &b)) == 0) {
        for (int t = 0; t < b->n_tensors; t++) {
            all = realloc(all, n + b->tensors[t].nbytes + 16);
            memcpy(all + n, b->tensors[t].data, b->tensors[t].nbytes);
            n += b->tensors[t].nbytes;
        }
        (*batches)++;
        *elements += b->n;
        spw_executor_release(ex, b);
    }
    *rc_out = rc;
    spw_executor_destroy(ex);
    spw_source_close(src);
    *bytes = n;
    return all;
}

START_TEST(test_executor_same_bytes_any_thread_count)
{
    make_folder(g_root);
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"seed\":3,\"epochs\":2},\"ops\":[{\"op\":\"decode_jpeg\"},"
        "{\"op\":\"random_resized_crop\",\"size\":[24,32]},{\"op\":\"random_horizontal_flip\"},"
        "{\"op\":\"normalize\",\"mean\":[0.5,0.4,0.3],\"std\":[0.2,0.2,0.2]}],\"batch\":{\"size\":4}}",
        g_root);
    size_t n1, n3;
    int64_t b1, e1, b3, e3;
    int rc;
    uint8_t *a = run_all(s, 1, &n1, &b1, &e1, &rc);
    ck_assert_int_eq(rc, SPW_ECLOSED);
    uint8_t *c = run_all(s, 3, &n3, &b3, &e3, &rc);
    ck_assert_int_eq(b1, 6);                     /* 9 samples, batch 4, keep remainder: 3 per epoch */
    ck_assert_int_eq(e1, 18);
    ck_assert_int_eq(b3, b1);
    ck_assert_uint_eq(n1, n3);
    ck_assert(memcmp(a, c, n1) == 0);
    free(a);
    free(c);
    spw_spec_free(s);
}
END_TEST

/* The first batch of a pipeline, in a copy the caller frees (spw_batch_free). */
static struct spw_batch *first_batch(const struct spw_pipeline_spec *s)
{
    struct spw_source *src;
    char err[512];
    ck_assert_int_eq(spw_source_open(&s->source, &src, err, sizeof err), 0);
    struct spw_executor *ex;
    struct spw_executor_opts o = {.threads = 2};
    ck_assert_int_eq(spw_executor_create(s, src, &o, &ex, err, sizeof err), 0);
    struct spw_batch *b = NULL, *copy = calloc(1, sizeof *copy);
    ck_assert_int_eq(spw_executor_next(ex, &b), 0);
    *copy = *b;
    copy->data_capacity = 0;
    copy->keys = NULL;
    for (int t = 0; t < b->n_tensors; t++) {
        copy->tensors[t].data = malloc(b->tensors[t].nbytes);
        memcpy(copy->tensors[t].data, b->tensors[t].data, b->tensors[t].nbytes);
    }
    spw_executor_release(ex, b);
    spw_executor_destroy(ex);
    spw_source_close(src);
    return copy;
}

#define VIEWS_SOURCE "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"seed\":3,\"epochs\":2}"

/* Views: a batch carries one tensor per view instance, in order, with each view's dtype and shape, then the
 * labels; each repeat draws anew; a view without random ops equals its ops written inline after the prefix;
 * and the bytes are the same for any thread count. */
START_TEST(test_executor_views)
{
    make_folder(g_root);
    struct spw_pipeline_spec *s = spec_of(
        VIEWS_SOURCE ",\"ops\":[{\"op\":\"decode_jpeg\"}],\"views\":["
        "{\"repeat\":2,\"ops\":[{\"op\":\"random_resized_crop\",\"size\":[24,32]},{\"op\":\"random_horizontal_flip\"},"
        "{\"op\":\"random_apply\",\"p\":0.5,\"ops\":[{\"op\":\"invert\"}]},"
        "{\"op\":\"normalize\",\"mean\":[0.5,0.4,0.3],\"std\":[0.2,0.2,0.2]}]},"
        "{\"ops\":[{\"op\":\"center_crop\",\"size\":16},{\"op\":\"to_tensor\"}]},"
        "{\"ops\":[{\"op\":\"resize\",\"size\":[8,8]}]}],\"batch\":{\"size\":4}}", g_root);
    size_t n1, n3;
    int64_t b1, e1, b3, e3;
    int rc;
    uint8_t *a = run_all(s, 1, &n1, &b1, &e1, &rc);
    ck_assert_int_eq(rc, SPW_ECLOSED);
    uint8_t *c = run_all(s, 3, &n3, &b3, &e3, &rc);
    ck_assert_int_eq(b1, 6);
    ck_assert_int_eq(e1, 18);
    ck_assert_uint_eq(n1, n3);
    ck_assert(memcmp(a, c, n1) == 0);
    free(a);
    free(c);

    struct spw_batch *b = first_batch(s);
    ck_assert_int_eq(b->n_views, 4);
    ck_assert_int_eq(b->n_tensors, 5);
    const int64_t want[4][4] = {{4, 3, 24, 32}, {4, 3, 24, 32}, {4, 3, 16, 16}, {4, 8, 8, 3}};
    for (int t = 0; t < 4; t++) {
        ck_assert_int_eq(b->tensors[t].dtype, t < 3 ? SPW_DTYPE_F32 : SPW_DTYPE_U8);
        ck_assert_int_eq(b->tensors[t].ndim, 4);
        for (int d = 0; d < 4; d++)
            ck_assert_int_eq(b->tensors[t].shape[d], want[t][d]);
    }
    ck_assert_int_eq(b->tensors[4].dtype, SPW_DTYPE_I64);
    ck_assert_int_eq(b->tensors[4].shape[0], 4);
    ck_assert_str_eq(b->names[0], "view0");
    ck_assert_str_eq(b->names[3], "view3");
    ck_assert_str_eq(b->names[4], "labels");
    ck_assert_int_eq(spw_batch_find(b, "labels"), 4);
    ck_assert_int_eq(spw_batch_find(b, "data"), -1);
    ck_assert(memcmp(b->tensors[0].data, b->tensors[1].data, b->tensors[0].nbytes) != 0);    /* own draws */
    /* the deterministic views against the same ops inline */
    struct spw_pipeline_spec *inl = spec_of(
        VIEWS_SOURCE ",\"ops\":[{\"op\":\"decode_jpeg\"},{\"op\":\"center_crop\",\"size\":16},{\"op\":\"to_tensor\"}],"
        "\"batch\":{\"size\":4}}", g_root);
    struct spw_batch *ib = first_batch(inl);
    ck_assert_int_eq(ib->n_views, 0);
    ck_assert_uint_eq(ib->tensors[0].nbytes, b->tensors[2].nbytes);
    ck_assert(memcmp(ib->tensors[0].data, b->tensors[2].data, ib->tensors[0].nbytes) == 0);
    ck_assert(memcmp(ib->tensors[1].data, b->tensors[4].data, ib->tensors[1].nbytes) == 0);   /* labels */
    spw_batch_free(ib);
    spw_spec_free(inl);
    /* two inverts keep this resize out of the decode's group, where it would decode at a DCT scale: a view's
     * ops run on the whole decoded image, as torchvision's do */
    inl = spec_of(VIEWS_SOURCE ",\"ops\":[{\"op\":\"decode_jpeg\"},{\"op\":\"invert\"},{\"op\":\"invert\"},"
                  "{\"op\":\"resize\",\"size\":[8,8]}],\"batch\":{\"size\":4}}", g_root);
    ib = first_batch(inl);
    ck_assert_uint_eq(ib->tensors[0].nbytes, b->tensors[3].nbytes);
    ck_assert(memcmp(ib->tensors[0].data, b->tensors[3].data, ib->tensors[0].nbytes) == 0);
    spw_batch_free(ib);
    spw_spec_free(inl);
    spw_batch_free(b);
    spw_spec_free(s);
}
END_TEST

/* Packed elements that do not split: a batch whose instances' shapes differ between elements (a view with
 * no fixed size) is refused with a message, not split wrong. */
START_TEST(test_views_unpack_refuses_what_does_not_split)
{
    make_folder(g_root);
    struct spw_pipeline_spec *s = spec_of(
        VIEWS_SOURCE ",\"ops\":[{\"op\":\"decode_jpeg\"}],\"views\":[{\"repeat\":2,\"ops\":[{\"op\":\"invert\"}]}],"
        "\"batch\":{\"size\":4}}", g_root);
    uint8_t packed[2][8 + 2 * 24 + 2 * 12];
    struct spw_tensor data = {.dtype = SPW_DTYPE_U8, .ndim = 2, .shape = {2, sizeof packed[0]},
                              .nbytes = sizeof packed, .data = packed};
    for (int k = 0; k < 2; k++) {       /* two uint8 instances: [2, 2, 3] and [1, 4, 3] (swapped in element 1) */
        uint32_t head[14] = {0x57565053u, 2, 0, 3, 2, 2, 3, 0, 0, 3, 1, 4, 3, 0};
        if (k) {
            head[4] = 1, head[5] = 4, head[10] = 2, head[11] = 2;
        }
        memcpy(packed[k], head, sizeof head);
        memset(packed[k] + sizeof head, k + 1, sizeof packed[k] - sizeof head);
    }
    struct spw_tensor out[SPW_VIEWS_MAX_INSTANCES];
    char err[160] = "";
    ck_assert_int_eq(spw_views_unpack(s, &data, 1, out, err, sizeof err), 0);     /* element 0 alone splits */
    ck_assert_int_eq(out[0].shape[1], 2);
    ck_assert_int_eq(out[1].shape[1], 1);
    spw_tensor_free(&out[0]), spw_tensor_free(&out[1]);
    ck_assert_int_eq(spw_views_unpack(s, &data, 2, out, err, sizeof err), -EINVAL);
    ck_assert_str_eq(err, "views: elements of one batch differ in their instances' shapes (end each view with a "
                          "crop or a fixed-size resize)");
    ((uint32_t *)packed[0])[1] = 3;     /* a count the spec does not have */
    ck_assert_int_eq(spw_views_unpack(s, &data, 1, out, err, sizeof err), -EINVAL);
    ck_assert_str_eq(err, "views: an element that is not a packed one of 2 instances");
    ((uint32_t *)packed[0])[1] = 2;
    ((uint32_t *)packed[0])[4] = 3;     /* sizes that do not add up to the element's */
    ck_assert_int_eq(spw_views_unpack(s, &data, 1, out, err, sizeof err), -EINVAL);
    ck_assert_str_eq(err, "views: instances of 86 bytes in a 80-byte element");
    spw_spec_free(s);
}
END_TEST

/* amplitude_to_db on a spectrogram whose blocks hold what the vectorised log cannot take (inf, NaN, zero,
 * values under amin) beside ordinary ones: each value 10 log10(max(x, 1e-10)) within 2 float ulps of log10f's
 * (the fast ln is within 0.94 ulp), inf stays inf, NaN and 0 become amin's -100 dB. */
START_TEST(test_amplitude_to_db_odd_values)
{
    struct spw_pipeline_spec *s = spec_of("{\"source\":{\"format\":\"wav_folder\",\"path\":\"/x\"},\"ops\":["
                                          "{\"op\":\"decode_wav\"},{\"op\":\"stft\",\"n_fft\":64},"
                                          "{\"op\":\"amplitude_to_db\"}],\"batch\":{\"size\":1}}");
    enum { ROWS = 3, FRAMES = 100 };
    struct spw_value v = {.is_tensor = true};
    const int64_t shape[2] = {ROWS, FRAMES};
    ck_assert_int_eq(spw_tensor_alloc(&v.t, SPW_DTYPE_F32, 2, shape), 0);
    float *x = v.t.data, in[ROWS * FRAMES];
    for (int k = 0; k < ROWS * FRAMES; k++)
        x[k] = (float)(k + 1) * 37.25f;
    x[5] = INFINITY, x[70] = NAN, x[130] = 0.0f, x[131] = 1e-12f, x[200] = 1e-10f, x[260] = 3e38f;
    memcpy(in, x, sizeof in);
    char err[256] = "";
    struct spw_op_call c = {.op = &s->ops[2], .index = 2, .err = err, .errlen = sizeof err};
    ck_assert_int_eq(spw_audio_op_log_scale(&c, &v), 0);
    for (int k = 0; k < ROWS * FRAMES; k++) {
        const float want = 10.0f * log10f(in[k] > 1e-10f ? in[k] : 1e-10f);
        if (isinf(want))
            ck_assert(isinf(x[k]) && x[k] > 0);
        else
            ck_assert_msg(fabsf(x[k] - want) <= 2 * fabsf(want) * FLT_EPSILON + 1e-6f, "x[%d]: %g, log10f: %g", k,
                          (double)x[k], (double)want);
    }
    ck_assert_float_eq(x[70], -100.0f);
    ck_assert_float_eq(x[130], -100.0f);
    spw_value_free(&v);
    spw_spec_free(s);
}
END_TEST

START_TEST(test_executor_drop_remainder)
{
    make_folder(g_root);
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"shuffle\":false},\"ops\":[{\"op\":\"decode_jpeg\"},"
        "{\"op\":\"center_crop\",\"size\":16}],\"batch\":{\"size\":4,\"drop_remainder\":true}}", g_root);
    size_t n;
    int64_t b, e;
    int rc;
    free(run_all(s, 2, &n, &b, &e, &rc));
    ck_assert_int_eq(b, 2);
    ck_assert_int_eq(e, 8);
    ck_assert_uint_eq(n, 8 * 16 * 16 * 3 + 8 * 8);
    spw_spec_free(s);
}
END_TEST

/* A profile measures the elements asked for; with a budget spent, at least SPW_PROFILE_MIN_SAMPLES per thread
 * and no more (each element here, resized to 1536x1536, takes milliseconds: over a 1 ms budget at once). */
START_TEST(test_profile_budget_bounds_a_slow_pipeline)
{
    make_folder(g_root);
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"shuffle\":false},\"ops\":[{\"op\":\"decode_jpeg\"},"
        "{\"op\":\"resize\",\"size\":[1536,1536]}],\"batch\":{\"size\":4}}", g_root);
    struct spw_source *src;
    char err[256];
    ck_assert_int_eq(spw_source_open(&s->source, &src, err, sizeof err), 0);
    struct spw_profile p;
    ck_assert_int_eq(spw_profile_run(s, src, 8, 1, 0, &p, err, sizeof err), 0);
    ck_assert_int_eq(p.samples, 8);
    ck_assert_int_eq(spw_profile_run(s, src, 8, 1, 1, &p, err, sizeof err), 0);
    ck_assert_int_eq(p.samples, SPW_PROFILE_MIN_SAMPLES);
    ck_assert(p.group_ns[0] > 0 && p.bytes[1] == 1536.0 * 1536 * 3);
    spw_source_close(src);
    spw_spec_free(s);
}
END_TEST

static void add_corrupt(const char *root)
{
    char p[512];
    size_t len;
    FILE *f = fopen(FIX "rgb444.jpg", "rb");
    uint8_t buf[8192];
    len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    snprintf(p, sizeof p, "%s/cat/z_truncated.jpg", root);
    write_bytes(p, buf, len / 3);
    snprintf(p, sizeof p, "%s/cat/z_empty.jpg", root);
    write_bytes(p, buf, 0);
    snprintf(p, sizeof p, "%s/dog/z_text.jpg", root);
    write_bytes(p, "hello, not a jpeg", 17);
}

START_TEST(test_executor_skip_policy_counts_and_continues)
{
    make_folder(g_root);
    add_corrupt(g_root);
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"seed\":1},\"ops\":[{\"op\":\"decode_jpeg\"},"
        "{\"op\":\"resize\",\"size\":[20,20]}],\"batch\":{\"size\":5},\"on_error\":\"skip\"}", g_root);
    struct spw_source *src;
    char err[512];
    ck_assert_int_eq(spw_source_open(&s->source, &src, err, sizeof err), 0);
    ck_assert_int_eq(src->n, 12);
    struct spw_executor *ex;
    struct spw_executor_opts o = {.threads = 2};
    ck_assert_int_eq(spw_executor_create(s, src, &o, &ex, err, sizeof err), 0);
    struct spw_batch *b;
    int64_t elements = 0, skipped = 0;
    int rc;
    while ((rc = spw_executor_next(ex, &b)) == 0) {
        elements += b->n;
        skipped += b->skipped;
        ck_assert_int_eq(b->tensors[0].shape[0], b->n);
        ck_assert_int_eq(b->tensors[1].shape[0], b->n);
        for (int i = 0; i < b->n; i++)
            ck_assert(strstr(b->keys[i].path, "/z_") == NULL);
        spw_batch_free(b);
    }
    ck_assert_int_eq(rc, SPW_ECLOSED);
    ck_assert_int_eq(elements, 9);
    ck_assert_int_eq(skipped, 3);
    struct spw_exec_stats st;
    spw_executor_stats(ex, &st);
    ck_assert_int_eq(st.skipped, 3);
    spw_executor_destroy(ex);
    spw_source_close(src);
    spw_spec_free(s);
}
END_TEST

START_TEST(test_executor_fail_policy_stops_with_path)
{
    make_folder(g_root);
    add_corrupt(g_root);
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"shuffle\":false},\"ops\":[{\"op\":\"decode_jpeg\"},"
        "{\"op\":\"resize\",\"size\":[20,20]}],\"batch\":{\"size\":5},\"on_error\":\"fail\"}", g_root);
    struct spw_source *src;
    char err[512];
    ck_assert_int_eq(spw_source_open(&s->source, &src, err, sizeof err), 0);
    struct spw_executor *ex;
    struct spw_executor_opts o = {.threads = 2};
    ck_assert_int_eq(spw_executor_create(s, src, &o, &ex, err, sizeof err), 0);
    struct spw_batch *b;
    int rc;
    while ((rc = spw_executor_next(ex, &b)) == 0)
        spw_batch_free(b);
    ck_assert_int_eq(rc, SPW_EDECODE);
    ck_assert_msg(strstr(spw_executor_errmsg(ex), "/z_") != NULL, "msg: %s", spw_executor_errmsg(ex));
    spw_executor_destroy(ex);
    spw_source_close(src);
    spw_spec_free(s);
}
END_TEST

START_TEST(test_executor_shape_mismatch_is_clear_error)
{
    make_folder(g_root);
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"shuffle\":false},\"ops\":[{\"op\":\"decode_jpeg\"}],"
        "\"batch\":{\"size\":9}}", g_root);
    size_t n;
    int64_t b, e;
    int rc;
    free(run_all(s, 2, &n, &b, &e, &rc));
    ck_assert_int_eq(rc, SPW_ESPEC);
    spw_spec_free(s);
}
END_TEST

/* With per-group counters (a worker's metrics) spw_produce runs the groups one by one: the same element, and
 * each group's elements and CPU counted. */
/* The test folder through decode_jpeg, resize [20, 24], invert and to_tensor: its spec, source and context. */
static struct spw_pipeline_spec *invert_pipeline(struct spw_source **src, struct spw_element_ctx *ctx)
{
    make_folder(g_root);
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"shuffle\":false},\"ops\":[{\"op\":\"decode_jpeg\"},"
        "{\"op\":\"resize\",\"size\":[20,24]},{\"op\":\"invert\"},{\"op\":\"to_tensor\"}],\"batch\":{\"size\":2}}",
        g_root);
    char err[512];
    ck_assert_msg(spw_source_open(&s->source, src, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(spw_element_ctx_init(ctx, s), 0);
    return s;
}

START_TEST(test_produce_counts_cpu_per_group)
{
    struct spw_source *src;
    struct spw_element_ctx ctx;
    char err[512];
    struct spw_pipeline_spec *s = invert_pipeline(&src, &ctx);
    ck_assert_int_ge(ctx.n_groups, 2);
    int64_t ns[8] = {0}, n[8] = {0};
    struct spw_producer plain = {.spec = s, .src = src, .ctx = &ctx, .component = "test"};
    struct spw_producer counted = plain;
    counted.group_ns = ns;
    counted.group_elements = n;
    for (int64_t sample = 0; sample < 3; sample++) {
        struct spw_value a, b;
        ck_assert_int_eq(spw_produce(&plain, 1, sample, ctx.n_groups, &a, NULL, NULL, err, sizeof err), 0);
        ck_assert_int_eq(spw_produce(&counted, 1, sample, ctx.n_groups, &b, NULL, NULL, err, sizeof err), 0);
        ck_assert(a.is_tensor && b.is_tensor && a.t.nbytes == b.t.nbytes);
        ck_assert_int_eq(memcmp(a.t.data, b.t.data, a.t.nbytes), 0);
        spw_value_free(&a);
        spw_value_free(&b);
    }
    for (int g = 0; g < ctx.n_groups; g++)
        ck_assert_int_eq(n[g], 3);
    ck_assert_int_gt(ns[0], 0);                 /* the decode's CPU */
    spw_element_ctx_destroy(&ctx);
    spw_source_close(src);
    spw_spec_free(s);
}
END_TEST

/* A destination takes the last write of a run that stops before the pipeline's end (how the CPU backend
 * stages a Python op's input in its shared memory): the value is placed, an HWC view of that memory, with
 * the bytes of the run without one; the groups after it read it there; only the run's last write goes.
 * A borrowed value is copied before an op changes it. */
START_TEST(test_produce_partial_run_writes_through_dest)
{
    struct spw_source *src;
    struct spw_element_ctx ctx;
    char err[512];
    struct spw_pipeline_spec *s = invert_pipeline(&src, &ctx);
    ck_assert_int_eq(ctx.n_groups, 3);         /* decode+resize | invert | to_tensor */
    struct spw_producer p = {.spec = s, .src = src, .ctx = &ctx, .component = "test"};
    uint8_t *room = malloc(20 * 24 * 3);
    struct spw_element_dest dest = {place_into, room, SPW_LAYOUT_HWC};
    struct spw_value a, b;
    ck_assert_int_eq(spw_produce(&p, 0, 1, 1, &a, NULL, NULL, err, sizeof err), 0);
    ck_assert_int_eq(spw_produce(&p, 0, 1, 1, &b, NULL, &dest, err, sizeof err), 0);
    ck_assert(!a.placed && b.placed && b.img.data == room && b.img.w == 24 && b.img.h == 20);
    ck_assert_int_eq(memcmp(a.img.data, room, 20 * 24 * 3), 0);
    /* the rest of the pipeline from the placed value: the same tensor, and the room left as it was */
    ck_assert_int_eq(spw_produce_more(&p, 1, 3, 0, 1, &a, NULL, NULL, err, sizeof err), 0);
    ck_assert_int_eq(spw_produce_more(&p, 1, 3, 0, 1, &b, NULL, NULL, err, sizeof err), 0);
    ck_assert(a.is_tensor && b.is_tensor && !b.placed && a.t.nbytes == b.t.nbytes);
    ck_assert_int_eq(memcmp(a.t.data, b.t.data, a.t.nbytes), 0);
    spw_value_free(&a);
    spw_value_free(&b);
    /* a borrowed value (a Python op's result in its shared memory) is copied before an op changes it: the
     * memory it borrowed stays as it was */
    uint8_t *lent = malloc(20 * 24 * 3), *kept = malloc(20 * 24 * 3);
    for (int k = 0; k < 20 * 24 * 3; k++)
        lent[k] = kept[k] = (uint8_t)(k * 7);
    spw_value_borrow_array(&b, SPW_DTYPE_U8, 3, (int64_t[]){20, 24, 3}, lent);
    ck_assert(b.borrowed && !b.is_tensor && b.img.data == lent);
    ck_assert_int_eq(spw_produce_more(&p, 1, 2, 0, 1, &b, NULL, NULL, err, sizeof err), 0);      /* invert */
    ck_assert(!b.borrowed && b.img.data != lent);
    ck_assert_int_eq(memcmp(lent, kept, 20 * 24 * 3), 0);
    for (int k = 0; k < 20 * 24 * 3; k++)
        ck_assert_int_eq(b.img.data[(size_t)(k / 72) * b.img.stride + (size_t)(k % 72)], 255 - kept[k]);
    spw_value_free(&b);
    free(lent);
    free(kept);
    /* a run of all three groups with the destination writes only its last op there (a tensor) */
    float *last = malloc(20 * 24 * 3 * sizeof *last);
    dest.opaque = last;
    ck_assert_int_eq(spw_produce(&p, 0, 1, 3, &b, NULL, &dest, err, sizeof err), 0);
    ck_assert(b.placed && b.is_tensor && b.t.data == (void *)last);
    spw_value_free(&b);
    free(last);
    free(room);
    spw_element_ctx_destroy(&ctx);
    spw_source_close(src);
    spw_spec_free(s);
}
END_TEST

/* spw_produce: cut 0 is the file's bytes (an empty file refused), a full cut the element, a vanished file a
 * read failure; spw_produce_failed says whether on_error fails the job and names the file. */
START_TEST(test_produce_cuts_and_failures)
{
    make_folder(g_root);
    char empty[512];
    snprintf(empty, sizeof empty, "%s/dog/e.jpg", g_root);
    write_bytes(empty, "", 0);
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"shuffle\":false},\"ops\":[{\"op\":\"decode_jpeg\"},"
        "{\"op\":\"resize\",\"size\":[20,24]}],\"batch\":{\"size\":5},\"on_error\":\"fail\"}", g_root);
    struct spw_source *src;
    char err[512], msg[1024];
    ck_assert_int_eq(spw_source_open(&s->source, &src, err, sizeof err), 0);
    struct spw_element_ctx ctx;
    ck_assert_int_eq(spw_element_ctx_init(&ctx, s), 0);
    struct spw_producer p = {.spec = s, .src = src, .ctx = &ctx, .component = "test", .job = 7};
    struct spw_value v;
    ck_assert_int_eq(spw_produce(&p, 0, 0, 0, &v, NULL, NULL, err, sizeof err), 0);
    ck_assert(v.is_tensor && v.t.dtype == SPW_DTYPE_U8 && v.t.shape[0] == src->samples[0].size);
    ck_assert_int_eq(memcmp(v.t.data, "\xff\xd8", 2), 0);
    spw_value_free(&v);
    ck_assert_int_eq(spw_produce(&p, 0, 0, ctx.n_groups, &v, NULL, NULL, err, sizeof err), 0);
    ck_assert(!v.is_tensor && v.img.w == 24 && v.img.h == 20);
    spw_value_free(&v);
    int64_t e = -1;
    for (int64_t i = 0; i < src->n; i++)
        if (strstr(src->samples[i].path, "/e.jpg"))
            e = i;
    ck_assert_int_ge(e, 0);
    ck_assert_int_eq(spw_produce(&p, 0, e, 0, &v, NULL, NULL, err, sizeof err), SPW_EFORMAT);
    ck_assert_str_eq(err, "empty file (0 bytes)");
    ck_assert(!v.is_tensor && !v.t.data && !v.img.data);
    ck_assert(spw_produce_failed(&p, e, SPW_EFORMAT, err, "w1", msg, sizeof msg));
    ck_assert_msg(strstr(msg, "/dog/e.jpg: empty file (0 bytes) (on worker w1)") != NULL, "%s", msg);
    ck_assert_int_eq(unlink(empty), 0);
    ck_assert_int_lt(spw_produce(&p, 0, e, ctx.n_groups, &v, NULL, NULL, err, sizeof err), 0);
    ck_assert_msg(strncmp(err, "read failed: ", 13) == 0, "%s", err);
    s->on_error = SPW_ON_ERROR_SKIP;
    int64_t failures[SPW_FAIL_KINDS] = {0};
    p.failures = failures;      /* counted by reason: the worker's metrics */
    ck_assert(!spw_produce_failed(&p, e, -ENOENT, err, NULL, msg, sizeof msg));
    ck_assert(!spw_produce_failed(&p, e, SPW_EDECODE, err, NULL, msg, sizeof msg));
    ck_assert(!spw_produce_failed(&p, e, SPW_EFORMAT, err, NULL, msg, sizeof msg));
    ck_assert(!spw_produce_failed(&p, e, SPW_ETOOBIG, err, NULL, msg, sizeof msg));
    ck_assert(failures[SPW_FAIL_READ] == 1 && failures[SPW_FAIL_DECODE] == 2 && failures[SPW_FAIL_TOO_BIG] == 1 &&
              failures[SPW_FAIL_MEMORY] == 0 && failures[SPW_FAIL_OTHER] == 0);
    ck_assert_str_eq(spw_failure_names[SPW_FAIL_TOO_BIG], "too_big");
    spw_element_ctx_destroy(&ctx);
    spw_source_close(src);
    spw_spec_free(s);
}
END_TEST

struct mb_probe {
    int done[16], rc[16];
    int64_t bytes[16];
    uint8_t slot[20 * 24 * 3];
    struct spw_element_dest dest;
};

static void *probe_place(void *opaque, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    return ((struct mb_probe *)opaque)->slot;
}

static bool probe_want(void *opaque, int k) { return k != 1; }

static const struct spw_element_dest *probe_dest(void *opaque, int k)
{
    return k == 2 ? &((struct mb_probe *)opaque)->dest : NULL;
}

static void probe_done(void *opaque, int k, int rc, struct spw_value *v, const char *err)
{
    struct mb_probe *m = opaque;
    m->done[k]++;
    m->rc[k] = rc;
    m->bytes[k] = rc == 0 ? (int64_t)spw_value_bytes(v) + (v->placed ? 1000000 : 0) : -1;
    spw_value_free(v);
}

/* The CPU backend: every wanted element reaches done once, in order, placed where dest says. */
START_TEST(test_backend_cpu_microbatch)
{
    make_folder(g_root);
    add_corrupt(g_root);
    struct spw_pipeline_spec *s = spec_of(
        "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"shuffle\":false},\"ops\":[{\"op\":\"decode_jpeg\"},"
        "{\"op\":\"resize\",\"size\":[20,24]}],\"batch\":{\"size\":5}}", g_root);
    struct spw_source *src;
    char err[512];
    ck_assert_int_eq(spw_source_open(&s->source, &src, err, sizeof err), 0);
    struct spw_element_ctx ctx;
    ck_assert_int_eq(spw_element_ctx_init(&ctx, s), 0);
    const struct spw_producer p = {.spec = s, .src = src, .ctx = &ctx, .component = "test"};
    int64_t samples[4] = {0, 1, 2, src->n - 1};        /* the last one is a corrupt file (z_...) */
    struct mb_probe m = {.dest = {probe_place, NULL, SPW_LAYOUT_HWC}};
    m.dest.opaque = &m;
    const struct spw_microbatch mb = {.epoch = 0, .cut = ctx.n_groups, .n = 4, .samples = samples, .opaque = &m,
                                      .want = probe_want, .dest = probe_dest, .done = probe_done};
    const struct spw_backend *const table[] = {&spw_backend_cpu};
    ck_assert_int_eq(spw_backend_run(table, 1, &p, &mb), 0);
    ck_assert(m.done[0] == 1 && m.done[1] == 0 && m.done[2] == 1 && m.done[3] == 1);
    ck_assert(m.rc[0] == 0 && m.bytes[0] == 20 * 24 * 3);
    ck_assert(m.rc[2] == 0 && m.bytes[2] == 1000000 + 20 * 24 * 3);    /* written into the slot */
    ck_assert_msg(m.rc[3] != 0, "%s", src->samples[src->n - 1].path);
    ck_assert_int_eq(spw_backend_run(table, 0, &p, &mb), -ENODEV);
    spw_element_ctx_destroy(&ctx);
    spw_source_close(src);
    spw_spec_free(s);
}
END_TEST

/* The micro-batch queue: the largest end and the smallest end come out in size order; a full queue refuses
 * more; two consumers pulling from both ends while a producer fills take every entry exactly once. */
START_TEST(test_mb_queue_two_ends)
{
    struct spw_mb_queue *q;
    ck_assert_int_eq(spw_mb_queue_create(0, &q), -EINVAL);
    ck_assert_int_eq(spw_mb_queue_create(8, &q), 0);
    const int64_t sizes[8] = {50, 10, 80, 10, 30, 99, 1, 60};
    for (int i = 0; i < 8; i++) {
        struct spw_mb_entry e = {.first = i * 4, .n = 4, .bytes = sizes[i]};
        ck_assert_int_eq(spw_mb_queue_put(q, &e), 0);
    }
    struct spw_mb_entry e = {.bytes = 5};
    ck_assert_int_eq(spw_mb_queue_put(q, &e), -ENOSPC);
    const int64_t big[3] = {99, 80, 60}, small[3] = {1, 10, 10};
    for (int i = 0; i < 3; i++) {
        ck_assert(spw_mb_queue_take(q, SPW_MB_LARGEST, &e) && e.bytes == big[i]);
        ck_assert(spw_mb_queue_take(q, SPW_MB_SMALLEST, &e) && e.bytes == small[i]);
    }
    ck_assert(spw_mb_queue_take(q, SPW_MB_SMALLEST, &e) && e.first == 16);     /* 30 */
    ck_assert_int_eq(spw_mb_queue_len(q), 1);
    ck_assert(spw_mb_queue_take(q, SPW_MB_LARGEST, &e) && e.first == 0);       /* 50 */
    ck_assert(!spw_mb_queue_take(q, SPW_MB_LARGEST, &e));
    spw_mb_queue_destroy(q);
}
END_TEST

struct mbq_shared {
    struct spw_mb_queue *q;
    int taken[4000];
    int done;                   /* atomic: the producer finished */
};

struct mbq_consumer {
    struct mbq_shared *sh;
    enum spw_mb_end end;
    int64_t count;
};

static void *mbq_consume(void *arg)
{
    struct mbq_consumer *c = arg;
    struct spw_mb_entry e;
    for (;;) {
        if (spw_mb_queue_take(c->sh->q, c->end, &e)) {
            __atomic_add_fetch(&c->sh->taken[e.first], 1, __ATOMIC_RELAXED);
            c->count++;
        } else if (__atomic_load_n(&c->sh->done, __ATOMIC_ACQUIRE) && spw_mb_queue_len(c->sh->q) == 0) {
            return NULL;
        } else {
            sched_yield();
        }
    }
}

START_TEST(test_mb_queue_concurrent_ends)
{
    static struct mbq_shared sh;
    memset(&sh, 0, sizeof sh);
    ck_assert_int_eq(spw_mb_queue_create(16, &sh.q), 0);
    struct mbq_consumer c[2] = {{&sh, SPW_MB_SMALLEST, 0}, {&sh, SPW_MB_LARGEST, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, mbq_consume, &c[i]), 0);
    struct spw_rng g;
    spw_rng_init(&g, 3, 0, 0, 0);
    for (int i = 0; i < 4000; i++) {
        struct spw_mb_entry e = {.first = i, .n = 1, .bytes = (int64_t)spw_rng_below(&g, 1000)};
        while (spw_mb_queue_put(sh.q, &e) != 0)
            sched_yield();
    }
    __atomic_store_n(&sh.done, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 4000; i++)
        ck_assert_int_eq(sh.taken[i], 1);
    ck_assert_int_eq(c[0].count + c[1].count, 4000);
    spw_mb_queue_destroy(sh.q);
}
END_TEST

/* spw_backend_run_all with a backend that declines (-ENODEV) and one that records: micro-batches of mb_max,
 * each announced to the sink with its first index and samples, every element done once, a stop honoured
 * between micro-batches. */
struct run_log {
    int begins, k0[8], n[8], done[64], stop_after;
    int64_t samples[64];
};
static int declines(const struct spw_backend *b, const struct spw_producer *p, const struct spw_microbatch *mb)
{
    return -ENODEV;
}
static int records(const struct spw_backend *b, const struct spw_producer *p, const struct spw_microbatch *mb)
{
    for (int k = 0; k < mb->n; k++) {
        struct spw_value v = {0};
        mb->done(mb->opaque, k, 0, &v, "");
    }
    return 0;
}
static int64_t log_sample(void *opaque, int i)
{
    return 1000 + i;
}
static void log_begin(void *opaque, int k0, int n, const int64_t *samples)
{
    struct run_log *l = opaque;
    l->k0[l->begins] = k0;
    l->n[l->begins++] = n;
    for (int k = 0; k < n; k++)
        l->samples[k0 + k] = samples[k];
}
static bool log_stop(void *opaque)
{
    struct run_log *l = opaque;
    return l->stop_after && l->begins >= l->stop_after;
}
static void log_done(void *opaque, int k, int rc, struct spw_value *v, const char *err)
{
    struct run_log *l = opaque;
    l->done[l->k0[l->begins - 1] + k]++;
}

START_TEST(test_backend_run_all_makes_micro_batches_for_a_sink)
{
    const struct spw_backend no = {.name = "no", .run = declines}, yes = {.name = "yes", .run = records};
    const struct spw_backend *const table[] = {&no, &yes};
    struct run_log l = {0};
    struct spw_run r = {.epoch = 3, .cut = 1, .n = 37, .mb_max = 16, .opaque = &l, .sample_of = log_sample,
                        .begin = log_begin, .stop = log_stop, .done = log_done};
    ck_assert_int_eq(spw_backend_run_all(table, 2, NULL, &r), 37);
    ck_assert_int_eq(l.begins, 3);
    ck_assert(l.k0[0] == 0 && l.k0[1] == 16 && l.k0[2] == 32 && l.n[0] == 16 && l.n[1] == 16 && l.n[2] == 5);
    for (int i = 0; i < 37; i++)
        ck_assert(l.done[i] == 1 && l.samples[i] == 1000 + i);
    memset(&l, 0, sizeof l);
    l.stop_after = 2;       /* stops before the third micro-batch */
    ck_assert_int_eq(spw_backend_run_all(table, 2, NULL, &r), 32);
    ck_assert_int_eq(l.begins, 2);
    ck_assert(l.done[31] == 1 && l.done[32] == 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_order_is_bijection_per_epoch);
    tcase_add_test(tc, test_produce_partial_run_writes_through_dest);
    tcase_add_test(tc, test_order_epochs_differ_and_repeat);
    tcase_add_test(tc, test_source_image_folder_labels_sorted);
    tcase_add_test(tc, test_source_missing_dir_is_clear_error);
    tcase_add_test(tc, test_source_tar_shards_pairs_jpg_and_cls);
    tcase_add_test(tc, test_fusion_groups_train_pipeline);
    tcase_add_test(tc, test_rows_from_parts_same_bytes);
    tcase_add_test(tc, test_executor_same_bytes_any_thread_count);
    tcase_add_test(tc, test_executor_views);
    tcase_add_test(tc, test_views_unpack_refuses_what_does_not_split);
    tcase_add_test(tc, test_amplitude_to_db_odd_values);
    tcase_add_test(tc, test_executor_drop_remainder);
    tcase_add_test(tc, test_executor_skip_policy_counts_and_continues);
    tcase_add_test(tc, test_executor_fail_policy_stops_with_path);
    tcase_add_test(tc, test_executor_shape_mismatch_is_clear_error);
    tcase_add_test(tc, test_produce_cuts_and_failures);
    tcase_add_test(tc, test_produce_counts_cpu_per_group);
    tcase_add_test(tc, test_backend_cpu_microbatch);
    tcase_add_test(tc, test_mb_queue_two_ends);
    tcase_add_test(tc, test_mb_queue_concurrent_ends);
    tcase_add_test(tc, test_profile_budget_bounds_a_slow_pipeline);
    tcase_add_test(tc, test_backend_run_all_makes_micro_batches_for_a_sink);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
