/* lib/direct.c - direct data connections (see direct.h): the ticketed listener (with TLS: the handshake
 * first, non-blocking, on the acceptor thread), connect, and framed send and receive on a blocking socket
 * with 200 ms timeouts, so a stop callback is asked while a peer stalls; through SSL_read/SSL_write when the
 * connection has TLS. Not the OpenSSL contexts (lib/direct_tls.c).
 * Threads: the listener's acceptor thread owns the connections still to say their ticket; the ticket table
 * is guarded by the listener's mutex. */
#include "lib/direct.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>

#include "lib/clock.h"
#include "lib/direct_tls.h"
#include "lib/err.h"
#include "lib/log.h"

#define MAGIC 0x44575053u           /* "SPWD", little-endian on the wire */
#define HELLO_BYTES (4 + SPW_DIRECT_TICKET_BYTES)
#define HELLO_MS 2000               /* an accepted connection has this long to present its ticket */
#define TICKET_MS 10000             /* a ticket not presented by then is withdrawn */
#define MAX_TICKETS 256
#define MAX_WAITING 32              /* accepted connections still to say their ticket; the oldest is dropped */
#define TICK_MS 200
#define STAGE_BYTES 16384           /* TLS: small parts of a message are gathered into records this big */
#define STAGE_PART 4096             /* ... parts under this size; bigger ones go to SSL_write as they are */

struct spw_direct_conn {
    int fd;
    SSL *ssl;                       /* NULL: plaintext */
    uint8_t *stage;                 /* TLS: STAGE_BYTES for a message's small parts */
};

struct ticket {
    uint8_t id[SPW_DIRECT_TICKET_BYTES];
    int64_t issued_ms;
    struct spw_direct_conn *conn;   /* NULL until presented */
};

struct waiting {
    int fd;
    SSL *ssl;                       /* TLS: the session being made */
    bool handshaken;
    short events;                   /* what the handshake waits for (POLLIN or POLLOUT) */
    int64_t since_ms;
    size_t got;
    uint8_t hello[HELLO_BYTES];
};

