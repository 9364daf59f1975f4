/* tests/unit/check_api.c - libspillway as a user sees it: this file includes spillway/client.h and nothing of
 * the tree, so it proves the header self-contained; its error codes and dtypes agree with the library's
 * (spw_strerror's texts, a real batch's tensors); and a real in-process job over a folder with broken JPEGs
 * never delivers an empty batch (batch size 1 and 8): partial batches keep dtype and element shape, keys and
 * positions are right, and a checkpoint taken after passed-over batches resumes exactly once. */
#include <spillway/client.h>

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_run.h"

START_TEST(test_api_error_codes_match_the_library)
{
    static const struct { int code; const char *text; } codes[] = {
        {SPW_ESPEC, "invalid pipeline spec"}, {SPW_EDECODE, "corrupt or undecodable input"},
        {SPW_ETOOBIG, "input exceeds a configured size cap"}, {SPW_ESOURCE, "data source error"},
        {SPW_ECLOSED, "closed"}, {SPW_EUNSUPPORTED, "unsupported input"},
        {SPW_EFORMAT, "malformed file format"}, {SPW_EINTERNAL, "internal error"},
        {SPW_EFORKED, "used in a forked child process"}, {SPW_EUSER, "the user's function failed"},
    };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        ck_assert_str_eq(spw_strerror(codes[i].code), codes[i].text);
}
END_TEST

/* A folder of 6 class-a JPEGs of which the ones at indexes in `broken` (a bitmask) are not JPEGs. */
static void make_folder(char *root, unsigned broken)
{
    char cmd[1024];
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/a && for i in 0 1 2 3 4 5; do cp tests/data/fixtures/rgb420.jpg %s/a/$i.jpg; done",
             root, root);
    ck_assert_int_eq(system(cmd), 0);
    for (int i = 0; i < 6; i++)
        if (broken & (1u << i)) {
            snprintf(cmd, sizeof cmd, "echo 'not a jpeg' > %s/a/%d.jpg", root, i);
            ck_assert_int_eq(system(cmd), 0);
        }
}

static void remove_folder(const char *root)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
}

static struct spw_job *job_of(const char *root, int batch, int64_t resume_batches, uint64_t manifest)
{
    char json[768], err[512];
    snprintf(json, sizeof json,
             "{\"source\": {\"format\": \"image_folder\", \"path\": \"%s\", \"epochs\": 2, \"shuffle\": false},"
             " \"ops\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}],"
             " \"batch\": {\"size\": %d}, \"on_error\": \"skip\"}", root, batch);
    struct spw_job_opts o;
    spw_job_opts_init(&o);
    o.local_cores = 2;
    o.resume.batches = resume_batches;
    o.resume.manifest = manifest;
    struct spw_job *job = NULL;
    ck_assert_msg(spw_job_create_json(json, &o, &job, err, sizeof err) == 0, "%s", err);
    return job;
}

/* Take every batch: check each is non-empty, uint8 [n, 8, 8, 3] with int64 labels [n], and record its
 * elements' (epoch, sample) as epoch * 100 + sample into seen (returns how many). */
