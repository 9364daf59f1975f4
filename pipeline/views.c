/* pipeline/views.c - multi-crop views (see views.h). Packed element: u32 magic, u32 instance count, then per
 * instance u32 dtype, u32 ndim, u32 shape[4], then the instances' bytes in order. Thread-safe: state is per
 * call. */
#include "pipeline/views.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "pipeline/element.h"

#define PACK_MAGIC 0x57565053u     /* "SPVW" */
#define ENTRY_WORDS 6
#define MAX_DIMS 4

int spw_views_instances(const struct spw_pipeline_spec *spec)
{
    int n = 0;
    for (int v = 0; v < spec->n_views; v++)
        n += spec->views[v].repeat;
    return n;
}

static size_t header_bytes(int instances)
{
    return sizeof(uint32_t) * (2 + (size_t)ENTRY_WORDS * (size_t)instances);
}

/* One view instance: a copy of the prefix's output through the view's ops; the last instance takes the
 * prefix's output itself (last: nothing reads it after). */
static int run_instance(struct spw_op_call *c, int view, int r, struct spw_value *prefix, bool last,
                        struct spw_value *out)
{
    int rc = 0;
    if (last && !prefix->placed && !prefix->borrowed) {
        *out = *prefix;
        *prefix = (struct spw_value){0};
    } else if ((rc = spw_value_copy(prefix, out))) {
        return spw_fail(c->err, c->errlen, rc, "views[%d]: out of memory for its copy of the element", view);
    }
    rc = spw_element_run_keyed(&c->ctx->views[view], spw_views_key(view, r), c->epoch, c->sample, out, c->err,
                               c->errlen);
    if (rc) {
        char inner[256];
        snprintf(inner, sizeof inner, "%s", c->err);
        snprintf(c->err, c->errlen, "views[%d] (repeat %d): %s", view, r, inner);
    }
    return rc;
}

int spw_views_run(struct spw_op_call *c, struct spw_value *v)
{
    const struct spw_pipeline_spec *spec = c->ctx->spec;
    const enum spw_layout layout = spec->batch.layout;
    const int n = spw_views_instances(spec);
    struct spw_value outs[SPW_VIEWS_MAX_INSTANCES];
    memset(outs, 0, sizeof outs);
    int k = 0, rc = 0;
    for (int view = 0; view < spec->n_views && rc == 0; view++)
        for (int r = 0; r < spec->views[view].repeat && rc == 0; r++, k++)
            rc = run_instance(c, view, r, v, k == n - 1, &outs[k]);
    uint32_t head[2 + ENTRY_WORDS * SPW_VIEWS_MAX_INSTANCES];
    size_t bytes = header_bytes(n);
    head[0] = PACK_MAGIC;
    head[1] = (uint32_t)n;
    for (int i = 0; i < n && rc == 0; i++) {
        enum spw_dtype dt;
        int ndim;
        int64_t shape[SPW_TENSOR_MAX_DIMS];
        spw_value_out_shape(&outs[i], layout, &dt, &ndim, shape);
        if (ndim > MAX_DIMS) {
            rc = spw_fail(c->err, c->errlen, SPW_EUNSUPPORTED, "views: instance %d has %d dimensions (at most %d)",
                          i, ndim, MAX_DIMS);
            break;
        }
        uint32_t *e = head + 2 + ENTRY_WORDS * i;
        e[0] = (uint32_t)dt, e[1] = (uint32_t)ndim;
        for (int d = 0; d < MAX_DIMS; d++)
            e[2 + d] = d < ndim ? (uint32_t)shape[d] : 0;
        bytes += spw_value_bytes(&outs[i]);
    }
    uint8_t *mem = NULL;
    struct spw_value packed = {.is_tensor = true};
    const int64_t shape[1] = {(int64_t)bytes};
    if (rc == 0 && c->dest && c->dest->place && (mem = c->dest->place(c->dest->opaque, SPW_DTYPE_U8, 1, shape))) {
        packed.placed = true;           /* straight into the batch slot */
        packed.t = (struct spw_tensor){.dtype = SPW_DTYPE_U8, .ndim = 1, .shape = {shape[0]}, .nbytes = bytes,
                                       .data = mem};
    } else if (rc == 0) {
        if ((rc = spw_tensor_alloc(&packed.t, SPW_DTYPE_U8, 1, shape)) == 0)
            mem = packed.t.data;
        else
            spw_fail(c->err, c->errlen, rc, "views: out of memory for a %zu-byte element", bytes);
    }
    if (rc == 0) {
        memcpy(mem, head, header_bytes(n));
        size_t at = header_bytes(n);
        for (int i = 0; i < n; i++) {
            spw_value_copy_out(&outs[i], layout, mem + at);
            at += spw_value_bytes(&outs[i]);
        }
    }
    for (int i = 0; i < k; i++)
        spw_value_free(&outs[i]);
    spw_value_free(v);
    if (rc == 0)
        *v = packed;
    return rc;
}