struct spw_direct_listener {
    int fd, port;
    const struct spw_direct_tls *tls;
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;
    struct ticket tickets[MAX_TICKETS];
    int n_tickets;
    int64_t refused;
    struct waiting waiting[MAX_WAITING];    /* acceptor thread only */
    int n_waiting;
    int64_t logged_ms;                      /* the last refusal logged (acceptor thread only) */
};

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void set_timeouts(int fd)
{
    struct timeval tv = {.tv_sec = 0, .tv_usec = TICK_MS * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* SIGPIPE: OpenSSL writes with write()/sendmsg() without MSG_NOSIGNAL, and neither the worker nor a
 * trainer using the library ignores the signal. Blocked on this thread around TLS writes, and one raised
 * meanwhile is taken off its queue (it is this thread's: a write raises it on the writer). */
static void sigpipe_block(sigset_t *old)
{
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, old);
}

static void sigpipe_restore(const sigset_t *old)
{
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    if (!sigismember(old, SIGPIPE) && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
        const struct timespec none = {0, 0};
        sigtimedwait(&pipe, NULL, &none);
    }
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

static struct spw_direct_conn *conn_new(int fd, SSL *ssl)
{
    struct spw_direct_conn *c = calloc(1, sizeof *c);
    if (c && ssl && !(c->stage = malloc(STAGE_BYTES))) {
        free(c);
        c = NULL;
    }
    if (!c)
        return NULL;
    c->fd = fd;
    c->ssl = ssl;
    return c;
}

int spw_direct_wrap(int fd, struct spw_direct_conn **out)
{
    struct spw_direct_conn *c = conn_new(fd, NULL);
    if (!c)
        return -ENOMEM;
    *out = c;
    return 0;
}

int spw_direct_fd(const struct spw_direct_conn *c)
{
    return c ? c->fd : -1;
}

void spw_direct_close(struct spw_direct_conn *c)
{
    if (!c)
        return;
    if (c->ssl) {
        sigset_t old;
        sigpipe_block(&old);
        SSL_shutdown(c->ssl);       /* close_notify, once: the peer is not waited for */
        sigpipe_restore(&old);
        SSL_free(c->ssl);
        ERR_clear_error();
    }
    close(c->fd);
    free(c->stage);
    free(c);
}

const char *spw_direct_describe(const struct spw_direct_conn *c, char *buf, size_t len)
{
    if (!c || !c->ssl) {
        snprintf(buf, len, "plaintext");
        return buf;
    }
    bool ksend = false, krecv = false;
#ifndef OPENSSL_NO_KTLS
    ksend = BIO_get_ktls_send(SSL_get_wbio(c->ssl));
    krecv = BIO_get_ktls_recv(SSL_get_rbio(c->ssl));
#endif
    snprintf(buf, len, "%s %s%s ktls=%s", SSL_get_version(c->ssl), SSL_CIPHER_get_name(SSL_get_current_cipher(c->ssl)),
             SSL_session_reused(c->ssl) ? " resumed" : "",
             ksend && krecv ? "send,recv" : ksend ? "send" : krecv ? "recv" : "none");
    return buf;
}

/* ---- listener ---- */

/* Compare all of two tickets whatever they hold (no early exit to time). */
static bool same_ticket(const uint8_t *a, const uint8_t *b)
{
    uint8_t d = 0;
    for (int i = 0; i < SPW_DIRECT_TICKET_BYTES; i++)
        d |= (uint8_t)(a[i] ^ b[i]);
    return d == 0;
}

static void drop_ticket(struct spw_direct_listener *l, int i)
{
    spw_direct_close(l->tickets[i].conn);
    l->tickets[i] = l->tickets[--l->n_tickets];
}

/* Refuse waiting connection w: closed, counted, and logged at most once a second (a flood of them is one
 * line a second, with the count). */
static void refuse(struct spw_direct_listener *l, int w, const char *why)
{
    SSL_free(l->waiting[w].ssl);
    ERR_clear_error();
    close(l->waiting[w].fd);
    l->waiting[w] = l->waiting[--l->n_waiting];
    pthread_mutex_lock(&l->mu);
    const int64_t refused = ++l->refused;
    pthread_mutex_unlock(&l->mu);
    const int64_t now = spw_now_ms();
    if (now - l->logged_ms >= 1000 || refused == 1) {
        spw_log(SPW_LOG_WARN, "direct", "refused a data connection: %s (%lld refused in all)", why,
                (long long)refused);
        l->logged_ms = now;
    }
}

/* A waiting connection said its whole hello: hand it to its ticket, or refuse it. */
static void presented(struct spw_direct_listener *l, int w)
{
    const struct waiting *c = &l->waiting[w];
    struct spw_direct_conn *conn = NULL;
    bool taken = false, magic = get_le(c->hello, 4) == MAGIC;
    if (magic && (conn = conn_new(c->fd, c->ssl)) != NULL) {
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
        set_timeouts(c->fd);            /* before anyone can take it */
        pthread_mutex_lock(&l->mu);
        for (int i = 0; i < l->n_tickets && !taken; i++)
            if (!l->tickets[i].conn && same_ticket(l->tickets[i].id, c->hello + 4)) {
                l->tickets[i].conn = conn;
                taken = true;
                pthread_cond_broadcast(&l->cv);
            }
        pthread_mutex_unlock(&l->mu);
    }
    if (!taken) {
        if (conn) {                     /* the waiting entry still owns fd and ssl */
            free(conn->stage);
            free(conn);
        }
        refuse(l, w, !magic ? "not a Spillway data connection" : conn ? "no such ticket" : "out of memory");
        return;
    }
    l->waiting[w] = l->waiting[--l->n_waiting];
}

static void accept_one(struct spw_direct_listener *l)
{
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    if (l->n_waiting == MAX_WAITING) {       /* the one waiting longest goes */
        int oldest = 0;
        for (int w = 1; w < l->n_waiting; w++)
            if (l->waiting[w].since_ms < l->waiting[oldest].since_ms)
                oldest = w;
        refuse(l, oldest, "too many connections still to present a ticket");
    }
    SSL *ssl = NULL;
    if (l->tls && !(ssl = spw_direct_tls_accepting(l->tls, fd))) {
        close(fd);
        return;
    }
    l->waiting[l->n_waiting++] = (struct waiting){.fd = fd, .ssl = ssl, .events = POLLIN, .since_ms = spw_now_ms()};
}

/* TLS: move waiting connection w's handshake on as far as its socket lets it. 1 done, 0 not yet, -1 refused. */
static int handshake_some(struct spw_direct_listener *l, int w)
{
    struct waiting *c = &l->waiting[w];
    ERR_clear_error();
    sigset_t old;
    sigpipe_block(&old);
    const int r = SSL_do_handshake(c->ssl);
    sigpipe_restore(&old);
    if (r == 1) {
        c->handshaken = true;
        c->events = POLLIN;
        return 1;
    }
    const int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        c->events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    char why[200], msg[256];
    snprintf(msg, sizeof msg, "TLS handshake failed: %s", spw_direct_tls_why(c->ssl, r, why, sizeof why));
    refuse(l, w, msg);
    return -1;
}

static void read_hello(struct spw_direct_listener *l, int w)
{
    struct waiting *c = &l->waiting[w];
    if (c->ssl && !c->handshaken && handshake_some(l, w) != 1)
        return;
    ssize_t n;
    if (c->ssl) {
        size_t got = 0;
        ERR_clear_error();
        const int r = SSL_read_ex(c->ssl, c->hello + c->got, HELLO_BYTES - c->got, &got);
        const int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
        n = r == 1 ? (ssize_t)got : e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? -1 : 0;
        errno = EAGAIN;
    } else {
        n = recv(c->fd, c->hello + c->got, HELLO_BYTES - c->got, 0);
    }
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        refuse(l, w, "closed before presenting a ticket");
        return;
    }
    if (n > 0 && (c->got += (size_t)n) == HELLO_BYTES)
        presented(l, w);
}

static void expire(struct spw_direct_listener *l)
{
    const int64_t now = spw_now_ms();
    for (int w = l->n_waiting - 1; w >= 0; w--)
        if (now - l->waiting[w].since_ms > HELLO_MS)
            refuse(l, w, "no ticket within 2 s");
    pthread_mutex_lock(&l->mu);
    for (int i = l->n_tickets - 1; i >= 0; i--)
        if (now - l->tickets[i].issued_ms > TICKET_MS)
            drop_ticket(l, i);
    pthread_mutex_unlock(&l->mu);
}

static void *acceptor(void *arg)
{
    struct spw_direct_listener *l = arg;
    pthread_setname_np(pthread_self(), "spw-direct");
    for (;;) {
        pthread_mutex_lock(&l->mu);
        const bool stop = l->stopping;
        pthread_mutex_unlock(&l->mu);
        if (stop)
            break;
        struct pollfd p[1 + MAX_WAITING];
        const int n = 1 + l->n_waiting;
        p[0] = (struct pollfd){.fd = l->fd, .events = POLLIN};
        for (int w = 0; w < l->n_waiting; w++)
            p[1 + w] = (struct pollfd){.fd = l->waiting[w].fd, .events = l->waiting[w].events};
        if (poll(p, (nfds_t)n, TICK_MS) > 0) {
            for (int w = n - 2; w >= 0; w--)      /* from the end: refusing moves the last into w */
                if (p[1 + w].revents)
                    read_hello(l, w);
            if (p[0].revents & POLLIN)
                accept_one(l);
        }
        expire(l);
    }
    for (int w = 0; w < l->n_waiting; w++) {
        SSL_free(l->waiting[w].ssl);
        close(l->waiting[w].fd);
    }
    return NULL;
}

int spw_direct_listen(const char *host, int port, const struct spw_direct_tls *tls,
                      struct spw_direct_listener **out, char *err, size_t errlen)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    int g = getaddrinfo(host && *host ? host : NULL, ps, &hints, &ai);
    if (g != 0)
        return spw_fail(err, errlen, -EINVAL, "data port: cannot resolve %s: %s", host, gai_strerror(g));
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        freeaddrinfo(ai);
        if (fd >= 0)
            close(fd);
        return spw_fail(err, errlen, -e, "data port: cannot listen on %s:%d: %s", host, port, strerror(e));
    }
    freeaddrinfo(ai);
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    struct spw_direct_listener *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return spw_fail(err, errlen, -ENOMEM, "out of memory");
    }
    l->fd = fd;
    l->tls = tls;
    l->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                             : ((struct sockaddr_in *)&sa)->sin_port);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->tid, NULL, acceptor, l) != 0) {
        close(fd);
        free(l);
        return spw_fail(err, errlen, -EAGAIN, "data port: cannot start its thread");
    }
    *out = l;
    return 0;
}

