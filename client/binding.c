/* client/binding.c - libspillway's accessors: a batch's tensors, keys and place (struct spw_batch is opaque
 * to users), and a flat face for language bindings (Python's ctypes): job options set by name from strings,
 * stats and the op registry as JSON, so a binding never mirrors a C struct layout or keeps a list of ops.
 * Each function maps onto client.h, pipeline/executor.h and pipeline/op_schema.h.
 * Thread model: as client.h (the options object and a batch belong to one thread at a time). */
#include "spillway/client.h"

#include <dlpack/dlpack.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/executor.h"
#include "pipeline/op_schema.h"

struct binding_opts {           /* the options and the strings they point to */
    struct spw_job_opts o;      /* first: a struct spw_job_opts * is a struct binding_opts * */
    char dispatcher[256];
    char auth_token[512];
    char job_name[129];
    char tls_ca[4096], tls_cert[4096], tls_key[4096];
    char gpu_mem_budget[64];
    struct spw_checkpoint *rest;    /* "rest_of_rank": the old ranks' checkpoints (o.rest_of) */
};

struct spw_job_opts *spw_job_opts_new(void)
{
    struct binding_opts *b = calloc(1, sizeof *b);
    if (b)
        spw_job_opts_init(&b->o);
    return b ? &b->o : NULL;
}

void spw_job_opts_cancel_flag(struct spw_job_opts *o, const volatile int *flag)
{
    o->cancel = flag;
}

void spw_job_opts_free(struct spw_job_opts *o)
{
    struct binding_opts *b = (struct binding_opts *)o;
    if (o) {
        free(o->resume.places);
        for (int r = 0; r < o->rest_of.world; r++)
            free(b->rest[r].places);
        free(b->rest);
    }
    free(o);                    /* the binding_opts that starts with it */
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                                                    : -1;
}

