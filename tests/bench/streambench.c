/* tests/bench/streambench.c - element streaming throughput, Spillway's path vs a raw TCP socket moving the
 * same bytes. One process per side (pin them to different cores):
 *   streambench server MODE ELEM_BYTES ELEMENTS        prints "listening on 127.0.0.1:PORT", serves one
 *                                                      client, exits with one JSON line (its CPU seconds)
 *   streambench client MODE HOST:PORT ELEM_BYTES       receives everything, copies each element once into a
 *                                                      batch slot, prints one JSON line (MB/s, CPU seconds)
 * MODE is grpc, direct, tls or tcp.
 * gRPC: the worker's path: ElementBatch messages of ~1 MiB built by the zero-copy wire codec, one send in
 * flight per stream, against byte credits the client grants; the client decodes without copying and copies
 * each payload once. STREAMBENCH_STREAMS=S (both sides) splits the elements over S streams on one channel,
 * each with its own sending and receiving thread. TCP: the same message sizes with a 4-byte length prefix,
 * write(2)/read(2), the same one copy. direct: the gRPC stream carries the credits and a ticket for a data
 * connection (lib/direct.h) that carries the same ElementBatch messages; the client reads each into one
 * buffer it keeps and copies each element once into its slot, as the TCP receiver does. tls: direct with TLS on
 * the data connection (lib/direct.h: OpenSSL, kTLS where the kernel has it): the server presents
 * $STREAMBENCH_TLS_CERT and $STREAMBENCH_TLS_KEY (PEM files), the client verifies it against
 * $STREAMBENCH_TLS_CA, no client certificate; the gRPC stream stays plaintext (it carries only credits and
 * the ticket), so tls vs direct is the data connection's TLS alone. In direct and tls modes both JSON lines
 * carry "data": the data connection's spw_direct_describe (e.g. "TLSv1.3 ... ktls=send"). */
#include <arpa/inet.h>
#include <stdbool.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/direct.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "pipeline/wire.h"
#include "proto/spillway.pb-c.h"

#define MSG_TARGET (1u << 20)
#define CREDIT (64u << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static size_t g_elem, g_count, g_per_msg;
static int g_streams = 1;                       /* STREAMBENCH_STREAMS: gRPC streams in parallel */
static bool g_private;                          /* STREAMBENCH_PRIVATE=1: each stream its own TCP connection */
static _Atomic int g_served;
static char g_data_desc[160] = "none";          /* stream 0's data connection, as spw_direct_describe says */

/* Elements stream `i` of g_streams carries: an even share, the remainder on stream 0. */
static size_t share_of(int i)
{
    return g_count / (size_t)g_streams + (i == 0 ? g_count % (size_t)g_streams : 0);
}
static uint8_t *g_payload;

