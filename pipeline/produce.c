/* pipeline/produce.c - read, run, and the on_error decision for one element (see produce.h). Thread-safe:
 * all state is per call. */
#include "pipeline/produce.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "pipeline/fields.h"
#include "pipeline/op_registry.h"

int spw_produce_read(const struct spw_producer *p, int64_t sample, uint8_t **buf, size_t *len, char *err,
                     size_t errlen)
{
    int rc = -EIO;
    *buf = NULL;
    *len = 0;
    err[0] = 0;
    for (int attempt = 0; attempt < SPW_PRODUCE_READ_TRIES && rc < 0 && rc != SPW_ETOOBIG; attempt++)
        rc = spw_source_read(p->src, sample, p->spec->max_file_bytes, buf, len);      /* I/O: retry */
    if (rc)
        snprintf(err, errlen, "read failed: %s", spw_strerror(rc));
    return rc;
}

/* Groups [g_from, g_to) on one element (spw_element_run), each group's thread CPU into the producer's
 * counters when it keeps them. */
static int run_groups(const struct spw_producer *p, int g_from, int g_to, uint64_t epoch, int64_t sample,
                      const uint8_t *buf, size_t len, struct spw_value *v, struct spw_element_stats *stats,
                      const struct spw_element_dest *dest, char *err, size_t errlen)
{
    if (!p->group_ns)
        return spw_element_run(p->ctx, g_from, g_to, epoch, sample, buf, len, v, stats, dest, err, errlen);
    int rc = 0;
    for (int g = g_from; g < g_to && rc == 0; g++) {
        const int64_t cpu0 = spw_thread_cpu_ns();
        rc = spw_element_run(p->ctx, g, g + 1, epoch, sample, buf, len, v, stats, g == g_to - 1 ? dest : NULL,
                             err, errlen);
        if (rc == 0) {
            __atomic_fetch_add(&p->group_ns[g], spw_thread_cpu_ns() - cpu0, __ATOMIC_RELAXED);
            __atomic_fetch_add(&p->group_elements[g], 1, __ATOMIC_RELAXED);
        }
    }
    return rc;
}

int spw_produce(const struct spw_producer *p, uint64_t epoch, int64_t sample, int cut, struct spw_value *v,
                struct spw_element_stats *stats, const struct spw_element_dest *dest, char *err, size_t errlen)
{
    uint8_t *buf;
    size_t len;
    memset(v, 0, sizeof *v);
    int rc = spw_produce_read(p, sample, &buf, &len, err, errlen);
    if (rc)
        return rc;
    if (cut == 0 && len == 0) {
        free(buf);
        snprintf(err, errlen, "empty file (0 bytes)");
        return SPW_EFORMAT;     /* nothing to decode: a failed sample, not a malformed empty element */
    }
    if (p->spec->source.n_fields &&
        (rc = spw_fields_read(p->src, p->spec, sample, &v->fields, err, errlen)) != 0) {
        free(buf);
        return rc;
    }
    if (cut == 0) {
        /* The element travels encoded: the bytes become a uint8 [len] tensor without a copy. */
        v->is_tensor = true;
        v->t.dtype = SPW_DTYPE_U8;
        v->t.ndim = 1;
        v->t.shape[0] = (int64_t)len;
        v->t.nbytes = len;
        v->t.data = buf;
        return 0;
    }
    rc = run_groups(p, 0, cut, epoch, sample, buf, len, v, stats, dest, err, errlen);
    free(buf);
    return rc;
}

int spw_produce_batching(const struct spw_producer *p, int from, int cut)
{
    int g = from > 1 ? from : 1;
    while (g < cut && !spw_element_group_batches(p->ctx, g))
        g++;
    return g < cut ? g : cut;
}

const struct spw_element_dest *spw_produce_stage(const struct spw_producer *p, int g)
{
    const struct spw_op_spec *op = &p->spec->ops[p->ctx->groups[g].first];
    const struct spw_op_def *def = spw_op_def(op->kind);
    return def->stage ? def->stage(op) : NULL;
}

int spw_produce_more(const struct spw_producer *p, int g_from, int g_to, uint64_t epoch, int64_t sample,
                     struct spw_value *v, struct spw_element_stats *stats, const struct spw_element_dest *dest,
                     char *err, size_t errlen)
{
    return run_groups(p, g_from, g_to, epoch, sample, NULL, 0, v, stats, dest, err, errlen);
}

void spw_produce_many(const struct spw_producer *p, int g, uint64_t epoch, const int64_t *samples, int n,
                      struct spw_value *const *vs, int *rcs, struct spw_element_stats *const *stats, char *errs,
                      size_t errlen)
{
    const int64_t cpu0 = p->group_ns ? spw_thread_cpu_ns() : 0;
    spw_element_run_many(p->ctx, g, epoch, samples, n, vs, rcs, stats, errs, errlen);
    int made = 0;
    for (int k = 0; k < n; k++)
        made += rcs[k] == 0;
    if (p->group_ns && made) {
        __atomic_fetch_add(&p->group_ns[g], spw_thread_cpu_ns() - cpu0, __ATOMIC_RELAXED);
        __atomic_fetch_add(&p->group_elements[g], made, __ATOMIC_RELAXED);
    }
}

const char *const spw_failure_names[SPW_FAIL_KINDS] = {"decode", "too_big", "read", "memory", "other", "user"};

enum spw_failure spw_failure_of(int rc)
{
    switch (rc) {
    case SPW_EDECODE:
    case SPW_EFORMAT:
    case SPW_EUNSUPPORTED: return SPW_FAIL_DECODE;
    case SPW_ETOOBIG: return SPW_FAIL_TOO_BIG;
    case SPW_ESOURCE: return SPW_FAIL_READ;
    case -ENOMEM: return SPW_FAIL_MEMORY;
    case SPW_EUSER: return SPW_FAIL_USER;
    default: return rc < 0 && rc > -4096 ? SPW_FAIL_READ : SPW_FAIL_OTHER;   /* -errno: the read */
    }
}

bool spw_produce_failed(const struct spw_producer *p, int64_t sample, int rc, const char *err, const char *from,
                        char *msg, size_t msglen)
{
    const bool fail = p->spec->on_error == SPW_ON_ERROR_FAIL;
    if (p->failures)
        __atomic_fetch_add(&p->failures[spw_failure_of(rc)], 1, __ATOMIC_RELAXED);
    const char *path = sample >= 0 && sample < p->src->n ? p->src->samples[sample].path : "?";
    char job[32] = "";
    if (p->job)
        snprintf(job, sizeof job, "job=%llu ", (unsigned long long)p->job);
    spw_log(fail || rc == -ENOMEM ? SPW_LOG_ERROR : SPW_LOG_WARN, p->component,
            "%s %ssample=%lld path=\"%s\" err=\"%s\"%s%s", fail ? "failed" : "skipped", job, (long long)sample,
            path, err, from ? " worker=" : "", from ? from : "");
    if (fail && msg)
        snprintf(msg, msglen, "%s: %s%s%s%s", path, err, from ? " (on worker " : "", from ? from : "",
                 from ? ")" : "");
    return fail;
}
