/* tests/tools/hostilepeer.c - a peer that knows a job's id but not its secret, speaking the raw RPCs as an
 * attacker would (integration tests check that each is refused and that the victim job is unharmed):
 *   hostilepeer DISPATCHER heartbeat JOB          ClientHeartbeat of rank 0 with a huge incarnation (it would
 *                                                 fence the real client) acking split 0 of epoch 0
 *   hostilepeer DISPATCHER lease JOB MANIFEST     LeaseSplit as rank 0's own threads (MANIFEST in hex)
 *   hostilepeer DISPATCHER join JOB PIPELINE.json CreateJob joining JOB by id, as rank 0
 *   hostilepeer WORKER stream JOB                 StreamElements for JOB's rank 0: prints how many messages
 *                                                 came before the stream ended
 *   hostilepeer WORKER idle N                     N StreamElements opened at once that never send a thing:
 *                                                 prints "status=NAME n=K" per status they ended with and
 *                                                 "held_ms_max=T", the longest one stayed open
 *   hostilepeer DISPATCHER manifest JOB [PIPELINE.json]  GetManifest's first chunk, by JOB (a worker's way) or,
 *                                                 with JOB 0, by the pipeline (a client's): prints its size too
 *   hostilepeer DISPATCHER ahead 0 PIPELINE.json N  N GetManifests by pipeline with plan_ahead (each would
 *                                                 have every worker profile it), each pipeline made distinct
 *                                                 by its max_file_bytes, no CreateJob: prints "ok=K of N" 
 * Env HOSTILEPEER_TOKEN: a bearer token to send (a holder of one token trying another's calls).
 * Prints "status=NAME msg=..." (stream: "status=NAME msg=... messages=N"). Exit 0 when a status came back,
 * 1 on local failure, 2 on bad arguments. One thread. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "proto/spillway.pb-c.h"

static int stream(struct spw_rpc_channel *ch, uint64_t job)
{
    struct spw_rpc_stream *st;
    if (spw_rpc_stream_open(ch, SPW_PATH(STREAM_ELEMENTS), 20000, &st) != 0)
        return 1;
    Spillway__V1__StreamRequest req = SPILLWAY__V1__STREAM_REQUEST__INIT;
    uint8_t buf[64];
    req.job = job;
    req.incarnation = UINT64_MAX;
    req.credit_bytes = 64 << 20;
    struct iovec iov = {buf, spillway__v1__stream_request__pack(&req, buf)};
    spw_rpc_stream_send(st, &iov, 1);
    int messages = 0, r;
    for (;;) {
        uint8_t *m;
        size_t len;
        if ((r = spw_rpc_stream_recv(st, 15000, &m, &len)) != 1)
            break;
        free(m);
        messages++;
    }
    if (r == -ETIMEDOUT)
        spw_rpc_stream_cancel(st);      /* the worker kept it open: the status says CANCELLED */
    char msg[512] = "";
    int status = spw_rpc_stream_finish(st, msg, sizeof msg);
    printf("status=%s msg=%s messages=%d\n", spw_rpc_status_name(status), msg, messages);
    return 0;
}

#define IDLE_MAX 1024

static int idle_streams(struct spw_rpc_channel *ch, int n)
{
    static struct spw_rpc_stream *st[IDLE_MAX];
    static int64_t opened[IDLE_MAX];
    int count[32] = {0};
    int64_t held_max = 0;
    for (int i = 0; i < n; i++) {
        opened[i] = spw_now_ms();
        if (spw_rpc_stream_open(ch, SPW_PATH(STREAM_ELEMENTS), 20000, &st[i]) != 0)
            return 1;
    }
    for (int i = 0; i < n; i++) {       /* one after another: each ends by itself (or at 15 s, cancelled) */
        uint8_t *m;
        size_t len;
        int r = spw_rpc_stream_recv(st[i], 15000, &m, &len);
        if (r == 1)
            free(m);
        else if (r == -ETIMEDOUT)
            spw_rpc_stream_cancel(st[i]);
        const int64_t held = spw_now_ms() - opened[i];
        held_max = held > held_max ? held : held_max;
        char msg[256];
        const int status = spw_rpc_stream_finish(st[i], msg, sizeof msg);
        count[status >= 0 && status < 32 ? status : 31]++;
    }
    for (int k = 0; k < 32; k++)
        if (count[k])
            printf("status=%s n=%d\n", spw_rpc_status_name(k), count[k]);
    printf("held_ms_max=%lld\n", (long long)held_max);
    return 0;
}

static int get_manifest(struct spw_rpc_channel *ch, uint64_t job, Spillway__V1__Pipeline *pipe)
{
    Spillway__V1__GetManifestRequest req = SPILLWAY__V1__GET_MANIFEST_REQUEST__INIT;
    req.job = job;
    req.pipeline = pipe;
    ProtobufCMessage *reply = NULL;
    char msg[512] = "";
    int st = spw_rpc_call_reply(ch, SPW_PATH(GET_MANIFEST), &req.base, 30000,
                                &spillway__v1__get_manifest_response__descriptor, &reply, msg, sizeof msg);
    const Spillway__V1__GetManifestResponse *m = (const Spillway__V1__GetManifestResponse *)reply;
    printf("status=%s msg=%s total=%llu samples=%lld\n", spw_rpc_status_name(st), msg,
           m ? (unsigned long long)m->total_bytes : 0ull, m ? (long long)m->samples : 0ll);
    if (reply)
        protobuf_c_message_free_unpacked(reply, NULL);
    spw_spec_proto_free(pipe);
    spw_rpc_channel_destroy(ch);
    spw_rpc_shutdown();
    return 0;
}

