/* tests/unit/check_channel.c - lib/channel over real gRPC streams and real data connections on 127.0.0.1: the
 * same sender and receiver code moves messages on either transport (the offer/ticket exchange inside the
 * channel), control messages reach the sender on both, a receiver that could not connect gets its data on
 * the call, a message over the receiver's cap is refused before it is read, and the call's end is seen.
 * A test codec of plain bytes stands in for the StreamElements messages; each test starts its own server. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "lib/channel.h"
#include "lib/err.h"
#include "lib/rpc.h"

#define M_CH "/test.Channel/Stream"

/* Messages: 'O' port ticket (an offer), 'A' connected (an answer), 'D' payload (data), 'C' credit (control),
 * 'R' asks-direct (the receiver's first request). */
static size_t t_offer(void *ctx, uint32_t port, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES], uint8_t *buf,
                      size_t cap)
{
    buf[0] = 'O';
    memcpy(buf + 1, &port, 4);
    memcpy(buf + 5, ticket, SPW_DIRECT_TICKET_BYTES);
    return 5 + SPW_DIRECT_TICKET_BYTES;
}

static int t_answer_of(void *ctx, const uint8_t *msg, size_t len, int64_t *credit)
{
    if (len != 2 || msg[0] != 'A')
        return -1;
    *credit += 100;
    return msg[1];
}

static int t_offer_of(void *ctx, const struct iovec *parts, int n, uint32_t *port,
                      uint8_t ticket[SPW_DIRECT_TICKET_BYTES])
{
    const uint8_t *p = parts[0].iov_base;
    if (parts[0].iov_len != 5 + SPW_DIRECT_TICKET_BYTES || p[0] != 'O')
        return 0;
    memcpy(port, p + 1, 4);
    memcpy(ticket, p + 5, SPW_DIRECT_TICKET_BYTES);
    if (ctx)        /* the receiver cannot reach the port: a wrong one */
        *port = 1;
    return 1;
}

static size_t t_answer(void *ctx, bool connected, uint8_t *buf, size_t cap)
{
    buf[0] = 'A';
    buf[1] = connected;
    return 2;
}

static const struct spw_channel_codec CODEC = {t_offer, t_answer_of, t_offer_of, t_answer};

struct sender {
    struct spw_direct_listener *l;
    size_t big;                 /* a data message of this many bytes after the others (0: none) */
    char kind[16];
    int64_t credit, heard;
};

/* The worker's side: the first request says whether to offer; three data messages, one control message
 * heard, a last data message (or a big one), then the end of the call. */
static int h_channel(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen)
{
    struct sender *sd = ctx;
    uint8_t *in;
    size_t n;
    if (spw_rpc_stream_recv(st, 5000, &in, &n) != 1)
        return SPW_RPC_INVALID_ARGUMENT;
    const bool asked = n == 2 && in[0] == 'R' && in[1];
    free(in);
    const struct spw_channel_opts o = {.call = st, .peer = "test", .codec = &CODEC};
    struct spw_channel *c;
    if (spw_channel_accept(&o, sd->l, asked, &sd->credit, &c, msg, msglen) != 0)
        return SPW_RPC_UNAVAILABLE;
    snprintf(sd->kind, sizeof sd->kind, "%s", spw_channel_kind(c));
    char text[32];
    for (int i = 0; i < 3; i++) {
        snprintf(text, sizeof text, "D%d", i);
        struct iovec iov[2] = {{text, 1}, {text + 1, 1}};     /* a gathered send */
        ck_assert_int_eq(spw_channel_send(c, iov, 2), 0);
    }
    int r;
    while ((r = spw_channel_hear(c, 5000, &in, &n)) == -ETIMEDOUT)
        ;
    ck_assert_int_eq(r, 1);
    ck_assert(n == 1 && in[0] == 'C');
    sd->heard++;
    free(in);
    uint8_t *big = sd->big ? calloc(1, sd->big) : NULL;
    struct iovec last = big ? (struct iovec){big, sd->big} : (struct iovec){"D3", 2};
    if (big)
        big[0] = 'D';
    spw_channel_send(c, &last, 1);
    free(big);
    spw_channel_destroy(c);
    return SPW_RPC_OK;
}

static struct spw_rpc_server *g_srv;
static struct spw_rpc_channel *g_ch;
static struct sender g_sd;
static char g_target[64];

static void setup(void)
{
    spw_rpc_init();
    memset(&g_sd, 0, sizeof g_sd);
    char err[256];
    ck_assert_int_eq(spw_direct_listen("127.0.0.1", 0, NULL, &g_sd.l, err, sizeof err), 0);
    struct spw_rpc_server_opts o = {.listen_addr = "127.0.0.1:0", .max_message_bytes = 8u << 20};
    ck_assert_int_eq(spw_rpc_server_create(&o, &g_srv, err, sizeof err), 0);
    ck_assert_int_eq(spw_rpc_server_add_stream(g_srv, M_CH, h_channel, &g_sd), 0);
    int port = 0;
    ck_assert_int_eq(spw_rpc_server_start(g_srv, &port), 0);
    snprintf(g_target, sizeof g_target, "127.0.0.1:%d", port);
    struct spw_rpc_channel_opts co = {.max_message_bytes = 8u << 20};
    ck_assert_int_eq(spw_rpc_channel_create(g_target, &co, &g_ch), 0);
}

