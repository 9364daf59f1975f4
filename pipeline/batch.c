/* pipeline/batch.c - batches (see batch.h): filling slots element by element, building the named parts
 * (closing skipped samples, padding within a cap, splitting views, mixing) and the process-wide cache of
 * batch buffers. Thread model: a fill or batch is one thread's at a time; the cache has its own mutex. */
#include "pipeline/batch.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "lib/err.h"
#include "pipeline/fields.h"
#include "pipeline/mix.h"
#include "pipeline/views.h"

/* Batch buffers outlive an executor in a small process-wide cache, so the next executor (the next epoch's
 * iterator, or the timed run after a warm-up) reuses memory that is already mapped: first touches of fresh
 * memory are slow under virtualization. Bounded by count and bytes. */
#define CACHE_SLOTS 4
#define CACHE_MAX_BYTES ((size_t)512 << 20)
static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_cache[CACHE_SLOTS];
static size_t g_cache_cap[CACHE_SLOTS];
static int g_cache_n;

static size_t buffer_size(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    return bytes >= huge ? (bytes + huge - 1) / huge * huge : (bytes ? bytes : 1);
}

/* Give a buffer (of buffer_size() bytes) to the cache, or free it. */
static void cache_put(void *p, size_t cap)
{
    size_t total = cap;
    pthread_mutex_lock(&g_cache_mu);
    for (int i = 0; i < g_cache_n; i++)
        total += g_cache_cap[i];
    if (g_cache_n < CACHE_SLOTS && total <= CACHE_MAX_BYTES) {
        g_cache[g_cache_n] = p;
        g_cache_cap[g_cache_n++] = cap;
        p = NULL;
    }
    pthread_mutex_unlock(&g_cache_mu);
    free(p);
}

static void *cache_take(size_t cap)
{
    void *p = NULL;
    pthread_mutex_lock(&g_cache_mu);
    for (int i = 0; i < g_cache_n; i++) {
        if (g_cache_cap[i] == cap) {
            p = g_cache[i];
            g_cache[i] = g_cache[--g_cache_n];
            g_cache_cap[i] = g_cache_cap[g_cache_n];
            break;
        }
    }
    pthread_mutex_unlock(&g_cache_mu);
    return p;
}

size_t spw_batch_buffer_size(size_t bytes)
{
    return buffer_size(bytes);
}

void spw_batch_buffer_put(void *p, size_t cap)
{
    cache_put(p, cap);
}

void *spw_batch_buffer_take(size_t bytes)
{
    const size_t cap = buffer_size(bytes);
    void *p = cache_take(cap);
    if (p)
        return p;
    /* Batches are tens of MB: ask for transparent huge pages, so filling a new buffer takes one fault per
     * 2 MiB instead of one per 4 KiB page. */
    const size_t huge = (size_t)2 << 20;
    if (cap >= huge) {
        if (posix_memalign(&p, huge, cap) != 0)
            return NULL;
        madvise(p, cap, MADV_HUGEPAGE);
        return p;
    }
    return malloc(cap);
}

static size_t shape_bytes(enum spw_dtype dt, int ndim, const int64_t *shape)
{
    size_t bytes = spw_dtype_size(dt);
    for (int i = 0; i < ndim; i++)
        bytes *= (size_t)shape[i];
    return bytes;
}

static const char shape_msg[] =
    "batch: elements of one batch differ in shape (add a crop or a fixed-size resize, or use batch size 1)";

/* A padded fill's element: its own buffer; its dtype and rank must match the first element's (audio: all its
 * dimensions but the last too). */
