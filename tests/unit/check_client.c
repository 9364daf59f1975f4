/* tests/unit/check_client.c - the client's prefetch buffer and exactly-once ledger (client/assembler.c)
 * without sockets: ordered jobs place elements by position (batches as a local run), unordered jobs fill in
 * arrival order, duplicates are dropped, splits are acked once complete, elements beyond the window park
 * and are placed later, drop_remainder tails are counted but not delivered, skipped samples compact their
 * batch, the head's missing positions are listed for the rescue; and a job used after fork() refuses. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "client/assembler.h"
#include "lib/err.h"
#include "pipeline/executor.h"
#include "pipeline/spec.h"
#include "spillway/client.h"

#define N 10

static struct spw_sample g_samples[N];
static char g_paths[N][16];
static struct spw_source g_src;

static struct spw_pipeline_spec *spec_of(int batch, bool drop, bool shuffle)
{
    char json[512], err[256];
    snprintf(json, sizeof json,
             "{\"source\": {\"format\": \"image_folder\", \"path\": \"unused\", \"shuffle\": %s, \"epochs\": 1},"
             " \"ops\": [{\"op\": \"decode_jpeg\"}], \"batch\": {\"size\": %d, \"drop_remainder\": %s}}",
             shuffle ? "true" : "false", batch, drop ? "true" : "false");
    struct spw_pipeline_spec *s = NULL;
    ck_assert_msg(spw_spec_parse_json(json, &s, err, sizeof err) == 0, "%s", err);
    return s;
}

static struct asm_opts opts_of(const struct spw_pipeline_spec *spec, bool ordered, int64_t prefetch)
{
    for (int i = 0; i < N; i++) {
        snprintf(g_paths[i], sizeof g_paths[i], "s%d.jpg", i);
        g_samples[i] = (struct spw_sample){.path = g_paths[i], .label = 100 + i, .file = -1};
    }
    g_src = (struct spw_source){.samples = g_samples, .n = N};
    return (struct asm_opts){.spec = spec, .src = &g_src, .prefetch_bytes = prefetch, .ordered = ordered,
                             .split_size = 3, .splits_per_epoch = (N + 2) / 3};
}

static struct assembler *make_with(const struct asm_opts *o)
{
    struct assembler *a = NULL;
    ck_assert_int_eq(asm_create(o, &a), 0);
    return a;
}

static struct assembler *make(const struct spw_pipeline_spec *spec, bool ordered, int64_t prefetch)
{
    struct asm_opts o = opts_of(spec, ordered, prefetch);
    return make_with(&o);
}

/* Claim (0, pos) and, when placeable, write pos as its one float; a pos below -1 claims place -pos - 1 and
 * writes its sample. Returns the claim result. */
static enum asm_claim put(struct assembler *a, int64_t pos)
{
    struct asm_ticket t;
    enum asm_claim c = pos < -1 ? asm_claim_place(a, 0, -pos - 1, &t) : asm_claim(a, 0, pos, &t);
    if (pos < -1 && (c == ASM_PLACE || c == ASM_PARK))
        pos = t.sample;
    if (c == ASM_PLACE) {
        int64_t shape[1] = {1};
        float *dst = (float *)asm_dst(a, &t, SPW_DTYPE_F32, 1, shape);
        ck_assert_ptr_nonnull(dst);
        *dst = (float)pos;
        asm_done(a, &t, true);
    } else if (c == ASM_PARK) {
        struct spw_value v = {.is_tensor = true};
        int64_t shape[1] = {1};
        ck_assert_int_eq(spw_tensor_alloc(&v.t, SPW_DTYPE_F32, 1, shape), 0);
        *(float *)v.t.data = (float)pos;
        asm_park(a, &t, &v, NULL);
    }
    return c;
}

static struct spw_batch *next(struct assembler *a)
{
    struct spw_batch *b = NULL;
    char err[256];
    int rc = asm_next(a, 1000, &b, err, sizeof err);
    ck_assert_msg(rc == 0, "asm_next: %d %s", rc, err);
    return b;
}