/* gRPC server: the first client message grants credit; send ElementBatches while credit lasts. */
static int serve_stream(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen)
{
    struct spw_direct_listener *dl = ctx;     /* direct mode: the data connections' listener */
    struct spw_direct_conn *data = NULL;
    uint8_t *in;
    size_t inlen;
    int64_t credit = 0;
    size_t sent = 0, count = 0;
    bool named = false, stream0 = false;
    int64_t positions[4096];
    uint8_t scratch[1 << 16];
    while (!named || sent < count) {
        while (credit < (int64_t)(g_per_msg * g_elem)) {
            int r = spw_rpc_stream_recv(st, 0, &in, &inlen);
            if (r <= 0) {
                snprintf(msg, msglen, "client went away");
                return SPW_RPC_CANCELLED;
            }
            Spillway__V1__StreamRequest *req = spillway__v1__stream_request__unpack(NULL, inlen, in);
            free(in);
            if (req) {
                if (!named) {       /* the first message: rank = this stream's index */
                    count = share_of(req->rank >= 0 && req->rank < g_streams ? req->rank : 0), named = true;
                    uint8_t offer[2 + SPW_DIRECT_TICKET_BYTES];
                    struct iovec ov = {offer, sizeof offer};
                    const int port = dl ? spw_direct_port(dl) : 0;
                    offer[0] = (uint8_t)(port >> 8), offer[1] = (uint8_t)port;
                    if (dl && (spw_direct_ticket(dl, offer + 2) != 0 || spw_rpc_stream_send(st, &ov, 1) != 0 ||
                               spw_direct_take(dl, offer + 2, 5000, &data) != 0)) {
                        snprintf(msg, msglen, "no data connection");
                        return SPW_RPC_INTERNAL;
                    }
                    stream0 = req->rank == 0;
                }
                credit += req->credit_bytes;
                spillway__v1__stream_request__free_unpacked(req, NULL);
            }
        }
        if (sent >= count)
            break;
        size_t k = count - sent < g_per_msg ? count - sent : g_per_msg;
        for (size_t i = 0; i < k; i++)
            positions[i] = (int64_t)(sent + i);
        struct spw_wire_batch b = {.job = 1, .split = sent / 64, .generation = 1, .n_positions = k,
                                   .positions = positions, .n_tensors = 1};
        b.tensors[0] = (struct spw_wire_tensor){SPW_DTYPE_U8, 2, {(int64_t)k, (int64_t)g_elem}, g_payload,
                                                k * g_elem, 0, 0, 0};
        struct iovec iov[4];
        int n = spw_wire_encode(&b, scratch, sizeof scratch, iov, 4);
        if (n < 0 || (data ? spw_direct_send(data, iov, n, NULL, NULL)
                                   : spw_rpc_stream_send(st, iov, n)) != 0) {
            snprintf(msg, msglen, "send failed");
            return SPW_RPC_INTERNAL;
        }
        credit -= (int64_t)(k * g_elem);
        sent += k;
    }
    /* Wait for the client to close its side: it has everything then. */
    while (spw_rpc_stream_recv(st, 0, &in, &inlen) == 1)
        free(in);
    if (data && stream0)            /* at the end: kTLS is settled by then */
        spw_direct_describe(data, g_data_desc, sizeof g_data_desc);
    spw_direct_close(data);
    g_served++;
    return SPW_RPC_OK;
}

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        b += r;
        n -= (size_t)r;
    }
    return 0;
}

/* tls mode's settings of one side from $STREAMBENCH_TLS_CERT and _KEY (server) or _CA (client): 0 and *out,
 * or 1 with the reason on stderr. */
static int tls_from_env(bool is_server, struct spw_rpc_tls **rt, struct spw_direct_tls **out)
{
    const char *cert = getenv("STREAMBENCH_TLS_CERT"), *key = getenv("STREAMBENCH_TLS_KEY");
    const char *ca = getenv("STREAMBENCH_TLS_CA");
    char err[256];
    if (spw_rpc_tls_load(is_server ? cert : NULL, is_server ? key : NULL, is_server ? NULL : ca, false, rt, err,
                         sizeof err) != 0 ||
        spw_direct_tls_create(*rt, is_server, out, err, sizeof err) != 0) {
        fprintf(stderr, "streambench: tls mode (STREAMBENCH_TLS_%s): %s\n", is_server ? "CERT, _KEY" : "CA", err);
        spw_rpc_tls_free(*rt);
        *rt = NULL;
        return 1;
    }
    return 0;
}

static bool is_direct(const char *mode)
{
    return !strcmp(mode, "direct") || !strcmp(mode, "tls");
}

