/* tests/tools/pullclient.c - a minimal consumer for integration tests (not the client library): creates a
 * job on the dispatcher, streams from every worker it lists, dedupes elements by (epoch, position), acks
 * complete splits in heartbeats until the dispatcher says the job is finished, and prints one JSON line:
 * elements, tombstones, duplicates dropped, and whether every position of every epoch arrived exactly once.
 *   pullclient DISPATCHER PIPELINE.json [TIMEOUT_S]
 * Env PULLCLIENT_STALL_MS: after its first message each stream stops reading for that long (heartbeats go
 * on), to test what a stalled consumer costs the workers. Env PULLCLIENT_RATE: elements read per second over
 * all streams together (the workers held back by their credits), so that a job lasts as long as a test needs
 * on a fast machine too. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "pipeline/wire.h"
#include "proto/spillway.pb-c.h"

#define CREDIT (32 << 20)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static double g_rate;                    /* PULLCLIENT_RATE (0: as fast as elements come) */
static int64_t g_next_read_ns;           /* when the rate lets the next elements be read */
static uint64_t g_job, g_secret;
static int64_t g_samples, g_epochs, g_split_size, g_splits;
static uint8_t *g_seen;                  /* [epoch][position]: 0 none, 1 element, 2 tombstone */
static int64_t *g_split_left;            /* [epoch][split]: positions still missing */
static int64_t g_elements, g_tombstones, g_dups, g_bad_label;
static Spillway__V1__SplitRef **g_acks;
static size_t g_n_acks, g_cap_acks;
static volatile bool g_done;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void note(uint64_t epoch, int64_t pos, int kind)
{
    if ((int64_t)epoch >= g_epochs || pos < 0 || pos >= g_samples)
        return;
    uint8_t *s = &g_seen[epoch * (uint64_t)g_samples + (uint64_t)pos];
    if (*s) {
        g_dups++;
        return;
    }
    *s = (uint8_t)kind;
    kind == 1 ? g_elements++ : g_tombstones++;
    int64_t split = pos / g_split_size;
    if (--g_split_left[epoch * (uint64_t)g_splits + (uint64_t)split] == 0) {
        if (g_n_acks == g_cap_acks) {
            g_cap_acks = g_cap_acks ? 2 * g_cap_acks : 256;
            g_acks = realloc(g_acks, g_cap_acks * sizeof *g_acks);
        }
        Spillway__V1__SplitRef *a = malloc(sizeof *a);
        spillway__v1__split_ref__init(a);
        a->epoch = epoch;
        a->split = (uint64_t)split;
        g_acks[g_n_acks++] = a;
    }
}

struct stream_arg {
    char addr[256];
};

/* Hold this stream until n more elements fit PULLCLIENT_RATE. */
static void pace(size_t n)
{
    if (g_rate <= 0 || n == 0)
        return;
    pthread_mutex_lock(&g_mu);
    const int64_t now = spw_now_ns(), at = g_next_read_ns > now ? g_next_read_ns : now;
    g_next_read_ns = at + (int64_t)((double)n * 1e9 / g_rate);
    pthread_mutex_unlock(&g_mu);
    while (!g_done && spw_now_ns() < at)
        usleep(10 * 1000);
}