START_TEST(test_assembler_ordered_places_by_position)
{
    struct spw_pipeline_spec *spec = spec_of(4, false, false);
    struct assembler *a = make(spec, true, 1 << 20);
    for (int64_t pos = N - 1; pos >= 0; pos--)
        ck_assert_int_eq(put(a, pos), ASM_PLACE);
    const int sizes[] = {4, 4, 2};
    for (int b = 0; b < 3; b++) {
        struct spw_batch *bt = next(a);
        ck_assert_int_eq(bt->index, b);
        ck_assert_int_eq(bt->n, sizes[b]);
        for (int i = 0; i < bt->n; i++) {
            ck_assert_float_eq(((float *)bt->tensors[0].data)[i], (float)(4 * b + i));
            ck_assert_int_eq(((int64_t *)bt->tensors[1].data)[i], 100 + 4 * b + i);
            ck_assert_int_eq(bt->keys[i].sample, 4 * b + i);
        }
        asm_release(a, bt);
    }
    struct spw_batch *bt;
    char err[64];
    ck_assert_int_eq(asm_next(a, 10, &bt, err, sizeof err), SPW_ECLOSED);
    asm_destroy(a);
    spw_spec_free(spec);
}
END_TEST

START_TEST(test_assembler_duplicates_dropped_and_splits_acked)
{
    struct spw_pipeline_spec *spec = spec_of(4, false, true);
    struct assembler *a = make(spec, true, 1 << 20);
    struct asm_split acks[8];
    ck_assert_int_eq(put(a, 0), ASM_PLACE);
    ck_assert_int_eq(put(a, 0), ASM_DUP);
    ck_assert_int_eq(put(a, 1), ASM_PLACE);
    ck_assert_int_eq(asm_take_acks(a, acks, 8), 0);       /* split 0 = positions 0-2: not complete */
    ck_assert_int_eq(put(a, 2), ASM_PLACE);
    ck_assert_int_eq(asm_take_acks(a, acks, 8), 1);
    ck_assert_int_eq(acks[0].split, 0);
    ck_assert_int_eq(put(a, 9), ASM_PLACE);                /* the last split has one position */
    ck_assert_int_eq(asm_take_acks(a, acks, 8), 1);
    ck_assert_int_eq(acks[0].split, 3);
    asm_return_acks(a, acks, 1);                           /* a failed heartbeat puts them back */
    ck_assert_int_eq(asm_take_acks(a, acks, 8), 1);
    ck_assert_int_eq(put(a, 9), ASM_DUP);
    ck_assert_int_eq(put(a, -1), ASM_DUP);                 /* out of range: never placed */
    ck_assert_int_eq(put(a, N), ASM_DUP);
    asm_destroy(a);
    spw_spec_free(spec);
}
END_TEST

START_TEST(test_assembler_unordered_fills_in_arrival_order)
{
    struct spw_pipeline_spec *spec = spec_of(4, false, false);
    struct assembler *a = make(spec, false, 1 << 20);
    const int64_t arrivals[N] = {9, 3, 7, 1, 0, 8, 2, 6, 5, 4};
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(put(a, arrivals[i]), ASM_PLACE);
    int k = 0;
    for (int b = 0; b < 3; b++) {
        struct spw_batch *bt = next(a);
        for (int i = 0; i < bt->n; i++, k++) {
            ck_assert_float_eq(((float *)bt->tensors[0].data)[i], (float)arrivals[k]);
            ck_assert_int_eq(bt->keys[i].sample, arrivals[k]);     /* shuffle off: sample = position */
            ck_assert_int_eq(((int64_t *)bt->tensors[1].data)[i], 100 + arrivals[k]);
        }
        asm_release(a, bt);
    }
    ck_assert_int_eq(k, N);
    asm_destroy(a);
    spw_spec_free(spec);
}
END_TEST

START_TEST(test_assembler_parks_beyond_window_and_places_later)
{
    struct spw_pipeline_spec *spec = spec_of(2, false, false);
    struct assembler *a = make(spec, true, 1);         /* the window is the minimum, 2 batches */
    ck_assert_int_eq(put(a, 0), ASM_PLACE);            /* batch 0 fixes the size: window = 2 */
    ck_assert_int_eq(put(a, 9), ASM_PARK);             /* batch 4 */
    ck_assert_int_eq(put(a, 9), ASM_DUP);              /* parked counts as arrived */
    for (int64_t pos = 1; pos < 9; pos++)
        put(a, pos);
    int64_t total, delivered, parked;
    asm_progress(a, &total, &delivered, &parked);
    ck_assert_int_gt(parked, 0);
    for (int b = 0; b < 5; b++) {
        struct spw_batch *bt = next(a);
        ck_assert_int_eq(bt->n, 2);
        for (int i = 0; i < 2; i++)
            ck_assert_float_eq(((float *)bt->tensors[0].data)[i], (float)(2 * b + i));
        asm_release(a, bt);
    }
    asm_progress(a, &total, &delivered, &parked);
    ck_assert_int_eq(parked, 0);
    ck_assert_int_eq(delivered, 5);
    asm_destroy(a);
    spw_spec_free(spec);
}
END_TEST

