/* pipeline/backend.c - the CPU backend and the table walk (see backend.h). Thread-safe: no shared state. */
#include "pipeline/backend.h"

#include <errno.h>

/* The elements wanted of [k0, k1): each made up to the first group that batches (until they hold
 * SPW_BACKEND_MANY_BYTES), the groups from there to the last one that batches run on all of them (those
 * that batch together), then each one's last groups, dest and done. Returns where it stopped. */
static int cpu_run_many(const struct spw_producer *p, const struct spw_microbatch *mb, int k0, int k1, int first)
{
    int64_t samples[SPW_ELEMENT_MANY_MAX] = {0};
    int at[SPW_ELEMENT_MANY_MAX], rcs[SPW_ELEMENT_MANY_MAX], n = 0, k = k0;
    struct spw_value vs[SPW_ELEMENT_MANY_MAX];
    struct spw_value *vp[SPW_ELEMENT_MANY_MAX];
    struct spw_element_stats *st[SPW_ELEMENT_MANY_MAX];
    char errs[SPW_ELEMENT_MANY_MAX][512];
    size_t held = 0;
    const struct spw_element_dest *stage = spw_produce_stage(p, first);
    for (; k < k1 && held < SPW_BACKEND_MANY_BYTES; k++) {
        if (mb->want && !mb->want(mb->opaque, k))
            continue;
        st[n] = mb->stats ? mb->stats(mb->opaque, k) : NULL;
        samples[n] = mb->samples[k];
        vp[n] = &vs[n];
        rcs[n] = spw_produce(p, mb->epoch, samples[n], first, &vs[n], st[n], stage, errs[n], sizeof errs[n]);
        held += rcs[n] == 0 ? spw_value_bytes(&vs[n]) : 0;
        at[n++] = k;
    }
    int last = first;
    for (int g = first; g < mb->cut; g = spw_produce_batching(p, g + 1, mb->cut))
        last = g;
    for (int g = first; g <= last; g++) {
        if (g == spw_produce_batching(p, g, mb->cut)) {
            spw_produce_many(p, g, mb->epoch, samples, n, vp, rcs, st, errs[0], sizeof errs[0]);
            continue;
        }
        for (int j = 0; j < n; j++)
            if (rcs[j] == 0)
                rcs[j] = spw_produce_more(p, g, g + 1, mb->epoch, samples[j], &vs[j], st[j], NULL, errs[j],
                                          sizeof errs[j]);
    }
    for (int j = 0; j < n; j++) {
        const struct spw_element_dest *dest = rcs[j] == 0 && mb->dest ? mb->dest(mb->opaque, at[j]) : NULL;
        if (rcs[j] == 0)
            rcs[j] = spw_produce_more(p, last + 1, mb->cut, mb->epoch, samples[j], &vs[j], st[j], dest, errs[j],
                                      sizeof errs[j]);
        mb->done(mb->opaque, at[j], rcs[j], &vs[j], errs[j]);
    }
    return k;
}

static int cpu_run(const struct spw_backend *b, const struct spw_producer *p, const struct spw_microbatch *mb)
{
    const int first = spw_produce_batching(p, 1, mb->cut);
    if (first < mb->cut) {
        for (int k = 0; k < mb->n;)
            k = cpu_run_many(p, mb, k, k + SPW_ELEMENT_MANY_MAX < mb->n ? k + SPW_ELEMENT_MANY_MAX : mb->n, first);
        return 0;
    }
    char err[512];
    for (int k = 0; k < mb->n; k++) {
        if (mb->want && !mb->want(mb->opaque, k))
            continue;
        struct spw_value v;
        const struct spw_element_dest *dest = mb->dest ? mb->dest(mb->opaque, k) : NULL;
        int rc = spw_produce(p, mb->epoch, mb->samples[k], mb->cut, &v, mb->stats ? mb->stats(mb->opaque, k) : NULL,
                             dest, err, sizeof err);
        mb->done(mb->opaque, k, rc, &v, err);
    }
    return 0;
}

const struct spw_backend spw_backend_cpu = {.name = "cpu", .run = cpu_run};

int spw_backend_run(const struct spw_backend *const *table, int n, const struct spw_producer *p,
                    const struct spw_microbatch *mb)
{
    int rc = -ENODEV;
    for (int i = 0; i < n && rc != 0; i++)
        rc = table[i]->run(table[i], p, mb);
    return rc;
}

int spw_backend_run_all(const struct spw_backend *const *table, int n_table, const struct spw_producer *p,
                        const struct spw_run *r)
{
    int64_t samples[SPW_RUN_MB_MAX];
    const int mb_max = r->mb_max < 1 ? 1 : r->mb_max > SPW_RUN_MB_MAX ? SPW_RUN_MB_MAX : r->mb_max;
    int k0 = 0;
    for (; k0 < r->n && !(r->stop && r->stop(r->opaque)); k0 += mb_max) {
        const int n = r->n - k0 < mb_max ? r->n - k0 : mb_max;
        for (int k = 0; k < n; k++)
            samples[k] = r->sample_of(r->opaque, k0 + k);
        if (r->begin)
            r->begin(r->opaque, k0, n, samples);
        const struct spw_microbatch mb = {.epoch = r->epoch, .cut = r->cut, .n = n, .samples = samples,
                                          .opaque = r->opaque, .want = r->want, .dest = r->dest,
                                          .done = r->done};
        spw_backend_run(table, n_table, p, &mb);
    }
    return k0 < r->n ? k0 : r->n;
}