static uint8_t *place_row(struct spw_batch_fill *f, int n, int idx, enum spw_dtype dt, int ndim,
                          const int64_t *shape, char *err, size_t errlen)
{
    struct spw_tensor *d = &f->data;
    if (!f->rows) {
        f->rows = calloc((size_t)n, sizeof *f->rows);
        f->shapes = calloc((size_t)n, sizeof *f->shapes);
        f->n_rows = f->rows ? n : 0;
        if (!f->rows || !f->shapes || ndim < 1 || ndim >= SPW_TENSOR_MAX_DIMS) {
            snprintf(err, errlen, ndim < 1 ? "batch: a scalar element cannot be padded" : "out of memory for a batch");
            return NULL;
        }
        d->dtype = dt;
        d->ndim = ndim + 1;
        d->shape[0] = n;
        memcpy(d->shape + 1, shape, sizeof(int64_t) * (size_t)ndim);
        f->elem_bytes = shape_bytes(dt, ndim, shape);
    }
    if (d->dtype != dt || d->ndim != ndim + 1) {
        snprintf(err, errlen, "batch: elements of one batch differ in dtype or number of dimensions");
        return NULL;
    }
    if (f->pad == SPW_FILL_PAD_LAST && memcmp(d->shape + 1, shape, sizeof(int64_t) * (size_t)(ndim - 1))) {
        snprintf(err, errlen, "batch: elements of one batch differ in more than their last dimension (length)");
        return NULL;
    }
    free(f->rows[idx]);
    f->rows[idx] = malloc(shape_bytes(dt, ndim, shape) + 1);
    memcpy(f->shapes[idx], shape, sizeof(int64_t) * (size_t)ndim);
    if (!f->rows[idx])
        snprintf(err, errlen, "out of memory for a batch");
    return f->rows[idx];
}

uint8_t *spw_batch_element_place(struct spw_batch_fill *f, int n, int idx, enum spw_dtype dt, int ndim,
                                 const int64_t *shape, void *(*take)(void *ctx, size_t bytes), void *ctx, char *err,
                                 size_t errlen)
{
    if (f->pad)
        return place_row(f, n, idx, dt, ndim, shape, err, errlen);
    struct spw_tensor *data = &f->data;
    if (!data->data) {
        const size_t elem = shape_bytes(dt, ndim, shape);
        if (!(data->data = take(ctx, elem * (size_t)n))) {
            snprintf(err, errlen, "out of memory for a batch");
            return NULL;
        }
        data->dtype = dt;
        data->ndim = ndim + 1;
        data->shape[0] = n;
        memcpy(data->shape + 1, shape, sizeof(int64_t) * (size_t)ndim);
        f->elem_bytes = elem;
        data->nbytes = elem * (size_t)n;
    }
    if (data->dtype != dt || data->ndim != ndim + 1 ||
        memcmp(data->shape + 1, shape, sizeof(int64_t) * (size_t)ndim) != 0) {
        snprintf(err, errlen, "%s", shape_msg);
        return NULL;
    }
    return (uint8_t *)data->data + f->elem_bytes * (size_t)idx;
}

bool spw_batch_fill_started(const struct spw_batch_fill *f)
{
    return f->data.data || f->rows;
}

size_t spw_batch_fill_bytes(const struct spw_batch_fill *f, int n)
{
    return f->elem_bytes * (size_t)n;
}

void spw_batch_fill_clear(struct spw_batch_fill *f)
{
    if (f->data.data)
        cache_put(f->data.data, buffer_size(f->data.nbytes));
    for (int i = 0; i < f->n_rows; i++)
        free(f->rows[i]);
    free(f->rows);
    free(f->shapes);
    for (int i = 0; i < f->n_fields; i++)
        spw_fields_free(f->fields[i]);
    free(f->fields);
    const enum spw_fill_pad pad = f->pad;
    memset(f, 0, sizeof *f);
    f->pad = pad;
}