static void *receiver(void *arg)
{
    struct stream_arg *sa = arg;
    struct spw_rpc_channel *ch;
    struct spw_rpc_stream *st;
    if (spw_rpc_channel_create(sa->addr, NULL, &ch) != 0)
        return NULL;
    if (spw_rpc_stream_open(ch, SPW_PATH(STREAM_ELEMENTS), 0, &st) != 0) {
        spw_rpc_channel_destroy(ch);
        return NULL;
    }
    Spillway__V1__StreamRequest req = SPILLWAY__V1__STREAM_REQUEST__INIT;
    uint8_t buf[64];
    req.job = g_job;
    req.job_secret = g_secret;
    req.incarnation = 1;
    req.credit_bytes = CREDIT;
    struct iovec iov = {buf, spillway__v1__stream_request__pack(&req, buf)};
    spw_rpc_stream_send(st, &iov, 1);
    int64_t unused = CREDIT;
    const char *stall = getenv("PULLCLIENT_STALL_MS");
    bool stalled = false;
    while (!g_done) {
        uint8_t *m;
        size_t len;
        int r = spw_rpc_stream_recv(st, 200, &m, &len);
        if (r == -ETIMEDOUT)
            continue;
        if (r != 1)
            break;
        struct spw_wire_batch b;
        char err[128];
        if (spw_wire_decode(m, len, &b, err, sizeof err) == 0) {
            pace(b.n_positions);
            pthread_mutex_lock(&g_mu);
            for (size_t i = 0; i < b.n_positions; i++)
                note(b.epoch, b.positions[i], 1);
            for (size_t i = 0; i < b.n_tombstones; i++)
                note(b.epoch, b.tombstones[i], 2);
            if (b.n_tensors == 2 && b.tensors[1].nbytes == b.n_positions * 8) {
                const int64_t *lab = (const int64_t *)(const void *)b.tensors[1].data;
                for (size_t i = 0; i < b.n_positions; i++)
                    g_bad_label += lab[i] < 0;
            }
            pthread_mutex_unlock(&g_mu);
            spw_wire_batch_free(&b);
        }
        unused -= (int64_t)len;
        free(m);
        if (stall && !stalled) {
            stalled = true;
            for (long ms = atol(stall); ms > 0 && !g_done; ms -= 50)
                usleep(50 * 1000);
        }
        if (unused < CREDIT / 2) {
            req.credit_bytes = CREDIT / 2;
            iov.iov_len = spillway__v1__stream_request__pack(&req, buf);
            spw_rpc_stream_send(st, &iov, 1);
            unused += CREDIT / 2;
        }
    }
    spw_rpc_stream_cancel(st);
    char msg[64];
    spw_rpc_stream_finish(st, msg, sizeof msg);
    spw_rpc_channel_destroy(ch);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: pullclient DISPATCHER PIPELINE.json [TIMEOUT_S]\n");
        return 2;
    }
    double timeout = argc > 3 ? atof(argv[3]) : 60;
    const char *rate = getenv("PULLCLIENT_RATE");
    g_rate = rate ? atof(rate) : 0;
    char err[512];
    struct spw_pipeline_spec *spec;
    if (spw_spec_load_file(argv[2], &spec, err, sizeof err) != 0) {
        fprintf(stderr, "pullclient: %s\n", err);
        return 2;
    }
    Spillway__V1__Pipeline *pipe;
    if (spw_spec_to_proto(spec, &pipe) != 0)
        return 1;
    spw_rpc_init();
    struct spw_rpc_channel *disp;
    spw_rpc_channel_create(argv[1], NULL, &disp);
    Spillway__V1__CreateJobRequest cj = SPILLWAY__V1__CREATE_JOB_REQUEST__INIT;
    cj.pipeline = pipe;
    cj.protocol_version = SPW_PROTOCOL_VERSION;
    cj.cut = -1;
    cj.incarnation = 1;
    uint8_t *resp;
    size_t len;
    int st = spw_rpc_call_msg(disp, SPW_PATH(CREATE_JOB), &cj.base, 10000, &resp, &len, err,
                              sizeof err);
    if (st != SPW_RPC_OK) {
        fprintf(stderr, "pullclient: CreateJob: %s: %s\n", spw_rpc_status_name(st), err);
        return 1;
    }
    Spillway__V1__CreateJobResponse *job = spillway__v1__create_job_response__unpack(NULL, len, resp);
    free(resp);
    g_job = job->job;
    g_secret = job->job_secret;
    g_samples = job->samples;
    g_epochs = spec->source.epochs > 0 ? spec->source.epochs : 1;
    g_split_size = job->split_size;
    g_splits = job->splits_per_epoch;
    g_seen = calloc((size_t)(g_epochs * g_samples), 1);
    g_split_left = malloc(sizeof(int64_t) * (size_t)(g_epochs * g_splits));
    for (int64_t e = 0; e < g_epochs; e++)
        for (int64_t s = 0; s < g_splits; s++) {
            int64_t left = g_samples - s * g_split_size;
            g_split_left[e * g_splits + s] = left < g_split_size ? left : g_split_size;
        }
    size_t nw = job->n_workers;
    pthread_t tids[64];
    struct stream_arg args[64];
    for (size_t i = 0; i < nw && i < 64; i++) {
        snprintf(args[i].addr, sizeof args[i].addr, "%s", job->workers[i]->address);
        pthread_create(&tids[i], NULL, receiver, &args[i]);
    }
    double t0 = now_s();
    bool finished = false;
    while (!finished && now_s() - t0 < timeout) {
        usleep(100 * 1000);
        Spillway__V1__ClientHeartbeatRequest hb = SPILLWAY__V1__CLIENT_HEARTBEAT_REQUEST__INIT;
        hb.job = g_job;
        hb.job_secret = g_secret;
        hb.incarnation = 1;
        pthread_mutex_lock(&g_mu);            /* the ack list is read while packing */
        hb.n_acked = g_n_acks;
        hb.acked = g_acks;
        st = spw_rpc_call_msg(disp, SPW_PATH(CLIENT_HEARTBEAT), &hb.base, 5000, &resp, &len, err,
                              sizeof err);
        pthread_mutex_unlock(&g_mu);
        if (st == SPW_RPC_OK) {
            Spillway__V1__ClientHeartbeatResponse *r = spillway__v1__client_heartbeat_response__unpack(NULL, len, resp);
            finished = r && r->finished;
            if (r)
                spillway__v1__client_heartbeat_response__free_unpacked(r, NULL);
        }
        free(resp);
    }
    double secs = now_s() - t0;
    g_done = true;
    for (size_t i = 0; i < nw && i < 64; i++)
        pthread_join(tids[i], NULL);
    int64_t missing = 0;
    for (int64_t i = 0; i < g_epochs * g_samples; i++)
        missing += g_seen[i] == 0;
    printf("{\"job\": %llu, \"workers\": %zu, \"finished\": %s, \"elements\": %lld, \"tombstones\": %lld, "
           "\"duplicates_dropped\": %lld, \"missing\": %lld, \"bad_labels\": %lld, \"exactly_once\": %s, "
           "\"seconds\": %.3f, \"elements_per_s\": %.1f}\n",
           (unsigned long long)g_job, nw, finished ? "true" : "false", (long long)g_elements,
           (long long)g_tombstones, (long long)g_dups, (long long)missing, (long long)g_bad_label,
           finished && missing == 0 ? "true" : "false", secs, g_elements / secs);
    for (size_t i = 0; i < g_n_acks; i++)
        free(g_acks[i]);
    free(g_acks);
    free(g_seen);
    free(g_split_left);
    spillway__v1__create_job_response__free_unpacked(job, NULL);
    spw_spec_proto_free(pipe);
    spw_spec_free(spec);
    spw_rpc_channel_destroy(disp);
    spw_rpc_shutdown();
    return finished && missing == 0 ? 0 : 1;
}