static void teardown(void)
{
    spw_rpc_channel_destroy(g_ch);
    spw_rpc_server_shutdown(g_srv, 1000);
    spw_direct_listener_destroy(g_sd.l);
    spw_rpc_shutdown();
}

/* The client's side: ask (or not), receive everything; returns the last spw_channel_recv code and the kind. */
static int receive(bool ask, void *codec_ctx, size_t cap, char *kind, char *err, size_t errlen)
{
    struct spw_rpc_stream *st;
    ck_assert_int_eq(spw_rpc_stream_open(g_ch, M_CH, 10000, &st), 0);
    const struct spw_channel_opts o = {.call = st, .peer = g_target, .max_message = cap, .codec = &CODEC,
                                       .codec_ctx = codec_ctx};
    struct spw_channel *c;
    ck_assert_int_eq(spw_channel_open(&o, g_target, ask, &c), 0);
    const uint8_t first[2] = {'R', ask};
    ck_assert_int_eq(spw_channel_tell(c, &(struct iovec){(void *)first, 2}, 1), 0);
    int got = 0, rc;
    for (;;) {
        struct spw_channel_msg m;
        rc = spw_channel_recv(c, 200, &m, err, errlen);
        if (rc == -ETIMEDOUT)
            continue;
        if (rc != 1)
            break;
        char text[8] = "";
        for (int i = 0, at = 0; i < m.n && at < 7; i++)
            for (size_t k = 0; k < m.parts[i].iov_len && at < 7; k++)
                text[at++] = ((const char *)m.parts[i].iov_base)[k];
        ck_assert_int_eq(text[0], 'D');
        if (m.len == 2)
            ck_assert_int_eq(text[1], '0' + got);
        got++;
        snprintf(kind, 16, "%s", spw_channel_kind(c));
        spw_channel_msg_done(c, &m);
        if (got == 3)
            ck_assert_int_eq(spw_channel_tell(c, &(struct iovec){"C", 1}, 1), 0);
    }
    ck_assert_int_eq(got, rc == 0 ? 4 : 3);
    spw_channel_destroy(c);
    if (rc != 0)
        spw_rpc_stream_cancel(st);
    char msg[128];
    const int status = spw_rpc_stream_finish(st, msg, sizeof msg);
    if (rc == 0)
        ck_assert_int_eq(status, SPW_RPC_OK);
    return rc;
}

START_TEST(test_channel_the_same_code_on_either_transport)
{
    char kind[16] = "", err[128];
    /* Asked, with a listener: the exchange, then data on the connection; the answer's credit counted. */
    ck_assert_int_eq(receive(true, NULL, 1 << 20, kind, err, sizeof err), 0);
    ck_assert_str_eq(kind, "direct");
    ck_assert_str_eq(g_sd.kind, "direct");
    ck_assert_int_eq(g_sd.credit, 100);
    ck_assert_int_eq(g_sd.heard, 1);
    /* Not asked: everything on the call. */
    ck_assert_int_eq(receive(false, NULL, 1 << 20, kind, err, sizeof err), 0);
    ck_assert_str_eq(kind, "grpc");
    ck_assert_str_eq(g_sd.kind, "grpc");
    ck_assert_int_eq(g_sd.heard, 2);
}
END_TEST

START_TEST(test_channel_a_receiver_that_cannot_connect_gets_its_data_on_the_call)
{
    char kind[16] = "", err[128];
    int unreachable = 1;
    ck_assert_int_eq(receive(true, &unreachable, 1 << 20, kind, err, sizeof err), 0);
    ck_assert_str_eq(kind, "grpc");
    ck_assert_str_eq(g_sd.kind, "grpc");
    ck_assert_int_eq(g_sd.credit, 100);     /* it answered (not connected), with its credit */
}
END_TEST

START_TEST(test_channel_a_message_over_the_cap_is_refused_before_it_is_read)
{
    char kind[16] = "", err[128] = "";
    g_sd.big = 2u << 20;
    ck_assert_int_eq(receive(true, NULL, 1 << 20, kind, err, sizeof err), SPW_ETOOBIG);
    ck_assert_str_eq(kind, "direct");
    ck_assert_msg(strstr(err, "cap") || strstr(err, "bytes"), "%s", err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("channel");
    TCase *tc = tcase_create("channel");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_channel_the_same_code_on_either_transport);
    tcase_add_test(tc, test_channel_a_receiver_that_cannot_connect_gets_its_data_on_the_call);
    tcase_add_test(tc, test_channel_a_message_over_the_cap_is_refused_before_it_is_read);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