/* A parked value outlives the producer's micro-batch: a borrowed one (a Python op's result in its thread's
 * shared memory, reused for the next micro-batch) is parked as its own copy, so overwriting the memory it
 * borrowed does not change the batch it lands in. */
START_TEST(test_assembler_parks_a_borrowed_value_as_its_own_copy)
{
    struct spw_pipeline_spec *spec = spec_of(2, false, false);
    struct assembler *a = make(spec, true, 1);         /* the window is the minimum, 2 batches */
    ck_assert_int_eq(put(a, 0), ASM_PLACE);
    struct asm_ticket t;
    ck_assert_int_eq(asm_claim(a, 0, 9, &t), ASM_PARK);
    float room[1] = {9.0f};
    int64_t shape[1] = {1};
    struct spw_value v;
    spw_value_borrow_array(&v, SPW_DTYPE_F32, 1, shape, room);
    ck_assert(v.borrowed && v.is_tensor && v.t.data == (void *)room);
    asm_park(a, &t, &v, NULL);
    room[0] = -1.0f;                                    /* the next micro-batch reuses the memory */
    for (int64_t pos = 1; pos < 9; pos++)
        put(a, pos);
    for (int b = 0; b < 5; b++) {
        struct spw_batch *bt = next(a);
        for (int i = 0; i < bt->n; i++)
            ck_assert_float_eq(((float *)bt->tensors[0].data)[i], (float)(2 * b + i));
        asm_release(a, bt);
    }
    asm_destroy(a);
    spw_spec_free(spec);
}
END_TEST

START_TEST(test_assembler_drop_remainder_counts_but_drops_the_tail)
{
    struct spw_pipeline_spec *spec = spec_of(4, true, false);
    struct assembler *a = make(spec, true, 1 << 20);
    ck_assert_int_eq(put(a, 8), ASM_DROP);
    ck_assert_int_eq(put(a, 9), ASM_DROP);
    struct asm_split acks[8];
    ck_assert_int_eq(asm_take_acks(a, acks, 8), 1);    /* split 3 = position 9 alone: complete */
    for (int64_t pos = 0; pos < 8; pos++)
        ck_assert_int_eq(put(a, pos), ASM_PLACE);
    for (int b = 0; b < 2; b++)
        asm_release(a, next(a));
    struct spw_batch *bt;
    char err[64];
    ck_assert_int_eq(asm_next(a, 10, &bt, err, sizeof err), SPW_ECLOSED);
    asm_destroy(a);
    spw_spec_free(spec);
}
END_TEST

START_TEST(test_assembler_skipped_sample_compacts_its_batch)
{
    struct spw_pipeline_spec *spec = spec_of(4, false, false);
    struct assembler *a = make(spec, true, 1 << 20);
    for (int64_t pos = 0; pos < 4; pos++) {
        if (pos == 1) {
            struct asm_ticket t;
            ck_assert_int_eq(asm_claim(a, 0, pos, &t), ASM_PLACE);
            asm_done(a, &t, false);                    /* a tombstone */
        } else {
            put(a, pos);
        }
    }
    struct spw_batch *bt = next(a);
    ck_assert_int_eq(bt->n, 3);
    ck_assert_int_eq(bt->skipped, 1);
    ck_assert_float_eq(((float *)bt->tensors[0].data)[1], 2.0f);
    ck_assert_int_eq(bt->keys[1].sample, 2);
    asm_release(a, bt);
    asm_destroy(a);
    spw_spec_free(spec);
}
END_TEST

START_TEST(test_assembler_head_missing_lists_unclaimed_positions)
{
    struct spw_pipeline_spec *spec = spec_of(4, false, false);
    struct assembler *a = make(spec, true, 1 << 20);
    put(a, 0);
    put(a, 2);
    put(a, 5);                                          /* batch 1: not the head */
    uint64_t epoch = 99;
    int64_t pos[8], stalled;
    int n_self;
    int n = asm_head_missing(a, &epoch, pos, 8, &stalled, &n_self);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(n_self, 0);
    ck_assert_int_eq(epoch, 0);
    ck_assert_int_eq(pos[0], 1);
    ck_assert_int_eq(pos[1], 3);
    ck_assert_int_ge(stalled, 0);
    asm_destroy(a);
    spw_spec_free(spec);

    spec = spec_of(4, false, false);
    a = make(spec, false, 1 << 20);
    put(a, 7);                                          /* unordered: the head takes any 3 more */
    n = asm_head_missing(a, &epoch, pos, 8, &stalled, &n_self);
    ck_assert_int_eq(n, 3);
    for (int i = 0; i < n; i++)
        ck_assert_int_ne(pos[i], 7);
    asm_destroy(a);
    spw_spec_free(spec);
}
END_TEST