int spw_direct_port(const struct spw_direct_listener *l)
{
    return l->port;
}

int spw_direct_ticket(struct spw_direct_listener *l, uint8_t ticket[SPW_DIRECT_TICKET_BYTES])
{
    if (getrandom(ticket, SPW_DIRECT_TICKET_BYTES, 0) != SPW_DIRECT_TICKET_BYTES)
        return -EIO;
    pthread_mutex_lock(&l->mu);
    int rc = -ENOSPC;
    if (l->n_tickets < MAX_TICKETS) {
        struct ticket *t = &l->tickets[l->n_tickets++];
        memcpy(t->id, ticket, SPW_DIRECT_TICKET_BYTES);
        t->issued_ms = spw_now_ms();
        t->conn = NULL;
        rc = 0;
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

static int find_ticket(const struct spw_direct_listener *l, const uint8_t *ticket)
{
    for (int i = 0; i < l->n_tickets; i++)
        if (same_ticket(l->tickets[i].id, ticket))
            return i;
    return -1;
}

int spw_direct_take(struct spw_direct_listener *l, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES], int timeout_ms,
                    struct spw_direct_conn **out)
{
    const struct timespec dl = spw_deadline_in_ms(timeout_ms);
    pthread_mutex_lock(&l->mu);
    int i;
    for (;;) {
        i = find_ticket(l, ticket);
        if (i < 0 || l->tickets[i].conn || l->stopping)
            break;
        if (pthread_cond_timedwait(&l->cv, &l->mu, &dl) != 0) {
            i = find_ticket(l, ticket);
            break;
        }
    }
    int rc = -ETIMEDOUT;
    if (i >= 0) {
        if (l->tickets[i].conn) {
            *out = l->tickets[i].conn;
            l->tickets[i].conn = NULL;
            rc = 0;
        }
        drop_ticket(l, i);
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int64_t spw_direct_refused(struct spw_direct_listener *l)
{
    pthread_mutex_lock(&l->mu);
    int64_t n = l->refused;
    pthread_mutex_unlock(&l->mu);
    return n;
}

void spw_direct_listener_destroy(struct spw_direct_listener *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->tid, NULL);
    while (l->n_tickets)
        drop_ticket(l, 0);
    close(l->fd);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}

/* ---- connect ---- */

/* The host of "host:port" or "[v6]:port" into host (brackets removed). */
static int host_of(const char *addr, char *host, size_t cap)
{
    const char *start = addr, *end;
    if (addr[0] == '[') {
        start = addr + 1;
        end = strchr(start, ']');
    } else {
        end = strrchr(addr, ':');
    }
    if (!end || end == start || (size_t)(end - start) >= cap)
        return -EINVAL;
    memcpy(host, start, (size_t)(end - start));
    host[end - start] = '\0';
    return 0;
}

static int connect_within(int fd, const struct sockaddr *sa, socklen_t len, int timeout_ms)
{
    if (connect(fd, sa, len) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return -errno;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int n = poll(&p, 1, timeout_ms);
    if (n == 0)
        return -ETIMEDOUT;
    int e = 0;
    socklen_t el = sizeof e;
    if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
        return -errno;
    return -e;
}

/* TLS: the client's handshake on a blocking socket with 200 ms timeouts, until deadline_ms. 0, -ETIMEDOUT, or
 * -EPROTO with why. */
static int client_handshake(SSL *ssl, int64_t deadline_ms, char *why, size_t whylen)
{
    sigset_t old;
    sigpipe_block(&old);
    int rc = 0;
    for (;;) {
        ERR_clear_error();
        errno = 0;
        const int r = SSL_do_handshake(ssl);
        if (r == 1)
            break;
        const int e = SSL_get_error(ssl, r);
        if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) && spw_now_ms() < deadline_ms)
            continue;
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            rc = -ETIMEDOUT;
            snprintf(why, whylen, "no TLS handshake in time (is the data port a TLS one?)");
        } else {
            rc = -EPROTO;
            char r2[200];
            snprintf(why, whylen, "TLS handshake failed: %s", spw_direct_tls_why(ssl, r, r2, sizeof r2));
        }
        break;
    }
    sigpipe_restore(&old);
    return rc;
}