int spw_batch_pad_check(enum spw_dtype dt, int ndim, const int64_t *shape, size_t elem_bytes, char *err,
                        size_t errlen)
{
    size_t bytes = spw_dtype_size(dt);
    bool overflow = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && bytes > SIZE_MAX / (size_t)shape[i]))
            overflow = true;
        else
            bytes *= (size_t)shape[i];
    }
    const size_t cap = elem_bytes > (SIZE_MAX - SPW_BATCH_PAD_SLACK) / SPW_BATCH_PAD_FACTOR
                           ? SIZE_MAX
                           : elem_bytes * SPW_BATCH_PAD_FACTOR + SPW_BATCH_PAD_SLACK;
    if (!overflow && bytes <= cap)
        return 0;
    char dims[SPW_TENSOR_MAX_DIMS * 22 + 4] = "[";
    for (int i = 0; i < ndim; i++)
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%" PRId64, i ? ", " : "", shape[i]);
    snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "]");
    char padded[32];
    snprintf(padded, sizeof padded, overflow ? "over 2^64" : "%zu", bytes);
    return spw_fail(err, errlen, SPW_ETOOBIG, "batch.pad: padding the elements to the largest size in each "
                    "dimension makes %s %s, %s bytes, from %zu bytes of elements: past the cap of %d x those + "
                    "%zu MiB (%zu bytes); resize or crop the images to a common size first (a fixed-size resize, "
                    "or a crop), or use smaller batches", dims, spw_dtype_name(dt), padded, elem_bytes,
                    SPW_BATCH_PAD_FACTOR, SPW_BATCH_PAD_SLACK >> 20, cap);
}

/* An element of shape s (ndim dims) into a [..largest] block m of element size es, zero-padded at the end of
 * each dimension: each output row written once (its part of the element, then zeros). */
static void copy_padded(uint8_t *dst, const uint8_t *src, int ndim, const int64_t *s, const int64_t *m, size_t es)
{
    int64_t idx[SPW_TENSOR_MAX_DIMS] = {0};
    const size_t in_row = (size_t)s[ndim - 1] * es, out_row = (size_t)m[ndim - 1] * es;
    size_t rows = 1;
    for (int i = 0; i < ndim - 1; i++)
        rows *= (size_t)m[i];
    for (size_t r = 0; r < rows; r++, dst += out_row) {
        bool inside = true;
        for (int i = 0; i < ndim - 1; i++)
            inside = inside && idx[i] < s[i];
        if (inside) {
            memcpy(dst, src, in_row);
            src += in_row;
        }
        memset(dst + (inside ? in_row : 0), 0, out_row - (inside ? in_row : 0));
        for (int i = ndim - 2; i >= 0 && ++idx[i] == m[i]; i--)
            idx[i] = 0;
    }
}

/* A padded fill's ok rows as [n_ok, ...largest] zero-padded into b->tensors[0], and into *sizes_out their
 * lengths (audio, [n]) or shapes (images, [n, ndim]). Images are checked against the cap first; audio rows
 * need no check, as they differ in their last dimension only, so the batch is at most n times its largest
 * row, which the spec's element caps bound. Returns 0, SPW_ETOOBIG (message in err) or -ENOMEM. */
static int build_padded(struct spw_batch_fill *f, int n_pos, const bool *ok, struct spw_batch *b,
                        struct spw_tensor *sizes_out, char *err, size_t errlen)
{
    const struct spw_tensor *d = &f->data;
    const int ndim = d->ndim - 1;
    int64_t largest[SPW_TENSOR_MAX_DIMS] = {0};
    for (int p = 0; p < n_pos; p++)
        for (int i = 0; ok[p] && i < ndim; i++)
            largest[i] = f->shapes[p][i] > largest[i] ? f->shapes[p][i] : largest[i];
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    shape[0] = b->n;
    memcpy(shape + 1, largest, sizeof(int64_t) * (size_t)ndim);
    const bool audio = f->pad == SPW_FILL_PAD_LAST;
    size_t elem_bytes = 0;
    for (int p = 0; p < n_pos; p++)
        elem_bytes += ok[p] ? shape_bytes(d->dtype, ndim, f->shapes[p]) : 0;
    const int rc = audio ? 0 : spw_batch_pad_check(d->dtype, d->ndim, shape, elem_bytes, err, errlen);
    if (rc)
        return rc;
    int64_t sshape[2] = {b->n, ndim};
    if (spw_tensor_alloc(&b->tensors[0], d->dtype, d->ndim, shape) != 0 ||
        spw_tensor_alloc(sizes_out, SPW_DTYPE_I64, audio ? 1 : 2, sshape) != 0)
        return -ENOMEM;
    const size_t es = spw_dtype_size(d->dtype), out_elem = shape_bytes(d->dtype, ndim, largest);
    uint8_t *dst = b->tensors[0].data;
    int64_t *sizes = sizes_out->data;
    for (int p = 0; p < n_pos; p++) {
        if (!ok[p])
            continue;
        copy_padded(dst, f->rows[p], ndim, f->shapes[p], largest, es);
        dst += out_elem;
        if (audio)
            *sizes++ = f->shapes[p][ndim - 1];
        else
            for (int i = 0; i < ndim; i++)
                *sizes++ = f->shapes[p][i];
    }
    return 0;
}

