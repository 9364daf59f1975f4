/* pipeline/profile.c - step-by-step pipeline costs (see profile.h). Thread t takes elements t, t + T, ... of
 * epoch 0's order, reads each, runs it group by group (the same runs a producer does for any cut) and copies
 * each step's output once; each step's CPU time (the thread's own clock) is summed, the thread's first
 * element left out as a warm-up. Costs are CPU time per element with every thread busy, so they include
 * cache and memory contention but not time the thread waited for a CPU: a CPU quota or other processes are
 * the caller's to count (lib/cpulimit.h). */
#include "pipeline/profile.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>
#include "lib/clock.h"
#include "lib/err.h"
#include "pipeline/compress.h"
#include "pipeline/element.h"
#include "pipeline/order.h"

struct measure {
    const struct spw_pipeline_spec *spec;
    const struct spw_source *src;
    const struct spw_element_ctx *ctx;
    const struct spw_order *order;
    int n, stride, first;
    bool warm_up;               /* leave this thread's first element out */
    int64_t until_ns;           /* stop then (spw_now_ns), once SPW_PROFILE_MIN_SAMPLES are in; 0 = never */
    struct spw_profile sum;     /* sums over this thread's elements */
    struct zstd_sums {          /* compression samples, per cut */
        struct spw_zstd *c, *d;
        uint8_t *buf, *out;
        size_t buf_cap, out_cap;
        double raw[SPW_PROFILE_MAX_GROUPS + 1], sent[SPW_PROFILE_MAX_GROUPS + 1];
        double c_ns[SPW_PROFILE_MAX_GROUPS + 1], d_ns[SPW_PROFILE_MAX_GROUPS + 1];
    } z;
};

/* Copy n bytes (or a value) into scratch, growing it; returns the ns the copy took, or -1. */
static int64_t timed_copy(const uint8_t *bytes, size_t n, const struct spw_value *v, uint8_t **scratch, size_t *cap)
{
    if (n > *cap) {
        uint8_t *p = realloc(*scratch, n);
        if (!p)
            return -1;
        *scratch = p;
        *cap = n;
    }
    const int64_t t0 = spw_thread_cpu_ns();
    if (v)
        spw_value_copy_out(v, SPW_LAYOUT_HWC, *scratch);
    else
        memcpy(*scratch, bytes, n);
    return spw_thread_cpu_ns() - t0;
}

static bool grow(uint8_t **p, size_t *cap, size_t n)
{
    if (n <= *cap)
        return true;
    uint8_t *q = realloc(*p, n);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}

/* Compress the n bytes at cut k as a worker would, then check and decompress them as the client would. */
static void sample_zstd(struct zstd_sums *z, int k, const uint8_t *raw, size_t n)
{
    if (!n || (!z->c && spw_zstd_create(SPW_ZSTD_DEFAULT_LEVEL, &z->c) != 0) ||
        (!z->d && spw_zstd_create(0, &z->d) != 0) || !grow(&z->buf, &z->buf_cap, spw_zstd_bound(1, n)) ||
        !grow(&z->out, &z->out_cap, n))
        return;
    int64_t t0 = spw_thread_cpu_ns();
    const size_t zl = spw_zstd_compress(z->c, raw, 1, n, z->buf, z->buf_cap);
    const int64_t t1 = spw_thread_cpu_ns();
    char err[128];
    if (!zl || spw_zstd_decompress(z->d, z->buf, zl, 1, n, z->out, err, sizeof err) != 0)
        return;
    z->d_ns[k] += (double)(spw_thread_cpu_ns() - t1);
    z->c_ns[k] += (double)(t1 - t0);
    z->raw[k] += (double)n;
    z->sent[k] += (double)zl;
}

