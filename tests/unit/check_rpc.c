/* tests/unit/check_rpc.c - lib/rpc: unary calls, statuses, message caps, bearer auth (checked before the message
 * is read), a unary call without a message, dead peers, bidi streams (concurrent send/recv, zero-copy gather
 * sends, 600 KB pumping), cancel, stream cap and shutdown deadlines.
 * Runs without forking (grpc_init before a fork hangs); each test starts its own server on 127.0.0.1:0. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "lib/rpc.h"

#define M_ECHO   "/test.Echo/Unary"
#define M_FAIL   "/test.Echo/Fail"
#define M_SIZED  "/test.Echo/Sized"
#define M_STREAM "/test.Echo/Stream"
#define M_PUMP   "/test.Echo/Pump"
#define M_HOLD   "/test.Echo/Hold"

#define SERVER_CAP (8u << 20)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- handlers ---- */

static int h_echo(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                  size_t msglen)
{
    *resp = malloc(len ? len : 1);
    memcpy(*resp, req, len);
    *resp_len = len;
    return SPW_RPC_OK;
}

static int h_fail(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                  size_t msglen)
{
    snprintf(msg, msglen, "split 7 already leased");
    return SPW_RPC_FAILED_PRECONDITION;
}

/* Replies with as many bytes as the request's first 4 bytes say. */
static int h_sized(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                   size_t msglen)
{
    uint32_t n;
    if (len < 4) {
        snprintf(msg, msglen, "need 4 bytes");
        return SPW_RPC_INVALID_ARGUMENT;
    }
    memcpy(&n, req, 4);
    *resp = calloc(1, n ? n : 1);
    *resp_len = n;
    return SPW_RPC_OK;
}

/* Echoes every message back, then OK at the client's half-close. The received buffer is freed as soon as the
 * send returns, so a zero-copy send that returned early would be caught by ASan. */
static int h_stream(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen)
{
    for (;;) {
        uint8_t *m;
        size_t n;
        int r = spw_rpc_stream_recv(st, 0, &m, &n);
        if (r == 0)
            return SPW_RPC_OK;
        if (r < 0) {
            snprintf(msg, msglen, "recv: %d", r);
            return SPW_RPC_CANCELLED;
        }
        struct iovec iov = {m, n};
        r = spw_rpc_stream_send(st, &iov, 1);
        free(m);
        if (r < 0) {
            snprintf(msg, msglen, "send: %d", r);
            return SPW_RPC_CANCELLED;
        }
    }
}

/* Pump payload: message i is an 8-byte index (copied part) + PUMP_SIZE-8 bytes of g_pattern from offset
 * i % 1000 (a zero-copy part). */
#define PUMP_COUNT 1000
#define PUMP_SIZE  (600u * 1000u)
static uint8_t *g_pattern;

static void make_pattern(void)
{
    if (g_pattern)
        return;
    g_pattern = malloc(PUMP_SIZE + 1000);
    for (size_t k = 0; k < PUMP_SIZE + 1000; k++)
        g_pattern[k] = (uint8_t)(k * 7 + k / 251);
}

static int h_pump(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen)
{
    uint8_t *m;
    size_t n;
    if (spw_rpc_stream_recv(st, 0, &m, &n) != 1 || n != 4) {
        snprintf(msg, msglen, "want a 4-byte count");
        return SPW_RPC_INVALID_ARGUMENT;
    }
    uint32_t count;
    memcpy(&count, m, 4);
    free(m);
    for (uint64_t i = 0; i < count; i++) {
        struct iovec iov[2] = {{&i, 8}, {g_pattern + i % 1000, PUMP_SIZE - 8}};
        if (spw_rpc_stream_send(st, iov, 2) < 0) {
            snprintf(msg, msglen, "send %llu failed", (unsigned long long)i);
            return SPW_RPC_ABORTED;
        }
    }
    return SPW_RPC_OK;
}

/* Echoes until the stream ends or fails, and records how it ended. */
struct hold_ctx {
    atomic_int entered;
    atomic_int finished;
    atomic_int last_rc;  /* recv's or send's final return */
};

static int h_hold(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen)
{
    struct hold_ctx *h = ctx;
    atomic_fetch_add(&h->entered, 1);
    int r;
    for (;;) {
        uint8_t *m;
        size_t n;
        r = spw_rpc_stream_recv(st, 0, &m, &n);
        if (r <= 0)
            break;
        struct iovec iov = {m, n};
        r = spw_rpc_stream_send(st, &iov, 1);
        free(m);
        if (r < 0)
            break;
    }
    atomic_store(&h->last_rc, r);
    atomic_fetch_add(&h->finished, 1);
    return r == 0 ? SPW_RPC_OK : SPW_RPC_CANCELLED;
}

/* ---- fixture: one server with every method, one channel ---- */

static struct spw_rpc_server *g_srv;
static struct spw_rpc_channel *g_ch;
static struct hold_ctx g_hold;
static int g_port;
static char g_target[64];

static struct spw_rpc_server *start_server(const char *token, int max_streams, int *port)
{
    struct spw_rpc_server_opts o = {.listen_addr = "127.0.0.1:0", .max_message_bytes = SERVER_CAP,
                                    .auth_token = token, .max_streams = max_streams};
    struct spw_rpc_server *s = NULL;
    char err[256];
    ck_assert_int_eq(spw_rpc_server_create(&o, &s, err, sizeof err), 0);
    ck_assert_int_eq(spw_rpc_server_add_unary(s, M_ECHO, h_echo, NULL), 0);
    ck_assert_int_eq(spw_rpc_server_add_unary(s, M_FAIL, h_fail, NULL), 0);
    ck_assert_int_eq(spw_rpc_server_add_unary(s, M_SIZED, h_sized, NULL), 0);
    ck_assert_int_eq(spw_rpc_server_add_stream(s, M_STREAM, h_stream, NULL), 0);
    ck_assert_int_eq(spw_rpc_server_add_stream(s, M_PUMP, h_pump, NULL), 0);
    ck_assert_int_eq(spw_rpc_server_add_stream(s, M_HOLD, h_hold, &g_hold), 0);
    ck_assert_int_eq(spw_rpc_server_add_unary(s, M_ECHO, h_echo, NULL), -EEXIST);
    ck_assert_int_eq(spw_rpc_server_start(s, port), 0);
    ck_assert_int_gt(*port, 0);
    ck_assert_int_eq(spw_rpc_server_add_unary(s, "/test.Echo/Late", h_echo, NULL), -EBUSY);
    return s;
}

