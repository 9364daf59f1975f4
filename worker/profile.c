/* worker/profile.c - Worker.Profile (see profile.h): validates the request, lists the source here, measures
 * with pipeline/profile.c on the worker's threads and answers W(k) = read + groups [0, k) + one copy, and b_k.
 * Per-message costs (a few microseconds per ~1 MiB message) are not included. */
#include "worker/profile.h"

#include <stdio.h>
#include <stdlib.h>

#include "lib/cpulimit.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/rpc.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/profile.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "proto/spillway.pb-c.h"

#define DEFAULT_SAMPLES 256
#define GPU_SAMPLES 64         /* the GPU producer's: 15 micro-batches after a warm-up */
#define MAX_SAMPLES 4096

int wrk_profile(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                size_t msglen)
{
    const struct wrk_profile_opts *o = ctx;
    Spillway__V1__ProfileRequest *r = spillway__v1__profile_request__unpack(NULL, len, req);
    if (!r) {
        snprintf(msg, msglen, "malformed ProfileRequest");
        return SPW_RPC_INVALID_ARGUMENT;
    }
    struct spw_pipeline_spec *spec = NULL;
    struct spw_source *src = NULL;
    struct spw_profile *p = NULL;
    int status = SPW_RPC_OK, rc;
    char err[512];
    if (r->samples < 0 || r->samples > MAX_SAMPLES) {
        snprintf(msg, msglen, "samples: %d is outside [0, %d]", r->samples, MAX_SAMPLES);
        status = SPW_RPC_INVALID_ARGUMENT;
        goto out;
    }
    if (!r->pipeline || spw_spec_from_proto(r->pipeline, &spec, err, sizeof err) != 0) {
        snprintf(msg, msglen, "pipeline: %s", r->pipeline ? err : "required");
        status = SPW_RPC_INVALID_ARGUMENT;
        goto out;
    }
    if (spw_source_open(&spec->source, &src, err, sizeof err) != 0) {
        snprintf(msg, msglen, "this worker cannot list the source: %s", err);
        status = SPW_RPC_FAILED_PRECONDITION;
        goto out;
    }
    if (!(p = malloc(sizeof *p))) {
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    rc = spw_profile_run(spec, src, r->samples ? r->samples : DEFAULT_SAMPLES, o->threads > 0 ? o->threads : 1,
                         SPW_PROFILE_BUDGET_MS, p, err, sizeof err);
    if (rc) {
        snprintf(msg, msglen, "%s", rc == SPW_ESOURCE ? err : spw_strerror(rc));
        status = rc == SPW_ESOURCE ? SPW_RPC_FAILED_PRECONDITION : SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    Spillway__V1__CutProfile cuts[SPW_PROFILE_MAX_GROUPS + 1], *ptrs[SPW_PROFILE_MAX_GROUPS + 1];
    for (int k = 0; k <= p->groups; k++) {
        spillway__v1__cut_profile__init(&cuts[k]);
        cuts[k].cut = k;
        cuts[k].ns_per_element = spw_profile_prefix_ns(p, k);
        cuts[k].bytes_per_element = p->bytes[k];
        ptrs[k] = &cuts[k];
    }
    Spillway__V1__ProfileResponse out = SPILLWAY__V1__PROFILE_RESPONSE__INIT;
    out.n_cuts = (size_t)p->groups + 1;
    out.cuts = ptrs;
    out.threads = p->threads;
    const double limit = spw_cpu_limit();    /* a container's CPU limit, the affinity mask */
    out.cores = p->threads < limit ? p->threads : limit;
    out.samples = p->samples;
    out.skipped = p->skipped;
    if (o->gpu) {
        struct spw_element_ctx ectx;
        if (spw_element_ctx_init(&ectx, spec) == 0) {
            const struct spw_producer pr = {.spec = spec, .src = src, .ctx = &ectx, .component = "worker"};
            if (spw_gpu_backend_measure(o->gpu, &pr, GPU_SAMPLES, &out.gpu_elements_per_s, &out.gpu_cpu_ns, err,
                                        sizeof err) != 0)
                spw_log(SPW_LOG_INFO, "worker", "profile: the GPU is not in it: %s", err);
            spw_element_ctx_destroy(&ectx);
        }
    }
    size_t plen = spillway__v1__profile_response__get_packed_size(&out);
    if (!(*resp = malloc(plen ? plen : 1))) {
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    *resp_len = spillway__v1__profile_response__pack(&out, *resp);
    spw_log(SPW_LOG_INFO, "worker", "profiled cuts=%d samples=%d threads=%d skipped=%d gpu_per_s=%.0f", p->groups + 1,
            p->samples, p->threads, p->skipped, out.gpu_elements_per_s);
out:
    free(p);
    spw_source_close(src);
    spw_spec_free(spec);
    spillway__v1__profile_request__free_unpacked(r, NULL);
    return status;
}

#define PROBE_MAX_BYTES ((int64_t)1 << 30)
#define PROBE_CHUNK (64 << 10)      /* small enough that a slow link shows several in a probe */

int wrk_probe(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen)
{
    (void)ctx;
    uint8_t *in = NULL;
    size_t len = 0;
    if (spw_rpc_stream_recv(st, 1000, &in, &len) != 1) {      /* an idle stream holds no slot for long */
        snprintf(msg, msglen, "expected a ProbeRequest within 1 s");
        return SPW_RPC_INVALID_ARGUMENT;
    }
    Spillway__V1__ProbeRequest *r = spillway__v1__probe_request__unpack(NULL, len, in);
    free(in);
    if (!r || r->bytes < 0 || r->bytes > PROBE_MAX_BYTES) {
        snprintf(msg, msglen, "probe bytes must be in [0, %lld]", (long long)PROBE_MAX_BYTES);
        if (r)
            spillway__v1__probe_request__free_unpacked(r, NULL);
        return SPW_RPC_INVALID_ARGUMENT;
    }
    int64_t left = r->bytes;
    spillway__v1__probe_request__free_unpacked(r, NULL);
    /* A ProbeChunk by hand: tag 1 (bytes), its length as a varint, then the payload (zeros). */
    static const uint8_t zeros[PROBE_CHUNK];
    while (left > 0) {
        size_t n = left < PROBE_CHUNK ? (size_t)left : PROBE_CHUNK;
        uint8_t head[16];
        size_t h = 0;
        head[h++] = 0x0a;
        for (size_t v = n; ; v >>= 7) {
            head[h++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
            if (v < 0x80)
                break;
        }
        struct iovec iov[2] = {{head, h}, {(void *)zeros, n}};
        if (spw_rpc_stream_send(st, iov, 2) != 0)
            return SPW_RPC_CANCELLED;
        left -= (int64_t)n;
    }
    return SPW_RPC_OK;
}