/* A checkpoint's places bitmap from hex ("" = none) into *places, *len. */
static int parse_places(const char *v, size_t n, uint8_t **places, size_t *len)
{
    if (n % 2)
        return -EINVAL;
    uint8_t *p = n ? malloc(n / 2) : NULL;
    if (n && !p)
        return -ENOMEM;
    for (size_t i = 0; i < n / 2; i++) {
        const int hi = hex_value(v[2 * i]), lo = hex_value(v[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(p);
            return -EINVAL;
        }
        p[i] = (uint8_t)(hi << 4 | lo);
    }
    *places = p;
    *len = n / 2;
    return 0;
}

static int set_places(struct spw_job_opts *o, const char *v)
{
    uint8_t *p;
    size_t len;
    const int rc = parse_places(v, strlen(v), &p, &len);
    if (rc)
        return rc;
    free(o->resume.places);
    o->resume.places = p;
    o->resume.places_len = len;
    return 0;
}

/* One more old rank's checkpoint for o.rest_of: "BATCHES MANIFEST_HEX SPLIT PLACES_HEX" (PLACES_HEX may be
 * empty), ranks in order. */
static int add_rest_rank(struct binding_opts *b, const char *v)
{
    long long batches;
    unsigned long long manifest;
    int split, at = -1;
    if (sscanf(v, "%lld %llx %d %n", &batches, &manifest, &split, &at) != 3 || at < 0 || batches < 0 ||
        split < 0 || b->o.rest_of.world >= 65536)
        return -EINVAL;
    struct spw_checkpoint *r = realloc(b->rest, (size_t)(b->o.rest_of.world + 1) * sizeof *r);
    if (!r)
        return -ENOMEM;
    b->rest = r;
    r += b->o.rest_of.world;
    *r = (struct spw_checkpoint){.batches = batches, .manifest = manifest, .split_size = split};
    const int rc = parse_places(v + at, strlen(v + at), &r->places, &r->places_len);
    if (rc)
        return rc;
    b->o.rest_of.ranks = b->rest;
    b->o.rest_of.world++;
    return 0;
}

static int parse_hex64(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long h = strtoull(v, &end, 16);
    return !errno && end != v && !*end ? (*out = h, 0) : -EINVAL;
}

static int parse_int64(const char *v, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return -EINVAL;
    *out = x;
    return 0;
}

static int copy_string(char *dst, size_t cap, const char *v, const char **field)
{
    if (strlen(v) >= cap)
        return -EINVAL;
    snprintf(dst, cap, "%s", v);
    *field = *dst ? dst : NULL;
    return 0;
}

int spw_job_opts_set(struct spw_job_opts *o, const char *key, const char *value)
{
    struct binding_opts *b = (struct binding_opts *)o;
    int64_t x = 0;
    if (!o || !key || !value)
        return -EINVAL;
    if (!strcmp(key, "dispatcher"))
        return copy_string(b->dispatcher, sizeof b->dispatcher, value, &o->dispatcher);
    if (!strcmp(key, "auth_token"))
        return copy_string(b->auth_token, sizeof b->auth_token, value, &o->auth_token);
    if (!strcmp(key, "ordered"))
        return !strcmp(value, "1") || !strcmp(value, "0") ? (o->ordered = value[0] == '1', 0) : -EINVAL;
    if (!strcmp(key, "device_batches"))
        return !strcmp(value, "1") || !strcmp(value, "0") ? (o->device_batches = value[0] == '1', 0) : -EINVAL;
    if (!strcmp(key, "keep_job"))
        return !strcmp(value, "1") || !strcmp(value, "0") ? (o->keep_job = value[0] == '1', 0) : -EINVAL;
    if (!strcmp(key, "insecure"))
        return !strcmp(value, "1") || !strcmp(value, "0") ? (o->insecure = value[0] == '1', 0) : -EINVAL;
    if (!strcmp(key, "job_name"))
        return copy_string(b->job_name, sizeof b->job_name, value, &o->job_name);
    if (!strcmp(key, "tls_ca"))
        return copy_string(b->tls_ca, sizeof b->tls_ca, value, &o->tls_ca);
    if (!strcmp(key, "tls_cert"))
        return copy_string(b->tls_cert, sizeof b->tls_cert, value, &o->tls_cert);
    if (!strcmp(key, "tls_key"))
        return copy_string(b->tls_key, sizeof b->tls_key, value, &o->tls_key);
    if (!strcmp(key, "gpu_mem_budget"))
        return copy_string(b->gpu_mem_budget, sizeof b->gpu_mem_budget, value, &o->gpu_mem_budget);
    if (!strcmp(key, "gpu")) {          /* a device index, or -1: none */
        if (parse_int64(value, -1, 1023, &x))
            return -EINVAL;
        o->gpu = x >= 0;
        o->gpu_device = x >= 0 ? (int)x : 0;
        return 0;
    }
    if (!strcmp(key, "resume_manifest"))
        return parse_hex64(value, &o->resume.manifest);
    if (!strcmp(key, "resume_job_secret"))
        return parse_hex64(value, &o->resume.job_secret);
    if (!strcmp(key, "resume_places"))
        return set_places(o, value);
    if (!strcmp(key, "rest_of_rank"))
        return add_rest_rank(b, value);
    if (!strcmp(key, "compress"))
        return spw_job_compress_parse(value, &o->compress);
    if (!strcmp(key, "cut") && !strcmp(value, "default"))
        return o->cut = SPW_CUT_DEFAULT, 0;
    if (!strcmp(key, "cut"))
        return spw_job_cut_parse(!strcmp(value, "-1") ? "all" : value, &o->cut);
    if (!strcmp(key, "trainer_rate")) {
        char *end;
        double r = strtod(value, &end);
        return end != value && !*end && r >= 0 ? (o->trainer_rate = r, 0) : -EINVAL;
    }
    /* Integer options: where each lives in struct spw_job_opts, its width and its range. */
#define INT_OPT(name, field, lo, hi) {name, lo, hi, offsetof(struct spw_job_opts, field), sizeof o->field}
    static const struct {
        const char *key;
        int64_t lo, hi;
        size_t offset, size;
    } ints[] = {INT_OPT("local_cores", local_cores, -1, 256), INT_OPT("max_workers", max_workers, 0, INT_MAX),
                INT_OPT("prefetch_bytes", prefetch_bytes, 0, INT64_MAX),
                INT_OPT("credit_bytes", credit_bytes, 0, INT64_MAX), INT_OPT("max_batches", max_batches, 0, INT64_MAX),
                INT_OPT("split_size", split_size, 0, INT_MAX), INT_OPT("rescue_after_ms", rescue_after_ms, 0, INT_MAX),
                INT_OPT("rank", rank, 0, 65535), INT_OPT("world_size", world_size, 0, 65536),
                INT_OPT("resume_batches", resume.batches, 0, INT64_MAX),
                INT_OPT("resume_job", resume.job, 0, INT64_MAX),
                INT_OPT("resume_split_size", resume.split_size, 0, INT_MAX),
                INT_OPT("dispatcher_wait_ms", dispatcher_wait_ms, 0, INT_MAX)};
#undef INT_OPT
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(key, ints[i].key) != 0)
            continue;
        if (parse_int64(value, ints[i].lo, ints[i].hi, &x))
            return -EINVAL;
        char *field = (char *)o + ints[i].offset;
        if (ints[i].size == sizeof(int)) {
            int v = (int)x;
            memcpy(field, &v, sizeof v);
        } else {
            memcpy(field, &x, sizeof x);        /* int64_t and uint64_t fields */
        }
        return 0;
    }
    return -ENOENT;
}

