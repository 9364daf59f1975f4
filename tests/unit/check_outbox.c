/* tests/unit/check_outbox.c - worker/outbox.c without sockets: a builder's elements and tombstones decode as
 * they were added, each message goes to its split's rank, credit decides what a stream may take (one
 * oversized element once a full message's credit is there), a message put back comes first again, a rank
 * streams once at a time, producers wait for room in a bounded queue and a stop frees them, and a stream's
 * zstd level compresses what is made after it attached. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "pipeline/wire.h"
#include "worker/outbox.h"

static struct wrk_outbox *O;
static int64_t g_zin, g_zout;

static void make(int world, size_t queue_bytes)
{
    g_zin = g_zout = 0;
    const struct wrk_outbox_opts o = {.world = world, .queue_bytes = queue_bytes, .zstd_in = &g_zin,
                                      .zstd_out = &g_zout};
    ck_assert_int_eq(wrk_outbox_create(&o, &O), 0);
}

static void teardown(void)
{
    wrk_outbox_destroy(O);
    O = NULL;
}

/* n elements of w x w x 3 bytes (pixel value: the sample's id), labels 100 + sample, at positions from pos0. */
static void add_images(struct wrk_builder *bd, int n, int w, int64_t pos0, bool noisy)
{
    const int64_t shape[3] = {w, w, 3};
    for (int i = 0; i < n; i++) {
        uint8_t *dst = wrk_builder_slot(O, bd, SPW_DTYPE_U8, 3, shape);
        ck_assert_ptr_nonnull(dst);
        for (int k = 0; k < w * w * 3; k++)
            dst[k] = noisy ? (uint8_t)rand() : (uint8_t)(pos0 + i);
        ck_assert_int_eq(wrk_builder_added(bd, pos0 + i, 40 + pos0 + i, 100 + 40 + pos0 + i, NULL), 0);
    }
}

static struct wrk_msg *take(int rank, int64_t credit)
{
    bool stopped;
    return wrk_outbox_take(O, rank, credit, 0, &stopped);
}

START_TEST(test_outbox_a_message_decodes_as_built_for_its_splits_rank)
{
    make(2, 0);
    struct wrk_builder bd;
    wrk_builder_init(&bd);
    wrk_builder_begin(&bd, 7, 3, 5, 2, 1);         /* split 5: rank 1 of 2 */
    add_images(&bd, 3, 8, 10, false);
    wrk_builder_tombstone(O, &bd, 13, "unreadable file");
    ck_assert_int_eq(wrk_builder_flush(O, &bd, true), 0);
    ck_assert_ptr_null(take(0, 1 << 30));         /* rank 0 has nothing */
    struct wrk_msg *m = take(1, 1 << 30);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->elements, 3);
    struct spw_wire_batch b;
    char err[128];
    ck_assert_int_eq(spw_wire_decode_parts(m->iov, m->iovcnt, &b, err, sizeof err), 0);
    ck_assert(b.job == 7 && b.epoch == 3 && b.split == 5 && b.generation == 2 && b.cut == 1 && b.end_of_split);
    ck_assert_int_eq(b.n_positions, 3);
    for (int i = 0; i < 3; i++)
        ck_assert(b.positions[i] == 10 + i && b.samples[i] == 50 + i);
    ck_assert(b.tensors[0].ndim == 4 && b.tensors[0].shape[0] == 3 && b.tensors[0].shape[1] == 8);
    ck_assert_int_eq(b.tensors[0].data[8 * 8 * 3 * 2], 12);
    ck_assert_int_eq(((const int64_t *)b.tensors[1].data)[1], 151);
    ck_assert(b.n_tombstones == 1 && b.tombstones[0] == 13 && !strcmp(b.tombstone_errors[0], "unreadable file"));
    spw_wire_batch_free(&b);
    wrk_msg_free(m);
    wrk_builder_release(&bd);
}
END_TEST

START_TEST(test_outbox_credit_decides_and_a_message_put_back_comes_first)
{
    make(1, 0);
    struct wrk_builder bd;
    wrk_builder_init(&bd);
    wrk_builder_begin(&bd, 1, 0, 0, 1, 1);
    add_images(&bd, 2, 16, 0, false);
    ck_assert_int_eq(wrk_builder_flush(O, &bd, false), 0);
    add_images(&bd, 1, 16, 2, false);
    ck_assert_int_eq(wrk_builder_flush(O, &bd, true), 0);
    struct wrk_outbox_stats st;
    wrk_outbox_stats(O, &st);
    ck_assert_int_eq(st.busy_queues, 1);
    const int64_t first = st.queue_bytes - (int64_t)(16 * 16 * 3 + 200);     /* about the first's size */
    ck_assert_ptr_null(take(0, 100));          /* too little credit: stays queued */
    struct wrk_msg *m = take(0, first + 400);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->elements, 2);
    wrk_outbox_put_back(O, 0, m);              /* its client went away */
    m = take(0, 1 << 30);
    ck_assert_int_eq(m->elements, 2);          /* the same one, first again */
    wrk_msg_free(m);
    /* A single element bigger than the whole grant goes once the grant is a full message's. */
    m = take(0, 10);
    ck_assert_ptr_null(m);
    m = take(0, WRK_MSG_TARGET_BYTES);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->elements, 1);
    wrk_msg_free(m);
    wrk_outbox_stats(O, &st);
    ck_assert_int_eq(st.queue_bytes, 0);
    wrk_builder_release(&bd);
}
END_TEST