int spw_batch_fill_fields(struct spw_batch_fill *f, int n, int idx, struct spw_fields *fields)
{
    if (!f->fields) {
        if (!(f->fields = calloc((size_t)n, sizeof *f->fields))) {
            spw_fields_free(fields);
            return -ENOMEM;
        }
        f->n_fields = n;
    }
    spw_fields_free(f->fields[idx]);
    f->fields[idx] = fields;
    return 0;
}

int spw_batch_find(const struct spw_batch *b, const char *name)
{
    for (int i = 0; i < b->n_tensors; i++)
        if (strcmp(b->names[i], name) == 0)
            return i;
    return -1;
}

/* Append a part (the batch owns t from here, also on failure). Returns 0 or -ENOSPC. */
static int add_part(struct spw_batch *b, const char *name, struct spw_tensor *t)
{
    if (b->n_tensors >= SPW_BATCH_MAX_TENSORS) {
        spw_tensor_free(t);
        return -ENOSPC;
    }
    b->tensors[b->n_tensors] = *t;
    snprintf(b->names[b->n_tensors++], SPW_BATCH_NAME_MAX, "%s", name);
    memset(t, 0, sizeof *t);
    return 0;
}

/* A views batch's packed data [n, bytes] (tensors[0]) into one part per instance, the other parts after them.
 * Returns 0 or spw_views_unpack's error (message in err). */
static int split_views(const struct spw_pipeline_spec *spec, struct spw_batch *b, char *err, size_t errlen)
{
    const int k = spw_views_instances(spec);
    struct spw_tensor parts[SPW_VIEWS_MAX_INSTANCES];
    const int rc = spw_views_unpack(spec, &b->tensors[0], b->n, parts, err, errlen);
    if (rc)
        return rc;
    if (b->data_capacity)
        spw_batch_buffer_put(b->tensors[0].data, b->data_capacity);
    else
        spw_tensor_free(&b->tensors[0]);
    b->data_capacity = 0;
    const int rest = b->n_tensors - 1;                  /* the parts after the data move behind the views */
    memmove(b->tensors + k, b->tensors + 1, sizeof *b->tensors * (size_t)rest);
    memmove(b->names + k, b->names + 1, sizeof *b->names * (size_t)rest);
    for (int v = 0; v < k; v++) {
        b->tensors[v] = parts[v];
        snprintf(b->names[v], SPW_BATCH_NAME_MAX, "view%d", v);
    }
    b->n_tensors = k + rest;
    b->n_views = k;
    return 0;
}

/* Field k's masks as one part "NAME", uint8 [n, H, W] (the first channel of each); with pad (images of a padded
 * batch), masks of different sizes padded with ignore_index to the largest, within the cap (spw_batch_pad_check:
 * masks may differ from their images). Returns 0, -ENOMEM, -EINVAL (masks of one batch differing in size
 * without pad), SPW_ETOOBIG (messages in err) or -ENOSPC. */