static int server(const char *mode)
{
    if (!strcmp(mode, "grpc") || is_direct(mode)) {
        struct spw_direct_listener *dl = NULL;
        struct spw_rpc_tls *rt = NULL;
        struct spw_direct_tls *dt = NULL;
        char derr[256];
        if (!strcmp(mode, "tls") && tls_from_env(true, &rt, &dt) != 0)
            return 1;
        if (is_direct(mode) && spw_direct_listen("127.0.0.1", 0, dt, &dl, derr, sizeof derr) != 0) {
            fprintf(stderr, "%s\n", derr);
            return 1;
        }
        spw_rpc_init();
        struct spw_rpc_server *srv;
        struct spw_rpc_server_opts o = {.listen_addr = "127.0.0.1:0"};
        char err[256];
        if (spw_rpc_server_create(&o, &srv, err, sizeof err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        spw_rpc_server_add_stream(srv, SPW_PATH(STREAM_ELEMENTS), serve_stream, dl);
        int port;
        spw_rpc_server_start(srv, &port);
        printf("listening on 127.0.0.1:%d\n", port);
        fflush(stdout);
        double c0 = cpu_s();
        while (g_served < g_streams)              /* serve one client's streams, then stop */
            usleep(10000);
        spw_rpc_server_shutdown(srv, 1000);
        spw_rpc_server_destroy(srv);
        printf("{\"side\": \"server\", \"mode\": \"%s\", \"cpu_s\": %.4f, \"data\": \"%s\"}\n", mode,
               cpu_s() - c0, g_data_desc);
        spw_rpc_shutdown();
        spw_direct_listener_destroy(dl);
        spw_direct_tls_destroy(dt);
        spw_rpc_tls_free(rt);
        return 0;
    }
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1) || getsockname(ls, (struct sockaddr *)&a, &al))
        return 1;
    printf("listening on 127.0.0.1:%d\n", ntohs(a.sin_port));
    fflush(stdout);
    int fd = accept(ls, NULL, NULL);
    double c0 = cpu_s();
    for (size_t sent = 0; sent < g_count;) {
        size_t k = g_count - sent < g_per_msg ? g_count - sent : g_per_msg;
        uint32_t len = (uint32_t)(k * g_elem);
        if (write_all(fd, &len, 4) || write_all(fd, g_payload, len))
            return 1;
        sent += k;
    }
    shutdown(fd, SHUT_WR);
    char c;
    while (read(fd, &c, 1) > 0)
        ;
    close(fd);
    close(ls);
    printf("{\"side\": \"server\", \"mode\": \"tcp\", \"cpu_s\": %.4f}\n", cpu_s() - c0);
    return 0;
}

/* One gRPC stream's receiver: names its index in the first message (with the credit), then takes its share
 * of the elements, copying each once into a batch slot of its own. */
struct receiver {
    struct spw_rpc_channel *ch;
    const char *target;
    const struct spw_direct_tls *tls;   /* tls mode: the data connection's; NULL: plaintext */
    bool direct;
    int index, failed;
    uint8_t *slot;
    size_t got, bytes;
};