static void setup(void)
{
    spw_rpc_init();
    make_pattern();
    memset(&g_hold, 0, sizeof g_hold);
    g_srv = start_server(NULL, 0, &g_port);
    snprintf(g_target, sizeof g_target, "127.0.0.1:%d", g_port);
    struct spw_rpc_channel_opts co = {.max_message_bytes = 16u << 20};
    ck_assert_int_eq(spw_rpc_channel_create(g_target, &co, &g_ch), 0);
}

static void teardown(void)
{
    spw_rpc_channel_destroy(g_ch);
    spw_rpc_server_shutdown(g_srv, 1000);
    spw_rpc_server_destroy(g_srv);
    spw_rpc_shutdown();
}

static int call(struct spw_rpc_channel *c, const char *method, const void *req, size_t len, uint8_t **resp,
                size_t *resp_len, char *msg, size_t msglen)
{
    return spw_rpc_call(c, method, req, len, 10000, resp, resp_len, msg, msglen);
}

static void wait_for(atomic_int *v, int want, int ms)
{
    double until = now_ms() + ms;
    while (atomic_load(v) < want && now_ms() < until)
        usleep(1000);
    ck_assert_int_ge(atomic_load(v), want);
}

/* ---- unary ---- */

START_TEST(test_rpc_unary_round_trip)
{
    uint8_t *resp = NULL;
    size_t n = 0;
    char msg[128];
    ck_assert_int_eq(call(g_ch, M_ECHO, "hello", 5, &resp, &n, msg, sizeof msg), SPW_RPC_OK);
    ck_assert_uint_eq(n, 5);
    ck_assert_mem_eq(resp, "hello", 5);
    free(resp);
    resp = NULL;
    ck_assert_int_eq(call(g_ch, M_ECHO, NULL, 0, &resp, &n, msg, sizeof msg), SPW_RPC_OK);
    ck_assert_ptr_nonnull(resp);
    ck_assert_uint_eq(n, 0);
    free(resp);
    if (getenv("SPW_RPC_TIMING")) {
        double t0 = now_ms();
        for (int i = 0; i < 2000; i++) {
            ck_assert_int_eq(call(g_ch, M_ECHO, "hello", 5, &resp, &n, msg, sizeof msg), SPW_RPC_OK);
            free(resp);
        }
        printf("unary: %.1f us per round trip\n", (now_ms() - t0) * 1e3 / 2000);
    }
}
END_TEST

START_TEST(test_rpc_unary_error_status_and_message)
{
    uint8_t *resp = NULL;
    size_t n = 0;
    char msg[128];
    ck_assert_int_eq(call(g_ch, M_FAIL, "x", 1, &resp, &n, msg, sizeof msg), SPW_RPC_FAILED_PRECONDITION);
    ck_assert_str_eq(msg, "split 7 already leased");
    ck_assert_ptr_null(resp);
    ck_assert_str_eq(spw_rpc_status_name(SPW_RPC_FAILED_PRECONDITION), "FAILED_PRECONDITION");
}
END_TEST

START_TEST(test_rpc_unknown_method_unimplemented)
{
    uint8_t *resp = NULL;
    size_t n = 0;
    char msg[128];
    ck_assert_int_eq(call(g_ch, "/test.Echo/Nope", "x", 1, &resp, &n, msg, sizeof msg), SPW_RPC_UNIMPLEMENTED);
    ck_assert_ptr_nonnull(strstr(msg, "/test.Echo/Nope"));
    /* and the server still serves */
    ck_assert_int_eq(call(g_ch, M_ECHO, "a", 1, &resp, &n, msg, sizeof msg), SPW_RPC_OK);
    free(resp);
}
END_TEST

/* 5 MiB each way is above gRPC's 4 MiB default receive limit: proves the limits were raised. */
START_TEST(test_rpc_large_message_within_cap)
{
    size_t len = 5u << 20;
    uint8_t *req = malloc(len), *resp = NULL;
    size_t n = 0;
    char msg[256];
    for (size_t i = 0; i < len; i++)
        req[i] = (uint8_t)(i * 13 + 5);
    ck_assert_int_eq(call(g_ch, M_ECHO, req, len, &resp, &n, msg, sizeof msg), SPW_RPC_OK);
    ck_assert_uint_eq(n, len);
    ck_assert_int_eq(memcmp(resp, req, len), 0);
    free(resp);
    free(req);
}
END_TEST