static int tls_write(struct spw_direct_conn *c, const void *p, size_t n, spw_direct_stop_fn stop, void *ctx);

int spw_direct_connect(const char *addr, int port, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES],
                       const struct spw_direct_tls *tls, int timeout_ms, struct spw_direct_conn **out, char *err,
                       size_t errlen)
{
    char host[256], ps[16], key[280], why[320] = "";
    if (host_of(addr, host, sizeof host) != 0 || port <= 0 || port > 65535)
        return spw_fail(err, errlen, -EINVAL, "data connection: bad address %s port %d", addr, port);
    const int64_t deadline = spw_now_ms() + timeout_ms;
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g != 0)
        return spw_fail(err, errlen, -EHOSTUNREACH, "data connection: cannot resolve %s: %s", host, gai_strerror(g));
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = fd < 0 ? -errno : connect_within(fd, ai->ai_addr, ai->ai_addrlen, timeout_ms);
    freeaddrinfo(ai);
    struct spw_direct_conn *c = NULL;
    SSL *ssl = NULL;
    if (rc == 0) {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        set_timeouts(fd);
        snprintf(key, sizeof key, "%s:%d", host, port);
        if (tls && !(ssl = spw_direct_tls_connecting(tls, fd, host, key)))
            rc = -ENOMEM;
        if (rc == 0 && !(c = conn_new(fd, ssl)))
            rc = -ENOMEM;
        if (rc == 0 && ssl)
            rc = client_handshake(ssl, deadline, why, sizeof why);
    }
    if (rc == 0) {
        uint8_t hello[HELLO_BYTES];
        put32(hello, MAGIC);
        memcpy(hello + 4, ticket, SPW_DIRECT_TICKET_BYTES);
        if (ssl) {
            rc = tls_write(c, hello, sizeof hello, NULL, NULL);
        } else {
            struct iovec iov = {hello, sizeof hello};
            struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
            if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof hello)
                rc = errno ? -errno : -EPIPE;
        }
    }
    if (rc != 0) {
        if (c)
            spw_direct_close(c);
        else if (fd >= 0)
            close(fd);
        if (ssl && !c)
            SSL_free(ssl);
        return spw_fail(err, errlen, rc, "data connection to %s port %d: %s", host, port,
                        *why ? why : strerror(-rc));
    }
    *out = c;
    return 0;
}