static void *receive_stream(void *arg)
{
    struct receiver *r = arg;
    struct spw_rpc_stream *st;
    const size_t count = share_of(r->index);
    struct spw_rpc_channel *own = NULL;
    if (g_private && spw_rpc_channel_create(r->target, &(struct spw_rpc_channel_opts){.private_connection = true},
                                            &own)) {
        r->failed = 1;
        return NULL;
    }
    if (spw_rpc_stream_open(own ? own : r->ch, SPW_PATH(STREAM_ELEMENTS), 0, &st)) {
        r->failed = 1;
        return NULL;
    }
    Spillway__V1__StreamRequest req = SPILLWAY__V1__STREAM_REQUEST__INIT;
    uint8_t rbuf[64];
    req.job = 1;
    req.rank = r->index;
    req.credit_bytes = CREDIT;
    struct iovec iov = {rbuf, spillway__v1__stream_request__pack(&req, rbuf)};
    spw_rpc_stream_send(st, &iov, 1);
    int64_t granted_unused = CREDIT;
    struct spw_direct_conn *dc = NULL;
    if (r->direct) {                    /* the offer: the data port and a ticket */
        uint8_t *offer = NULL;
        size_t olen = 0;
        char err[256] = "no offer on the gRPC stream";
        if (spw_rpc_stream_recv(st, 5000, &offer, &olen) != 1 || olen != 2 + SPW_DIRECT_TICKET_BYTES ||
            spw_direct_connect(r->target, offer[0] << 8 | offer[1], offer + 2, r->tls, 2000, &dc, err,
                               sizeof err) != 0) {
            fprintf(stderr, "streambench: data connection: %s\n", err);
            r->failed = 1;
        }
        free(offer);
    }
    uint8_t *buf = NULL;            /* the message buffer, kept from one message to the next */
    size_t cap = 0;
    while (r->direct && !r->failed && r->got < count) {
        size_t len;
        struct spw_wire_batch b;
        char err[256];
        if (spw_direct_next(dc, 5000, 64 << 20, &len, NULL, NULL, err, sizeof err) != 1 ||
            (len > cap && !(buf = realloc(buf, cap = len))) || spw_direct_read(dc, buf, len, NULL, NULL) ||
            spw_wire_decode(buf, len, &b, err, sizeof err)) {
            r->failed = 1;
            break;
        }
        for (size_t i = 0; i < b.n_positions; i++)      /* the one copy, from the message */
            memcpy(r->slot + ((r->got + i) % 64) * g_elem, b.tensors[0].data + i * g_elem, g_elem);
        r->got += b.n_positions;
        r->bytes += b.tensors[0].nbytes;
        granted_unused -= (int64_t)b.tensors[0].nbytes;
        spw_wire_batch_free(&b);
        if (granted_unused < (int64_t)CREDIT / 2) {
            req.credit_bytes = CREDIT / 2;
            iov.iov_len = spillway__v1__stream_request__pack(&req, rbuf);
            spw_rpc_stream_send(st, &iov, 1);
            granted_unused += CREDIT / 2;
        }
    }
    free(buf);
    if (dc && r->index == 0)        /* at the end: kTLS is settled by then */
        spw_direct_describe(dc, g_data_desc, sizeof g_data_desc);
    spw_direct_close(dc);
    while (!r->direct && r->got < count) {
        struct spw_rpc_msg *m;
        if (spw_rpc_stream_recv_parts(st, 0, &m) != 1) {
            r->failed = 1;
            break;
        }
        int nparts;
        size_t len;
        const struct iovec *parts = spw_rpc_msg_parts(m, &nparts, &len);
        struct spw_wire_batch b;
        char err[128];
        if (spw_wire_decode_parts(parts, nparts, &b, err, sizeof err) != 0) {
            spw_rpc_msg_free(m);
            r->failed = 1;
            break;
        }
        for (size_t i = 0; i < b.n_positions; i++)   /* the one copy, from the received slices */
            spw_wire_copy(parts, nparts, b.tensors[0].offset + i * g_elem, g_elem,
                          r->slot + ((r->got + i) % 64) * g_elem);
        r->got += b.n_positions;
        r->bytes += b.tensors[0].nbytes;
        granted_unused -= (int64_t)b.tensors[0].nbytes;
        spw_wire_batch_free(&b);
        spw_rpc_msg_free(m);
        if (granted_unused < (int64_t)CREDIT / 2) {          /* top the credit up */
            req.credit_bytes = CREDIT / 2;
            iov.iov_len = spillway__v1__stream_request__pack(&req, rbuf);
            spw_rpc_stream_send(st, &iov, 1);
            granted_unused += CREDIT / 2;
        }
    }
    spw_rpc_stream_close_send(st);
    char msg[64];
    spw_rpc_stream_finish(st, msg, sizeof msg);
    if (own)
        spw_rpc_channel_destroy(own);
    return NULL;
}