START_TEST(test_rpc_oversized_message_resource_exhausted)
{
    size_t len = SERVER_CAP + 1;
    uint8_t *req = calloc(1, len), *resp = NULL;
    size_t n = 0;
    char msg[256];
    /* over the server's cap (the channel's is 16 MiB, so the server is the one refusing) */
    ck_assert_int_eq(call(g_ch, M_ECHO, req, len, &resp, &n, msg, sizeof msg), SPW_RPC_RESOURCE_EXHAUSTED);
    ck_assert_int_eq(call(g_ch, M_ECHO, "ok", 2, &resp, &n, msg, sizeof msg), SPW_RPC_OK);
    free(resp);
    resp = NULL;

    /* over a client's cap in each direction */
    struct spw_rpc_channel *small = NULL;
    struct spw_rpc_channel_opts co = {.max_message_bytes = 1u << 20};
    ck_assert_int_eq(spw_rpc_channel_create(g_target, &co, &small), 0);
    ck_assert_int_eq(call(small, M_ECHO, req, (2u << 20), &resp, &n, msg, sizeof msg), SPW_RPC_RESOURCE_EXHAUSTED);
    uint32_t want = 2u << 20;
    ck_assert_int_eq(call(small, M_SIZED, &want, 4, &resp, &n, msg, sizeof msg), SPW_RPC_RESOURCE_EXHAUSTED);
    ck_assert_ptr_null(resp);
    want = 1000;
    ck_assert_int_eq(call(small, M_SIZED, &want, 4, &resp, &n, msg, sizeof msg), SPW_RPC_OK);
    ck_assert_uint_eq(n, 1000);
    free(resp);
    spw_rpc_channel_destroy(small);
    free(req);
}
END_TEST

START_TEST(test_rpc_auth_token_required)
{
    int port;
    char target[64], msg[256];
    uint8_t *resp = NULL;
    size_t n = 0;
    struct spw_rpc_server *s = start_server("s3cret", 0, &port);
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    struct spw_rpc_channel *none = NULL, *wrong = NULL, *right = NULL;
    struct spw_rpc_channel_opts wo = {.auth_token = "s3cres"}, ro = {.auth_token = "s3cret"};
    ck_assert_int_eq(spw_rpc_channel_create(target, NULL, &none), 0);
    ck_assert_int_eq(spw_rpc_channel_create(target, &wo, &wrong), 0);
    ck_assert_int_eq(spw_rpc_channel_create(target, &ro, &right), 0);

    ck_assert_int_eq(call(none, M_ECHO, "a", 1, &resp, &n, msg, sizeof msg), SPW_RPC_UNAUTHENTICATED);
    ck_assert_int_eq(call(wrong, M_ECHO, "a", 1, &resp, &n, msg, sizeof msg), SPW_RPC_UNAUTHENTICATED);
    ck_assert_int_eq(call(right, M_ECHO, "a", 1, &resp, &n, msg, sizeof msg), SPW_RPC_OK);
    free(resp);

    struct spw_rpc_stream *st = NULL;
    ck_assert_int_eq(spw_rpc_stream_open(wrong, M_STREAM, 5000, &st), 0);
    ck_assert_int_eq(spw_rpc_stream_finish(st, msg, sizeof msg), SPW_RPC_UNAUTHENTICATED);
    ck_assert_int_eq(spw_rpc_stream_open(right, M_STREAM, 5000, &st), 0);
    struct iovec iov = {"ping", 4};
    ck_assert_int_eq(spw_rpc_stream_send(st, &iov, 1), 0);
    ck_assert_int_eq(spw_rpc_stream_recv(st, 0, &resp, &n), 1);
    free(resp);
    ck_assert_int_eq(spw_rpc_stream_close_send(st), 0);
    ck_assert_int_eq(spw_rpc_stream_finish(st, msg, sizeof msg), SPW_RPC_OK);

    spw_rpc_channel_destroy(none);
    spw_rpc_channel_destroy(wrong);
    spw_rpc_channel_destroy(right);
    spw_rpc_server_shutdown(s, 1000);
    spw_rpc_server_destroy(s);
}
END_TEST

/* An unauthenticated request over the server's message cap is refused for its token, not its size: the token
 * is checked before any of the message is read. */
START_TEST(test_rpc_auth_checked_before_message_read)
{
    int port;
    char target[64], msg[256];
    uint8_t *req = calloc(1, SERVER_CAP + 1), *resp = NULL;
    size_t n = 0;
    struct spw_rpc_server *s = start_server("s3cret", 0, &port);
    struct spw_rpc_channel *none = NULL, *right = NULL;
    struct spw_rpc_channel_opts no = {.max_message_bytes = 16u << 20},
                                ro = {.max_message_bytes = 16u << 20, .auth_token = "s3cret"};
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    ck_assert_int_eq(spw_rpc_channel_create(target, &no, &none), 0);
    ck_assert_int_eq(spw_rpc_channel_create(target, &ro, &right), 0);

    ck_assert_int_eq(call(none, M_ECHO, req, SERVER_CAP + 1, &resp, &n, msg, sizeof msg), SPW_RPC_UNAUTHENTICATED);
    ck_assert_int_eq(call(right, M_ECHO, req, SERVER_CAP + 1, &resp, &n, msg, sizeof msg),
                     SPW_RPC_RESOURCE_EXHAUSTED);
    ck_assert_int_eq(call(right, M_ECHO, req, SERVER_CAP, &resp, &n, msg, sizeof msg), SPW_RPC_OK);
    ck_assert_uint_eq(n, SERVER_CAP);
    free(resp);

    spw_rpc_channel_destroy(none);
    spw_rpc_channel_destroy(right);
    spw_rpc_server_shutdown(s, 1000);
    spw_rpc_server_destroy(s);
    free(req);
}
END_TEST

/* A unary call whose client half-closes without sending a message gets INVALID_ARGUMENT, not a hang. */
START_TEST(test_rpc_unary_without_message_invalid_argument)
{
    struct spw_rpc_stream *st = NULL;
    char msg[256];
    ck_assert_int_eq(spw_rpc_stream_open(g_ch, M_ECHO, 5000, &st), 0);
    ck_assert_int_eq(spw_rpc_stream_close_send(st), 0);
    ck_assert_int_eq(spw_rpc_stream_finish(st, msg, sizeof msg), SPW_RPC_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(msg, "request message missing"));
}
END_TEST

