/* tests/unit/check_direct.c - lib/direct.c on real loopback sockets: a ticketed connection carries messages
 * byte for byte and ends cleanly; the listener refuses a wrong or reused ticket, a peer that says nothing,
 * and one that is not Spillway, without handing them to anyone; the receiver refuses oversized and malformed
 * message headers before reading further, reports a header or message cut short, and a stop callback or a
 * shutdown from another thread ends a read on a stalled peer; IPv6 addresses ([::1]:PORT) work. */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "lib/clock.h"
#include "lib/direct.h"
#include "lib/err.h"

static struct spw_direct_listener *listen_here(void)
{
    struct spw_direct_listener *l;
    char err[256];
    ck_assert_msg(spw_direct_listen("127.0.0.1", 0, &l, err, sizeof err) == 0, "%s", err);
    ck_assert_int_gt(spw_direct_port(l), 0);
    return l;
}

/* A connected pair through the listener: *w the worker's end, *c the client's. */
static void pair(struct spw_direct_listener *l, int *w, int *c)
{
    uint8_t t[SPW_DIRECT_TICKET_BYTES];
    char err[256];
    ck_assert_int_eq(spw_direct_ticket(l, t), 0);
    ck_assert_msg(spw_direct_connect("127.0.0.1:1", spw_direct_port(l), t, 2000, c, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_int_eq(spw_direct_take(l, t, 2000, w), 0);
}

/* A plain TCP connection to the listener, no hello. */
static int raw_connect(const struct spw_direct_listener *l)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)spw_direct_port(l)),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static void wait_refused(struct spw_direct_listener *l, int64_t n, int within_ms)
{
    const int64_t t0 = spw_now_ms();
    while (spw_direct_refused(l) < n && spw_now_ms() - t0 < within_ms)
        usleep(10000);
    ck_assert_int_eq(spw_direct_refused(l), n);
}

/* The listener closed a refused connection: reading it ends (or is reset, when the listener left bytes
 * unread). */
static void closed_by_peer(int fd)
{
    char b[8];
    ssize_t n = recv(fd, b, sizeof b, 0);
    ck_assert_msg(n == 0 || (n < 0 && errno == ECONNRESET), "recv: %zd (%s)", n, strerror(errno));
    close(fd);
}

static uint8_t body[3 << 20];               /* larger than the socket buffers: the send takes many writes */
static char head[] = "head bytes";

static void *send_messages(void *arg)
{
    int fd = *(int *)arg;
    struct iovec iov[2] = {{head, sizeof head}, {body, sizeof body}};
    intptr_t rc = spw_direct_send(fd, iov, 2, NULL, NULL);
    if (rc == 0)
        rc = spw_direct_send(fd, iov, 0, NULL, NULL);    /* an empty message */
    if (rc == 0)
        rc = spw_direct_send(fd, iov, 1, NULL, NULL);
    close(fd);
    return (void *)rc;
}

START_TEST(test_direct_messages_round_trip)
{
    struct spw_direct_listener *l = listen_here();
    int w, c;
    pair(l, &w, &c);
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (uint8_t)(i * 31 + 7);
    pthread_t tid;
    pthread_create(&tid, NULL, send_messages, &w);
    size_t len;
    char err[256], h[sizeof head];
    ck_assert_int_eq(spw_direct_next(c, 2000, 64 << 20, &len, NULL, NULL, err, sizeof err), 1);
    ck_assert_uint_eq(len, sizeof head + sizeof body);
    uint8_t *got = malloc(sizeof body);
    ck_assert_int_eq(spw_direct_read(c, h, sizeof h, NULL, NULL), 0);
    ck_assert_int_eq(spw_direct_read(c, got, 1000, NULL, NULL), 0);
    ck_assert_int_eq(spw_direct_read(c, NULL, 5000, NULL, NULL), 0);        /* dropped */
    ck_assert_int_eq(spw_direct_read(c, got + 6000, sizeof body - 6000, NULL, NULL), 0);
    ck_assert_str_eq(h, head);
    ck_assert(memcmp(got, body, 1000) == 0 && memcmp(got + 6000, body + 6000, sizeof body - 6000) == 0);
    ck_assert_int_eq(spw_direct_next(c, 2000, 64 << 20, &len, NULL, NULL, err, sizeof err), 1);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(spw_direct_next(c, 2000, 64 << 20, &len, NULL, NULL, err, sizeof err), 1);
    ck_assert_uint_eq(len, sizeof head);
    ck_assert_int_eq(spw_direct_read(c, h, sizeof h, NULL, NULL), 0);
    void *rc;
    pthread_join(tid, &rc);
    ck_assert_int_eq((intptr_t)rc, 0);
    ck_assert_int_eq(spw_direct_next(c, 2000, 64 << 20, &len, NULL, NULL, err, sizeof err), 0);   /* the end */
    close(c);
    free(got);
    spw_direct_listener_destroy(l);
}
END_TEST