/* Rank 1 of 2 (splits of 3 of 10 samples: it owns splits 1 and 3, positions 3-5 and 9): other ranks'
 * positions are duplicates, acks name the dispatcher's split ids, and with padding its two missing places
 * repeat its first samples and are listed as this client's own work. */
START_TEST(test_assembler_rank_share_pads_or_drops)
{
    struct spw_pipeline_spec *spec = spec_of(4, false, false);
    struct asm_opts o = opts_of(spec, true, 1 << 20);
    o.rank = 1;
    o.world_size = 2;
    struct assembler *a = make_with(&o);
    ck_assert_int_eq(asm_batches_per_epoch(a), 2);           /* 6 places: rank 0's share */
    ck_assert_int_eq(put(a, 0), ASM_DUP);
    ck_assert_int_eq(put(a, 6), ASM_DUP);
    struct asm_split acks[8];
    for (int64_t pos = 3; pos <= 5; pos++)
        ck_assert_int_eq(put(a, pos), ASM_PLACE);
    ck_assert_int_eq(asm_take_acks(a, acks, 8), 1);
    ck_assert_int_eq(acks[0].split, 1);
    ck_assert_int_eq(put(a, 9), ASM_PLACE);
    ck_assert_int_eq(asm_take_acks(a, acks, 8), 1);
    ck_assert_int_eq(acks[0].split, 3);
    const int64_t first[] = {3, 4, 5, 9}, pads[] = {3, 4};
    struct spw_batch *bt = next(a);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(bt->keys[i].sample, first[i]);
    asm_release(a, bt);
    uint64_t epoch;
    int64_t places[8], stalled;
    int n_self;
    ck_assert_int_eq(asm_head_missing(a, &epoch, places, 8, &stalled, &n_self), 2);
    ck_assert_int_eq(n_self, 2);                             /* nobody else makes padding */
    ck_assert_int_eq(places[0], 4);
    ck_assert_int_eq(put(a, -places[0] - 1), ASM_PLACE);
    ck_assert_int_eq(put(a, -places[1] - 1), ASM_PLACE);
    bt = next(a);
    ck_assert_int_eq(bt->n, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(bt->keys[i].sample, pads[i]);
        ck_assert_float_eq(((float *)bt->tensors[0].data)[i], (float)pads[i]);
    }
    asm_release(a, bt);
    char err[64];
    ck_assert_int_eq(asm_next(a, 10, &bt, err, sizeof err), SPW_ECLOSED);
    asm_destroy(a);
    spw_spec_free(spec);

    spec = spec_of(4, true, false);                          /* drop: rank 0 leaves out its last 2 */
    o = opts_of(spec, true, 1 << 20);
    o.world_size = 2;
    a = make_with(&o);
    ck_assert_int_eq(asm_batches_per_epoch(a), 1);
    ck_assert_int_eq(put(a, 8), ASM_DROP);
    ck_assert_int_eq(put(a, 3), ASM_DUP);
    asm_destroy(a);
    spw_spec_free(spec);
}
END_TEST

/* Unordered batches delivered, a checkpoint taken, and a new assembler resumed from it: the rest of the epoch
 * is exactly the samples not yet delivered. Checkpoints that cannot be this job's are refused. */
