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
    if (!p->group_ns) {
        rc = spw_element_run(p->ctx, 0, cut, epoch, sample, buf, len, v, stats, dest, err, errlen);
    } else {                    /* group by group, each one's CPU time into the producer's counters */
        for (int g = 0; g < cut && rc == 0; g++) {
            const int64_t cpu0 = spw_thread_cpu_ns();
            rc = spw_element_run(p->ctx, g, g + 1, epoch, sample, buf, len, v, stats, dest, err, errlen);
            if (rc == 0) {
                __atomic_fetch_add(&p->group_ns[g], spw_thread_cpu_ns() - cpu0, __ATOMIC_RELAXED);
                __atomic_fetch_add(&p->group_elements[g], 1, __ATOMIC_RELAXED);
            }
        }
    }
    free(buf);
    return rc;
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