START_TEST(test_rpc_dead_port_unavailable_within_deadline)
{
    /* a port that was just free: bind, read it, close */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    char target[64], msg[256];
    snprintf(target, sizeof target, "127.0.0.1:%d", ntohs(a.sin_port));
    struct spw_rpc_channel *c = NULL;
    ck_assert_int_eq(spw_rpc_channel_create(target, NULL, &c), 0);
    uint8_t *resp = NULL;
    size_t n = 0;
    double t0 = now_ms();
    ck_assert_int_eq(spw_rpc_call(c, M_ECHO, (const uint8_t *)"a", 1, 2000, &resp, &n, msg, sizeof msg), SPW_RPC_UNAVAILABLE);
    ck_assert_double_lt(now_ms() - t0, 2500);
    ck_assert_ptr_null(resp);
    /* a stream to it fails the same way */
    struct spw_rpc_stream *st = NULL;
    ck_assert_int_eq(spw_rpc_stream_open(c, M_STREAM, 2000, &st), 0);
    struct iovec iov = {"x", 1};
    spw_rpc_stream_send(st, &iov, 1);  /* may fail or not, depending on timing */
    ck_assert_int_eq(spw_rpc_stream_finish(st, msg, sizeof msg), SPW_RPC_UNAVAILABLE);
    spw_rpc_channel_destroy(c);
}
END_TEST

/* Many threads sharing a channel; the server spreads them over its I/O queues. */
static void *unary_worker(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < 200; i++) {
        char req[32], msg[64];
        int len = snprintf(req, sizeof req, "w%ld-%d", id, i);
        uint8_t *resp = NULL;
        size_t n = 0;
        if (call(g_ch, M_ECHO, req, (size_t)len, &resp, &n, msg, sizeof msg) != SPW_RPC_OK || n != (size_t)len ||
            memcmp(resp, req, n) != 0) {
            free(resp);
            return (void *)1;
        }
        free(resp);
    }
    return NULL;
}

START_TEST(test_rpc_unary_concurrent_callers)
{
    pthread_t t[8];
    for (long i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, unary_worker, (void *)i);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
}
END_TEST

static atomic_int g_slow_done;

static int h_slow(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                  size_t msglen)
{
    usleep(800 * 1000);
    atomic_fetch_add(&g_slow_done, 1);
    return h_echo(ctx, req, len, resp, resp_len, msg, msglen);
}

static void *slow_caller(void *arg)
{
    struct spw_rpc_channel *c = arg;
    uint8_t *resp = NULL;
    size_t n = 0;
    int st = spw_rpc_call(c, "/test.Slow/Call", (const uint8_t *)"zz", 2, 10000, &resp, &n, NULL, 0);
    free(resp);
    return st == SPW_RPC_OK && n == 2 ? NULL : (void *)1;
}

/* One io thread: a slow method's handler runs on its own thread, so a quick call is answered meanwhile, and
 * shutdown waits for the slow handler instead of freeing what it replies through. */
START_TEST(test_rpc_slow_unary_does_not_block_quick_calls)
{
    struct spw_rpc_server_opts o = {.listen_addr = "127.0.0.1:0", .io_threads = 1};
    struct spw_rpc_server *s = NULL;
    char err[256], target[64];
    ck_assert_int_eq(spw_rpc_server_create(&o, &s, err, sizeof err), 0);
    ck_assert_int_eq(spw_rpc_server_add_unary_slow(s, "/test.Slow/Call", h_slow, NULL), 0);
    ck_assert_int_eq(spw_rpc_server_add_unary(s, M_ECHO, h_echo, NULL), 0);
    int port = 0;
    ck_assert_int_eq(spw_rpc_server_start(s, &port), 0);
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    struct spw_rpc_channel *c;
    ck_assert_int_eq(spw_rpc_channel_create(target, NULL, &c), 0);
    atomic_store(&g_slow_done, 0);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, slow_caller, c);
    usleep(100 * 1000);
    double t0 = now_ms();
    uint8_t *resp = NULL;
    size_t n = 0;
    ck_assert_int_eq(call(c, M_ECHO, "q", 1, &resp, &n, NULL, 0), SPW_RPC_OK);
    free(resp);
    ck_assert_msg(now_ms() - t0 < 500, "a quick call waited %.0f ms behind slow ones", now_ms() - t0);
    ck_assert_int_eq(atomic_load(&g_slow_done), 0);
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
    pthread_create(&t[0], NULL, slow_caller, c);        /* shut down while a slow handler runs */
    usleep(100 * 1000);
    spw_rpc_server_shutdown(s, 100);
    ck_assert_int_eq(atomic_load(&g_slow_done), 4);
    pthread_join(t[0], NULL);
    spw_rpc_channel_destroy(c);
    spw_rpc_server_destroy(s);
}
END_TEST

static atomic_int g_probe_runs, g_probe_expired;

/* A handler that waits 300 ms (as for a contended lock), then asks whether its caller still waits. */
static int h_deadline_probe(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                            size_t msglen)
{
    const bool before = spw_rpc_current_expired();
    usleep(300 * 1000);
    atomic_fetch_add(&g_probe_expired, !before && spw_rpc_current_expired());
    atomic_fetch_add(&g_probe_runs, 1);
    return h_echo(ctx, req, len, resp, resp_len, msg, msglen);
}

/* spw_rpc_current_expired: a handler that waited past its call's 100 ms deadline learns that nobody waits
 * for its answer (the dispatcher then sheds the call instead of doing the work); with time left it does not;
 * outside a handler it is false. */
