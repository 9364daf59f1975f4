/* tests/unit/check_direct.c - lib/direct.c on real loopback sockets: a ticketed connection carries messages
 * byte for byte and ends cleanly; the listener refuses a wrong or reused ticket, a peer that says nothing,
 * and one that is not Spillway, without handing them to anyone; the receiver refuses oversized and malformed
 * message headers before reading further, reports a header or message cut short, and a stop callback or a
 * shutdown from another thread ends a read on a stalled peer; IPv6 addresses ([::1]:PORT) work. With TLS
 * (certificates from scripts/dev/make-certs.sh): the same messages arrive, a second connection resumes the
 * session; a client that does not trust the worker's CA, or dials an address its certificate does not name,
 * fails saying so; under mutual TLS a client without a certificate of the clients' CA is refused; a
 * plaintext client on a TLS port (and a TLS client on a plaintext one) is refused without a hang, and the
 * listener goes on serving. */
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
#include "lib/rpc.h"
#include "tests/unit/fixture_dir.h"

static struct spw_direct_listener *listen_here(void)
{
    struct spw_direct_listener *l;
    char err[256];
    ck_assert_msg(spw_direct_listen("127.0.0.1", 0, NULL, &l, err, sizeof err) == 0, "%s", err);
    ck_assert_int_gt(spw_direct_port(l), 0);
    return l;
}