START_TEST(test_outbox_a_rank_streams_once_at_a_time)
{
    make(2, 0);
    ck_assert_int_eq(wrk_outbox_attach(O, 2, 0), -EINVAL);
    ck_assert_int_eq(wrk_outbox_attach(O, -1, 0), -EINVAL);
    ck_assert_int_eq(wrk_outbox_attach(O, 1, 0), 0);
    ck_assert_int_eq(wrk_outbox_attach(O, 1, 0), -EBUSY);
    wrk_outbox_set_direct(O, 1, true);
    wrk_outbox_credit(O, 1, 1234);
    struct wrk_outbox_stats st;
    wrk_outbox_stats(O, &st);
    ck_assert(st.streams == 1 && st.direct_streams == 1 && st.credit_bytes == 1234);
    wrk_outbox_detach(O, 1);
    wrk_outbox_stats(O, &st);
    ck_assert(st.streams == 0 && st.direct_streams == 0 && st.credit_bytes == 0);
    ck_assert_int_eq(wrk_outbox_attach(O, 1, 0), 0);
}
END_TEST

struct producer_run {
    int flushed;                /* messages pushed (atomic) */
};

/* Messages of 16 elements of 48 KiB (768 KiB each) into rank 0 until 8 are pushed or the outbox stops. */
static void *produce(void *arg)
{
    struct producer_run *p = arg;
    struct wrk_builder bd;
    wrk_builder_init(&bd);
    for (int i = 0; i < 8; i++) {
        wrk_builder_begin(&bd, 1, 0, 0, 1, 1);
        add_images(&bd, 16, 128, i * 16, false);
        wrk_builder_flush(O, &bd, false);
        __atomic_add_fetch(&p->flushed, 1, __ATOMIC_RELAXED);
    }
    wrk_builder_release(&bd);
    return NULL;
}

START_TEST(test_outbox_producers_wait_for_room_and_a_stop_frees_them)
{
    make(1, (size_t)1 << 20);           /* bound: 1 MiB queued (below the 4 MiB a drain rate would give) */
    struct producer_run p = {0};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, produce, &p), 0);
    usleep(300 * 1000);
    const int before = __atomic_load_n(&p.flushed, __ATOMIC_RELAXED);
    ck_assert_msg(before >= 1 && before <= 3, "%d pushed into a 1 MiB queue", before);
    struct wrk_outbox_stats st;
    wrk_outbox_stats(O, &st);
    ck_assert_int_le(st.queue_bytes, (2 << 20) + 4096);
    struct wrk_msg *m = take(0, 1 << 30);    /* room: the producer goes on */
    ck_assert_ptr_nonnull(m);
    wrk_msg_free(m);
    usleep(300 * 1000);
    ck_assert_int_gt(__atomic_load_n(&p.flushed, __ATOMIC_RELAXED), before);
    ck_assert_int_lt(__atomic_load_n(&p.flushed, __ATOMIC_RELAXED), 8);
    wrk_outbox_stop(O);                  /* the waiting push drops its message and returns */
    pthread_join(t, NULL);
    ck_assert_int_eq(p.flushed, 8);
    bool stopped = false;
    ck_assert_ptr_null(wrk_outbox_take(O, 0, 1 << 30, 1000, &stopped));
    ck_assert(stopped);
}
END_TEST

START_TEST(test_outbox_a_streams_zstd_level_compresses_what_is_made_after)
{
    make(1, 0);
    struct wrk_builder bd;
    wrk_builder_init(&bd);
    wrk_builder_begin(&bd, 1, 0, 0, 1, 1);
    add_images(&bd, 4, 32, 0, false);
    ck_assert_int_eq(wrk_builder_flush(O, &bd, false), 0);      /* before: raw */
    ck_assert_int_eq(wrk_outbox_attach(O, 0, 3), 0);
    add_images(&bd, 4, 32, 4, false);                            /* flat images: compress well */
    ck_assert_int_eq(wrk_builder_flush(O, &bd, false), 0);
    add_images(&bd, 4, 32, 8, true);     /* noise: sent raw (no saving), and said to be raw */
    ck_assert_int_eq(wrk_builder_flush(O, &bd, true), 0);
    const enum spw_wire_encoding want[3] = {SPW_WIRE_RAW, SPW_WIRE_ZSTD, SPW_WIRE_RAW};
    for (int i = 0; i < 3; i++) {
        struct wrk_msg *m = take(0, 1 << 30);
        struct spw_wire_batch b;
        char err[128];
        ck_assert_int_eq(spw_wire_decode_parts(m->iov, m->iovcnt, &b, err, sizeof err), 0);
        ck_assert_msg(b.tensors[0].encoding == want[i], "message %d: encoding %d", i, (int)b.tensors[0].encoding);
        ck_assert_int_eq(b.tensors[0].nbytes, want[i] == SPW_WIRE_RAW ? 4 * 32 * 32 * 3 : b.tensors[0].nbytes);
        spw_wire_batch_free(&b);
        wrk_msg_free(m);
    }
    ck_assert(g_zin == 4 * 32 * 32 * 3 && g_zout > 0 && g_zout < g_zin / 10);
    wrk_builder_release(&bd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("outbox");
    TCase *tc = tcase_create("outbox");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_outbox_a_message_decodes_as_built_for_its_splits_rank);
    tcase_add_test(tc, test_outbox_credit_decides_and_a_message_put_back_comes_first);
    tcase_add_test(tc, test_outbox_a_rank_streams_once_at_a_time);
    tcase_add_test(tc, test_outbox_producers_wait_for_room_and_a_stop_frees_them);
    tcase_add_test(tc, test_outbox_a_streams_zstd_level_compresses_what_is_made_after);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
