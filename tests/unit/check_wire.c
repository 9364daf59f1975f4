/* tests/unit/check_wire.c - pipeline/wire.c: an encoding is a valid ElementBatch for protobuf-c's own parser,
 * the zero-copy decoder returns the same fields with tensor data pointing into the message, also for the
 * message cut into random parts, and malformed or oversized messages are refused (mutation loops, whole and
 * in parts, never crash). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "lib/err.h"
#include "lib/rng.h"
#include "pipeline/wire.h"
#include "proto/spillway.pb-c.h"

static uint8_t *flatten(const struct iovec *iov, int n, size_t *len)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    uint8_t *buf = malloc(total + 1), *p = buf;
    for (int i = 0; i < n; i++) {
        memcpy(p, iov[i].iov_base, iov[i].iov_len);
        p += iov[i].iov_len;
    }
    *len = total;
    return buf;
}

static struct spw_wire_batch sample_batch(uint8_t *img, float *lab)
{
    static int64_t pos[3] = {128, 129, 131}, tomb[1] = {130}, samples[3] = {77, 1000000007LL, 0};
    struct spw_wire_batch b = {.job = 5, .epoch = 2, .split = 2, .generation = 3, .cut = 1, .end_of_split = true,
                               .n_positions = 3, .positions = pos, .n_tombstones = 1, .tombstones = tomb,
                               .n_samples = 3, .samples = samples, .n_tensors = 2};
    for (int i = 0; i < 3 * 4 * 5 * 3; i++)
        img[i] = (uint8_t)(i * 7);
    for (int i = 0; i < 3; i++)
        lab[i] = (float)i - 0.5f;
    b.tensors[0] = (struct spw_wire_tensor){SPW_DTYPE_U8, 4, {3, 4, 5, 3}, img, 3 * 4 * 5 * 3, 0, 0, 0};
    b.tensors[1] = (struct spw_wire_tensor){SPW_DTYPE_F32, 1, {3}, (uint8_t *)lab, 12, 0, 0, 0};
    return b;
}

START_TEST(test_wire_encoding_is_valid_protobuf)
{
    uint8_t img[180];
    float lab[3];
    struct spw_wire_batch b = sample_batch(img, lab);
    uint8_t scratch[512];
    struct iovec iov[8];
    int n = spw_wire_encode(&b, scratch, sizeof scratch, iov, 8);
    ck_assert_int_eq(n, 5);
    ck_assert(iov[2].iov_base == img);                /* zero copy: the tensor's own bytes */
    size_t len;
    uint8_t *msg = flatten(iov, n, &len);
    ck_assert_uint_eq(len, spw_wire_encoded_size(&b));
    Spillway__V1__ElementBatch *m = spillway__v1__element_batch__unpack(NULL, len, msg);
    ck_assert(m != NULL);
    ck_assert_uint_eq(m->job, 5);
    ck_assert_uint_eq(m->generation, 3);
    ck_assert_int_eq(m->cut, 1);
    ck_assert(m->end_of_split);
    ck_assert_uint_eq(m->n_positions, 3);
    ck_assert_int_eq(m->positions[2], 131);
    ck_assert_uint_eq(m->n_tombstones, 1);
    ck_assert_int_eq(m->samples[1], 1000000007LL);
    ck_assert_uint_eq(m->n_tensors, 2);
    ck_assert_int_eq(m->tensors[0]->dtype, SPILLWAY__V1__DTYPE__DTYPE_UINT8);
    ck_assert_uint_eq(m->tensors[0]->n_shape, 4);
    ck_assert_uint_eq(m->tensors[0]->data.len, 180);
    ck_assert(memcmp(m->tensors[0]->data.data, img, 180) == 0);
    ck_assert(memcmp(m->tensors[1]->data.data, lab, 12) == 0);
    spillway__v1__element_batch__free_unpacked(m, NULL);
    free(msg);
}
END_TEST

