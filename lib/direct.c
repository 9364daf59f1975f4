/* lib/direct.c - direct data connections (see direct.h): the ticketed listener, connect, and framed send and
 * receive on a blocking socket with 200 ms timeouts, so a stop callback is asked while a peer stalls.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"

#define MAGIC 0x44575053u           /* "SPWD", little-endian on the wire */
#define HELLO_BYTES (4 + SPW_DIRECT_TICKET_BYTES)
#define HELLO_MS 2000               /* an accepted connection has this long to present its ticket */
#define TICKET_MS 10000             /* a ticket not presented by then is withdrawn */
#define MAX_TICKETS 256
#define MAX_WAITING 32              /* accepted connections still to say their ticket; the oldest is dropped */
#define TICK_MS 200

struct ticket {
    uint8_t id[SPW_DIRECT_TICKET_BYTES];
    int64_t issued_ms;
    int fd;                         /* -1 until presented */
};

struct waiting {
    int fd;
    int64_t since_ms;
    size_t got;
    uint8_t hello[HELLO_BYTES];
};

struct spw_direct_listener {
    int fd, port;
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
    if (l->tickets[i].fd >= 0)
        close(l->tickets[i].fd);
    l->tickets[i] = l->tickets[--l->n_tickets];
}

/* Refuse waiting connection w: closed, counted, and logged at most once a second (a flood of them is one
 * line a second, with the count). */
static void refuse(struct spw_direct_listener *l, int w, const char *why)
{
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
    bool taken = false;
    if (get_le(c->hello, 4) == MAGIC) {
        set_timeouts(c->fd);            /* before anyone can take it */
        pthread_mutex_lock(&l->mu);
        for (int i = 0; i < l->n_tickets && !taken; i++)
            if (l->tickets[i].fd < 0 && same_ticket(l->tickets[i].id, c->hello + 4)) {
                l->tickets[i].fd = c->fd;
                taken = true;
                pthread_cond_broadcast(&l->cv);
            }
        pthread_mutex_unlock(&l->mu);
    }
    if (!taken) {
        refuse(l, w, get_le(c->hello, 4) == MAGIC ? "no such ticket" : "not a Spillway data connection");
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
    l->waiting[l->n_waiting++] = (struct waiting){.fd = fd, .since_ms = spw_now_ms()};
}

static void read_hello(struct spw_direct_listener *l, int w)
{
    struct waiting *c = &l->waiting[w];
    ssize_t n = recv(c->fd, c->hello + c->got, HELLO_BYTES - c->got, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        refuse(l, w, "closed before presenting a ticket");
        return;
    }
    if (n > 0 && (c->got += (size_t)n) == HELLO_BYTES) {
        fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
        presented(l, w);
    }
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
            p[1 + w] = (struct pollfd){.fd = l->waiting[w].fd, .events = POLLIN};
        if (poll(p, (nfds_t)n, TICK_MS) > 0) {
            for (int w = n - 2; w >= 0; w--)      /* from the end: refusing moves the last into w */
                if (p[1 + w].revents)
                    read_hello(l, w);
            if (p[0].revents & POLLIN)
                accept_one(l);
        }
        expire(l);
    }
    for (int w = 0; w < l->n_waiting; w++)
        close(l->waiting[w].fd);
    return NULL;
}

int spw_direct_listen(const char *host, int port, struct spw_direct_listener **out, char *err, size_t errlen)
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
        t->fd = -1;
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
                    int *fd)
{
    const struct timespec dl = spw_deadline_in_ms(timeout_ms);
    pthread_mutex_lock(&l->mu);
    int i;
    for (;;) {
        i = find_ticket(l, ticket);
        if (i < 0 || l->tickets[i].fd >= 0 || l->stopping)
            break;
        if (pthread_cond_timedwait(&l->cv, &l->mu, &dl) != 0) {
            i = find_ticket(l, ticket);
            break;
        }
    }
    int rc = -ETIMEDOUT;
    if (i >= 0) {
        if (l->tickets[i].fd >= 0) {
            *fd = l->tickets[i].fd;
            l->tickets[i].fd = -1;
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

int spw_direct_connect(const char *addr, int port, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES], int timeout_ms,
                       int *out, char *err, size_t errlen)
{
    char host[256], ps[16];
    if (host_of(addr, host, sizeof host) != 0 || port <= 0 || port > 65535)
        return spw_fail(err, errlen, -EINVAL, "data connection: bad address %s port %d", addr, port);
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    int g = getaddrinfo(host, ps, &hints, &ai);
    if (g != 0)
        return spw_fail(err, errlen, -EHOSTUNREACH, "data connection: cannot resolve %s: %s", host, gai_strerror(g));
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = fd < 0 ? -errno : connect_within(fd, ai->ai_addr, ai->ai_addrlen, timeout_ms);
    freeaddrinfo(ai);
    if (rc == 0) {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        set_timeouts(fd);
        uint8_t hello[HELLO_BYTES];
        put32(hello, MAGIC);
        memcpy(hello + 4, ticket, SPW_DIRECT_TICKET_BYTES);
        struct iovec iov = {hello, sizeof hello};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof hello)
            rc = errno ? -errno : -EPIPE;
    }
    if (rc != 0) {
        if (fd >= 0)
            close(fd);
        return spw_fail(err, errlen, rc, "data connection to %s port %d: %s", host, port, strerror(-rc));
    }
    *out = fd;
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

int spw_direct_send(int fd, const struct iovec *iov, int n, spw_direct_stop_fn stop, void *ctx)
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
    struct msghdr mh = {.msg_iov = v, .msg_iovlen = (size_t)n + 1};
    while (mh.msg_iovlen) {
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
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
static ssize_t read_some(int fd, void *dst, size_t n, spw_direct_stop_fn stop, void *ctx)
{
    for (;;) {
        ssize_t r = recv(fd, dst, n, 0);
        if (r >= 0)
            return r;
        const int rc = again(stop, ctx);
        if (rc)
            return rc;
    }
}

int spw_direct_read(int fd, void *dst, size_t n, spw_direct_stop_fn stop, void *ctx)
{
    uint8_t sink[16384];
    while (n) {
        void *to = dst ? dst : sink;
        size_t want = dst || n < sizeof sink ? n : sizeof sink;
        ssize_t r = read_some(fd, to, want, stop, ctx);
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

int spw_direct_next(int fd, int timeout_ms, size_t max_len, size_t *len, spw_direct_stop_fn stop, void *ctx,
                    char *err, size_t errlen)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    if (n < 0)
        return errno == EINTR ? -ETIMEDOUT : -errno;
    if (n == 0)
        return -ETIMEDOUT;
    uint8_t hdr[SPW_DIRECT_FRAME_HEADER];
    ssize_t r = read_some(fd, hdr, sizeof hdr, stop, ctx);
    if (r == 0)
        return 0;
    if (r < 0)
        return (int)r;
    int rc = spw_direct_read(fd, hdr + r, sizeof hdr - (size_t)r, stop, ctx);
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

void spw_direct_shutdown(int fd)
{
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
}