START_TEST(test_rpc_handler_learns_its_deadline_passed)
{
    struct spw_rpc_server_opts o = {.listen_addr = "127.0.0.1:0"};
    struct spw_rpc_server *s = NULL;
    char err[256], target[64];
    ck_assert_int_eq(spw_rpc_server_create(&o, &s, err, sizeof err), 0);
    ck_assert_int_eq(spw_rpc_server_add_unary(s, "/test.Probe/Call", h_deadline_probe, NULL), 0);
    int port = 0;
    ck_assert_int_eq(spw_rpc_server_start(s, &port), 0);
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    struct spw_rpc_channel *c;
    ck_assert_int_eq(spw_rpc_channel_create(target, NULL, &c), 0);
    atomic_store(&g_probe_runs, 0);
    atomic_store(&g_probe_expired, 0);
    uint8_t *resp = NULL;
    size_t n = 0;
    ck_assert_int_eq(spw_rpc_call(c, "/test.Probe/Call", (const uint8_t *)"p", 1, 100, &resp, &n, NULL, 0),
                     SPW_RPC_DEADLINE_EXCEEDED);
    free(resp);
    wait_for(&g_probe_runs, 1, 2000);
    ck_assert_int_eq(atomic_load(&g_probe_expired), 1);
    resp = NULL;
    ck_assert_int_eq(spw_rpc_call(c, "/test.Probe/Call", (const uint8_t *)"p", 1, 5000, &resp, &n, NULL, 0),
                     SPW_RPC_OK);
    free(resp);
    ck_assert_int_eq(atomic_load(&g_probe_runs), 2);
    ck_assert_int_eq(atomic_load(&g_probe_expired), 1);
    ck_assert(!spw_rpc_current_expired());
    spw_rpc_channel_destroy(c);
    spw_rpc_server_shutdown(s, 1000);
    spw_rpc_server_destroy(s);
}
END_TEST

/* One peer host holds at most half of the slow-call slots (8 of 16): its ninth call is refused while another
 * host (::1) is still served. */
START_TEST(test_rpc_slow_calls_per_peer_host)
{
    struct spw_rpc_server_opts o = {.listen_addr = "[::]:0"};
    struct spw_rpc_server *s = NULL;
    char err[256], target[64], msg[256] = "";
    ck_assert_int_eq(spw_rpc_server_create(&o, &s, err, sizeof err), 0);
    ck_assert_int_eq(spw_rpc_server_add_unary_slow(s, "/test.Slow/Call", h_slow, NULL), 0);
    int port = 0;
    ck_assert_int_eq(spw_rpc_server_start(s, &port), 0);
    struct spw_rpc_channel *v4, *v6;
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    ck_assert_int_eq(spw_rpc_channel_create(target, NULL, &v4), 0);
    snprintf(target, sizeof target, "[::1]:%d", port);
    ck_assert_int_eq(spw_rpc_channel_create(target, NULL, &v6), 0);
    pthread_t t[SPW_RPC_MAX_SLOW_CALLS / 2];
    for (int i = 0; i < SPW_RPC_MAX_SLOW_CALLS / 2; i++)
        pthread_create(&t[i], NULL, slow_caller, v4);
    usleep(200 * 1000);
    uint8_t *resp = NULL;
    size_t n = 0;
    ck_assert_int_eq(spw_rpc_call(v4, "/test.Slow/Call", (const uint8_t *)"zz", 2, 10000, &resp, &n, msg,
                                  sizeof msg), SPW_RPC_RESOURCE_EXHAUSTED);
    ck_assert_msg(strstr(msg, "from this peer") != NULL, "%s", msg);
    free(resp);
    resp = NULL;
    ck_assert_int_eq(spw_rpc_call(v6, "/test.Slow/Call", (const uint8_t *)"zz", 2, 10000, &resp, &n, msg,
                                  sizeof msg), SPW_RPC_OK);
    free(resp);
    for (int i = 0; i < SPW_RPC_MAX_SLOW_CALLS / 2; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
    spw_rpc_channel_destroy(v4);
    spw_rpc_channel_destroy(v6);
    spw_rpc_server_destroy(s);
}
END_TEST

START_TEST(test_rpc_bind_in_use_fails)
{
    char addr[64], err[256];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", g_port);
    struct spw_rpc_server_opts o = {.listen_addr = addr};
    struct spw_rpc_server *s = NULL;
    ck_assert_int_eq(spw_rpc_server_create(&o, &s, err, sizeof err), -EADDRINUSE);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(err, addr));
    ck_assert_ptr_nonnull(strstr(err, "in use"));
    if (getenv("SPW_RPC_TIMING"))
        printf("bind error: %s\n", err);
    o.listen_addr = NULL;
    ck_assert_int_eq(spw_rpc_server_create(&o, &s, err, sizeof err), -EINVAL);
}
END_TEST

/* ---- streams ---- */

#define BIDI_N 300

static size_t bidi_len(int i)
{
    return (size_t)(i % 3 == 0 ? 40000 + i : 10 + i);  /* a third take the zero-copy path */
}

static void *bidi_sender(void *arg)
{
    struct spw_rpc_stream *st = arg;
    uint8_t *buf = malloc(50000);
    for (int i = 0; i < BIDI_N; i++) {
        uint32_t hdr = (uint32_t)i;
        size_t len = bidi_len(i);
        for (size_t k = 0; k < len; k++)
            buf[k] = (uint8_t)(i + k);
        struct iovec iov[2] = {{&hdr, 4}, {buf, len}};
        if (spw_rpc_stream_send(st, iov, 2) != 0) {
            free(buf);
            return (void *)1;
        }
        memset(buf, 0xEE, len);  /* reusing the buffer right away must be safe */
    }
    free(buf);
    return spw_rpc_stream_close_send(st) == 0 ? NULL : (void *)2;
}

