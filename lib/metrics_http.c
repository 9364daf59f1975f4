/* lib/metrics_http.c - the metrics port (see metrics_http.h) on libmicrohttpd's own polling thread (epoll),
 * and a reaper thread that cuts connections older than REQUEST_MS (libmicrohttpd's timeout counts idle time
 * only: a slowloris peer sending a byte now and then would hold its slot for ever). Thread model: the
 * polling thread runs every request, so collect never runs twice at once; the connection table is shared
 * with the reaper under a mutex. */
#include "lib/metrics_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/clock.h"
#include "lib/err.h"

/* Room for a scraper beside many slow peers (8 KiB each at most); each connection lives REQUEST_MS at most,
 * request and reply together (a scrape takes milliseconds; a keep-alive scraper just connects again). */
#define MAX_CONNECTIONS 256
#define MAX_PER_ADDRESS 128
#define REQUEST_MEMORY (8 << 10)
#define IDLE_TIMEOUT_S 10
#define REQUEST_MS 5000

struct conn {                /* a slot of the table, its address the connection's socket context */
    int fd;
    int64_t since_ms;       /* INT64_MAX: cut already */
    bool used;
};

struct spw_metrics_http {
    struct MHD_Daemon *d;
    spw_metrics_collect_fn collect;
    void *ctx;
    int port;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping, reaping;
    pthread_t reaper;
    struct conn conns[MAX_CONNECTIONS];
};

/* libmicrohttpd's connection notifications: a slot per open connection, when it began. The slot is found
 * again through the connection's socket context, not its fd (which may be gone by the time it closes). */
static void notify(void *cls, struct MHD_Connection *c, void **socket_ctx, enum MHD_ConnectionNotificationCode code)
{
    struct spw_metrics_http *h = cls;
    pthread_mutex_lock(&h->mu);
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        for (int i = 0; ci && i < MAX_CONNECTIONS; i++)
            if (!h->conns[i].used) {
                h->conns[i] = (struct conn){ci->connect_fd, spw_now_ms(), true};
                *socket_ctx = &h->conns[i];
                break;
            }
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_ctx) {
        ((struct conn *)*socket_ctx)->used = false;
        *socket_ctx = NULL;
    }
    pthread_mutex_unlock(&h->mu);
}

/* Every 200 ms, shut down the sockets of connections older than REQUEST_MS: the polling thread then reads
 * their end and closes them. */
static void *reap(void *arg)
{
    struct spw_metrics_http *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stopping) {
        struct timespec dl = spw_deadline_in_ms(200);
        pthread_cond_timedwait(&h->cv, &h->mu, &dl);
        const int64_t now = spw_now_ms();
        for (int i = 0; i < MAX_CONNECTIONS; i++)
            if (h->conns[i].used && now - h->conns[i].since_ms > REQUEST_MS) {
                shutdown(h->conns[i].fd, SHUT_RDWR);
                h->conns[i].since_ms = INT64_MAX;
            }
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type, char *body, size_t len,
                             enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned code, const char *msg)
{
    return reply(c, code, "text/plain; charset=utf-8", (char *)msg, strlen(msg), MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size,
                              void **req_cls)
{
    struct spw_metrics_http *h = cls;
    (void)version;
    (void)upload_data;
    (void)req_cls;
    /* Answered at the first call, before any body: a body is never read (the connection closes after). */
    *upload_data_size = 0;
    const bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    if (strcmp(url, "/metrics") != 0 && strcmp(url, "/healthz") != 0)
        return text(c, MHD_HTTP_NOT_FOUND, "not found: this port serves /metrics and /healthz\n");
    if (!get)
        return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: GET or HEAD\n");
    if (strcmp(url, "/healthz") == 0)
        return text(c, MHD_HTTP_OK, "ok\n");
    struct spw_prom p;
    spw_prom_init(&p);
    h->collect(h->ctx, &p);
    if (p.oom || !p.buf) {
        spw_prom_free(&p);
        return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", p.buf, p.len, MHD_RESPMEM_MUST_FREE);
}

int spw_metrics_http_start(const char *listen, int port, spw_metrics_collect_fn collect, void *ctx,
                           struct spw_metrics_http **out, char *err, size_t errlen)
{
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    const struct sockaddr *sa = (const struct sockaddr *)&a4;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    if (port < 0 || port > 65535)
        return spw_fail(err, errlen, -EINVAL, "metrics port %d is outside [0, 65535]", port);
    if (!listen || !*listen || strcmp(listen, "0.0.0.0") == 0) {
        a4.sin_addr.s_addr = htonl(INADDR_ANY);
    } else if (inet_pton(AF_INET6, listen, &a6.sin6_addr) == 1) {
        sa = (const struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else if (inet_pton(AF_INET, listen, &a4.sin_addr) != 1) {
        return spw_fail(err, errlen, -EINVAL, "metrics: \"%s\" is not an IPv4 or IPv6 address", listen);
    }
    struct spw_metrics_http *h = calloc(1, sizeof *h);
    if (!h)
        return spw_fail(err, errlen, -ENOMEM, "out of memory");
    h->collect = collect;
    h->ctx = ctx;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    h->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)MAX_PER_ADDRESS,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)REQUEST_MEMORY,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, h, MHD_OPTION_END);
    if (h->d && pthread_create(&h->reaper, NULL, reap, h) == 0)
        h->reaping = true;
    if (!h->d || !h->reaping) {
        const int e = !h->d ? (errno ? errno : EADDRINUSE) : EAGAIN;
        if (h->d)
            MHD_stop_daemon(h->d);
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
        free(h);
        return spw_fail(err, errlen, -e, "metrics: cannot listen on %s:%d: %s", listen && *listen ? listen : "0.0.0.0",
                        port, strerror(e));
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : port;
    *out = h;
    return 0;
}

int spw_metrics_http_port(const struct spw_metrics_http *h)
{
    return h->port;
}

void spw_metrics_http_stop(struct spw_metrics_http *h)
{
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    h->stopping = true;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->reaper, NULL);
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}