/* IPv6: a listener on ::1 and a worker address written [::1]:PORT; malformed addresses refused. */
START_TEST(test_direct_ipv6)
{
    struct spw_direct_listener *l;
    char err[256];
    if (spw_direct_listen("::1", 0, &l, err, sizeof err) != 0)
        return;                 /* no IPv6 loopback on this machine */
    uint8_t t[SPW_DIRECT_TICKET_BYTES], b[4] = {1, 2, 3, 4}, got[4];
    int w, c;
    ck_assert_int_eq(spw_direct_ticket(l, t), 0);
    ck_assert_msg(spw_direct_connect("[::1]:5051", spw_direct_port(l), t, 2000, &c, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(spw_direct_take(l, t, 2000, &w), 0);
    struct iovec iov = {b, sizeof b};
    ck_assert_int_eq(spw_direct_send(w, &iov, 1, NULL, NULL), 0);
    size_t len;
    ck_assert_int_eq(spw_direct_next(c, 2000, 64, &len, NULL, NULL, err, sizeof err), 1);
    ck_assert_int_eq(spw_direct_read(c, got, len, NULL, NULL), 0);
    ck_assert(len == 4 && memcmp(got, b, 4) == 0);
    close(w);
    close(c);
    /* an empty host, or an IPv4 address with no port to split off: refused before any connection */
    ck_assert_int_eq(spw_direct_connect(":5051", spw_direct_port(l), t, 200, &c, err, sizeof err), -EINVAL);
    ck_assert_int_eq(spw_direct_connect("[]:5051", spw_direct_port(l), t, 200, &c, err, sizeof err), -EINVAL);
    ck_assert_int_eq(spw_direct_connect("127.0.0.1", spw_direct_port(l), t, 200, &c, err, sizeof err), -EINVAL);
    spw_direct_listener_destroy(l);
}
END_TEST

START_TEST(test_direct_listener_refuses_without_a_ticket)
{
    struct spw_direct_listener *l = listen_here();
    uint8_t t[SPW_DIRECT_TICKET_BYTES], wrong[SPW_DIRECT_TICKET_BYTES];
    char err[256];
    int c, w;
    ck_assert_int_eq(spw_direct_ticket(l, t), 0);
    memcpy(wrong, t, sizeof wrong);
    wrong[15] ^= 1;
    /* a wrong ticket: refused and closed; the real ticket's holder gets nothing */
    ck_assert_int_eq(spw_direct_connect("127.0.0.1:1", spw_direct_port(l), wrong, 2000, &c, err, sizeof err), 0);
    wait_refused(l, 1, 2000);
    closed_by_peer(c);
    ck_assert_int_eq(spw_direct_take(l, t, 300, &w), -ETIMEDOUT);
    /* the ticket was spent by that take: presenting it now is refused too */
    ck_assert_int_eq(spw_direct_connect("127.0.0.1:1", spw_direct_port(l), t, 2000, &c, err, sizeof err), 0);
    wait_refused(l, 2, 2000);
    closed_by_peer(c);
    /* a ticket is used once: a second connection with it is refused */
    ck_assert_int_eq(spw_direct_ticket(l, t), 0);
    ck_assert_int_eq(spw_direct_connect("127.0.0.1:1", spw_direct_port(l), t, 2000, &c, err, sizeof err), 0);
    ck_assert_int_eq(spw_direct_take(l, t, 2000, &w), 0);
    int c1;
    ck_assert_int_eq(spw_direct_connect("127.0.0.1:1", spw_direct_port(l), t, 2000, &c1, err, sizeof err), 0);
    wait_refused(l, 3, 2000);
    closed_by_peer(c1);
    close(w);
    close(c);
    /* not Spillway: an HTTP request */
    c = raw_connect(l);
    ck_assert_int_eq(send(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27, 0), 27);
    wait_refused(l, 4, 2000);
    closed_by_peer(c);
    /* silent: refused after 2 s, while a ticketed connection made meanwhile still works */
    c = raw_connect(l);
    const int64_t t0 = spw_now_ms();
    int c2;
    pair(l, &w, &c2);
    close(w);
    close(c2);
    wait_refused(l, 5, 3500);
    ck_assert_int_ge(spw_now_ms() - t0, 1900);
    closed_by_peer(c);
    spw_direct_listener_destroy(l);
}
END_TEST

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A message header written by hand (n of its 8 bytes): magic, length. */
static int next_after(uint32_t magic, uint32_t len, size_t n, char *err)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    uint8_t b[8];
    put32(b, magic);
    put32(b + 4, len);
    ck_assert_int_eq(write(sv[0], b, n), (ssize_t)n);
    close(sv[0]);
    size_t got;
    int rc = spw_direct_next(sv[1], 1000, 64 << 20, &got, NULL, NULL, err, 256);
    close(sv[1]);
    return rc;
}

START_TEST(test_direct_receiver_checks_message_headers)
{
    const uint32_t magic = 0x44575053u;
    char err[256];
    ck_assert_int_eq(next_after(magic, 64 << 20, 8, err), 1);
    ck_assert_int_eq(next_after(magic, (64 << 20) + 1, 8, err), SPW_ETOOBIG);
    ck_assert_msg(strstr(err, "over the 67108864-byte cap") != NULL, "%s", err);
    ck_assert_int_eq(next_after(magic, 0xffffffffu, 8, err), SPW_ETOOBIG);
    ck_assert_int_eq(next_after(0x20544547u, 1, 8, err), SPW_EFORMAT);       /* "GET " */
    ck_assert_int_eq(next_after(magic, 1, 5, err), -EPIPE);      /* closed mid-header */
    ck_assert_int_eq(next_after(magic, 1, 0, err), 0);      /* closed between messages: a clean end */
}
END_TEST

static bool stop_now(void *ctx)
{
    ++*(int *)ctx;
    return true;
}

static void *shut_later(void *arg)
{
    usleep(300 * 1000);
    spw_direct_shutdown(*(int *)arg);
    return NULL;
}

START_TEST(test_direct_stalled_peer)
{
    struct spw_direct_listener *l = listen_here();
    int w, c;
    pair(l, &w, &c);
    uint8_t b[100];
    /* a message cut short: the worker closes mid-message */
    ck_assert_int_eq(write(w, b, 10), 10);
    close(w);
    ck_assert_int_eq(spw_direct_read(c, b, sizeof b, NULL, NULL), -EPIPE);
    close(c);
    /* a peer that stalls: the stop callback ends the read within one 200 ms wait */
    pair(l, &w, &c);
    int asked = 0;
    int64_t t0 = spw_now_ms();
    ck_assert_int_eq(spw_direct_read(c, b, sizeof b, stop_now, &asked), -ECANCELED);
    ck_assert_int_eq(asked, 1);
    ck_assert_int_lt(spw_now_ms() - t0, 1000);
    size_t len;
    char err[256];
    ck_assert_int_eq(spw_direct_next(c, 100, 64 << 20, &len, NULL, NULL, err, sizeof err), -ETIMEDOUT);
    /* or a shutdown from another thread ends it */
    pthread_t tid;
    pthread_create(&tid, NULL, shut_later, &c);
    ck_assert_int_eq(spw_direct_read(c, b, sizeof b, NULL, NULL), -EPIPE);
    pthread_join(tid, NULL);
    close(c);
    close(w);
    spw_direct_listener_destroy(l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("direct");
    TCase *tc = tcase_create("direct");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_direct_messages_round_trip);
    tcase_add_test(tc, test_direct_listener_refuses_without_a_ticket);
    tcase_add_test(tc, test_direct_receiver_checks_message_headers);
    tcase_add_test(tc, test_direct_stalled_peer);
    tcase_add_test(tc, test_direct_ipv6);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