static void *bidi_receiver(void *arg)
{
    struct spw_rpc_stream *st = arg;
    for (int i = 0; i < BIDI_N; i++) {
        uint8_t *m;
        size_t n;
        if (spw_rpc_stream_recv(st, 0, &m, &n) != 1)
            return (void *)1;
        uint32_t hdr;
        memcpy(&hdr, m, 4);
        int bad = hdr != (uint32_t)i || n != 4 + bidi_len(i);
        for (size_t k = 0; !bad && k < n - 4; k++)
            bad = m[4 + k] != (uint8_t)(i + k);
        free(m);
        if (bad)
            return (void *)2;
    }
    uint8_t *m;
    size_t n;
    return spw_rpc_stream_recv(st, 0, &m, &n) == 0 ? NULL : (void *)3;
}

START_TEST(test_rpc_stream_bidi_concurrent_send_recv)
{
    struct spw_rpc_stream *st = NULL;
    pthread_t ts, tr;
    void *rs, *rr;
    char msg[128];
    ck_assert_int_eq(spw_rpc_stream_open(g_ch, M_STREAM, 30000, &st), 0);
    pthread_create(&ts, NULL, bidi_sender, st);
    pthread_create(&tr, NULL, bidi_receiver, st);
    pthread_join(ts, &rs);
    pthread_join(tr, &rr);
    ck_assert_ptr_null(rs);
    ck_assert_ptr_null(rr);
    ck_assert_int_eq(spw_rpc_stream_finish(st, msg, sizeof msg), SPW_RPC_OK);
}
END_TEST

START_TEST(test_rpc_stream_server_pumps_600k_messages)
{
    struct spw_rpc_stream *st = NULL;
    char msg[128];
    uint32_t count = PUMP_COUNT;
    struct iovec iov = {&count, 4};
    ck_assert_int_eq(spw_rpc_stream_open(g_ch, M_PUMP, 120000, &st), 0);
    ck_assert_int_eq(spw_rpc_stream_send(st, &iov, 1), 0);
    ck_assert_int_eq(spw_rpc_stream_close_send(st), 0);
    size_t bytes = 0;
    double t0 = now_ms();
    for (uint64_t i = 0; i < PUMP_COUNT; i++) {
        uint8_t *m;
        size_t n;
        ck_assert_int_eq(spw_rpc_stream_recv(st, 0, &m, &n), 1);
        ck_assert_uint_eq(n, PUMP_SIZE);
        uint64_t idx;
        memcpy(&idx, m, 8);
        ck_assert_uint_eq(idx, i);
        ck_assert_int_eq(memcmp(m + 8, g_pattern + i % 1000, PUMP_SIZE - 8), 0);
        bytes += n;
        free(m);
    }
    double ms = now_ms() - t0;
    uint8_t *m;
    size_t n;
    ck_assert_int_eq(spw_rpc_stream_recv(st, 0, &m, &n), 0);
    ck_assert_int_eq(spw_rpc_stream_finish(st, msg, sizeof msg), SPW_RPC_OK);
    if (getenv("SPW_RPC_TIMING"))
        printf("pump: %zu MB in %.0f ms = %.0f MB/s\n", bytes / 1000000, ms, bytes / 1e3 / ms);
}
END_TEST

START_TEST(test_rpc_stream_client_cancel_reaches_handler)
{
    struct spw_rpc_stream *st = NULL;
    char msg[128];
    uint8_t *m;
    size_t n;
    struct iovec iov = {"ping", 4};
    ck_assert_int_eq(spw_rpc_stream_open(g_ch, M_HOLD, 30000, &st), 0);
    ck_assert_int_eq(spw_rpc_stream_send(st, &iov, 1), 0);
    ck_assert_int_eq(spw_rpc_stream_recv(st, 0, &m, &n), 1);  /* the handler is now blocked in recv */
    free(m);
    spw_rpc_stream_cancel(st);
    wait_for(&g_hold.finished, 1, 5000);
    ck_assert_int_lt(atomic_load(&g_hold.last_rc), 0);
    ck_assert_int_eq(spw_rpc_stream_send(st, &iov, 1), -ECANCELED);
    ck_assert_int_eq(spw_rpc_stream_finish(st, msg, sizeof msg), SPW_RPC_CANCELLED);
}
END_TEST

START_TEST(test_rpc_stream_recv_timeout_resumes)
{
    struct spw_rpc_stream *st = NULL;
    char msg[128];
    uint8_t *m;
    size_t n;
    struct iovec iov = {"late", 4};
    ck_assert_int_eq(spw_rpc_stream_open(g_ch, M_STREAM, 30000, &st), 0);
    double t0 = now_ms();
    ck_assert_int_eq(spw_rpc_stream_recv(st, 50, &m, &n), -ETIMEDOUT);
    ck_assert_double_ge(now_ms() - t0, 40);
    ck_assert_int_eq(spw_rpc_stream_send(st, &iov, 1), 0);
    ck_assert_int_eq(spw_rpc_stream_recv(st, 5000, &m, &n), 1);
    ck_assert_uint_eq(n, 4);
    ck_assert_mem_eq(m, "late", 4);
    free(m);
    ck_assert_int_eq(spw_rpc_stream_close_send(st), 0);
    ck_assert_int_eq(spw_rpc_stream_send(st, &iov, 1), -EPIPE);
    ck_assert_int_eq(spw_rpc_stream_finish(st, msg, sizeof msg), SPW_RPC_OK);
}
END_TEST