/* N first chunks by distinct pipelines, each asking the workers' profiles ahead of a CreateJob never sent. */
static int ahead_flood(struct spw_rpc_channel *ch, Spillway__V1__Pipeline *pipe, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        Spillway__V1__GetManifestRequest req = SPILLWAY__V1__GET_MANIFEST_REQUEST__INIT;
        pipe->opt_max_file_bytes_case = SPILLWAY__V1__PIPELINE__OPT_MAX_FILE_BYTES_MAX_FILE_BYTES;
        pipe->max_file_bytes = (64 << 20) - 1 - i;     /* none the default: not a real client's */
        req.pipeline = pipe;
        req.plan_ahead = 1;
        ProtobufCMessage *reply = NULL;
        char msg[512] = "";
        const int st = spw_rpc_call_reply(ch, SPW_PATH(GET_MANIFEST), &req.base, 30000,
                                          &spillway__v1__get_manifest_response__descriptor, &reply, msg, sizeof msg);
        ok += st == SPW_RPC_OK;
        if (st != SPW_RPC_OK)
            printf("status=%s msg=%s\n", spw_rpc_status_name(st), msg);
        if (reply)
            protobuf_c_message_free_unpacked(reply, NULL);
    }
    printf("ok=%d of %d\n", ok, n);
    spw_spec_proto_free(pipe);
    spw_rpc_channel_destroy(ch);
    spw_rpc_shutdown();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[2], "heartbeat") && strcmp(argv[2], "lease") && strcmp(argv[2], "join") &&
                     strcmp(argv[2], "stream") && strcmp(argv[2], "manifest") && strcmp(argv[2], "ahead") &&
                     strcmp(argv[2], "idle")) ||
        (!strcmp(argv[2], "lease") && argc != 5) || (!strcmp(argv[2], "join") && argc != 5) ||
        (!strcmp(argv[2], "ahead") && argc != 6)) {
        fprintf(stderr, "usage: hostilepeer HOST:PORT heartbeat|lease|join|stream|manifest|ahead|idle JOB|N "
                "[MANIFEST_HEX|PIPELINE [N]]\n");
        return 2;
    }
    const uint64_t job = strtoull(argv[3], NULL, 10);
    spw_rpc_init();
    struct spw_rpc_channel *ch;
    struct spw_rpc_channel_opts co = {.auth_token = getenv("HOSTILEPEER_TOKEN")};
    if (spw_rpc_channel_create(argv[1], &co, &ch) != 0)
        return 1;
    if (!strcmp(argv[2], "stream") || !strcmp(argv[2], "idle")) {
        int rc = !strcmp(argv[2], "stream") ? stream(ch, job)
                 : job > 0 && job <= IDLE_MAX ? idle_streams(ch, (int)job) : 2;
        spw_rpc_channel_destroy(ch);
        spw_rpc_shutdown();
        return rc;
    }
    if (!strcmp(argv[2], "manifest") && argc == 4)
        return get_manifest(ch, job, NULL);
    Spillway__V1__SplitRef ack = SPILLWAY__V1__SPLIT_REF__INIT, *acks[1] = {&ack};
    Spillway__V1__ClientHeartbeatRequest hb = SPILLWAY__V1__CLIENT_HEARTBEAT_REQUEST__INIT;
    hb.job = job;
    hb.incarnation = UINT64_MAX;
    hb.n_acked = 1;
    hb.acked = acks;
    Spillway__V1__LeaseSplitRequest lr = SPILLWAY__V1__LEASE_SPLIT_REQUEST__INIT;
    lr.job = job;
    lr.incarnation = UINT64_MAX;
    lr.max_splits = 64;
    lr.manifest_hash = argc > 4 ? strtoull(argv[4], NULL, 16) : 0;
    Spillway__V1__CreateJobRequest cj = SPILLWAY__V1__CREATE_JOB_REQUEST__INIT;
    struct spw_pipeline_spec *spec = NULL;
    Spillway__V1__Pipeline *pipe = NULL;
    char msg[512] = "";
    const bool manifest = !strcmp(argv[2], "manifest"), ahead = !strcmp(argv[2], "ahead");
    if (!strcmp(argv[2], "join") || ahead || (manifest && argc > 4)) {
        if (spw_spec_load_file(argv[4], &spec, msg, sizeof msg) != 0 || spw_spec_to_proto(spec, &pipe) != 0) {
            fprintf(stderr, "hostilepeer: %s\n", msg);
            return 2;
        }
        cj.pipeline = pipe;
        cj.job = job;
        if (manifest || ahead) {
            spw_spec_free(spec);
            return manifest ? get_manifest(ch, job, pipe) : ahead_flood(ch, pipe, atoi(argv[5]));
        }
        cj.cut = -1;
        cj.incarnation = UINT64_MAX;
        cj.protocol_version = SPW_PROTOCOL_VERSION;
        cj.build = "hostilepeer";
    }
    const char *method = !strcmp(argv[2], "heartbeat") ? SPW_PATH(CLIENT_HEARTBEAT)
                         : !strcmp(argv[2], "lease")   ? SPW_PATH(LEASE_SPLIT)
                                                       : SPW_PATH(CREATE_JOB);
    const ProtobufCMessage *req = !strcmp(argv[2], "heartbeat") ? &hb.base
                                  : !strcmp(argv[2], "lease")   ? &lr.base
                                                                : &cj.base;
    uint8_t *resp = NULL;
    size_t len = 0;
    int st = spw_rpc_call_msg(ch, method, req, 10000, &resp, &len, msg, sizeof msg);
    printf("status=%s msg=%s\n", spw_rpc_status_name(st), msg);
    free(resp);
    spw_spec_proto_free(pipe);
    spw_spec_free(spec);
    spw_rpc_channel_destroy(ch);
    spw_rpc_shutdown();
    return 0;
}
