/* tests/tools/fakeworker.c - a hostile worker for integration tests: it registers with the dispatcher and
 * heartbeats like a worker (so clients stream from it) but never leases; every StreamElements it serves gets
 * one bad message, then it waits and closes the stream. Proves the client rejects what a worker controls.
 *   fakeworker DISPATCHER MODE [SAMPLES SEED]   prints "listening on 127.0.0.1:PORT"; runs until SIGTERM
 * MODE: garbage (bytes that are no ElementBatch), wrong-sample (a well-formed message whose sample is not
 * the one the epoch order puts at its position), huge-shape (a tensor whose shape claims far more bytes
 * than it carries), small-image (an 8x8 image of the right sample at cut 1, where the pipeline's crop makes
 * another size), oversized (an 80 MB message, over the client's receive cap); compressed payloads
 * (Tensor.encoding zstd) for the right sample of a shuffled source of SAMPLES with SEED: zstd-corrupt (a byte
 * of the frame changed), zstd-lying (a frame declaring 60 MB for a 12 KB element), zstd-bomb (a shape
 * claiming 3 TB once decompressed). slow-profile: a worker whose Profile takes 2 s (env FAKEWORKER_PROFILE_MS:
 * that many ms): it prints "profile asked at MS" and "profile answered at MS" (wall-clock milliseconds) to
 * stderr and answers every cut with 1 ms and 1000 bytes per element - for tests of how the dispatcher asks
 * several workers. lying-profile: answers at
 * once with one cut more than the pipeline has (a profile the planner must refuse). hung-profile: never
 * answers a Profile (until SIGTERM): a worker stuck on a hung mount. On a data connection (lib/direct.h),
 * offered when the client asks and taken with its ticket: direct-garbage (a message of bytes that are no
 * ElementBatch), direct-wrong-sample (as wrong-sample), direct-oversized (a header announcing 80 MB: refused
 * before it is read), direct-cut (a header announcing 1000 bytes, 10 sent, then closed), direct-reoffer (a
 * second offer of a data connection, on the data connection). For a pipeline with one text field
 * (source.fields), an element of the right sample whose fields lie: fields-missing (none sent), fields-offsets
 * (offsets that do not span the bytes sent), fields-length (a length of 2 GiB), fields-utf8 (text that is not
 * UTF-8); for one mask field, fields-mask (a 4000 x 4000 mask in 8 bytes); for one boxes field (a COCO set),
 * fields-boxes (5000 boxes claimed in 4 bytes) and fields-boxes-nan (a box with a NaN corner). */
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/direct.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "pipeline/fusion.h"
#include "pipeline/order.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "pipeline/wire.h"
#include <zstd.h>
#include "proto/spillway.pb-c.h"