START_TEST(test_rpc_stream_send_over_cap_is_local_error)
{
    struct spw_rpc_stream *st = NULL;
    char msg[128];
    uint8_t *m;
    size_t n;
    size_t big = (16u << 20) + 1;  /* the channel's cap */
    uint8_t *buf = calloc(1, big);
    struct iovec iov = {buf, big}, small = {"ok", 2};
    ck_assert_int_eq(spw_rpc_stream_open(g_ch, M_STREAM, 30000, &st), 0);
    ck_assert_int_eq(spw_rpc_stream_send(st, &iov, 1), -EMSGSIZE);
    ck_assert_int_eq(spw_rpc_stream_send(st, &small, 1), 0);
    ck_assert_int_eq(spw_rpc_stream_recv(st, 0, &m, &n), 1);
    free(m);
    /* over the server's cap but under the channel's: the server fails the call */
    iov.iov_len = SERVER_CAP + 1;
    spw_rpc_stream_send(st, &iov, 1);
    ck_assert_int_le(spw_rpc_stream_recv(st, 0, &m, &n), 0);  /* a client sees the end; finish says why */
    ck_assert_int_eq(spw_rpc_stream_finish(st, msg, sizeof msg), SPW_RPC_RESOURCE_EXHAUSTED);
    free(buf);
}
END_TEST

START_TEST(test_rpc_stream_cap_resource_exhausted)
{
    int port;
    char target[64], msg[128];
    uint8_t *m;
    size_t n;
    struct iovec iov = {"ping", 4};
    struct spw_rpc_server *s = start_server(NULL, 1, &port);
    struct spw_rpc_channel *c = NULL;
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    ck_assert_int_eq(spw_rpc_channel_create(target, NULL, &c), 0);
    struct spw_rpc_stream *a = NULL, *b = NULL;
    ck_assert_int_eq(spw_rpc_stream_open(c, M_HOLD, 30000, &a), 0);
    ck_assert_int_eq(spw_rpc_stream_send(a, &iov, 1), 0);
    ck_assert_int_eq(spw_rpc_stream_recv(a, 0, &m, &n), 1);
    free(m);
    ck_assert_int_eq(spw_rpc_stream_open(c, M_HOLD, 30000, &b), 0);
    ck_assert_int_eq(spw_rpc_stream_finish(b, msg, sizeof msg), SPW_RPC_RESOURCE_EXHAUSTED);
    ck_assert_int_eq(spw_rpc_stream_close_send(a), 0);
    ck_assert_int_eq(spw_rpc_stream_finish(a, msg, sizeof msg), SPW_RPC_OK);
    /* the slot frees once a's thread has ended, just after its status went out */
    int got = 0;
    for (int tries = 0; tries < 500 && !got; tries++) {
        ck_assert_int_eq(spw_rpc_stream_open(c, M_HOLD, 30000, &b), 0);
        if (spw_rpc_stream_send(b, &iov, 1) == 0 && spw_rpc_stream_recv(b, 0, &m, &n) == 1) {
            free(m);
            got = 1;
        } else {
            ck_assert_int_eq(spw_rpc_stream_finish(b, msg, sizeof msg), SPW_RPC_RESOURCE_EXHAUSTED);
            usleep(10000);
        }
    }
    ck_assert(got);
    ck_assert_int_eq(spw_rpc_stream_close_send(b), 0);
    ck_assert_int_eq(spw_rpc_stream_finish(b, msg, sizeof msg), SPW_RPC_OK);
    spw_rpc_channel_destroy(c);
    spw_rpc_server_destroy(s);
}
END_TEST

/* An open, echoing HOLD stream on c, or NULL when the server refused it (its status in *status). */
static struct spw_rpc_stream *hold_open(struct spw_rpc_channel *c, int *status, char *msg, size_t msglen)
{
    struct spw_rpc_stream *st = NULL;
    struct iovec iov = {"ping", 4};
    uint8_t *m;
    size_t n;
    ck_assert_int_eq(spw_rpc_stream_open(c, M_HOLD, 30000, &st), 0);
    if (spw_rpc_stream_send(st, &iov, 1) == 0 && spw_rpc_stream_recv(st, 0, &m, &n) == 1) {
        free(m);
        return st;
    }
    *status = spw_rpc_stream_finish(st, msg, msglen);
    return NULL;
}

START_TEST(test_rpc_stream_cap_per_peer_host)
{
    /* max 4 streams: one peer host (127.0.0.1) gets 2; another (::1) still gets one. */
    struct hold_ctx hold = {0};
    struct spw_rpc_server_opts o = {.listen_addr = "[::]:0", .max_streams = 4};
    struct spw_rpc_server *s = NULL;
    char err[256], msg[256], target[64];
    int port, status = 0;
    ck_assert_int_eq(spw_rpc_server_create(&o, &s, err, sizeof err), 0);
    ck_assert_int_eq(spw_rpc_server_add_stream(s, M_HOLD, h_hold, &hold), 0);
    ck_assert_int_eq(spw_rpc_server_start(s, &port), 0);
    struct spw_rpc_channel *v4 = NULL, *v6 = NULL;
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    ck_assert_int_eq(spw_rpc_channel_create(target, NULL, &v4), 0);
    snprintf(target, sizeof target, "[::1]:%d", port);
    ck_assert_int_eq(spw_rpc_channel_create(target, NULL, &v6), 0);
    struct spw_rpc_stream *a = hold_open(v4, &status, msg, sizeof msg), *b = hold_open(v4, &status, msg, sizeof msg);
    ck_assert(a && b);
    ck_assert_ptr_null(hold_open(v4, &status, msg, sizeof msg));
    ck_assert_int_eq(status, SPW_RPC_RESOURCE_EXHAUSTED);
    ck_assert_msg(strstr(msg, "too many open streams from this peer (max 2 per peer host)"), "%s", msg);
    struct spw_rpc_stream *c = hold_open(v6, &status, msg, sizeof msg);
    ck_assert_msg(c != NULL, "another peer host is refused: %s", msg);
    struct spw_rpc_stream *all[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(spw_rpc_stream_close_send(all[i]), 0);
        ck_assert_int_eq(spw_rpc_stream_finish(all[i], msg, sizeof msg), SPW_RPC_OK);
    }
    spw_rpc_channel_destroy(v4);
    spw_rpc_channel_destroy(v6);
    spw_rpc_server_destroy(s);
}
END_TEST