static void *measure_main(void *arg)
{
    struct measure *m = arg;
    const int groups = m->ctx->n_groups;
    uint8_t *scratch = NULL;
    size_t cap = 0;
    char err[256];
    struct spw_profile one;
    for (int i = m->first; i < m->n; i += m->stride) {
        const int64_t sample = spw_order_at(m->order, 0, i);
        const bool zs = (i / m->stride) % SPW_PROFILE_ZSTD_EVERY == 1;     /* never the warm-up element */
        uint8_t *buf = NULL;
        size_t len = 0;
        int64_t t0 = spw_thread_cpu_ns();
        int rc = spw_source_read(m->src, sample, m->spec->max_file_bytes, &buf, &len);
        one.read_ns = (double)(spw_thread_cpu_ns() - t0);
        int64_t c = rc ? -1 : timed_copy(buf, len, NULL, &scratch, &cap);
        one.copy_ns[0] = (double)c;
        one.bytes[0] = (double)len;
        if (zs && c >= 0)
            sample_zstd(&m->z, 0, scratch, len);
        rc = rc ? rc : c < 0 ? -ENOMEM : 0;
        struct spw_value v = {0};
        for (int g = 0; g < groups && rc == 0; g++) {
            t0 = spw_thread_cpu_ns();
            rc = spw_element_run(m->ctx, g, g + 1, 0, sample, buf, len, &v, NULL, NULL, err, sizeof err);
            one.group_ns[g] = (double)(spw_thread_cpu_ns() - t0);
            if (rc == 0 && (c = timed_copy(NULL, spw_value_bytes(&v), &v, &scratch, &cap)) < 0)
                rc = -ENOMEM;
            one.copy_ns[g + 1] = (double)c;
            one.bytes[g + 1] = (double)spw_value_bytes(&v);
            if (zs && rc == 0)
                sample_zstd(&m->z, g + 1, scratch, spw_value_bytes(&v));
        }
        spw_value_free(&v);
        free(buf);
        if (rc) {
            m->sum.skipped++;
            continue;
        }
        if (i == m->first && m->warm_up)
            continue;       /* first-touch pages, cold caches */
        m->sum.read_ns += one.read_ns;
        for (int g = 0; g < groups; g++)
            m->sum.group_ns[g] += one.group_ns[g];
        for (int k = 0; k <= groups; k++) {
            m->sum.copy_ns[k] += one.copy_ns[k];
            m->sum.bytes[k] += one.bytes[k];
        }
        m->sum.samples++;
        if (m->until_ns && m->sum.samples >= SPW_PROFILE_MIN_SAMPLES && spw_now_ns() >= m->until_ns)
            break;          /* the budget is spent: a slow pipeline, measured on fewer elements */
    }
    free(scratch);
    spw_zstd_destroy(m->z.c);
    spw_zstd_destroy(m->z.d);
    free(m->z.buf);
    free(m->z.out);
    return NULL;
}

int spw_profile_run(const struct spw_pipeline_spec *spec, const struct spw_source *src, int samples, int threads,
                    int budget_ms, struct spw_profile *out, char *err, size_t errlen)
{
    struct spw_element_ctx ctx;
    if (spw_element_ctx_init(&ctx, spec) != 0)
        return -ENOMEM;
    struct spw_order order;
    spw_order_init(&order, src->n, spec->source.shuffle, spec->source.seed);
    if (threads > samples)
        threads = samples > 0 ? samples : 1;
    /* One warm-up element per thread on top, when the source has them. */
    const bool warm_up = src->n >= (int64_t)samples + threads;
    const int n = warm_up ? samples + threads : src->n < samples ? (int)src->n : samples;
    if (threads > n)
        threads = n > 0 ? n : 1;
    const int64_t until_ns = budget_ms > 0 ? spw_now_ns() + (int64_t)budget_ms * 1000000 : 0;
    struct measure *ms = calloc((size_t)threads, sizeof *ms);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    int rc = 0, started = 0;
    if (!ms || !tids) {
        rc = -ENOMEM;
        goto out;
    }
    for (int t = 0; t < threads; t++) {
        ms[t] = (struct measure){.spec = spec, .src = src, .ctx = &ctx, .order = &order, .n = n, .stride = threads,
                                 .first = t, .warm_up = warm_up, .until_ns = until_ns};
        if (pthread_create(&tids[t], NULL, measure_main, &ms[t]) != 0)
            break;
        started++;
    }
    for (int t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    memset(out, 0, sizeof *out);
    out->groups = ctx.n_groups;
    out->threads = started;
    for (int t = 0; t < started; t++) {
        const struct spw_profile *s = &ms[t].sum;
        out->samples += s->samples;
        out->skipped += s->skipped;
        out->read_ns += s->read_ns;
        for (int g = 0; g < ctx.n_groups; g++)
            out->group_ns[g] += s->group_ns[g];
        for (int k = 0; k <= ctx.n_groups; k++) {
            out->copy_ns[k] += s->copy_ns[k];
            out->bytes[k] += s->bytes[k];
        }
    }
    if (!out->samples) {
        snprintf(err, errlen, "none of the %d sampled elements could be read and run", n);
        rc = started ? SPW_ESOURCE : -EAGAIN;
        goto out;
    }
    for (int k = 0; k <= ctx.n_groups; k++) {
        double raw = 0, sent = 0, c = 0, dn = 0;
        for (int t = 0; t < started; t++) {
            raw += ms[t].z.raw[k];
            sent += ms[t].z.sent[k];
            c += ms[t].z.c_ns[k];
            dn += ms[t].z.d_ns[k];
        }
        if (raw > 0 && sent > 0) {
            out->zstd_ratio[k] = raw / sent;
            out->zstd_compress_ns[k] = c / raw;
            out->zstd_decompress_ns[k] = dn / raw;
        }
    }
    const double d = out->samples;
    out->read_ns /= d;
    for (int g = 0; g < ctx.n_groups; g++)
        out->group_ns[g] /= d;
    for (int k = 0; k <= ctx.n_groups; k++) {
        out->copy_ns[k] /= d;
        out->bytes[k] /= d;
    }
out:
    free(ms);
    free(tids);
    spw_element_ctx_destroy(&ctx);
    return rc;
}

double spw_profile_prefix_ns(const struct spw_profile *p, int k)
{
    double ns = p->read_ns + p->copy_ns[k];
    for (int g = 0; g < k; g++)
        ns += p->group_ns[g];
    return ns;
}