/* ---- messages ---- */

/* After a send or receive failed with errno: 0 to try again (interrupted, or a 200 ms timeout while not
 * stopped), else -ECANCELED or -errno. */
static int again(spw_direct_stop_fn stop, void *ctx)
{
    if (errno == EINTR)
        return 0;
    if (errno != EAGAIN)
        return -errno;
    return stop && stop(ctx) ? -ECANCELED : 0;
}

/* After an SSL call on c returned r (not success): 0 to try again (a 200 ms timeout while not stopped), 1 at
 * the peer's end (close_notify or EOF), else -ECANCELED, -errno, or -EPROTO (a TLS error: logged once). */
static int tls_again(struct spw_direct_conn *c, int r, spw_direct_stop_fn stop, void *ctx)
{
    const int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        ERR_clear_error();
        return stop && stop(ctx) ? -ECANCELED : 0;
    }
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0 && !ERR_peek_error())) {
        ERR_clear_error();
        return 1;
    }
    if (e == SSL_ERROR_SYSCALL && errno) {
        ERR_clear_error();
        return errno == EINTR ? 0 : -errno;
    }
    char why[200];
    spw_log(SPW_LOG_WARN, "direct", "data connection: TLS failed: %s", spw_direct_tls_why(c->ssl, r, why, sizeof why));
    return -EPROTO;
}