static int add_masks(const struct spw_source_spec *spec, int k, bool pad, struct spw_fields *const *fields,
                     int n_pos, const bool *ok, struct spw_batch *b, char *err, size_t errlen)
{
    int w = -1, h = -1;
    size_t mask_bytes = 0;
    for (int p = 0; p < n_pos; p++) {
        const struct spw_image *m = ok[p] && fields && fields[p] ? &fields[p]->f[k].mask : NULL;
        if (!m)
            continue;
        mask_bytes += (size_t)m->w * (size_t)m->h;
        if (w < 0 || pad)
            w = m->w > w ? m->w : w, h = m->h > h ? m->h : h;
        if (!pad && (m->w != w || m->h != h))
            return spw_fail(err, errlen, -EINVAL, "field %s: masks of %dx%d and %dx%d in one batch (add a crop or a "
                            "fixed-size resize, or batch.pad)", spec->fields[k].name, w, h, m->w, m->h);
    }
    struct spw_tensor t;
    const int64_t shape[3] = {b->n, h < 0 ? 0 : h, w < 0 ? 0 : w};
    if (pad) {
        char why[480];
        const int rc = spw_batch_pad_check(SPW_DTYPE_U8, 3, shape, mask_bytes, why, sizeof why);
        if (rc)
            return spw_fail(err, errlen, rc, "field %s's masks: %s", spec->fields[k].name, why);
    }
    if (spw_tensor_alloc(&t, SPW_DTYPE_U8, 3, shape) != 0)
        return -ENOMEM;
    uint8_t *dst = t.data;
    const uint8_t fill = (uint8_t)spec->fields[k].ignore_index;
    for (int p = 0; p < n_pos; p++) {
        if (!ok[p])
            continue;
        const struct spw_image *m = fields && fields[p] ? &fields[p]->f[k].mask : NULL;
        const bool has = m && m->data;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                *dst++ = has && x < m->w && y < m->h ? spw_image_at(m, x, y)[0] : has ? fill : 0;
    }
    return add_part(b, spec->fields[k].name, &t);
}

/* Field k's boxes as three parts: "NAME" float32 [n, most, 4] (zero-padded), "NAME_labels" int64 [n, most]
 * (-1 padded) and "NAME_counts" int64 [n]. Returns 0, -ENOMEM or -ENOSPC. */
static int add_boxes(const struct spw_source_spec *spec, int k, struct spw_fields *const *fields, int n_pos,
                     const bool *ok, struct spw_batch *b)
{
    int most = 0;
    for (int p = 0; p < n_pos; p++)
        if (ok[p] && fields && fields[p] && fields[p]->f[k].n_boxes > most)
            most = fields[p]->f[k].n_boxes;
    struct spw_tensor t[3] = {0};
    const int64_t shape[3] = {b->n, most, 4};
    if (spw_tensor_alloc(&t[0], SPW_DTYPE_F32, 3, shape) || spw_tensor_alloc(&t[1], SPW_DTYPE_I64, 2, shape) ||
        spw_tensor_alloc(&t[2], SPW_DTYPE_I64, 1, shape)) {
        for (int i = 0; i < 3; i++)
            spw_tensor_free(&t[i]);
        return -ENOMEM;
    }
    float *box = t[0].data;
    int64_t *label = t[1].data, *count = t[2].data;
    for (int p = 0; p < n_pos; p++) {
        if (!ok[p])
            continue;
        const struct spw_field *f = fields && fields[p] ? &fields[p]->f[k] : NULL;
        const int n = f ? f->n_boxes : 0;
        memcpy(box, f ? f->boxes : box, sizeof *box * 4 * (size_t)n);
        memset(box + 4 * n, 0, sizeof *box * 4 * (size_t)(most - n));
        for (int i = 0; i < most; i++)
            label[i] = i < n ? f->box_labels[i] : -1;
        box += 4 * most;
        label += most;
        *count++ = n;
    }
    char name[SPW_BATCH_NAME_MAX];
    int rc = add_part(b, spec->fields[k].name, &t[0]);
    snprintf(name, sizeof name, "%s_labels", spec->fields[k].name);
    rc = rc ? rc : add_part(b, name, &t[1]);
    snprintf(name, sizeof name, "%s_counts", spec->fields[k].name);
    rc = rc ? rc : add_part(b, name, &t[2]);
    for (int i = 0; i < 3; i++)
        spw_tensor_free(&t[i]);     /* those not handed over on a failure */
    return rc;
}

/* Field k's text or bytes as two parts: "NAME" uint8 [n, longest] zero-padded and "NAME_lengths" int64 [n].
 * Returns 0, -ENOMEM or -ENOSPC. */