static const char *g_mode;
static struct spw_direct_listener *g_direct;     /* direct-* modes */
static int64_t g_sample0 = 999999;     /* the sample at position 0 of epoch 0 (SAMPLES SEED given) */
static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* Send a message on the data connection (dc non-NULL) or the stream. */
static int send_msg(struct spw_rpc_stream *st, struct spw_direct_conn *dc, const struct iovec *iov, int n)
{
    return dc ? spw_direct_send(dc, iov, n, NULL, NULL) : spw_rpc_stream_send(st, iov, n);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int send_bad(struct spw_rpc_stream *st, struct spw_direct_conn *dc, uint64_t job)
{
    const int fd = spw_direct_fd(dc);     /* the bad framings are written raw (plaintext only) */
    const char *mode = strncmp(g_mode, "direct-", 7) ? g_mode : g_mode + 7;
    if (!strcmp(mode, "oversized") && fd >= 0) {
        uint8_t hdr[SPW_DIRECT_FRAME_HEADER];
        put32(hdr, 0x44575053u);
        put32(hdr + 4, 80u << 20);
        return write(fd, hdr, sizeof hdr) == (ssize_t)sizeof hdr ? 0 : -EIO;
    }
    if (!strcmp(mode, "cut")) {
        uint8_t hdr[SPW_DIRECT_FRAME_HEADER + 10] = {0};
        put32(hdr, 0x44575053u);
        put32(hdr + 4, 1000);
        int rc = write(fd, hdr, sizeof hdr) == (ssize_t)sizeof hdr ? 0 : -EIO;
        shutdown(fd, SHUT_WR);
        return rc;
    }
    if (!strcmp(mode, "reoffer")) {
        struct spw_wire_batch b = {.job = job, .direct_port = 1};
        uint8_t scratch[64];
        struct iovec iov[1];
        return spw_wire_encode(&b, scratch, sizeof scratch, iov, 1) == 1 ? send_msg(st, dc, iov, 1) : -EINVAL;
    }
    if (!strcmp(mode, "garbage")) {
        uint8_t junk[100];
        for (size_t i = 0; i < sizeof junk; i++)
            junk[i] = (uint8_t)(0xA5 ^ (i * 37));
        struct iovec iov = {junk, sizeof junk};
        return send_msg(st, dc, &iov, 1);
    }
    if (!strcmp(g_mode, "oversized")) {
        size_t n = (size_t)80 << 20;
        uint8_t *big = calloc(1, n);
        struct iovec iov = {big, n};
        int rc = big ? spw_rpc_stream_send(st, &iov, 1) : -ENOMEM;
        free(big);
        return rc;
    }
    /* A well-formed ElementBatch: one 64x64 uint8 image (the size the tests' pipelines crop to) at position 0
     * of epoch 0. */
    static uint8_t pixels[64 * 64 * 3];
    int64_t label = 0, pos = 0, sample = 999999;     /* no dataset here has that sample at position 0 */
    struct spw_wire_batch b = {.job = job, .epoch = 0, .split = 0, .generation = 1, .cut = 1,
                               .n_positions = 1, .n_samples = 1, .positions = &pos, .samples = &sample,
                               .n_tensors = 2};
    b.tensors[0] = (struct spw_wire_tensor){.dtype = SPW_DTYPE_U8, .ndim = 4, .shape = {1, 64, 64, 3},
                                            .data = pixels, .nbytes = sizeof pixels};
    b.tensors[1] = (struct spw_wire_tensor){.dtype = SPW_DTYPE_I64, .ndim = 1, .shape = {1},
                                            .data = (const uint8_t *)&label, .nbytes = 8};
    if (!strcmp(g_mode, "small-image")) {
        sample = g_sample0;         /* the right sample, an image the pipeline cannot have made */
        b.tensors[0].shape[1] = b.tensors[0].shape[2] = 8;
        b.tensors[0].nbytes = 8 * 8 * 3;
    }
    if (!strcmp(g_mode, "huge-shape")) {
        sample = 0;
        b.tensors[0].shape[1] = b.tensors[0].shape[2] = 1 << 20;   /* claims 3 TB, carries 12 KB */
    }
    static uint8_t *big, frame[16384];
    if (!strncmp(g_mode, "zstd-", 5)) {
        sample = g_sample0;
        const bool lying = !strcmp(g_mode, "zstd-lying");
        const size_t raw = lying ? (size_t)60 << 20 : sizeof pixels;
        if (lying && !big && !(big = calloc(1, raw)))
            return -ENOMEM;
        size_t zl = ZSTD_compress(frame, sizeof frame, lying ? big : pixels, raw, 1);
        if (ZSTD_isError(zl))
            return -EINVAL;
        if (!strcmp(g_mode, "zstd-corrupt"))
            frame[zl - 5] ^= 0x40;                      /* inside the block, before the checksum */
        b.tensors[0].data = frame;
        b.tensors[0].nbytes = zl;
        b.tensors[0].encoding = SPW_WIRE_ZSTD;
        if (!strcmp(g_mode, "zstd-bomb"))
            b.tensors[0].shape[1] = b.tensors[0].shape[2] = 1 << 20;
    }
    /* fields-*: a pipeline with one text field (source.fields); the element of the right sample at cut 0 with
     * fields that lie: none sent, offsets that do not span them, a length past the cap, bytes that are not
     * UTF-8. */
    static uint8_t packed[64];
    static int64_t offsets[2];
    if (!strncmp(g_mode, "fields-boxes", 12)) {    /* u32 n, then u32 count, count x 4 float32, count int64 */
        sample = g_sample0;
        b.cut = 0;
        b.tensors[0].ndim = 2;
        b.tensors[0].shape[1] = b.tensors[0].nbytes = 100;
        const bool nan = !strcmp(g_mode, "fields-boxes-nan");
        const float box[4] = {__builtin_nanf(""), 1, 8, 8};
        const int64_t id = 1;
        put32(packed, nan ? 28 : 4);
        put32(packed + 4, nan ? 1 : 5000);
        memcpy(packed + 8, box, 16);
        memcpy(packed + 24, &id, 8);
        const size_t plen = nan ? 32 : 8;
        offsets[1] = (int64_t)plen;
        b.n_tensors = 4;
        b.tensors[2] = (struct spw_wire_tensor){.dtype = SPW_DTYPE_U8, .ndim = 1, .shape = {(int64_t)plen},
                                                .data = packed, .nbytes = plen};
        b.tensors[3] = (struct spw_wire_tensor){.dtype = SPW_DTYPE_I64, .ndim = 1, .shape = {2},
                                                .data = (const uint8_t *)offsets, .nbytes = 16};
    } else if (!strncmp(g_mode, "fields-", 7)) {
        sample = g_sample0;
        b.cut = 0;
        b.tensors[0].ndim = 2;
        b.tensors[0].shape[1] = b.tensors[0].nbytes = 100;
        const bool utf8 = !strcmp(g_mode, "fields-utf8");
        const bool mask = !strcmp(g_mode, "fields-mask");  /* a mask field: 4000 x 4000 claimed in 8 bytes */
        put32(packed, !strcmp(g_mode, "fields-length") ? 0x7fffffffu : mask ? 8 : 4);
        memcpy(packed + 4, utf8 ? "\xff\xfe\xfd\xfc" : "text", 4);
        if (mask)
            put32(packed + 4, 4000), put32(packed + 8, 4000);
        const size_t plen = mask ? 12 : 8;
        offsets[1] = !strcmp(g_mode, "fields-offsets") ? 4 : (int64_t)plen;
        b.n_tensors = !strcmp(g_mode, "fields-missing") ? 2 : 4;
        b.tensors[2] = (struct spw_wire_tensor){.dtype = SPW_DTYPE_U8, .ndim = 1, .shape = {(int64_t)plen},
                                                .data = packed, .nbytes = plen};
        b.tensors[3] = (struct spw_wire_tensor){.dtype = SPW_DTYPE_I64, .ndim = 1, .shape = {2},
                                                .data = (const uint8_t *)offsets, .nbytes = 16};
    }
    uint8_t scratch[4096];
    struct iovec iov[1 + 2 * SPW_WIRE_MAX_TENSORS];
    int n = spw_wire_encode(&b, scratch, sizeof scratch, iov, 1 + 2 * SPW_WIRE_MAX_TENSORS);
    return n < 0 ? n : send_msg(st, dc, iov, n);
}

/* Offer the client a data connection and take it: the connection, or NULL. */
static struct spw_direct_conn *offer(struct spw_rpc_stream *st, uint64_t job)
{
    struct spw_wire_batch b = {.job = job, .direct_port = (uint32_t)spw_direct_port(g_direct)};
    uint8_t scratch[64], *in;
    size_t len;
    struct iovec iov[1];
    struct spw_direct_conn *dc = NULL;
    if (spw_direct_ticket(g_direct, b.direct_ticket) != 0 || spw_wire_encode(&b, scratch, sizeof scratch, iov, 1) != 1 ||
        spw_rpc_stream_send(st, iov, 1) != 0 || spw_rpc_stream_recv(st, 10000, &in, &len) != 1)
        return NULL;
    free(in);
    spw_direct_take(g_direct, b.direct_ticket, 3000, &dc);
    return dc;
}

static long long wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* slow-profile: answer after 2 s, with a cost for every cut of the pipeline asked about. */
static int profile(void *ctx, const uint8_t *req, size_t req_len, uint8_t **resp, size_t *resp_len, char *msg,
                   size_t msglen)
{
    (void)ctx;
    fprintf(stderr, "fakeworker: profile asked at %lld\n", wall_ms());
    for (int i = 0; !strcmp(g_mode, "hung-profile") && !g_stop && i < 6000; i++)
        usleep(100 * 1000);
    if (!strcmp(g_mode, "hung-profile")) {
        snprintf(msg, msglen, "fakeworker: stopping");
        return SPW_RPC_UNAVAILABLE;
    }
    Spillway__V1__ProfileRequest *pr = spillway__v1__profile_request__unpack(NULL, req_len, req);
    struct spw_pipeline_spec *spec = NULL;
    char err[256];
    if (!pr || !pr->pipeline || spw_spec_from_proto(pr->pipeline, &spec, err, sizeof err) != 0) {
        if (pr)
            spillway__v1__profile_request__free_unpacked(pr, NULL);
        snprintf(msg, msglen, "fakeworker: no pipeline to profile");
        return SPW_RPC_INVALID_ARGUMENT;
    }
    spillway__v1__profile_request__free_unpacked(pr, NULL);
    struct spw_group groups[256];
    const bool lying = !strcmp(g_mode, "lying-profile");
    const int n_cuts = spw_fusion_groups(spec, groups) + 1 + lying;
    spw_spec_free(spec);
    if (!lying) {
        const char *ms = getenv("FAKEWORKER_PROFILE_MS");
        usleep((useconds_t)(ms ? atoi(ms) : 2000) * 1000);
    }
    Spillway__V1__CutProfile cuts[257], *ptrs[257];
    Spillway__V1__ProfileResponse r = SPILLWAY__V1__PROFILE_RESPONSE__INIT;
    for (int k = 0; k < n_cuts; k++) {
        spillway__v1__cut_profile__init(&cuts[k]);
        cuts[k].cut = k;
        cuts[k].ns_per_element = 1e6;
        cuts[k].bytes_per_element = 1000;
        ptrs[k] = &cuts[k];
    }
    r.n_cuts = (size_t)n_cuts;
    r.cuts = ptrs;
    r.threads = 1;
    r.samples = 256;
    r.cores = 1;
    *resp_len = spillway__v1__profile_response__get_packed_size(&r);
    if (!(*resp = malloc(*resp_len)))
        return SPW_RPC_RESOURCE_EXHAUSTED;
    spillway__v1__profile_response__pack(&r, *resp);
    fprintf(stderr, "fakeworker: profile answered at %lld\n", wall_ms());
    return SPW_RPC_OK;
}

static int serve(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen)
{
    (void)ctx;
    uint8_t *in;
    size_t len;
    if (spw_rpc_stream_recv(st, 10000, &in, &len) != 1)
        return SPW_RPC_INVALID_ARGUMENT;
    Spillway__V1__StreamRequest *req = spillway__v1__stream_request__unpack(NULL, len, in);
    free(in);
    if (!req)
        return SPW_RPC_INVALID_ARGUMENT;
    uint64_t job = req->job;
    const bool direct = req->direct;
    spillway__v1__stream_request__free_unpacked(req, NULL);
    struct spw_direct_conn *dc = g_direct && direct ? offer(st, job) : NULL;
    if (g_direct && !dc) {
        snprintf(msg, msglen, "no data connection");
        return SPW_RPC_UNAVAILABLE;
    }
    if (dc)
        fprintf(stderr, "fakeworker: job %llu: the client took a data connection\n", (unsigned long long)job);
    fprintf(stderr, "fakeworker: job %llu: sending a bad message (%s)\n", (unsigned long long)job, g_mode);
    send_bad(st, dc, job);
    for (int i = 0; i < 20 && !g_stop; i++) {       /* hold the stream open a while, reading credits */
        if (spw_rpc_stream_recv(st, 100, &in, &len) == 1)
            free(in);
    }
    spw_direct_close(dc);
    snprintf(msg, msglen, "fake worker done");
    return SPW_RPC_OK;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 5) {
        fprintf(stderr, "usage: fakeworker DISPATCHER garbage|wrong-sample|huge-shape|oversized|zstd-corrupt|"
                "zstd-lying|zstd-bomb|slow-profile|lying-profile|hung-profile|direct-garbage|direct-wrong-sample|"
                "direct-oversized|direct-cut|direct-reoffer [SAMPLES SEED]\n");
        return 2;
    }
    g_mode = argv[2];
    if (argc == 5) {        /* the sample a shuffled source puts at position 0 of epoch 0 */
        struct spw_order o;
        spw_order_init(&o, atoll(argv[3]), true, strtoull(argv[4], NULL, 10));
        g_sample0 = spw_order_at(&o, 0, 0);
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    spw_rpc_init();
    struct spw_rpc_server *srv;
    char err[256];
    struct spw_rpc_server_opts so = {.listen_addr = "127.0.0.1:0", .max_message_bytes = (size_t)128 << 20};
    if (!strncmp(g_mode, "direct-", 7) && spw_direct_listen("127.0.0.1", 0, NULL, &g_direct, err, sizeof err) != 0) {
        fprintf(stderr, "fakeworker: %s\n", err);
        return 1;
    }
    if (spw_rpc_server_create(&so, &srv, err, sizeof err) != 0) {
        fprintf(stderr, "fakeworker: %s\n", err);
        return 1;
    }
    spw_rpc_server_add_stream(srv, SPW_PATH(STREAM_ELEMENTS), serve, NULL);
    spw_rpc_server_add_unary_slow(srv, SPW_PATH(PROFILE), profile, NULL);
    int port = 0;
    spw_rpc_server_start(srv, &port);
    printf("listening on 127.0.0.1:%d\n", port);
    fflush(stdout);
    struct spw_rpc_channel *disp;
    spw_rpc_channel_create(argv[1], NULL, &disp);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    Spillway__V1__RegisterWorkerRequest rq = SPILLWAY__V1__REGISTER_WORKER_REQUEST__INIT;
    rq.address = addr;
    rq.protocol_version = SPW_PROTOCOL_VERSION;
    rq.threads = 1;
    uint8_t *resp = NULL;
    size_t len = 0;
    uint64_t id = 0, secret = 0;
    if (spw_rpc_call_msg(disp, SPW_PATH(REGISTER_WORKER), &rq.base, 5000, &resp, &len, err,
                         sizeof err) == SPW_RPC_OK) {
        Spillway__V1__RegisterWorkerResponse *r = spillway__v1__register_worker_response__unpack(NULL, len, resp);
        id = r ? r->worker_id : 0;
        secret = r ? r->secret : 0;
        if (r)
            spillway__v1__register_worker_response__free_unpacked(r, NULL);
    }
    free(resp);
    if (!id) {
        fprintf(stderr, "fakeworker: cannot register: %s\n", err);
        return 1;
    }
    while (!g_stop) {
        Spillway__V1__WorkerHeartbeatRequest hb = SPILLWAY__V1__WORKER_HEARTBEAT_REQUEST__INIT;
        hb.worker_id = id;
        hb.secret = secret;
        resp = NULL;
        spw_rpc_call_msg(disp, SPW_PATH(WORKER_HEARTBEAT), &hb.base, 5000, &resp, &len, NULL, 0);
        free(resp);
        usleep(100 * 1000);
    }
    spw_rpc_server_destroy(srv);
    spw_rpc_channel_destroy(disp);
    spw_rpc_shutdown();
    return 0;
}