START_TEST(test_assembler_checkpoint_and_resume)
{
    struct spw_pipeline_spec *spec = spec_of(2, false, false);
    struct asm_opts o = opts_of(spec, false, 1 << 20);
    struct assembler *a = make_with(&o);
    for (int64_t pos = 9; pos >= 6; pos--)
        ck_assert_int_eq(put(a, pos), ASM_PLACE);
    asm_release(a, next(a));
    asm_release(a, next(a));
    int64_t batches;
    uint8_t places[2];
    ck_assert_int_eq(asm_place_bytes(a), 2);
    asm_checkpoint(a, &batches, places);
    ck_assert_int_eq(batches, 2);
    ck_assert_int_eq(places[0], 0xc0);                       /* positions 6-9 */
    ck_assert_int_eq(places[1], 0x03);
    asm_destroy(a);

    o.resume_batches = batches;
    o.resume_places = places;
    o.resume_places_len = sizeof places;
    a = make_with(&o);
    asm_checkpoint(a, &batches, places);                     /* nothing new: the same checkpoint */
    ck_assert_int_eq(batches, 2);
    ck_assert_int_eq(places[0], 0xc0);
    ck_assert_int_eq(put(a, 7), ASM_DUP);
    for (int64_t pos = 0; pos < 6; pos++)
        ck_assert_int_eq(put(a, pos), ASM_PLACE);
    bool seen[N] = {false};
    for (int b = 0; b < 3; b++) {
        struct spw_batch *bt = next(a);
        ck_assert_int_eq(bt->index, 2 + b);
        for (int i = 0; i < bt->n; i++) {
            ck_assert(bt->keys[i].sample < 6 && !seen[bt->keys[i].sample]);
            seen[bt->keys[i].sample] = true;
        }
        asm_release(a, bt);
    }
    struct spw_batch *bt;
    char err[64];
    ck_assert_int_eq(asm_next(a, 10, &bt, err, sizeof err), SPW_ECLOSED);
    asm_destroy(a);

    struct assembler *bad = NULL;
    o.ordered = true;                                        /* not the epoch's first places */
    ck_assert_int_eq(asm_create(&o, &bad), -EINVAL);
    o.ordered = false;
    places[0] = 0xe0;                                        /* 5 places for 2 batches of 2 */
    ck_assert_int_eq(asm_create(&o, &bad), -EINVAL);
    o.resume_places_len = 1;                                 /* the wrong size */
    ck_assert_int_eq(asm_create(&o, &bad), -EINVAL);
    o.resume_places = NULL;                                  /* a count alone: the first places */
    o.ordered = true;
    a = make_with(&o);
    ck_assert_int_eq(put(a, 3), ASM_DUP);
    ck_assert_int_eq(put(a, 4), ASM_PLACE);
    asm_destroy(a);
    spw_spec_free(spec);
}
END_TEST

/* A real in-process job over a copy of the fixtures, then fork(): the child's next() is refused. */
START_TEST(test_job_refuses_use_after_fork)
{
    char root[64] = "/tmp/spw-client-XXXXXX", cmd[512];
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(cmd, sizeof cmd, "mkdir -p %s/a %s/b && cp tests/data/fixtures/rgb420.jpg %s/a/1.jpg && "
             "cp tests/data/fixtures/rgb444.jpg %s/b/2.jpg", root, root, root, root);
    ck_assert_int_eq(system(cmd), 0);
    char json[512], err[512];
    snprintf(json, sizeof json,
             "{\"source\": {\"format\": \"image_folder\", \"path\": \"%s\", \"epochs\": 0},"
             " \"ops\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}], \"batch\": {\"size\": 1}}",
             root);
    struct spw_job_opts o;
    spw_job_opts_init(&o);
    o.local_cores = 1;
    struct spw_job *job;
    ck_assert_msg(spw_job_create_json(json, &o, &job, err, sizeof err) == 0, "%s", err);
    struct spw_batch *b;
    ck_assert_int_eq(spw_job_next(job, &b), 0);
    spw_job_release(job, b);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = spw_job_next(job, &b);
        _exit(rc == SPW_EFORKED && strstr(spw_job_errmsg(job), "fork") ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child was not refused");
    ck_assert_int_eq(spw_job_next(job, &b), 0);        /* the parent goes on */
    spw_job_release(job, b);
    spw_job_destroy(job);
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase_create("assembler");
    tcase_add_test(tc, test_assembler_ordered_places_by_position);
    tcase_add_test(tc, test_assembler_rank_share_pads_or_drops);
    tcase_add_test(tc, test_assembler_checkpoint_and_resume);
    tcase_add_test(tc, test_assembler_duplicates_dropped_and_splits_acked);
    tcase_add_test(tc, test_assembler_unordered_fills_in_arrival_order);
    tcase_add_test(tc, test_assembler_parks_beyond_window_and_places_later);
    tcase_add_test(tc, test_assembler_parks_a_borrowed_value_as_its_own_copy);
    tcase_add_test(tc, test_assembler_drop_remainder_counts_but_drops_the_tail);
    tcase_add_test(tc, test_assembler_skipped_sample_compacts_its_batch);
    tcase_add_test(tc, test_assembler_head_missing_lists_unclaimed_positions);
    tcase_add_test(tc, test_job_refuses_use_after_fork);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