int spw_batch_elements(const struct spw_batch *b)
{
    return b ? b->n : 0;
}

int spw_batch_skipped(const struct spw_batch *b)
{
    return b ? b->skipped : 0;
}

int spw_batch_tensor_count(const struct spw_batch *b)
{
    return b ? b->n_tensors : 0;
}

int spw_batch_view_count(const struct spw_batch *b)
{
    return b ? b->n_views : 0;
}

int spw_batch_tensor_at(const struct spw_batch *b, int i, int *dtype, int *ndim, int64_t *shape, void **data,
                        size_t *nbytes)
{
    if (!b || i < 0 || i >= b->n_tensors)
        return -EINVAL;
    const struct spw_tensor *t = &b->tensors[i];
    *dtype = (int)t->dtype;
    *ndim = t->ndim;
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    *data = t->data;
    *nbytes = t->nbytes;
    return 0;
}

const char *spw_batch_tensor_name(const struct spw_batch *b, int i)
{
    return b && i >= 0 && i < b->n_tensors ? b->names[i] : NULL;
}

int spw_batch_tensor_index(const struct spw_batch *b, const char *name)
{
    const int i = b && name ? spw_batch_find(b, name) : -1;
    return i >= 0 ? i : -ENOENT;
}

int spw_batch_device(const struct spw_batch *b, int i, int *type, int *id)
{
    if (!b || i < 0 || i >= b->n_tensors)
        return -EINVAL;
    *type = i == 0 ? b->device_type : kDLCPU;
    *id = i == 0 && b->device_type != kDLCPU ? b->device_id : 0;
    return 0;
}

/* A DLManagedTensor with room for its shape, and who to tell when its consumer is done with it. */
struct managed {
    DLManagedTensor t;
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    void (*on_free)(void *ctx);
    void *ctx;
};

static void managed_delete(DLManagedTensor *t)
{
    struct managed *m = t->manager_ctx;
    if (m->on_free)
        m->on_free(m->ctx);
    free(m);
}

struct DLManagedTensor *spw_batch_dlpack(const struct spw_batch *b, int i, void (*on_free)(void *ctx), void *ctx)
{
    int type, id;
    if (spw_batch_device(b, i, &type, &id) != 0)
        return NULL;
    const struct spw_tensor *t = &b->tensors[i];
    static const DLDataType dl[] = {[SPW_DTYPE_U8] = {kDLUInt, 8, 1}, [SPW_DTYPE_F32] = {kDLFloat, 32, 1},
                                    [SPW_DTYPE_F16] = {kDLFloat, 16, 1}, [SPW_DTYPE_I64] = {kDLInt, 64, 1}};
    struct managed *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    m->t.dl_tensor = (DLTensor){.data = t->data, .device = {(DLDeviceType)type, id}, .ndim = t->ndim,
                                .dtype = dl[t->dtype], .shape = m->shape, .strides = NULL, .byte_offset = 0};
    m->t.manager_ctx = m;
    m->t.deleter = managed_delete;
    m->on_free = on_free;
    m->ctx = ctx;
    return &m->t;
}

int spw_batch_key_at(const struct spw_batch *b, int i, int64_t *epoch, int64_t *sample, const char **path)
{
    if (!b || i < 0 || i >= b->n)
        return -EINVAL;
    *epoch = b->keys[i].epoch;
    *sample = b->keys[i].sample;
    *path = b->keys[i].path;
    return 0;
}

char *spw_job_checkpoint_flat(struct spw_job *job, int64_t *batches, uint64_t *manifest, uint64_t *job_id,
                              uint64_t *job_secret, int *split_size)
{
    struct spw_checkpoint c;
    if (spw_job_checkpoint(job, &c) != 0)
        return NULL;
    char *hex = malloc(2 * c.places_len + 1);
    if (hex) {
        for (size_t i = 0; i < c.places_len; i++)
            snprintf(hex + 2 * i, 3, "%02x", c.places[i]);
        hex[2 * c.places_len] = 0;
        *batches = c.batches;
        *manifest = c.manifest;
        *job_id = c.job;
        *job_secret = c.job_secret;
        *split_size = c.split_size;
    }
    spw_checkpoint_clear(&c);
    return hex;
}