/* TLS: write all of p (SSL_write retried with the same bytes after a timeout). 0 or a negative code. */
static int tls_write(struct spw_direct_conn *c, const void *p, size_t n, spw_direct_stop_fn stop, void *ctx)
{
    while (n) {
        size_t w = 0;
        ERR_clear_error();
        errno = 0;
        const int r = SSL_write_ex(c->ssl, p, n, &w);
        if (r == 1) {
            p = (const uint8_t *)p + w;
            n -= w;
            continue;
        }
        const int rc = tls_again(c, r, stop, ctx);
        if (rc == 1)
            return -EPIPE;
        if (rc)
            return rc;
    }
    return 0;
}

/* TLS: a message's parts, small ones gathered into whole records (an 8-byte header alone in a record would
 * cost a record's 22 bytes and a syscall), big ones written as they are. */
static int tls_send(struct spw_direct_conn *c, const struct iovec *v, int n, spw_direct_stop_fn stop, void *ctx)
{
    sigset_t old;
    sigpipe_block(&old);
    size_t staged = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const size_t len = v[i].iov_len;
        if (len < STAGE_PART && staged + len <= STAGE_BYTES) {
            memcpy(c->stage + staged, v[i].iov_base, len);
            staged += len;
            continue;
        }
        if (staged && (rc = tls_write(c, c->stage, staged, stop, ctx)) != 0)
            break;
        staged = 0;
        if (len < STAGE_PART) {
            memcpy(c->stage, v[i].iov_base, len);
            staged = len;
        } else {
            rc = tls_write(c, v[i].iov_base, len, stop, ctx);
        }
    }
    if (rc == 0 && staged)
        rc = tls_write(c, c->stage, staged, stop, ctx);
    sigpipe_restore(&old);
    return rc;
}

int spw_direct_send(struct spw_direct_conn *c, const struct iovec *iov, int n, spw_direct_stop_fn stop, void *ctx)
{
    if (n < 0 || n > SPW_DIRECT_MAX_IOV)
        return -EINVAL;
    uint64_t len = 0;
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    if (len > UINT32_MAX)
        return -EINVAL;
    uint8_t hdr[SPW_DIRECT_FRAME_HEADER];
    put32(hdr, MAGIC);
    put32(hdr + 4, (uint32_t)len);
    struct iovec v[1 + SPW_DIRECT_MAX_IOV];
    v[0] = (struct iovec){hdr, sizeof hdr};
    memcpy(v + 1, iov, (size_t)n * sizeof *iov);
    if (c->ssl)
        return tls_send(c, v, n + 1, stop, ctx);
    struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)n + 1};
    while (mh.msg_iovlen) {
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            const int rc = again(stop, ctx);
            if (rc)
                return rc;
            continue;
        }
        size_t done = (size_t)w;
        while (mh.msg_iovlen && done >= mh.msg_iov[0].iov_len) {
            done -= mh.msg_iov[0].iov_len;
            mh.msg_iov++;
            mh.msg_iovlen--;
        }
        if (mh.msg_iovlen) {
            mh.msg_iov[0].iov_base = (uint8_t *)mh.msg_iov[0].iov_base + done;
            mh.msg_iov[0].iov_len -= done;
        }
    }
    return 0;
}