/* A connected pair through the listener: *w the worker's end, *c the client's. */
static void pair(struct spw_direct_listener *l, struct spw_direct_conn **w, struct spw_direct_conn **c)
{
    uint8_t t[SPW_DIRECT_TICKET_BYTES];
    char err[256];
    ck_assert_int_eq(spw_direct_ticket(l, t), 0);
    ck_assert_msg(spw_direct_connect("127.0.0.1:1", spw_direct_port(l), t, NULL, 2000, c, err, sizeof err) == 0, "%s",
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

static void conn_closed_by_peer(struct spw_direct_conn *c)
{
    closed_by_peer(dup(spw_direct_fd(c)));
    spw_direct_close(c);
}

static uint8_t body[3 << 20];               /* larger than the socket buffers: the send takes many writes */
static char head[] = "head bytes";

static void *send_messages(void *arg)
{
    struct spw_direct_conn *fd = arg;
    struct iovec iov[2] = {{head, sizeof head}, {body, sizeof body}};
    intptr_t rc = spw_direct_send(fd, iov, 2, NULL, NULL);
    if (rc == 0)
        rc = spw_direct_send(fd, iov, 0, NULL, NULL);    /* an empty message */
    if (rc == 0)
        rc = spw_direct_send(fd, iov, 1, NULL, NULL);
    spw_direct_close(fd);
    return (void *)rc;
}

START_TEST(test_direct_messages_round_trip)
{
    struct spw_direct_listener *l = listen_here();
    struct spw_direct_conn *w, *c;
    pair(l, &w, &c);
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (uint8_t)(i * 31 + 7);
    pthread_t tid;
    pthread_create(&tid, NULL, send_messages, w);
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
    spw_direct_close(c);
    free(got);
    spw_direct_listener_destroy(l);
}
END_TEST

/* IPv6: a listener on ::1 and a worker address written [::1]:PORT; malformed addresses refused. */
START_TEST(test_direct_ipv6)
{
    struct spw_direct_listener *l;
    char err[256];
    if (spw_direct_listen("::1", 0, NULL, &l, err, sizeof err) != 0)
        return;                 /* no IPv6 loopback on this machine */
    uint8_t t[SPW_DIRECT_TICKET_BYTES], b[4] = {1, 2, 3, 4}, got[4];
    struct spw_direct_conn *w, *c;
    ck_assert_int_eq(spw_direct_ticket(l, t), 0);
    ck_assert_msg(spw_direct_connect("[::1]:5051", spw_direct_port(l), t, NULL, 2000, &c, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_int_eq(spw_direct_take(l, t, 2000, &w), 0);
    struct iovec iov = {b, sizeof b};
    ck_assert_int_eq(spw_direct_send(w, &iov, 1, NULL, NULL), 0);
    size_t len;
    ck_assert_int_eq(spw_direct_next(c, 2000, 64, &len, NULL, NULL, err, sizeof err), 1);
    ck_assert_int_eq(spw_direct_read(c, got, len, NULL, NULL), 0);
    ck_assert(len == 4 && memcmp(got, b, 4) == 0);
    spw_direct_close(w);
    spw_direct_close(c);
    /* an empty host, or an IPv4 address with no port to split off: refused before any connection */
    ck_assert_int_eq(spw_direct_connect(":5051", spw_direct_port(l), t, NULL, 200, &c, err, sizeof err), -EINVAL);
    ck_assert_int_eq(spw_direct_connect("[]:5051", spw_direct_port(l), t, NULL, 200, &c, err, sizeof err), -EINVAL);
    ck_assert_int_eq(spw_direct_connect("127.0.0.1", spw_direct_port(l), t, NULL, 200, &c, err, sizeof err), -EINVAL);
    spw_direct_listener_destroy(l);
}
END_TEST

START_TEST(test_direct_listener_refuses_without_a_ticket)
{
    struct spw_direct_listener *l = listen_here();
    uint8_t t[SPW_DIRECT_TICKET_BYTES], wrong[SPW_DIRECT_TICKET_BYTES];
    char err[256];
    struct spw_direct_conn *c, *w;
    ck_assert_int_eq(spw_direct_ticket(l, t), 0);
    memcpy(wrong, t, sizeof wrong);
    wrong[15] ^= 1;
    /* a wrong ticket: refused and closed; the real ticket's holder gets nothing */
    ck_assert_int_eq(spw_direct_connect("127.0.0.1:1", spw_direct_port(l), wrong, NULL, 2000, &c, err, sizeof err), 0);
    wait_refused(l, 1, 2000);
    conn_closed_by_peer(c);
    ck_assert_int_eq(spw_direct_take(l, t, 300, &w), -ETIMEDOUT);
    /* the ticket was spent by that take: presenting it now is refused too */
    ck_assert_int_eq(spw_direct_connect("127.0.0.1:1", spw_direct_port(l), t, NULL, 2000, &c, err, sizeof err), 0);
    wait_refused(l, 2, 2000);
    conn_closed_by_peer(c);
    /* a ticket is used once: a second connection with it is refused */
    ck_assert_int_eq(spw_direct_ticket(l, t), 0);
    ck_assert_int_eq(spw_direct_connect("127.0.0.1:1", spw_direct_port(l), t, NULL, 2000, &c, err, sizeof err), 0);
    ck_assert_int_eq(spw_direct_take(l, t, 2000, &w), 0);
    struct spw_direct_conn *c1;
    ck_assert_int_eq(spw_direct_connect("127.0.0.1:1", spw_direct_port(l), t, NULL, 2000, &c1, err, sizeof err), 0);
    wait_refused(l, 3, 2000);
    conn_closed_by_peer(c1);
    spw_direct_close(w);
    spw_direct_close(c);
    /* not Spillway: an HTTP request */
    int r = raw_connect(l);
    ck_assert_int_eq(send(r, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27, 0), 27);
    wait_refused(l, 4, 2000);
    closed_by_peer(r);
    /* silent: refused after 2 s, while a ticketed connection made meanwhile still works */
    r = raw_connect(l);
    const int64_t t0 = spw_now_ms();
    struct spw_direct_conn *c2;
    pair(l, &w, &c2);
    spw_direct_close(w);
    spw_direct_close(c2);
    wait_refused(l, 5, 3500);
    ck_assert_int_ge(spw_now_ms() - t0, 1900);
    closed_by_peer(r);
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
    struct spw_direct_conn *c;
    ck_assert_int_eq(spw_direct_wrap(sv[1], &c), 0);
    int rc = spw_direct_next(c, 1000, 64 << 20, &got, NULL, NULL, err, 256);
    spw_direct_close(c);
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
    spw_direct_shutdown(arg);
    return NULL;
}

START_TEST(test_direct_stalled_peer)
{
    struct spw_direct_listener *l = listen_here();
    struct spw_direct_conn *w, *c;
    pair(l, &w, &c);
    uint8_t b[100] = {0};
    /* a message cut short: the worker closes mid-message */
    ck_assert_int_eq(write(spw_direct_fd(w), b, 10), 10);
    spw_direct_close(w);
    ck_assert_int_eq(spw_direct_read(c, b, sizeof b, NULL, NULL), -EPIPE);
    spw_direct_close(c);
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
    pthread_create(&tid, NULL, shut_later, c);
    ck_assert_int_eq(spw_direct_read(c, b, sizeof b, NULL, NULL), -EPIPE);
    pthread_join(tid, NULL);
    spw_direct_close(c);
    spw_direct_close(w);
    spw_direct_listener_destroy(l);
}
END_TEST

/* ---- TLS ---- */

static char g_certs[64];

/* Certificates for the TLS tests: make-certs.sh's set, plus a self-signed one naming only elsewhere.example. */
static void certs_make(void)
{
    char cmd[512];
    snprintf(g_certs, sizeof g_certs, "/tmp/spw-certs-XXXXXX");
    ck_assert(mkdtemp(g_certs) != NULL);
    snprintf(cmd, sizeof cmd, "bash scripts/dev/make-certs.sh '%s' > /dev/null && openssl req -x509 -newkey ec "
             "-pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=elsewhere -addext "
             "subjectAltName=DNS:elsewhere.example -keyout '%s/elsewhere.key' -out '%s/elsewhere.pem' 2> /dev/null",
             g_certs, g_certs, g_certs);
    ck_assert_int_eq(system(cmd), 0);
}

static void certs_remove(void)
{
    spw_fixture_remove(g_certs);
}

/* A spw_direct_tls from certs/<cert>.pem, <key>.key, <ca>.pem (NULL: none of it). */
static struct spw_direct_tls *tls_of(const char *cert, const char *ca, bool require_client_cert, bool server)
{
    char c[128] = "", k[128] = "", a[128] = "", err[256];
    if (cert) {
        snprintf(c, sizeof c, "%s/%s.pem", g_certs, cert);
        snprintf(k, sizeof k, "%s/%s.key", g_certs, cert);
    }
    if (ca)
        snprintf(a, sizeof a, "%s/%s.pem", g_certs, ca);
    struct spw_rpc_tls *rt;
    ck_assert_msg(spw_rpc_tls_load(c, k, a, require_client_cert, &rt, err, sizeof err) == 0, "%s", err);
    struct spw_direct_tls *t;
    ck_assert_msg(spw_direct_tls_create(rt, server, &t, err, sizeof err) == 0, "%s", err);
    spw_rpc_tls_free(rt);
    return t;
}

static struct spw_direct_listener *listen_tls(const struct spw_direct_tls *t)
{
    struct spw_direct_listener *l;
    char err[256];
    ck_assert_msg(spw_direct_listen("127.0.0.1", 0, t, &l, err, sizeof err) == 0, "%s", err);
    return l;
}

/* Connect as client tls to addr: the connect's code, err its message, *w the worker's end when taken. */
static int tls_connect(struct spw_direct_listener *l, const char *addr, const struct spw_direct_tls *tls,
                       struct spw_direct_conn **w, struct spw_direct_conn **c, char *err, size_t errlen)
{
    uint8_t t[SPW_DIRECT_TICKET_BYTES];
    ck_assert_int_eq(spw_direct_ticket(l, t), 0);
    *w = *c = NULL;
    const int rc = spw_direct_connect(addr, spw_direct_port(l), t, tls, 3000, c, err, errlen);
    spw_direct_take(l, t, rc == 0 ? 1000 : 0, w);
    return rc;
}

/* A TLS pair carries the messages as plaintext does; the second connection resumes the first's session. */
START_TEST(test_direct_tls_round_trip_and_resumption)
{
    certs_make();
    struct spw_direct_tls *st = tls_of("server", NULL, false, true), *ct = tls_of(NULL, "ca", false, false);
    struct spw_direct_listener *l = listen_tls(st);
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (uint8_t)(i * 131 + 3);
    for (int round = 0; round < 2; round++) {
        struct spw_direct_conn *w, *c;
        char err[512], how[128], h[sizeof head];
        ck_assert_msg(tls_connect(l, "127.0.0.1:1", ct, &w, &c, err, sizeof err) == 0, "%s", err);
        ck_assert_ptr_nonnull(w);
        spw_direct_describe(c, how, sizeof how);
        fprintf(stderr, "check_direct: TLS connection %d: %s\n", round, how);
        ck_assert_msg(strstr(how, "TLSv1.3 ") == how, "%s", how);
        ck_assert_msg((strstr(how, " resumed") != NULL) == (round == 1), "round %d: %s", round, how);
        pthread_t tid;
        pthread_create(&tid, NULL, send_messages, w);
        size_t len;
        uint8_t *got = malloc(sizeof body);
        ck_assert_int_eq(spw_direct_next(c, 2000, 64 << 20, &len, NULL, NULL, err, sizeof err), 1);
        ck_assert_uint_eq(len, sizeof head + sizeof body);
        ck_assert_int_eq(spw_direct_read(c, h, sizeof h, NULL, NULL), 0);
        ck_assert_int_eq(spw_direct_read(c, NULL, 1000, NULL, NULL), 0);    /* dropped */
        ck_assert_int_eq(spw_direct_read(c, got + 1000, sizeof body - 1000, NULL, NULL), 0);
        ck_assert_str_eq(h, head);
        ck_assert(memcmp(got + 1000, body + 1000, sizeof body - 1000) == 0);
        ck_assert_int_eq(spw_direct_next(c, 2000, 64 << 20, &len, NULL, NULL, err, sizeof err), 1);
        ck_assert_uint_eq(len, 0);
        ck_assert_int_eq(spw_direct_next(c, 2000, 64 << 20, &len, NULL, NULL, err, sizeof err), 1);
        ck_assert_uint_eq(len, sizeof head);
        ck_assert_int_eq(spw_direct_read(c, h, sizeof h, NULL, NULL), 0);
        void *rc;
        pthread_join(tid, &rc);
        ck_assert_int_eq((intptr_t)rc, 0);
        ck_assert_int_eq(spw_direct_next(c, 2000, 64 << 20, &len, NULL, NULL, err, sizeof err), 0);   /* the end */
        ck_assert_int_eq(spw_direct_next(c, 100, 64 << 20, &len, NULL, NULL, err, sizeof err), 0);
        spw_direct_close(c);
        free(got);
    }
    ck_assert_int_eq(spw_direct_refused(l), 0);
    spw_direct_listener_destroy(l);
    spw_direct_tls_destroy(st);
    spw_direct_tls_destroy(ct);
    certs_remove();
}
END_TEST

/* The client checks the worker: its CA, and the address dialled against the certificate's names. */
START_TEST(test_direct_tls_client_verifies_the_worker)
{
    certs_make();
    struct spw_direct_tls *st = tls_of("server", NULL, false, true), *other = tls_of(NULL, "other-ca", false, false);
    struct spw_direct_listener *l = listen_tls(st);
    struct spw_direct_conn *w, *c;
    char err[512];
    const int64_t t0 = spw_now_ms();
    ck_assert_int_eq(tls_connect(l, "127.0.0.1:1", other, &w, &c, err, sizeof err), -EPROTO);
    ck_assert_msg(strstr(err, "TLS handshake failed: the worker's certificate: ") != NULL, "%s", err);
    ck_assert_int_lt(spw_now_ms() - t0, 2000);
    ck_assert_ptr_null(w);
    wait_refused(l, 1, 2000);
    spw_direct_listener_destroy(l);
    spw_direct_tls_destroy(st);
    /* a worker whose certificate names elsewhere.example only, dialled at 127.0.0.1 */
    st = tls_of("elsewhere", NULL, false, true);
    struct spw_direct_tls *trusting = tls_of(NULL, "elsewhere", false, false);
    l = listen_tls(st);
    ck_assert_int_eq(tls_connect(l, "127.0.0.1:1", trusting, &w, &c, err, sizeof err), -EPROTO);
    ck_assert_msg(strstr(err, "IP address mismatch") != NULL, "%s", err);
    ck_assert_int_eq(tls_connect(l, "localhost:1", trusting, &w, &c, err, sizeof err), -EPROTO);
    ck_assert_msg(strstr(err, "hostname mismatch") != NULL, "%s", err);
    ck_assert_ptr_null(w);
    spw_direct_listener_destroy(l);
    spw_direct_tls_destroy(st);
    spw_direct_tls_destroy(trusting);
    spw_direct_tls_destroy(other);
    certs_remove();
}
END_TEST

/* Mutual TLS: only a client presenting a certificate of the clients' CA gets its connection taken. */
START_TEST(test_direct_tls_mutual)
{
    certs_make();
    struct spw_direct_tls *st = tls_of("server", "ca", true, true), *none = tls_of(NULL, "ca", false, false),
                          *foreign = tls_of("other-client", "ca", false, false),
                          *mine = tls_of("client", "ca", false, false);
    struct spw_direct_listener *l = listen_tls(st);
    struct spw_direct_conn *w, *c;
    char err[512];
    tls_connect(l, "127.0.0.1:1", none, &w, &c, err, sizeof err);
    ck_assert_ptr_null(w);
    wait_refused(l, 1, 2000);
    spw_direct_close(c);
    tls_connect(l, "127.0.0.1:1", foreign, &w, &c, err, sizeof err);
    ck_assert_ptr_null(w);
    wait_refused(l, 2, 2000);
    spw_direct_close(c);
    ck_assert_msg(tls_connect(l, "127.0.0.1:1", mine, &w, &c, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_nonnull(w);
    uint8_t b[3] = {7, 8, 9}, got[3];
    struct iovec iov = {b, sizeof b};
    size_t len;
    ck_assert_int_eq(spw_direct_send(w, &iov, 1, NULL, NULL), 0);
    ck_assert_int_eq(spw_direct_next(c, 2000, 64, &len, NULL, NULL, err, sizeof err), 1);
    ck_assert_int_eq(spw_direct_read(c, got, len, NULL, NULL), 0);
    ck_assert(len == 3 && memcmp(got, b, 3) == 0);
    spw_direct_close(w);
    spw_direct_close(c);
    /* resumption under mutual TLS too (the session carries the client's verified certificate) */
    ck_assert_msg(tls_connect(l, "127.0.0.1:1", mine, &w, &c, err, sizeof err) == 0, "%s", err);
    char how[128];
    ck_assert_msg(strstr(spw_direct_describe(c, how, sizeof how), " resumed") != NULL, "%s", how);
    spw_direct_close(w);
    spw_direct_close(c);
    ck_assert_int_eq(spw_direct_refused(l), 2);
    spw_direct_listener_destroy(l);
    spw_direct_tls_destroy(st);
    spw_direct_tls_destroy(none);
    spw_direct_tls_destroy(foreign);
    spw_direct_tls_destroy(mine);
    certs_remove();
}
END_TEST

/* Plaintext against TLS, either way round: refused promptly, and the TLS listener goes on serving. */
START_TEST(test_direct_tls_plaintext_mismatch)
{
    certs_make();
    struct spw_direct_tls *st = tls_of("server", NULL, false, true), *ct = tls_of(NULL, "ca", false, false);
    struct spw_direct_listener *l = listen_tls(st), *plain = listen_here();
    struct spw_direct_conn *w, *c;
    char err[512];
    ck_assert_int_eq(tls_connect(l, "127.0.0.1:1", NULL, &w, &c, err, sizeof err), 0);    /* says its hello */
    ck_assert_ptr_null(w);
    wait_refused(l, 1, 2000);
    conn_closed_by_peer(c);
    const int64_t t0 = spw_now_ms();
    ck_assert_int_ne(tls_connect(plain, "127.0.0.1:1", ct, &w, &c, err, sizeof err), 0);
    ck_assert_int_lt(spw_now_ms() - t0, 2500);
    ck_assert_msg(strstr(err, "TLS") != NULL, "%s", err);
    ck_assert_ptr_null(w);
    ck_assert_msg(tls_connect(l, "127.0.0.1:1", ct, &w, &c, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_nonnull(w);
    spw_direct_close(w);
    spw_direct_close(c);
    spw_direct_listener_destroy(l);
    spw_direct_listener_destroy(plain);
    spw_direct_tls_destroy(st);
    spw_direct_tls_destroy(ct);
    certs_remove();
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
    tcase_add_test(tc, test_direct_tls_round_trip_and_resumption);
    tcase_add_test(tc, test_direct_tls_client_verifies_the_worker);
    tcase_add_test(tc, test_direct_tls_mutual);
    tcase_add_test(tc, test_direct_tls_plaintext_mismatch);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