START_TEST(test_wire_decode_points_into_the_message)
{
    uint8_t img[180];
    float lab[3];
    struct spw_wire_batch b = sample_batch(img, lab);
    uint8_t scratch[512];
    struct iovec iov[8];
    size_t len;
    uint8_t *msg = flatten(iov, spw_wire_encode(&b, scratch, sizeof scratch, iov, 8), &len);
    struct spw_wire_batch d;
    char err[128] = "";
    ck_assert_int_eq(spw_wire_decode(msg, len, &d, err, sizeof err), 0);
    ck_assert_uint_eq(d.split, 2);
    ck_assert_uint_eq(d.n_positions, 3);
    ck_assert_int_eq(d.tombstones[0], 130);
    ck_assert_int_eq(d.n_tensors, 2);
    ck_assert(d.tensors[0].data > msg && d.tensors[0].data < msg + len);
    ck_assert(memcmp(d.tensors[0].data, img, 180) == 0);
    ck_assert_int_eq(d.tensors[0].shape[3], 3);
    ck_assert_int_eq(d.tensors[1].dtype, SPW_DTYPE_F32);
    spw_wire_batch_free(&d);
    /* a message from protobuf-c decodes the same way */
    Spillway__V1__ElementBatch *m = spillway__v1__element_batch__unpack(NULL, len, msg);
    size_t n2 = spillway__v1__element_batch__get_packed_size(m);
    uint8_t *re = malloc(n2);
    spillway__v1__element_batch__pack(m, re);
    ck_assert_int_eq(spw_wire_decode(re, n2, &d, err, sizeof err), 0);
    ck_assert(memcmp(d.tensors[0].data, img, 180) == 0);
    spw_wire_batch_free(&d);
    spillway__v1__element_batch__free_unpacked(m, NULL);
    free(re);
    free(msg);
}
END_TEST

START_TEST(test_wire_refuses_bad_messages)
{
    uint8_t img[180];
    float lab[3];
    struct spw_wire_batch b = sample_batch(img, lab);
    b.tensors[0].nbytes = 179;                       /* shape says 180 */
    uint8_t scratch[512];
    struct iovec iov[8];
    size_t len;
    uint8_t *msg = flatten(iov, spw_wire_encode(&b, scratch, sizeof scratch, iov, 8), &len);
    struct spw_wire_batch d;
    char err[128] = "";
    ck_assert_int_eq(spw_wire_decode(msg, len, &d, err, sizeof err), SPW_EFORMAT);
    ck_assert(strstr(err, "180 bytes") != NULL);
    free(msg);
    b.tensors[0].nbytes = 180;
    b.n_tensors = 9;
    ck_assert_int_eq(spw_wire_encode(&b, scratch, sizeof scratch, iov, 32), -EINVAL);
    /* mutations and truncations never crash and never point outside the message */
    b.n_tensors = 2;
    msg = flatten(iov, spw_wire_encode(&b, scratch, sizeof scratch, iov, 8), &len);
    struct spw_rng r;
    spw_rng_init(&r, 9, 0, 0, 0);
    uint8_t *m2 = malloc(len);
    for (int k = 0; k < 20000; k++) {
        memcpy(m2, msg, len);
        size_t l2 = len - spw_rng_below(&r, (uint32_t)len / 4 + 1);
        for (int f = 0; f < 1 + (int)spw_rng_below(&r, 4); f++)
            m2[spw_rng_below(&r, (uint32_t)l2)] ^= (uint8_t)(1u << spw_rng_below(&r, 8));
        if (spw_wire_decode(m2, l2, &d, err, sizeof err) == 0) {
            for (int t = 0; t < d.n_tensors; t++)
                ck_assert(d.tensors[t].nbytes == 0 ||
                          (d.tensors[t].data >= m2 && d.tensors[t].data + d.tensors[t].nbytes <= m2 + l2));
            spw_wire_batch_free(&d);
        }
    }
    free(m2);
    free(msg);
}
END_TEST

/* Split a message into k parts at random places (a part may be empty). */
static int split_parts(uint8_t *msg, size_t len, struct spw_rng *r, struct iovec *parts, int k)
{
    size_t cuts[16];
    for (int i = 0; i < k - 1; i++)
        cuts[i] = spw_rng_below(r, (uint32_t)len + 1);
    for (int i = 0; i < k - 1; i++)                  /* sort the cut points */
        for (int j = i + 1; j < k - 1; j++)
            if (cuts[j] < cuts[i]) {
                size_t t = cuts[i];
                cuts[i] = cuts[j];
                cuts[j] = t;
            }
    size_t prev = 0;
    for (int i = 0; i < k; i++) {
        size_t end = i < k - 1 ? cuts[i] : len;
        parts[i] = (struct iovec){msg + prev, end - prev};
        prev = end;
    }
    return k;
}