static int client(const char *mode, const char *target)
{
    uint8_t *slot = malloc(g_elem * 64);         /* a batch of 64: each element copied once into its slot */
    size_t got = 0, bytes = 0;
    double t0 = now_s(), c0 = cpu_s();
    const long f0 = minor_faults();
    struct spw_rpc_tls *rt = NULL;
    struct spw_direct_tls *dt = NULL;
    if (!strcmp(mode, "tls") && tls_from_env(false, &rt, &dt) != 0)
        return 1;
    if (!strcmp(mode, "grpc") || is_direct(mode)) {
        spw_rpc_init();
        struct spw_rpc_channel *ch;
        if (spw_rpc_channel_create(target, NULL, &ch))
            return 1;
        struct receiver rs[16];
        pthread_t th[16];
        for (int i = 0; i < g_streams; i++) {
            rs[i] = (struct receiver){.ch = ch, .target = target, .tls = dt, .direct = is_direct(mode), .index = i,
                                      .slot = i ? malloc(g_elem * 64) : slot};
            if (pthread_create(&th[i], NULL, receive_stream, &rs[i]))
                return 1;
        }
        int failed = 0;
        for (int i = 0; i < g_streams; i++) {
            pthread_join(th[i], NULL);
            failed |= rs[i].failed;
            got += rs[i].got;
            bytes += rs[i].bytes;
            if (i)
                free(rs[i].slot);
        }
        spw_rpc_channel_destroy(ch);
        spw_rpc_shutdown();
        spw_direct_tls_destroy(dt);
        spw_rpc_tls_free(rt);
        if (failed)
            return 1;
    } else {
        char host[64];
        int port = 0;
        if (sscanf(target, "%63[^:]:%d", host, &port) != 2)
            return 2;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, host, &a.sin_addr);
        if (connect(fd, (struct sockaddr *)&a, sizeof a))
            return 1;
        uint8_t *buf = malloc(MSG_TARGET + g_elem);
        while (got < g_count) {
            uint32_t len;
            if (read_all(fd, &len, 4) || len > MSG_TARGET + g_elem || read_all(fd, buf, len))
                return 1;
            size_t k = len / g_elem;
            for (size_t i = 0; i < k; i++)
                memcpy(slot + ((got + i) % 64) * g_elem, buf + i * g_elem, g_elem);
            got += k;
            bytes += len;
        }
        close(fd);
        free(buf);
    }
    double secs = now_s() - t0, cpu = cpu_s() - c0;
    printf("{\"side\": \"client\", \"mode\": \"%s\", \"elem_bytes\": %zu, \"elements\": %zu, \"seconds\": %.4f, "
           "\"mb_per_s\": %.1f, \"cpu_s\": %.4f, \"cpu_s_per_gb\": %.3f, \"minor_faults\": %ld, "
           "\"data\": \"%s\"}\n", mode, g_elem, got, secs, bytes / secs / 1e6, cpu, cpu / (bytes / 1e9),
           minor_faults() - f0, g_data_desc);
    free(slot);
    return 0;
}

int main(int argc, char **argv)
{
    /* Messages are ~1 MiB: keep freed ones on the heap instead of an mmap, faults and munmap each time
     * (the same setting for both modes). */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    if (argc < 5) {
        fprintf(stderr, "usage: streambench server grpc|direct|tls|tcp ELEM_BYTES ELEMENTS | "
                        "client grpc|direct|tls|tcp HOST:PORT ELEM_BYTES ELEMENTS\n"
                        "  tls: server $STREAMBENCH_TLS_CERT, $STREAMBENCH_TLS_KEY; client $STREAMBENCH_TLS_CA\n");
        return 2;
    }
    const bool is_server = !strcmp(argv[1], "server");
    g_elem = (size_t)atoll(argv[is_server ? 3 : 4]);
    g_count = (size_t)atoll(argv[is_server ? 4 : 5 < argc ? 5 : 4]);
    if (!is_server && argc > 5)
        g_count = (size_t)atoll(argv[5]);
    g_per_msg = MSG_TARGET / g_elem ? MSG_TARGET / g_elem : 1;
    if (g_per_msg > 4096)
        g_per_msg = 4096;
    const char *streams = getenv("STREAMBENCH_STREAMS");
    g_streams = streams ? atoi(streams) : 1;
    g_private = getenv("STREAMBENCH_PRIVATE") && !strcmp(getenv("STREAMBENCH_PRIVATE"), "1");
    if (g_streams < 1 || g_streams > 16) {
        fprintf(stderr, "streambench: STREAMBENCH_STREAMS must be 1..16\n");
        return 2;
    }
    g_payload = malloc(g_per_msg * g_elem);
    for (size_t i = 0; i < g_per_msg * g_elem; i++)
        g_payload[i] = (uint8_t)(i * 31);
    return is_server ? server(argv[2]) : client(argv[2], argv[3]);
}