START_TEST(test_rpc_shutdown_with_open_stream_within_deadline)
{
    int port;
    char target[64], msg[128];
    uint8_t *m;
    size_t n;
    struct iovec iov = {"ping", 4};
    struct spw_rpc_server *s = start_server(NULL, 0, &port);
    struct spw_rpc_channel *c = NULL;
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    ck_assert_int_eq(spw_rpc_channel_create(target, NULL, &c), 0);
    struct spw_rpc_stream *st = NULL;
    ck_assert_int_eq(spw_rpc_stream_open(c, M_HOLD, 30000, &st), 0);
    ck_assert_int_eq(spw_rpc_stream_send(st, &iov, 1), 0);
    ck_assert_int_eq(spw_rpc_stream_recv(st, 0, &m, &n), 1);
    free(m);
    double t0 = now_ms();
    spw_rpc_server_shutdown(s, 300);
    double took = now_ms() - t0;
    ck_assert_double_ge(took, 250);   /* the open stream got its grace period */
    ck_assert_double_lt(took, 1500);  /* and was then cancelled */
    ck_assert_int_eq(atomic_load(&g_hold.finished), 1);
    ck_assert_int_lt(atomic_load(&g_hold.last_rc), 0);
    int status = spw_rpc_stream_finish(st, msg, sizeof msg);
    ck_assert(status == SPW_RPC_CANCELLED || status == SPW_RPC_UNAVAILABLE);
    spw_rpc_server_destroy(s);
    spw_rpc_channel_destroy(c);
}
END_TEST

START_TEST(test_rpc_server_never_started_destroys)
{
    struct spw_rpc_server_opts o = {.listen_addr = "127.0.0.1:0"};
    struct spw_rpc_server *s = NULL;
    char err[128];
    ck_assert_int_eq(spw_rpc_server_create(&o, &s, err, sizeof err), 0);
    ck_assert_int_eq(spw_rpc_server_add_unary(s, M_ECHO, h_echo, NULL), 0);
    spw_rpc_server_destroy(s);
    spw_rpc_server_destroy(NULL);
    spw_rpc_channel_destroy(NULL);
}
END_TEST

START_TEST(test_rpc_peer_host_parses_grpc_peers)
{
    char h[64];
    ck_assert_int_eq(spw_rpc_peer_host("ipv4:10.0.0.7:41234", h, sizeof h), 0);
    ck_assert_str_eq(h, "10.0.0.7");
    ck_assert_int_eq(spw_rpc_peer_host("ipv6:[::1]:5051", h, sizeof h), 0);
    ck_assert_str_eq(h, "::1");
    ck_assert_int_eq(spw_rpc_peer_host("ipv6:%5Bfe80::1%5D:5051", h, sizeof h), 0);
    ck_assert_str_eq(h, "fe80::1");
    ck_assert_int_eq(spw_rpc_peer_host("unix:/tmp/sock", h, sizeof h), -EINVAL);
    ck_assert_str_eq(h, "");
    ck_assert_int_eq(spw_rpc_peer_host("ipv6:%5B::1", h, sizeof h), -EINVAL);
    ck_assert_int_eq(spw_rpc_peer_host("ipv4::5", h, sizeof h), -EINVAL);
    ck_assert_int_eq(spw_rpc_peer_host("ipv4:10.0.0.7:1", h, 4), -ENOSPC);
    ck_assert_str_eq(spw_rpc_current_peer(), "");        /* outside a handler */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rpc");
    TCase *tc = tcase_create("rpc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_rpc_unary_round_trip);
    tcase_add_test(tc, test_rpc_unary_error_status_and_message);
    tcase_add_test(tc, test_rpc_unknown_method_unimplemented);
    tcase_add_test(tc, test_rpc_large_message_within_cap);
    tcase_add_test(tc, test_rpc_oversized_message_resource_exhausted);
    tcase_add_test(tc, test_rpc_auth_token_required);
    tcase_add_test(tc, test_rpc_auth_checked_before_message_read);
    tcase_add_test(tc, test_rpc_unary_without_message_invalid_argument);
    tcase_add_test(tc, test_rpc_dead_port_unavailable_within_deadline);
    tcase_add_test(tc, test_rpc_unary_concurrent_callers);
    tcase_add_test(tc, test_rpc_bind_in_use_fails);
    tcase_add_test(tc, test_rpc_slow_unary_does_not_block_quick_calls);
    tcase_add_test(tc, test_rpc_handler_learns_its_deadline_passed);
    tcase_add_test(tc, test_rpc_slow_calls_per_peer_host);
    tcase_add_test(tc, test_rpc_stream_bidi_concurrent_send_recv);
    tcase_add_test(tc, test_rpc_stream_server_pumps_600k_messages);
    tcase_add_test(tc, test_rpc_stream_client_cancel_reaches_handler);
    tcase_add_test(tc, test_rpc_stream_recv_timeout_resumes);
    tcase_add_test(tc, test_rpc_stream_send_over_cap_is_local_error);
    tcase_add_test(tc, test_rpc_stream_cap_resource_exhausted);
    tcase_add_test(tc, test_rpc_stream_cap_per_peer_host);
    tcase_add_test(tc, test_rpc_shutdown_with_open_stream_within_deadline);
    tcase_add_test(tc, test_rpc_server_never_started_destroys);
    tcase_add_test(tc, test_rpc_peer_host_parses_grpc_peers);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);  /* grpc_init before a fork hangs */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    free(g_pattern);
    return failed ? 1 : 0;
}