static int add_bytes(const struct spw_source_spec *spec, int k, struct spw_fields *const *fields, int n_pos,
                     const bool *ok, struct spw_batch *b)
{
    size_t longest = 0;
    for (int p = 0; p < n_pos; p++)
        if (ok[p] && fields && fields[p] && fields[p]->f[k].len > longest)
            longest = fields[p]->f[k].len;
    struct spw_tensor t[2] = {0};
    const int64_t shape[2] = {b->n, (int64_t)longest};
    if (spw_tensor_alloc(&t[0], SPW_DTYPE_U8, 2, shape) || spw_tensor_alloc(&t[1], SPW_DTYPE_I64, 1, shape)) {
        spw_tensor_free(&t[0]);
        return -ENOMEM;
    }
    uint8_t *row = t[0].data;
    int64_t *len = t[1].data;
    for (int p = 0; p < n_pos; p++) {
        if (!ok[p])
            continue;
        const struct spw_field *f = fields && fields[p] ? &fields[p]->f[k] : NULL;
        const size_t n = f ? f->len : 0;
        if (n)
            memcpy(row, f->data, n);
        memset(row + n, 0, longest - n);
        row += longest;
        *len++ = (int64_t)n;
    }
    char name[SPW_BATCH_NAME_MAX];
    snprintf(name, sizeof name, "%s_lengths", spec->fields[k].name);
    int rc = add_part(b, spec->fields[k].name, &t[0]);
    rc = rc ? rc : add_part(b, name, &t[1]);
    spw_tensor_free(&t[1]);         /* when not handed over */
    return rc;
}

/* Each source.fields entry as its parts (above), from the fields of the ok positions; pad: the images of the
 * batch are padded (their masks too). Returns 0, -ENOMEM, -EINVAL (masks differing in size), SPW_ETOOBIG
 * (masks padded past the cap; messages in err) or -ENOSPC. */
static int add_fields(const struct spw_source_spec *spec, bool pad, struct spw_fields *const *fields, int n_pos,
                      const bool *ok, struct spw_batch *b, char *err, size_t errlen)
{
    int rc = 0;
    for (int k = 0; k < spec->n_fields && rc == 0; k++) {
        switch (spec->fields[k].kind) {
        case SPW_SAMPLE_FIELD_MASK: rc = add_masks(spec, k, pad, fields, n_pos, ok, b, err, errlen); break;
        case SPW_SAMPLE_FIELD_BOXES: rc = add_boxes(spec, k, fields, n_pos, ok, b); break;
        default: rc = add_bytes(spec, k, fields, n_pos, ok, b); break;
        }
    }
    return rc;
}