static int drain(struct spw_job *job, int *seen, int cap, int64_t *last_epoch, int64_t *last_index)
{
    int n_seen = 0;
    struct spw_batch *b;
    int rc;
    while ((rc = spw_job_next(job, &b)) == 0) {
        const int n = spw_batch_elements(b);
        ck_assert_int_ge(n, 1);
        int dtype, ndim;
        int64_t shape[SPW_TENSOR_MAX_DIMS];
        void *data;
        size_t nbytes;
        ck_assert_int_eq(spw_batch_tensor_count(b), 2);
        ck_assert_int_eq(spw_batch_view_count(b), 0);
        ck_assert_str_eq(spw_batch_tensor_name(b, 0), "data");
        ck_assert_str_eq(spw_batch_tensor_name(b, 1), "labels");
        ck_assert_ptr_null(spw_batch_tensor_name(b, 2));
        ck_assert_ptr_null(spw_batch_tensor_name(b, -1));
        ck_assert_int_eq(spw_batch_tensor_index(b, "labels"), 1);
        ck_assert_int_eq(spw_batch_tensor_index(b, "lengths"), -ENOENT);
        ck_assert_int_eq(spw_batch_tensor_index(b, NULL), -ENOENT);
        ck_assert_int_eq(spw_batch_tensor_at(b, 0, &dtype, &ndim, shape, &data, &nbytes), 0);
        ck_assert_int_eq(dtype, SPW_DTYPE_U8);
        ck_assert_int_eq(ndim, 4);
        ck_assert(shape[0] == n && shape[1] == 8 && shape[2] == 8 && shape[3] == 3);
        ck_assert_uint_eq(nbytes, (size_t)n * 8 * 8 * 3);
        ck_assert_int_eq(spw_batch_tensor_at(b, 1, &dtype, &ndim, shape, &data, &nbytes), 0);
        ck_assert(dtype == SPW_DTYPE_I64 && ndim == 1 && shape[0] == n);
        int64_t epoch, index;
        ck_assert_int_eq(spw_batch_position(b, &epoch, &index), 0);
        ck_assert_msg(epoch > *last_epoch || (epoch == *last_epoch && index > *last_index),
                      "positions go forward: (%lld, %lld) after (%lld, %lld)", (long long)epoch, (long long)index,
                      (long long)*last_epoch, (long long)*last_index);
        *last_epoch = epoch;
        *last_index = index;
        for (int i = 0; i < n; i++) {
            int64_t e, sample;
            const char *path;
            ck_assert_int_eq(spw_batch_key_at(b, i, &e, &sample, &path), 0);
            ck_assert_int_eq(e, epoch);
            ck_assert_int_lt(n_seen, cap);
            seen[n_seen++] = (int)(e * 100 + sample);
        }
        ck_assert_int_eq(spw_batch_key_at(b, n, &epoch, &epoch, &(const char *){NULL}), -22);
        spw_job_release(job, b);
    }
    ck_assert_int_eq(rc, SPW_ECLOSED);
    return n_seen;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Samples 1, 2 and 5 broken: with batch 1 three of six batches per epoch are all-skipped, with batch 8 the
 * one batch is partial. Every good sample once per epoch, no empty batch, the skips counted. */
/* Cuts as users write them; the options' default is SPW_CUT_DEFAULT (planned unless $SPILLWAY_CUT says). */
START_TEST(test_api_cut_parse_reads_auto_all_and_boundaries)
{
    int cut = 99;
    ck_assert_int_eq(spw_job_cut_parse("auto", &cut), 0);
    ck_assert_int_eq(cut, SPW_CUT_AUTO);
    ck_assert_int_eq(spw_job_cut_parse("all", &cut), 0);
    ck_assert_int_eq(cut, SPW_CUT_ALL);
    ck_assert_int_eq(spw_job_cut_parse("0", &cut), 0);
    ck_assert_int_eq(cut, 0);
    ck_assert_int_eq(spw_job_cut_parse("255", &cut), 0);
    ck_assert_int_eq(cut, 255);
    const char *bad[] = {"", "256", "-1", "2x", " 2", "Auto", "al", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(spw_job_cut_parse(bad[i], &cut), -EINVAL);
        ck_assert_int_eq(cut, 255);     /* untouched on failure */
    }
    ck_assert_int_eq(spw_job_cut_parse(NULL, &cut), -EINVAL);
    struct spw_job_opts o;
    spw_job_opts_init(&o);
    ck_assert_int_eq(o.cut, SPW_CUT_DEFAULT);
    struct spw_job_opts *f = spw_job_opts_new();
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(f->cut, SPW_CUT_DEFAULT);
    ck_assert_int_eq(spw_job_opts_set(f, "cut", "all"), 0);
    ck_assert_int_eq(f->cut, SPW_CUT_ALL);
    ck_assert_int_eq(spw_job_opts_set(f, "cut", "-1"), 0);
    ck_assert_int_eq(f->cut, SPW_CUT_ALL);
    ck_assert_int_eq(spw_job_opts_set(f, "cut", "default"), 0);
    ck_assert_int_eq(f->cut, SPW_CUT_DEFAULT);
    ck_assert_int_eq(spw_job_opts_set(f, "cut", "sideways"), -EINVAL);
    /* every integer option lands in its own field, whatever its width */
    ck_assert_int_eq(spw_job_opts_set(f, "rank", "3"), 0);
    ck_assert_int_eq(spw_job_opts_set(f, "world_size", "4"), 0);
    ck_assert_int_eq(spw_job_opts_set(f, "prefetch_bytes", "1000000000000"), 0);
    ck_assert_int_eq(spw_job_opts_set(f, "resume_job", "7"), 0);
    ck_assert_int_eq(spw_job_opts_set(f, "local_cores", "-1"), 0);
    ck_assert_int_eq(spw_job_opts_set(f, "dispatcher_wait_ms", "1234"), 0);
    ck_assert_int_eq(spw_job_opts_set(f, "rank", "65536"), -EINVAL);
    ck_assert_int_eq(f->rank, 3);
    ck_assert_int_eq(f->world_size, 4);
    ck_assert_int_eq(f->prefetch_bytes, 1000000000000LL);
    ck_assert_int_eq(f->resume.job, 7);
    ck_assert_int_eq(f->local_cores, -1);
    ck_assert_int_eq(f->dispatcher_wait_ms, 1234);
    ck_assert_int_eq(f->cut, SPW_CUT_DEFAULT);
    spw_job_opts_free(f);
}
END_TEST

/* Compression as users write it; the options' default is SPW_COMPRESS_AUTO. */
START_TEST(test_api_compress_parse_reads_auto_off_and_levels)
{
    int z = 99;
    ck_assert_int_eq(spw_job_compress_parse("auto", &z), 0);
    ck_assert_int_eq(z, SPW_COMPRESS_AUTO);
    ck_assert_int_eq(spw_job_compress_parse("off", &z), 0);
    ck_assert_int_eq(z, SPW_COMPRESS_OFF);
    ck_assert_int_eq(spw_job_compress_parse("zstd", &z), 0);
    ck_assert_int_eq(z, 1);
    ck_assert_int_eq(spw_job_compress_parse("zstd:19", &z), 0);
    ck_assert_int_eq(z, 19);
    const char *bad[] = {"", "zstd:", "zstd:0", "zstd:20", "zstd:-1", "zstd:3x", "zstd: 3", "lz4", "ZSTD", NULL};
    for (int i = 0; bad[i]; i++) {
        ck_assert_int_eq(spw_job_compress_parse(bad[i], &z), -EINVAL);
        ck_assert_int_eq(z, 19);
    }
    ck_assert_int_eq(spw_job_compress_parse(NULL, &z), -EINVAL);
    struct spw_job_opts o;
    spw_job_opts_init(&o);
    ck_assert_int_eq(o.compress, SPW_COMPRESS_AUTO);
    struct spw_job_opts *f = spw_job_opts_new();
    ck_assert_int_eq(spw_job_opts_set(f, "compress", "zstd:3"), 0);
    ck_assert_int_eq(f->compress, 3);
    ck_assert_int_eq(spw_job_opts_set(f, "compress", "gzip"), -EINVAL);
    ck_assert_int_eq(f->compress, 3);
    spw_job_opts_free(f);
}
END_TEST

START_TEST(test_api_skipped_samples_never_make_an_empty_batch)
{
    char root[64] = "/tmp/spw-api-XXXXXX";
    make_folder(root, 0x26);
    for (int bs = 1; bs <= 8; bs += 7) {
        struct spw_job *job = job_of(root, bs, 0, 0);
        int seen[64];
        int64_t le = -1, li = -1;
        const int n = drain(job, seen, 64, &le, &li);
        qsort(seen, (size_t)n, sizeof seen[0], cmp_int);
        const int want[] = {0, 3, 4, 100, 103, 104};
        ck_assert_int_eq(n, 6);
        for (int i = 0; i < 6; i++)
            ck_assert_int_eq(seen[i], want[i]);
        struct spw_job_stats st;
        spw_job_stats(job, &st);
        ck_assert_int_eq(st.skipped, 6);
        ck_assert_int_eq(st.elements, 6);
        ck_assert_int_eq(st.batches, bs == 1 ? 6 : 2);
        struct spw_job_times t;         /* where the time went: the waits within the job's life */
        spw_job_times(job, &t);
        ck_assert(t.elapsed_s > 0 && t.wait_s >= 0 && t.wait_s <= t.elapsed_s && t.starved_s >= 0);
        struct spw_op_time op;          /* in process: each step's time over the elements made */
        ck_assert_int_eq(spw_job_op_time(job, 0, &op), 0);
        ck_assert_ptr_nonnull(strstr(op.name, "decode_jpeg"));
        ck_assert(op.elements >= 6 && op.ns_total > 0);
        ck_assert_int_eq(spw_job_op_time(job, 64, &op), -ENOENT);
        ck_assert_int_eq(spw_job_op_time(job, -1, &op), -ENOENT);
        spw_job_destroy(job);
    }
    remove_folder(root);
}
END_TEST

/* Batch size 1, samples 0 and 1 broken: a checkpoint after the first delivered batch (two passed over before
 * it) resumes with the rest, each good sample of each epoch delivered exactly once over the two jobs. */
START_TEST(test_api_checkpoint_counts_passed_over_batches)
{
    char root[64] = "/tmp/spw-api-XXXXXX";
    make_folder(root, 0x3);
    struct spw_job *job = job_of(root, 1, 0, 0);
    struct spw_batch *b;
    ck_assert_int_eq(spw_job_next(job, &b), 0);
    int64_t e, sample;
    const char *path;
    ck_assert_int_eq(spw_batch_key_at(b, 0, &e, &sample, &path), 0);
    ck_assert(e == 0 && sample == 2);
    spw_job_release(job, b);
    struct spw_checkpoint cp;
    ck_assert_int_eq(spw_job_checkpoint(job, &cp), 0);
    ck_assert_int_eq(cp.batches, 3);                /* two passed over, one delivered */
    spw_job_destroy(job);
    job = job_of(root, 1, cp.batches, cp.manifest);
    int seen[64];
    int64_t le = -1, li = -1;
    const int n = drain(job, seen, 64, &le, &li);
    const int want[] = {3, 4, 5, 102, 103, 104, 105};
    ck_assert_int_eq(n, 7);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(seen[i], want[i]);
    spw_job_destroy(job);
    spw_checkpoint_clear(&cp);
    remove_folder(root);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("api");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_api_error_codes_match_the_library);
    tcase_add_test(tc, test_api_cut_parse_reads_auto_all_and_boundaries);
    tcase_add_test(tc, test_api_compress_parse_reads_auto_off_and_levels);
    tcase_add_test(tc, test_api_skipped_samples_never_make_an_empty_batch);
    tcase_add_test(tc, test_api_checkpoint_counts_passed_over_batches);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