/* Read up to n bytes, waiting out the 200 ms timeouts while not stopped: the count read (0: end of stream). */
static ssize_t read_some(struct spw_direct_conn *c, void *dst, size_t n, spw_direct_stop_fn stop, void *ctx)
{
    for (;;) {
        if (c->ssl) {
            size_t got = 0;
            ERR_clear_error();
            errno = 0;
            const int r = SSL_read_ex(c->ssl, dst, n, &got);
            if (r == 1)
                return (ssize_t)got;
            const int rc = tls_again(c, r, stop, ctx);
            if (rc == 1)
                return 0;
            if (rc)
                return rc;
            continue;
        }
        ssize_t r = recv(c->fd, dst, n, 0);
        if (r >= 0)
            return r;
        const int rc = again(stop, ctx);
        if (rc)
            return rc;
    }
}

int spw_direct_read(struct spw_direct_conn *c, void *dst, size_t n, spw_direct_stop_fn stop, void *ctx)
{
    uint8_t sink[16384];
    while (n) {
        void *to = dst ? dst : sink;
        size_t want = dst || n < sizeof sink ? n : sizeof sink;
        ssize_t r = read_some(c, to, want, stop, ctx);
        if (r < 0)
            return (int)r;
        if (r == 0)
            return -EPIPE;
        n -= (size_t)r;
        if (dst)
            dst = (uint8_t *)dst + r;
    }
    return 0;
}

/* Wait up to timeout_ms for a message's first bytes: 1 some came (or TLS holds some already), -ETIMEDOUT, or
 * -errno. With TLS, records that carry no data (a session ticket) wake the poll without a message: the wait
 * goes on for what is left of timeout_ms. */
static int first_bytes(struct spw_direct_conn *c, int timeout_ms, uint8_t *hdr, ssize_t *got,
                       spw_direct_stop_fn stop, void *ctx)
{
    const int64_t deadline = spw_now_ms() + timeout_ms;
    for (;;) {
        if (!c->ssl || !SSL_has_pending(c->ssl)) {
            const int64_t left = deadline - spw_now_ms();
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            int n = poll(&p, 1, left > 0 ? (int)left : 0);
            if (n < 0)
                return errno == EINTR ? -ETIMEDOUT : -errno;
            if (n == 0)
                return -ETIMEDOUT;
        }
        if (!c->ssl) {
            *got = read_some(c, hdr, SPW_DIRECT_FRAME_HEADER, stop, ctx);
            return 1;
        }
        size_t k = 0;
        ERR_clear_error();
        errno = 0;
        const int r = SSL_read_ex(c->ssl, hdr, SPW_DIRECT_FRAME_HEADER, &k);
        if (r == 1) {
            *got = (ssize_t)k;
            return 1;
        }
        const int rc = tls_again(c, r, stop, ctx);
        if (rc == 1) {
            *got = 0;
            return 1;
        }
        if (rc)
            return rc;
        if (spw_now_ms() >= deadline)
            return -ETIMEDOUT;
    }
}

int spw_direct_next(struct spw_direct_conn *c, int timeout_ms, size_t max_len, size_t *len, spw_direct_stop_fn stop,
                    void *ctx, char *err, size_t errlen)
{
    uint8_t hdr[SPW_DIRECT_FRAME_HEADER];
    ssize_t r = 0;
    int rc = first_bytes(c, timeout_ms, hdr, &r, stop, ctx);
    if (rc < 0)
        return rc;
    if (r == 0)
        return 0;
    if (r < 0)
        return (int)r;
    rc = spw_direct_read(c, hdr + r, sizeof hdr - (size_t)r, stop, ctx);
    if (rc != 0)
        return rc;
    if (get_le(hdr, 4) != MAGIC)
        return spw_fail(err, errlen, SPW_EFORMAT, "data connection: not a message (bad magic)");
    const uint64_t l = get_le(hdr + 4, 4);
    if (l > max_len)
        return spw_fail(err, errlen, SPW_ETOOBIG, "data connection: a message of %llu bytes, over the %zu-byte cap",
                        (unsigned long long)l, max_len);
    *len = (size_t)l;
    return 1;
}

void spw_direct_shutdown(struct spw_direct_conn *c)
{
    if (c && c->fd >= 0)
        shutdown(c->fd, SHUT_RDWR);
}