void spw_free(void *p)
{
    free(p);
}

char *spw_op_schema(void)
{
    return spw_op_schema_json();
}

int spw_batch_position(const struct spw_batch *b, int64_t *epoch, int64_t *index)
{
    if (!b)
        return -EINVAL;
    *epoch = b->epoch;
    *index = b->index;
    return 0;
}

/* s as the inside of a JSON string into out (n bytes, cut short to fit). */
static void json_escape(const char *s, char *out, size_t n)
{
    size_t w = 0;
    for (const char *c = s; *c && w + 7 < n; c++) {
        if (*c == '"' || *c == '\\')
            out[w++] = '\\';
        if ((unsigned char)*c < 0x20) {
            w += (size_t)snprintf(out + w, n - w, "\\u%04x", (unsigned char)*c);
            continue;
        }
        out[w++] = *c;
    }
    out[w] = 0;
}

/* Append to buf (cap bytes) at *at as snprintf would; *at counts what it needs, also past cap. */
static void append(char *buf, size_t cap, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t cap, size_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(*at < cap ? buf + *at : NULL, *at < cap ? cap - *at : 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        *at += (size_t)n;
}

/* JSON text of spw_job_stats, spw_job_times and spw_job_op_time into buf (cap bytes); returns the length it
 * needs (as snprintf). */
int spw_job_stats_json(struct spw_job *job, char *buf, size_t cap)
{
    struct spw_job_stats st;
    spw_job_stats(job, &st);
    char why[2 * sizeof st.plan_why];      /* JSON-escaped */
    json_escape(st.plan_why, why, sizeof why);
    size_t at = 0;
    append(buf, cap, &at,
                    "{\"job\": %llu, \"cut\": %d, \"groups\": %d, \"samples\": %lld, \"manifest_hash\": \"%016llx\", "
                    "\"elements\": %lld, \"batches\": %lld, \"skipped\": %lld, \"remote_elements\": %lld, "
                    "\"local_elements\": %lld, \"rescued_elements\": %lld, \"duplicates_dropped\": %lld, "
                    "\"bytes_received\": %lld, \"compress_level\": %d, \"workers\": %d, \"planned\": %s, \"offloaded\": %s, "
                    "\"predicted\": %.6g, \"plan_why\": \"%s\", \"gpu_elements\": %lld, \"device_batches\": %lld, "
                    "\"gpu_arena_bytes\": %lld, \"gpu_arena_used\": %lld, \"gpu_arena_peak\": %lld",
                    (unsigned long long)st.job, st.cut, st.groups, (long long)st.samples,
                    (unsigned long long)st.manifest_hash, (long long)st.elements, (long long)st.batches,
                    (long long)st.skipped, (long long)st.remote_elements, (long long)st.local_elements,
                    (long long)st.rescued_elements, (long long)st.duplicates_dropped, (long long)st.bytes_received,
                    st.compress_level, st.workers, st.planned ? "true" : "false", st.offloaded ? "true" : "false", st.predicted, why,
                    (long long)st.gpu_elements, (long long)st.device_batches, (long long)st.gpu_arena_bytes,
                    (long long)st.gpu_arena_used, (long long)st.gpu_arena_peak);
    struct spw_job_times t;
    spw_job_times(job, &t);
    append(buf, cap, &at, ", \"elapsed_s\": %.6g, \"wait_s\": %.6g, \"wait_fraction\": %.6g, \"starved_s\": %.6g, "
           "\"ops\": [", t.elapsed_s, t.wait_s, t.elapsed_s > 0 ? t.wait_s / t.elapsed_s : 0.0, t.starved_s);
    struct spw_op_time op;
    for (int i = 0; spw_job_op_time(job, i, &op) == 0; i++) {
        char name[2 * sizeof op.name];
        json_escape(op.name, name, sizeof name);
        append(buf, cap, &at, "%s{\"op\": \"%s\", \"elements\": %lld, \"seconds\": %.6g, \"us_per_element\": %.6g}",
               i ? ", " : "", name, (long long)op.elements, (double)op.ns_total / 1e9,
               op.elements > 0 ? (double)op.ns_total / 1e3 / (double)op.elements : 0.0);
    }
    append(buf, cap, &at, "]}");
    return (int)at;
}