/* spw_batch_build with the fields taken from the fill; a message in err for the failures that have one. */
static int build(const struct spw_pipeline_spec *spec, const struct spw_source *src, int64_t epoch, int64_t index,
                 int n_pos, const int64_t *samples, const bool *ok, struct spw_batch_fill *f,
                 struct spw_fields *const *fields, struct spw_batch **out, char *err, size_t errlen)
{
    struct spw_batch *b = calloc(1, sizeof *b);
    if (b)
        b->device_type = 1;     /* kDLCPU */
    int n_ok = 0;
    for (int p = 0; p < n_pos; p++)
        n_ok += ok[p];
    if (!b || !(b->keys = calloc((size_t)(n_ok ? n_ok : 1), sizeof *b->keys))) {
        free(b);
        return -ENOMEM;
    }
    b->epoch = epoch;
    b->index = index;
    b->skipped = n_pos - n_ok;
    b->n = n_ok;
    b->n_tensors = 1;
    snprintf(b->names[0], SPW_BATCH_NAME_MAX, "data");
    struct spw_tensor lt;
    int64_t lshape[1] = {n_ok};
    if (!spec->source.no_labels &&
        (spw_tensor_alloc(&lt, SPW_DTYPE_I64, 1, lshape) != 0 || add_part(b, "labels", &lt) != 0)) {
        spw_batch_free(b);
        return -ENOMEM;
    }
    int64_t *labels = spec->source.no_labels ? NULL : b->tensors[1].data;
    int k = 0;
    struct spw_tensor *data = &f->data;
    uint8_t *base = data->data;
    const size_t elem_bytes = f->elem_bytes;
    for (int p = 0; p < n_pos; p++) {
        if (!ok[p])
            continue;
        if (k != p && base)     /* close the gap a skipped sample left */
            memmove(base + elem_bytes * (size_t)k, base + elem_bytes * (size_t)p, elem_bytes);
        const struct spw_sample *sm = &src->samples[samples[p]];
        if (labels)
            labels[k] = sm->label;
        b->keys[k] = (struct spw_sample_key){epoch, src->listed ? src->listed[samples[p]] : samples[p], sm->path};
        k++;
    }
    if (f->rows && n_ok) {
        struct spw_tensor sizes = {0};
        const bool audio = f->pad == SPW_FILL_PAD_LAST;
        int rc = build_padded(f, n_pos, ok, b, &sizes, err, errlen);
        spw_batch_fill_clear(f);
        if (rc == 0)
            rc = add_part(b, audio ? "lengths" : "shapes", &sizes);
        spw_tensor_free(&sizes);
        if (rc) {
            spw_batch_free(b);
            return rc;
        }
    } else if (data->data) {
        b->data_capacity = buffer_size(data->nbytes);
        b->tensors[0] = *data;
        b->tensors[0].shape[0] = n_ok;
        b->tensors[0].nbytes = elem_bytes * (size_t)n_ok;
        memset(data, 0, sizeof *data);
    } else {
        spw_batch_fill_clear(f);
        int64_t eshape[1] = {0};
        spw_tensor_alloc(&b->tensors[0], SPW_DTYPE_U8, 1, eshape);
    }
    const int frc = add_fields(&spec->source, spw_fill_pad_of(spec) == SPW_FILL_PAD_ALL, fields, n_pos, ok, b, err,
                               errlen);
    if (frc) {
        spw_batch_free(b);
        return frc;
    }
    if (spec->n_views) {
        const int rc = split_views(spec, b, err, errlen);
        if (rc) {
            spw_batch_free(b);
            return rc;
        }
    }
    const struct spw_mix_spec *mix = &spec->batch.mix;
    if (mix->num_classes) {
        struct spw_mix_draw d = {0};
        const struct spw_tensor *t = &b->tensors[0];
        if (t->ndim == 4)
            spw_mix_plan(mix, spec->source.seed, epoch, index, (int)t->shape[3], (int)t->shape[2], &d);
        const int rc = spw_batch_mix(mix, &d, &b->tensors[0], &b->tensors[spw_batch_find(b, "labels")]);
        if (rc) {
            spw_batch_free(b);
            return spw_fail(err, errlen, rc, "batch.mix: the elements are not float32 [C, H, W] images");
        }
    }
    *out = b;
    return 0;
}

int spw_batch_build(const struct spw_pipeline_spec *spec, const struct spw_source *src, int64_t epoch, int64_t index,
                    int n_pos, const int64_t *samples, const bool *ok, struct spw_batch_fill *f,
                    struct spw_batch **out, char *err, size_t errlen)
{
    struct spw_fields **fields = f->fields;        /* ours from here: the fill may be cleared while building */
    const int n_fields = f->n_fields;
    f->fields = NULL;
    f->n_fields = 0;
    char why[480] = "";
    const int rc = build(spec, src, epoch, index, n_pos, samples, ok, f, fields, out, why, sizeof why);
    for (int p = 0; p < n_fields; p++)
        spw_fields_free(fields[p]);
    free(fields);
    if (rc && !why[0])
        snprintf(why, sizeof why, "%s", rc == -ENOMEM ? "out of memory building a batch" : spw_strerror(rc));
    if (rc)
        snprintf(err, errlen, "batch %" PRId64 " of epoch %" PRId64 ": %s", index, epoch, why);
    return rc;
}

void spw_batch_free(struct spw_batch *b)
{
    if (!b)
        return;
    for (int i = b->device_block ? 1 : 0; i < b->n_tensors; i++)
        spw_tensor_free(&b->tensors[i]);
    free(b->keys);
    free(b);
}