/* The instance table of a packed element of elem_bytes, checked: its size adds up. */
static int read_header(const uint8_t *p, size_t elem_bytes, int instances, uint32_t *head, size_t *sizes,
                       char *err, size_t errlen)
{
    if (elem_bytes < header_bytes(instances))
        return spw_fail(err, errlen, -EINVAL, "views: a %zu-byte element is not a packed one", elem_bytes);
    memcpy(head, p, header_bytes(instances));
    if (head[0] != PACK_MAGIC || head[1] != (uint32_t)instances)
        return spw_fail(err, errlen, -EINVAL, "views: an element that is not a packed one of %d instances",
                        instances);
    size_t total = header_bytes(instances);
    for (int i = 0; i < instances; i++) {
        const uint32_t *e = head + 2 + ENTRY_WORDS * i;
        if (e[1] < 1 || e[1] > MAX_DIMS || e[0] > SPW_DTYPE_I64)
            return spw_fail(err, errlen, -EINVAL, "views: instance %d: dtype %u, %u dimensions", i, e[0], e[1]);
        size_t b = spw_dtype_size((enum spw_dtype)e[0]);
        for (uint32_t d = 0; d < e[1]; d++)
            b *= e[2 + d];
        sizes[i] = b;
        total += b;
    }
    if (total != elem_bytes)
        return spw_fail(err, errlen, -EINVAL, "views: instances of %zu bytes in a %zu-byte element", total,
                        elem_bytes);
    return 0;
}

int spw_views_unpack(const struct spw_pipeline_spec *spec, const struct spw_tensor *data, int n,
                     struct spw_tensor *out, char *err, size_t errlen)
{
    const int instances = spw_views_instances(spec);
    memset(out, 0, sizeof *out * (size_t)instances);
    if (n == 0) {
        const int64_t none[1] = {0};
        for (int i = 0; i < instances; i++)
            if (spw_tensor_alloc(&out[i], SPW_DTYPE_U8, 1, none)) {
                for (int j = 0; j < i; j++)
                    spw_tensor_free(&out[j]);
                return -ENOMEM;
            }
        return 0;
    }
    if (data->dtype != SPW_DTYPE_U8 || data->ndim != 2 || data->shape[0] < n)
        return spw_fail(err, errlen, -EINVAL, "views: the batch is not %d packed elements", n);
    const size_t elem = (size_t)data->shape[1];
    const uint8_t *base = data->data;
    uint32_t head[2 + ENTRY_WORDS * SPW_VIEWS_MAX_INSTANCES];
    size_t sizes[SPW_VIEWS_MAX_INSTANCES];
    int rc = read_header(base, elem, instances, head, sizes, err, errlen);
    for (int k = 1; k < n && rc == 0; k++)
        if (memcmp(base + elem * (size_t)k, head, header_bytes(instances)) != 0)
            rc = spw_fail(err, errlen, -EINVAL, "views: elements of one batch differ in their instances' shapes "
                          "(end each view with a crop or a fixed-size resize)");
    for (int i = 0; i < instances && rc == 0; i++) {
        const uint32_t *e = head + 2 + ENTRY_WORDS * i;
        int64_t shape[1 + MAX_DIMS] = {n};
        for (uint32_t d = 0; d < e[1]; d++)
            shape[1 + d] = e[2 + d];
        if ((rc = spw_tensor_alloc(&out[i], (enum spw_dtype)e[0], 1 + (int)e[1], shape)))
            break;
    }
    if (rc) {
        for (int i = 0; i < instances; i++)
            spw_tensor_free(&out[i]);
        return rc;
    }
    for (int k = 0; k < n; k++) {
        size_t at = header_bytes(instances);
        for (int i = 0; i < instances; i++) {
            memcpy((uint8_t *)out[i].data + sizes[i] * (size_t)k, base + elem * (size_t)k + at, sizes[i]);
            at += sizes[i];
        }
    }
    return 0;
}
