/* worker/profile.c - Worker.Profile (see profile.h). Every measuring thread takes elements i = t, t + T, ...
 * of epoch 0's order, reads each, runs it group by group (the same runs a producer does for any cut) and
 * copies each group's output once, as packing it into a message would; the time of each step is summed per
 * cut. Costs are wall time per element per thread with every thread busy, so they include the contention a
 * loaded worker sees. Per-message costs (a few microseconds per ~1 MiB message) are not included. */
#include "worker/profile.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/rpc.h"
#include "pipeline/element.h"
#include "pipeline/order.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "proto/spillway.pb-c.h"

#define DEFAULT_SAMPLES 64
#define MAX_SAMPLES 4096
#define MAX_CUTS 257

struct measure {
    const struct spw_pipeline_spec *spec;
    const struct spw_source *src;
    const struct spw_element_ctx *ctx;
    const struct spw_order *order;
    int n, stride, first;
    double ns[MAX_CUTS], bytes[MAX_CUTS];   /* sums over this thread's elements */
    int done, skipped;
};

/* Copy a value as packing it into a message would; returns the ns it took. */
static int64_t pack_ns(const struct spw_value *v, uint8_t **scratch, size_t *cap)
{
    size_t need = spw_value_bytes(v);
    if (need > *cap) {
        uint8_t *p = realloc(*scratch, need);
        if (!p)
            return 0;
        *scratch = p;
        *cap = need;
    }
    int64_t t0 = spw_now_ns();
    spw_value_copy_out(v, SPW_LAYOUT_HWC, *scratch);
    return spw_now_ns() - t0;
}

static void *measure_main(void *arg)
{
    struct measure *m = arg;
    const int groups = m->ctx->n_groups;
    uint8_t *scratch = NULL;
    size_t cap = 0;
    char err[256];
    double ns[MAX_CUTS], bytes[MAX_CUTS];
    for (int i = m->first; i < m->n; i += m->stride) {
        const int64_t sample = spw_order_at(m->order, 0, i);
        uint8_t *buf = NULL;
        size_t len = 0;
        int64_t t0 = spw_now_ns();
        int rc = spw_source_read(m->src, sample, m->spec->max_file_bytes, &buf, &len);
        int64_t t = spw_now_ns() - t0;
        if (rc) {
            m->skipped++;
            continue;
        }
        /* cut 0 ships the file as read */
        if (len > cap) {
            uint8_t *p = realloc(scratch, len);
            if (p) {
                scratch = p;
                cap = len;
            }
        }
        int64_t c0 = spw_now_ns();
        if (len <= cap)
            memcpy(scratch, buf, len);
        ns[0] = (double)(t + spw_now_ns() - c0);
        bytes[0] = (double)len;
        struct spw_value v = {0};
        for (int g = 0; g < groups && rc == 0; g++) {
            int64_t g0 = spw_now_ns();
            rc = spw_element_run(m->ctx, g, g + 1, 0, sample, buf, len, &v, NULL, NULL, err, sizeof err);
            t += spw_now_ns() - g0;
            if (rc == 0) {
                ns[g + 1] = (double)(t + pack_ns(&v, &scratch, &cap));
                bytes[g + 1] = (double)spw_value_bytes(&v);
            }
        }
        spw_value_free(&v);
        free(buf);
        if (rc) {
            m->skipped++;
            continue;
        }
        for (int k = 0; k <= groups; k++) {
            m->ns[k] += ns[k];
            m->bytes[k] += bytes[k];
        }
        m->done++;
    }
    free(scratch);
    return NULL;
}

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
    struct spw_element_ctx ectx;
    bool ctx_ok = false;
    struct measure *ms = NULL;
    pthread_t *tids = NULL;
    int status = SPW_RPC_OK, threads = o->threads > 0 ? o->threads : 1, started = 0;
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
    if (spw_element_ctx_init(&ectx, spec) != 0) {
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    ctx_ok = true;
    struct spw_order order;
    spw_order_init(&order, src->n, spec->source.shuffle, spec->source.seed);
    const int want = r->samples ? r->samples : DEFAULT_SAMPLES;
    const int n = src->n < want ? (int)src->n : want;
    if (threads > n)
        threads = n;
    ms = calloc((size_t)threads, sizeof *ms);
    tids = calloc((size_t)threads, sizeof *tids);
    if (!ms || !tids) {
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    for (int t = 0; t < threads; t++) {
        ms[t] = (struct measure){.spec = spec, .src = src, .ctx = &ectx, .order = &order, .n = n,
                                 .stride = threads, .first = t};
        if (pthread_create(&tids[t], NULL, measure_main, &ms[t]) == 0)
            started++;
        else
            break;
    }
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    const int groups = ectx.n_groups;
    int done = 0, skipped = 0;
    for (int t = 0; t < started; t++) {
        done += ms[t].done;
        skipped += ms[t].skipped;
    }
    if (!done) {
        snprintf(msg, msglen, "none of the %d sampled elements could be read and run", n);
        status = SPW_RPC_FAILED_PRECONDITION;
        goto out;
    }
    Spillway__V1__CutProfile cuts[MAX_CUTS], *ptrs[MAX_CUTS];
    for (int k = 0; k <= groups; k++) {
        double ns = 0, bytes = 0;
        for (int t = 0; t < started; t++) {
            ns += ms[t].ns[k];
            bytes += ms[t].bytes[k];
        }
        spillway__v1__cut_profile__init(&cuts[k]);
        cuts[k].cut = k;
        cuts[k].ns_per_element = ns / done;
        cuts[k].bytes_per_element = bytes / done;
        ptrs[k] = &cuts[k];
    }
    Spillway__V1__ProfileResponse out = SPILLWAY__V1__PROFILE_RESPONSE__INIT;
    out.n_cuts = (size_t)groups + 1;
    out.cuts = ptrs;
    out.threads = started;
    out.samples = done;
    out.skipped = skipped;
    size_t plen = spillway__v1__profile_response__get_packed_size(&out);
    if (!(*resp = malloc(plen ? plen : 1))) {
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    *resp_len = spillway__v1__profile_response__pack(&out, *resp);
    spw_log(SPW_LOG_INFO, "worker", "profiled cuts=%d samples=%d threads=%d skipped=%d", groups + 1, done, started,
            skipped);
out:
    free(ms);
    free(tids);
    if (ctx_ok)
        spw_element_ctx_destroy(&ectx);
    spw_source_close(src);
    spw_spec_free(spec);
    spillway__v1__profile_request__free_unpacked(r, NULL);
    return status;
}