START_TEST(test_wire_tombstone_errors_round_trip_capped)
{
    uint8_t img[180];
    float lab[3];
    struct spw_wire_batch b = sample_batch(img, lab);
    char longer[SPW_WIRE_MAX_ERROR + 100];
    memset(longer, 'e', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    char *errs[1] = {longer};
    b.tombstone_errors = errs;
    b.n_tombstone_errors = 1;
    uint8_t scratch[2048];
    struct iovec iov[8];
    int n = spw_wire_encode(&b, scratch, sizeof scratch, iov, 8);
    ck_assert_int_gt(n, 0);
    size_t len;
    uint8_t *msg = flatten(iov, n, &len);
    ck_assert_uint_eq(len, spw_wire_encoded_size(&b));
    /* protobuf-c reads the same strings; ours decodes them cut to the cap */
    Spillway__V1__ElementBatch *m = spillway__v1__element_batch__unpack(NULL, len, msg);
    ck_assert(m != NULL);
    ck_assert_uint_eq(m->n_tombstone_errors, 1);
    ck_assert_uint_eq(strlen(m->tombstone_errors[0]), SPW_WIRE_MAX_ERROR);
    spillway__v1__element_batch__free_unpacked(m, NULL);
    struct spw_wire_batch d;
    char err[256];
    ck_assert_int_eq(spw_wire_decode(msg, len, &d, err, sizeof err), 0);
    ck_assert_uint_eq(d.n_tombstone_errors, 1);
    ck_assert_uint_eq(strlen(d.tombstone_errors[0]), SPW_WIRE_MAX_ERROR);
    spw_wire_batch_free(&d);
    free(msg);
    /* More errors than tombstones, or one over the cap (a hand-made field), are refused. */
    Spillway__V1__ElementBatch bad = SPILLWAY__V1__ELEMENT_BATCH__INIT;
    int64_t tomb = 4;
    char *two[2] = {"a", "b"};
    bad.n_tombstones = 1;
    bad.tombstones = &tomb;
    bad.n_tombstone_errors = 2;
    bad.tombstone_errors = two;
    uint8_t buf[4096];
    len = spillway__v1__element_batch__pack(&bad, buf);
    ck_assert_int_eq(spw_wire_decode(buf, len, &d, err, sizeof err), SPW_EFORMAT);
    ck_assert_ptr_nonnull(strstr(err, "2 tombstone errors for 1 tombstones"));
    bad.n_tombstone_errors = 1;
    two[0] = longer;
    len = spillway__v1__element_batch__pack(&bad, buf);
    ck_assert_int_eq(spw_wire_decode(buf, len, &d, err, sizeof err), SPW_ETOOBIG);
}
END_TEST

START_TEST(test_wire_decode_parts_equals_whole)
{
    uint8_t img[180];
    float lab[3];
    for (int i = 0; i < 180; i++)
        img[i] = (uint8_t)(i * 7);
    struct spw_wire_batch b = sample_batch(img, lab);
    uint8_t scratch[512];
    struct iovec iov[8];
    size_t len;
    uint8_t *msg = flatten(iov, spw_wire_encode(&b, scratch, sizeof scratch, iov, 8), &len);
    struct spw_rng r;
    spw_rng_init(&r, 11, 0, 0, 0);
    struct iovec parts[16];
    char err[128];
    uint8_t got[180];
    for (int k = 0; k < 5000; k++) {
        int n = split_parts(msg, len, &r, parts, 1 + (int)spw_rng_below(&r, 16));
        struct spw_wire_batch d;
        ck_assert_int_eq(spw_wire_decode_parts(parts, n, &d, err, sizeof err), 0);
        ck_assert_uint_eq(d.split, 2);
        ck_assert_uint_eq(d.n_positions, 3);
        ck_assert_int_eq(d.positions[2], 131);
        ck_assert_int_eq(d.samples[1], 1000000007LL);
        ck_assert_int_eq(d.tombstones[0], 130);
        ck_assert_int_eq(d.n_tensors, 2);
        ck_assert_int_eq(d.tensors[0].shape[3], 3);
        ck_assert_uint_eq(d.tensors[0].nbytes, 180);
        spw_wire_copy(parts, n, d.tensors[0].offset, 180, got);
        ck_assert(memcmp(got, img, 180) == 0);
        if (d.tensors[0].data)
            ck_assert(memcmp(d.tensors[0].data, img, 180) == 0);
        spw_wire_batch_free(&d);
    }
    /* mutated and truncated messages in parts: refused or decoded inside the message, never a crash */
    uint8_t *m2 = malloc(len);
    for (int k = 0; k < 20000; k++) {
        memcpy(m2, msg, len);
        size_t l2 = len - spw_rng_below(&r, (uint32_t)len / 4 + 1);
        for (int f = 0; f < 1 + (int)spw_rng_below(&r, 4); f++)
            m2[spw_rng_below(&r, (uint32_t)l2)] ^= (uint8_t)(1u << spw_rng_below(&r, 8));
        int n = split_parts(m2, l2, &r, parts, 1 + (int)spw_rng_below(&r, 16));
        struct spw_wire_batch d;
        if (spw_wire_decode_parts(parts, n, &d, err, sizeof err) == 0) {
            for (int t = 0; t < d.n_tensors; t++)
                ck_assert(d.tensors[t].offset + d.tensors[t].nbytes <= l2);
            spw_wire_batch_free(&d);
        }
    }
    free(m2);
    free(msg);
}
END_TEST

/* A compressed tensor (Tensor.encoding 1) travels with its shape; decode says how many bytes it stands for
 * and refuses, before anything is allocated, one standing for more than SPW_WIRE_MAX_RAW_BYTES, fewer payload
 * bytes than elements, and an encoding it does not know. */
START_TEST(test_wire_compressed_tensor_declares_its_raw_size)
{
    uint8_t frames[40] = {1, 2, 3};
    static int64_t pos[2] = {0, 1}, samples[2] = {4, 5};
    struct spw_wire_batch b = {.job = 1, .n_positions = 2, .positions = pos, .n_samples = 2, .samples = samples,
                               .n_tensors = 1};
    b.tensors[0] = (struct spw_wire_tensor){SPW_DTYPE_F32, 4, {2, 3, 224, 224}, frames, sizeof frames, 0,
                                            SPW_WIRE_ZSTD, 0};
    uint8_t scratch[512];
    struct iovec iov[4];
    int n = spw_wire_encode(&b, scratch, sizeof scratch, iov, 4);
    ck_assert_int_eq(n, 3);
    size_t len;
    uint8_t *msg = flatten(iov, n, &len);
    Spillway__V1__ElementBatch *m = spillway__v1__element_batch__unpack(NULL, len, msg);
    ck_assert(m != NULL);
    ck_assert_uint_eq(m->tensors[0]->encoding, 1);
    ck_assert_uint_eq(m->tensors[0]->data.len, sizeof frames);
    spillway__v1__element_batch__free_unpacked(m, NULL);
    struct spw_wire_batch d;
    char err[256];
    ck_assert_int_eq(spw_wire_decode(msg, len, &d, err, sizeof err), 0);
    ck_assert_int_eq(d.tensors[0].encoding, SPW_WIRE_ZSTD);
    ck_assert_uint_eq(d.tensors[0].nbytes, sizeof frames);
    ck_assert_uint_eq(d.tensors[0].raw_bytes, 2 * 3 * 224 * 224 * 4);
    spw_wire_batch_free(&d);
    free(msg);

    b.tensors[0].shape[0] = 120;      /* 120 x 602 kB = 72 MB: over the cap */
    n = spw_wire_encode(&b, scratch, sizeof scratch, iov, 4);
    msg = flatten(iov, n, &len);
    ck_assert_msg(spw_wire_decode(msg, len, &d, err, sizeof err) == SPW_ETOOBIG, "%s", err);
    ck_assert(strstr(err, "cap") != NULL);
    free(msg);
    b.tensors[0].shape[0] = 41;       /* 40 payload bytes cannot hold 41 frames */
    b.tensors[0].shape[2] = b.tensors[0].shape[3] = 2;
    n = spw_wire_encode(&b, scratch, sizeof scratch, iov, 4);
    msg = flatten(iov, n, &len);
    ck_assert_int_eq(spw_wire_decode(msg, len, &d, err, sizeof err), SPW_EFORMAT);
    free(msg);
    b.tensors[0].shape[0] = 2;
    b.tensors[0].encoding = 2;        /* no such encoding */
    n = spw_wire_encode(&b, scratch, sizeof scratch, iov, 4);
    msg = flatten(iov, n, &len);
    ck_assert_int_eq(spw_wire_decode(msg, len, &d, err, sizeof err), SPW_EFORMAT);
    ck_assert(strstr(err, "encoding") != NULL);
    free(msg);
}
END_TEST

/* A data connection's offer (port and ticket) round-trips, protobuf-c reads it as the proto's fields, and a
 * port without a ticket, a ticket of the wrong length, and a port of 0 or over 65535 are refused. */
START_TEST(test_wire_direct_offer)
{
    struct spw_wire_batch b = {.job = 9, .direct_port = 40123};
    for (int i = 0; i < SPW_DIRECT_TICKET_BYTES; i++)
        b.direct_ticket[i] = (uint8_t)(0xf0 + i);
    uint8_t scratch[128];
    struct iovec iov[4];
    size_t len;
    int n = spw_wire_encode(&b, scratch, sizeof scratch, iov, 4);
    ck_assert_int_eq(n, 1);
    uint8_t *msg = flatten(iov, n, &len);
    ck_assert_uint_eq(len, spw_wire_encoded_size(&b));
    Spillway__V1__ElementBatch *pb = spillway__v1__element_batch__unpack(NULL, len, msg);
    ck_assert_ptr_nonnull(pb);
    ck_assert_uint_eq(pb->direct_port, 40123);
    ck_assert_uint_eq(pb->direct_ticket.len, SPW_DIRECT_TICKET_BYTES);
    ck_assert(memcmp(pb->direct_ticket.data, b.direct_ticket, SPW_DIRECT_TICKET_BYTES) == 0);
    spillway__v1__element_batch__free_unpacked(pb, NULL);
    struct spw_wire_batch d;
    char err[128];
    ck_assert_int_eq(spw_wire_decode(msg, len, &d, err, sizeof err), 0);
    ck_assert_uint_eq(d.job, 9);
    ck_assert_uint_eq(d.direct_port, 40123);
    ck_assert(memcmp(d.direct_ticket, b.direct_ticket, SPW_DIRECT_TICKET_BYTES) == 0);
    spw_wire_batch_free(&d);
    /* a port alone (the ticket cut off) */
    ck_assert_int_eq(spw_wire_decode(msg, len - 2 - SPW_DIRECT_TICKET_BYTES, &d, err, sizeof err), SPW_EFORMAT);
    ck_assert_msg(strstr(err, "without its ticket") != NULL, "%s", err);
    /* a ticket of 15 bytes */
    uint8_t m2[64];
    memcpy(m2, msg, len);
    m2[len - SPW_DIRECT_TICKET_BYTES - 1] = SPW_DIRECT_TICKET_BYTES - 1;
    ck_assert_int_eq(spw_wire_decode(m2, len - 1, &d, err, sizeof err), SPW_EFORMAT);
    /* port 0 and port 70000 */
    const uint8_t zero[] = {12 << 3, 0}, big[] = {12 << 3, 0xf0, 0xa2, 0x04};
    ck_assert_int_eq(spw_wire_decode(zero, sizeof zero, &d, err, sizeof err), SPW_EFORMAT);
    ck_assert_int_eq(spw_wire_decode(big, sizeof big, &d, err, sizeof err), SPW_EFORMAT);
    free(msg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wire");
    TCase *tc = tcase_create("wire");
    tcase_add_test(tc, test_wire_encoding_is_valid_protobuf);
    tcase_add_test(tc, test_wire_decode_points_into_the_message);
    tcase_add_test(tc, test_wire_refuses_bad_messages);
    tcase_add_test(tc, test_wire_decode_parts_equals_whole);
    tcase_add_test(tc, test_wire_tombstone_errors_round_trip_capped);
    tcase_add_test(tc, test_wire_compressed_tensor_declares_its_raw_size);
    tcase_add_test(tc, test_wire_direct_offer);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
