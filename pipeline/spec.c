/* pipeline/spec.c - parse, validate and serialize the pipeline spec (JSON through jansson). One table per
 * op drives parsing, defaults, validation and canonical output, so they cannot drift apart.
 * Not the executor: nothing here touches images; proto conversion lives in pipeline/spec_proto.c.
 * Pure functions on caller-owned buffers; safe from any thread; a parsed spec is immutable. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* strdup, strnlen, mkstemp: POSIX, not C11 */
#endif
#include "pipeline/spec.h"

#include "lib/err.h"
#include "pipeline/channels.h"
#include "pipeline/op_registry.h"
#include "pipeline/plugin_ops.h"
#include "pipeline/tar_index.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_EDGE 65535          /* JPEG's own limit on a side; larger outputs cannot come from a decode */
#define MAX_PATH_BYTES 4096     /* PATH_MAX */
#define MAX_LABEL_KEY_BYTES 256
#define MAX_BATCH 65536
#define MAX_FUNCTION_BYTES 512
#define INF HUGE_VAL
#define DEFAULT_MAX_PIXELS 89478485LL           /* PIL's Image.MAX_IMAGE_PIXELS */
#define DEFAULT_MAX_FILE_BYTES (64LL << 20)
#define DEFAULT_MAX_SAMPLES (1LL << 26)         /* decoded audio samples: 70 min at 16 kHz, 256 MiB */
/* Message locations: an op's ("ops[255].ops[15].ops[15].ops[15]"), then one of its fields, then an element. */
#define SPW_WHERE_BYTES 64
#define SPW_LOC_BYTES 128

/* ---- names ---------------------------------------------------------------------------------------- */

static const char *const layout_names[] = {"HWC", "CHW", NULL};
static const char *const format_names[] = {"image_folder", "tar_shards", "wav_folder", "audio_folder", "coco", NULL};
static const char *const on_error_names[] = {"skip", "fail", NULL};

#define NAMES_COUNT(a) (sizeof(a) / sizeof((a)[0]) - 1)

static const char *name_at(const char *const *names, size_t n, int v)
{
    return v >= 0 && (size_t)v < n ? names[v] : NULL;
}

#define NAME_AT(names, v) name_at(names, NAMES_COUNT(names), (int)(v))
const char *spw_layout_name(enum spw_layout v) { return NAME_AT(layout_names, v); }
const char *spw_source_format_name(enum spw_source_format v) { return NAME_AT(format_names, v); }
const char *spw_on_error_name(enum spw_on_error v) { return NAME_AT(on_error_names, v); }

/* ---- ops' defaults ------------------------------------------------------------------------------- */

/* The op's defaults from its row; every field it does not have stays zero, so that a spec has one
 * representation (parse(to_json(x)) == x field for field). */
static void op_defaults(struct spw_op_spec *op, enum spw_op_kind kind)
{
    *op = spw_op_def(kind)->defaults;
    op->kind = kind;
}

/* ---- error reporting ------------------------------------------------------------------------------ */

struct vctx {
    char *err;
    size_t errlen;
    int depth;          /* of the op being parsed, less one: 0 for the spec's own ops, 1 for a combinator's */
    int total;          /* ops parsed so far, a combinator's included (at most SPW_SPEC_MAX_OPS) */
    int view;           /* parsing views[view]'s ops after the prefix's prefix_n ops; -1: the spec's ops */
    int prefix_n;
};

/* Where ops[i] of the list being parsed stands, as its writer wrote it: "ops[2]", or in a view (whose list is
 * the prefix's ops, then its own) "views[1].ops[0]". */
static const char *op_where(const struct vctx *c, int i, char *buf, size_t n)
{
    if (c->view >= 0 && i >= c->prefix_n)
        snprintf(buf, n, "views[%d].ops[%d]", c->view, i - c->prefix_n);
    else
        snprintf(buf, n, "ops[%d]", i);
    return buf;
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int fail(struct vctx *c, const char *loc, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        size_t n = 0;
        if (loc && *loc) {
            int k = snprintf(c->err, c->errlen, "%s: ", loc);
            n = k < 0 ? 0 : (size_t)k < c->errlen ? (size_t)k : c->errlen - 1;
        }
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + n, c->errlen - n, fmt, ap);
        va_end(ap);
    }
    return SPW_ESPEC;
}

static int fail_oom(struct vctx *c)
{
    if (c->err && c->errlen)
        snprintf(c->err, c->errlen, "out of memory");
    return -ENOMEM;
}

/* Shortest "%.*g" that reads back as the same double, so messages and output show what was written;
 * whole numbers below 2^53 in plain digits (300, not 3e+02). */
static void fmt_num(char *buf, size_t len, double v)
{
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        snprintf(buf, len, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* A user string for a message: quoted, at most 64 bytes, control characters and quotes replaced. */
static void fmt_str(char *buf, size_t len, const char *s)
{
    size_t o = 0, i = 0;
    if (len < 8)
        return;
    buf[o++] = '"';
    for (; s[i] && o + 5 < len && i < 64; i++) {
        unsigned char ch = (unsigned char)s[i];
        buf[o++] = (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\') ? '?' : (char)ch;
    }
    if (s[i]) {
        while (o > 1 && ((unsigned char)buf[o - 1] & 0xc0) == 0x80) /* do not cut a UTF-8 sequence */
            o--;
        if (o > 1 && ((unsigned char)buf[o - 1] & 0xc0) == 0xc0)
            o--;
        buf[o++] = '.', buf[o++] = '.', buf[o++] = '.';
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "unknown";
}

static int fail_type(struct vctx *c, const char *loc, const char *expected, const json_t *v)
{
    return fail(c, loc, "expected %s, got %s", expected, type_name(v));
}

/* ---- typed getters -------------------------------------------------------------------------------- */

static int check_num(struct vctx *c, const char *loc, double v, double lo, double hi, unsigned flags)
{
    char a[32], l[32], h[32];
    bool lo_open = flags & SPW_F_LO_OPEN;
    bool ok = (lo_open ? v > lo : v >= lo) && v <= hi;
    if (ok)
        return 0;
    fmt_num(a, sizeof(a), v), fmt_num(l, sizeof(l), lo), fmt_num(h, sizeof(h), hi);
    if (hi == INF)
        return fail(c, loc, "%s must be %s %s", a, lo_open ? ">" : ">=", l);
    return fail(c, loc, "%s is outside %s%s, %s]", a, lo_open ? "(" : "[", l, h);
}

static int get_num(struct vctx *c, const char *loc, const json_t *v, double lo, double hi, unsigned flags,
                   double *out)
{
    if (!json_is_number(v))
        return fail_type(c, loc, "a number", v);
    double d = json_number_value(v);
    int rc = check_num(c, loc, d, lo, hi, flags);
    if (rc == 0)
        *out = d;
    return rc;
}

static int get_int(struct vctx *c, const char *loc, const json_t *v, long long lo, long long hi,
                   long long *out)
{
    if (!json_is_integer(v))
        return fail_type(c, loc, "an integer", v);
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        if (hi == LLONG_MAX)
            return fail(c, loc, "%lld must be >= %lld", x, lo);
        return fail(c, loc, "%lld is outside [%lld, %lld]", x, lo, hi);
    }
    *out = x;
    return 0;
}

static int get_bool(struct vctx *c, const char *loc, const json_t *v, bool *out)
{
    if (!json_is_boolean(v))
        return fail_type(c, loc, "a boolean", v);
    *out = json_is_true(v);
    return 0;
}

/* names[] is indexed by enum value; NULL entries are values a spec may not name. */
/* null, or an array's shape: 1 to SPW_TENSOR_MAX_DIMS dimensions, each in [1, 2^31), at most 2^30 elements
 * in all (a python op's output_shape). */
static int get_shape(struct vctx *c, const char *loc, const json_t *v, struct spw_op_spec *op)
{
    op->out_ndim = 0;
    long long numel = 1;
    if (json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > SPW_TENSOR_MAX_DIMS)
        return fail(c, loc, "must be null or a list of 1 to %d dimensions", SPW_TENSOR_MAX_DIMS);
    for (size_t i = 0; i < json_array_size(v); i++) {
        long long d;
        char at[128];
        snprintf(at, sizeof at, "%.96s[%d]", loc, (int)i);
        if (get_int(c, at, json_array_get(v, i), 1, INT32_MAX, &d) != 0)
            return SPW_ESPEC;
        op->out_shape[i] = d;
        numel = numel * d;
        if (numel > (1LL << 30))
            return fail(c, loc, "more than 2^30 elements: no element may be that big");
    }
    op->out_ndim = (int)json_array_size(v);
    return 0;
}

static int get_enum(struct vctx *c, const char *loc, const json_t *v, const char *const *names, size_t n,
                    int *out)
{
    if (!json_is_string(v))
        return fail_type(c, loc, "a string", v);
    const char *s = json_string_value(v);
    for (size_t i = 0; i < n; i++) {
        if (names[i] && strcmp(names[i], s) == 0) {
            *out = (int)i;
            return 0;
        }
    }
    char q[80], list[160] = "";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (names[i])
            o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", names[i]);
        if (o >= sizeof(list))
            break;
    }
    fmt_str(q, sizeof(q), s);
    return fail(c, loc, "%s is not one of %s", q, list);
}

static void elem_loc(char *buf, size_t len, const char *loc, size_t i)
{
    if (snprintf(buf, len, "%s[%zu]", loc, i) >= (int)len)     /* cut short: locations are far shorter */
        buf[len - 1] = '\0';
}

/* An array of exactly n numbers, each in lo/hi. */
static int get_numbers(struct vctx *c, const char *loc, const json_t *v, size_t n, double lo, double hi,
                       unsigned flags, const char *what, double *out)
{
    char el[SPW_LOC_BYTES];
    double tmp[3];
    if (!json_is_array(v))
        return fail_type(c, loc, what, v);
    if (json_array_size(v) != n)
        return fail(c, loc, "expected %zu numbers, got %zu", n, json_array_size(v));
    for (size_t i = 0; i < n; i++) {
        elem_loc(el, sizeof(el), loc, i);
        int rc = get_num(c, el, json_array_get(v, i), lo, hi, flags, &tmp[i]);
        if (rc)
            return rc;
    }
    memcpy(out, tmp, n * sizeof(double));
    return 0;
}

/* number | [v] | [n numbers] -> out[n] (one value: every entry), each in lo/hi (flags: get_num's). */
static int get_broadcast(struct vctx *c, const char *loc, const json_t *v, size_t n, double lo, double hi,
                         unsigned flags, double *out)
{
    if (json_is_number(v) || (json_is_array(v) && json_array_size(v) == 1)) {
        char el[SPW_LOC_BYTES];
        const json_t *x = v;
        double one;
        if (json_is_array(v)) {
            elem_loc(el, sizeof(el), loc, 0);
            x = json_array_get(v, 0);
            loc = el;
        }
        const int rc = get_num(c, loc, x, lo, hi, flags, &one);
        for (size_t i = 0; rc == 0 && i < n; i++)
            out[i] = one;
        return rc;
    }
    if (json_is_array(v) && json_array_size(v) != n)
        return fail(c, loc, "expected 1 or %zu numbers, got %zu", n, json_array_size(v));
    char what[48];
    snprintf(what, sizeof what, "a number or an array of %zu numbers", n);
    return get_numbers(c, loc, v, n, lo, hi, flags, what, out);
}

static int get_size(struct vctx *c, const char *loc, const json_t *v, struct spw_op_spec *op)
{
    long long h, w = 0;
    int rc;
    char el[SPW_LOC_BYTES];
    if (json_is_integer(v))
        rc = get_int(c, loc, v, 1, MAX_EDGE, &h);
    else if (!json_is_array(v))
        return fail_type(c, loc, "an integer or [height, width]", v);
    else if (json_array_size(v) < 1 || json_array_size(v) > 2)
        return fail(c, loc, "expected 1 or 2 integers, got %zu", json_array_size(v));
    else {
        elem_loc(el, sizeof(el), loc, 0);
        rc = get_int(c, el, json_array_get(v, 0), 1, MAX_EDGE, &h);
        if (rc == 0 && json_array_size(v) == 2) {
            elem_loc(el, sizeof(el), loc, 1);
            rc = get_int(c, el, json_array_get(v, 1), 1, MAX_EDGE, &w);
        }
    }
    if (rc == 0)
        op->size_h = (int)h, op->size_w = (int)w;
    return rc;
}

/* torchvision ColorJitter._check_input: a number v gives [center - v, center + v] (clipped at 0 except
 * for hue), a pair must satisfy bound[0] <= min <= max <= bound[1], and [center, center] turns the
 * factor off - stored as (0, 0). Brightness/contrast/saturation [0, 0] is valid in torchvision (factor 0
 * every time) but collides with that "off" encoding, so it is refused with the equivalent op named. */
static int get_jitter(struct vctx *c, const char *loc, const json_t *v, const struct spw_op_field *f, double *out)
{
    const bool hue = f->flags & SPW_F_HUE;
    const double center = hue ? 0.0 : 1.0;
    double r[2];
    int rc;
    char a[32], b[32], l[32], h[32];
    if (json_is_number(v)) {
        double x = json_number_value(v);
        /* torchvision checks only x >= 0 here and fails later in adjust_hue for x > 0.5 */
        if ((rc = check_num(c, loc, x, 0, hue ? f->hi : INF, 0)))
            return rc;
        r[0] = center - x, r[1] = center + x;
        if (!hue && r[0] < 0)
            r[0] = 0;
    } else if (json_is_array(v) && json_array_size(v) == 2) {
        char el[SPW_LOC_BYTES];
        for (size_t i = 0; i < 2; i++) {
            elem_loc(el, sizeof(el), loc, i);
            if ((rc = get_num(c, el, json_array_get(v, i), -INF, INF, 0, &r[i])))
                return rc;
        }
        if (!(f->lo <= r[0] && r[0] <= r[1] && r[1] <= f->hi)) {
            fmt_num(a, sizeof(a), r[0]), fmt_num(b, sizeof(b), r[1]);
            fmt_num(l, sizeof(l), f->lo), fmt_num(h, sizeof(h), f->hi);
            if (f->hi == INF)
                return fail(c, loc, "[%s, %s] must satisfy %s <= min <= max", a, b, l);
            return fail(c, loc, "[%s, %s] must satisfy %s <= min <= max <= %s", a, b, l, h);
        }
        if (!hue && r[0] == 0 && r[1] == 0)
            return fail(c, loc, "[0, 0] is not supported; use adjust_%s with factor 0", f->name);
    } else if (json_is_array(v)) {
        return fail(c, loc, "expected 2 numbers, got %zu", json_array_size(v));
    } else {
        return fail_type(c, loc, "a number or [min, max]", v);
    }
    if (r[0] == center && r[1] == center)
        r[0] = r[1] = 0; /* off */
    out[0] = r[0], out[1] = r[1];
    return 0;
}

static int get_range(struct vctx *c, const char *loc, const json_t *v, const struct spw_op_field *f, double *out)
{
    double r[2];
    int rc = get_numbers(c, loc, v, 2, f->lo, f->hi, f->flags, "[min, max]", r);
    if (rc)
        return rc;
    if (r[0] > r[1]) {
        char a[32], b[32];
        fmt_num(a, sizeof(a), r[0]), fmt_num(b, sizeof(b), r[1]);
        return fail(c, loc, "[%s, %s] must be [min, max] with min <= max", a, b);
    }
    out[0] = r[0], out[1] = r[1];
    return 0;
}

/* An integer, or a list of them whose length is in `lengths` (a bit per length, below 32), each in the field's
 * lo/hi; `odd` refuses an even one. Into out (room for the longest length allowed), *n of them (1 for the bare
 * integer). */
static int get_int_list(struct vctx *c, const char *loc, const json_t *v, const struct spw_op_field *f,
                        unsigned lengths, bool odd, const char *what, long long *out, size_t *n)
{
    char el[SPW_LOC_BYTES];
    *n = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_integer(v) && !(json_is_array(v) && *n < 32 && (lengths >> *n & 1u)))
        return fail_type(c, loc, what, v);
    for (size_t i = 0; i < *n; i++) {
        const char *at = loc;
        if (json_is_array(v))
            elem_loc(el, sizeof(el), loc, i), at = el;
        const int rc = get_int(c, at, json_is_array(v) ? json_array_get(v, i) : v, (long long)f->lo,
                               (long long)f->hi, &out[i]);
        if (rc)
            return rc;
        if (odd && out[i] % 2 == 0)
            return fail(c, at, "%lld is even: a kernel size is odd", out[i]);
    }
    return 0;
}

/* gaussian_blur's kernel_size: k or [kx, ky], each odd in [1, hi] (F.gaussian_blur's checks). */
static int get_ksize(struct vctx *c, const char *loc, const json_t *v, const struct spw_op_field *f, int *out)
{
    long long k[4];
    size_t n;
    const int rc = get_int_list(c, loc, v, f, 1u << 1 | 1u << 2, true, "an odd integer or [kx, ky]", k, &n);
    if (rc == 0)
        out[0] = (int)k[0], out[1] = (int)k[n - 1];
    return rc;
}

/* random_shortest_size's min_size: s or [s, ...], 1 to 16 sizes, each in lo/hi. */
static int get_sizes(struct vctx *c, const char *loc, const json_t *v, const struct spw_op_field *f,
                     struct spw_op_spec *op)
{
    long long s[16];
    size_t n;
    const unsigned lengths = ((1u << 17) - 1) & ~1u;        /* 1 to 16 */
    const int rc = get_int_list(c, loc, v, f, lengths, false, "an integer or a list of 1 to 16 integers", s, &n);
    for (size_t i = 0; rc == 0 && i < n; i++)
        op->min_size[i] = (int)s[i];
    op->n_min_size = rc == 0 ? (int)n : 0;
    return rc;
}

/* Pad's and RandomCrop's padding: p on all sides, [lr, tb] or [left, top, right, bottom], each in lo/hi. */
static int get_padding(struct vctx *c, const char *loc, const json_t *v, const struct spw_op_field *f, int *out)
{
    long long p[4];
    size_t n;
    const int rc = get_int_list(c, loc, v, f, 1u << 1 | 1u << 2 | 1u << 4, false,
                                "an integer, [left/right, top/bottom] or [left, top, right, bottom]", p, &n);
    for (int i = 0; rc == 0 && i < 4; i++)     /* torchvision: one for all, [lr, tb], or each side */
        out[i] = (int)(n == 4 ? p[i] : n == 2 ? p[i % 2] : p[0]);
    return rc;
}

/* gaussian_blur's sigma: s (fixed) or [min, max], each > 0 (GaussianBlur's checks). */
static int get_sigma(struct vctx *c, const char *loc, const json_t *v, const struct spw_op_field *f, double *out)
{
    if (json_is_number(v)) {
        const int rc = get_num(c, loc, v, f->lo, f->hi, f->flags, &out[0]);
        out[1] = out[0];
        return rc;
    }
    return get_range(c, loc, v, f, out);
}

static int get_shear(struct vctx *c, const char *loc, const json_t *v, double *out)
{
    double s;
    int rc;
    if (json_is_number(v)) {
        if ((rc = get_num(c, loc, v, -INF, INF, 0, &s)))
            return rc;
        out[0] = s, out[1] = 0.0;
        return 0;
    }
    if (json_is_array(v) && json_array_size(v) == 1) {
        char el[SPW_LOC_BYTES];
        elem_loc(el, sizeof(el), loc, 0);
        if ((rc = get_num(c, el, json_array_get(v, 0), -INF, INF, 0, &s)))
            return rc;
        out[0] = out[1] = s;
        return 0;
    }
    if (json_is_array(v) && json_array_size(v) != 2)
        return fail(c, loc, "expected 1 or 2 numbers, got %zu", json_array_size(v));
    return get_numbers(c, loc, v, 2, -INF, INF, 0, "a number or [x, y]", out);
}

static int get_erase_value(struct vctx *c, const char *loc, const json_t *v, struct spw_op_spec *op)
{
    if (json_is_string(v)) {
        if (strcmp(json_string_value(v), "random") != 0) {
            char q[80];
            fmt_str(q, sizeof(q), json_string_value(v));
            return fail(c, loc, "%s is not one of random", q);
        }
        op->erase_random_value = true;
        op->erase_value[0] = op->erase_value[1] = op->erase_value[2] = 0;
        return 0;
    }
    if (!json_is_number(v) && !json_is_array(v))
        return fail_type(c, loc, "a number, an array of 3 numbers or \"random\"", v);
    op->erase_random_value = false;
    return get_broadcast(c, loc, v, 3, -INF, INF, 0, op->erase_value);
}

/* A dotted run of Python identifiers ("pkg.mod", "Outer.method"): the characters before *end. */
static bool dotted_identifiers(const char *s, const char *end)
{
    bool start = true;
    for (; s < end; s++) {
        const bool letter = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_';
        if (*s == '.' && !start)
            start = true;
        else if (letter || (!start && *s >= '0' && *s <= '9'))
            start = false;
        else
            return false;
    }
    return !start;
}

/* "package.module:qualname" of an importable module-level function. Lambdas ("<lambda>"), closures
 * ("<locals>") and __main__ cannot be imported where the op runs: refused with what to do instead. */
static int get_function(struct vctx *c, const char *loc, const json_t *v, char **out)
{
    if (!json_is_string(v))
        return fail_type(c, loc, "a string \"package.module:function\"", v);
    const char *s = json_string_value(v), *colon = strchr(s, ':');
    char q[160];
    fmt_str(q, sizeof q, s);
    if (json_string_length(v) > MAX_FUNCTION_BYTES)
        return fail(c, loc, "%zu bytes, more than the cap of %d", json_string_length(v), MAX_FUNCTION_BYTES);
    if (strstr(s, "<lambda>") || strstr(s, "<locals>"))
        return fail(c, loc, "%s is a lambda or a nested function, which workers cannot import: define it at "
                    "module level in a module on their Python path", q);
    if (!strncmp(s, "__main__:", 9))
        return fail(c, loc, "%s is defined in the script being run (__main__), which workers cannot import: move "
                    "it into a module on their Python path", q);
    if (!colon || !dotted_identifiers(s, colon) || !dotted_identifiers(colon + 1, colon + strlen(colon)))
        return fail(c, loc, "%s is not \"package.module:function\"", q);
    free(*out);
    if (!(*out = strdup(s)))
        return fail_oom(c);
    return 0;
}

/* Keyword arguments: a JSON object, kept as its canonical text (sorted keys, compact). */
static int get_kwargs(struct vctx *c, const char *loc, const json_t *v, char **out)
{
    if (!json_is_object(v))
        return fail_type(c, loc, "an object", v);
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text)
        return fail_oom(c);
    if (strlen(text) > SPW_OP_MAX_KWARGS_BYTES) {
        const size_t n = strlen(text);
        free(text);
        return fail(c, loc, "%zu bytes as JSON, more than the cap of %d", n, SPW_OP_MAX_KWARGS_BYTES);
    }
    free(*out);
    *out = text;
    return 0;
}

static int parse_children(struct vctx *c, const char *loc, const json_t *v, struct spw_op_spec *op);
static int get_weights(struct vctx *c, const char *loc, const json_t *v, struct spw_op_spec *op);

static int parse_field(struct vctx *c, const char *loc, const json_t *v, const struct spw_op_field *f,
                       struct spw_op_spec *op)
{
    char *base = (char *)op + f->off;
    long long i;
    int e = 0, rc = 0;
    switch (f->kind) {
    case SPW_FK_SIZE:
        return get_size(c, loc, v, op);
    case SPW_FK_MAX_SIZE:
        if (json_is_null(v)) {
            op->max_size = 0;
            return 0;
        }
        if ((rc = get_int(c, loc, v, (long long)f->lo, (long long)f->hi, &i)) == 0)
            op->max_size = (int)i;
        return rc;
    case SPW_FK_INT:
        if ((rc = get_int(c, loc, v, (long long)f->lo, (long long)f->hi, &i)) == 0)
            *(int *)(void *)base = (int)i;
        return rc;
    case SPW_FK_MAGNITUDE:
        if ((rc = get_int(c, loc, v, 0, op->num_magnitude_bins - 1, &i)) == 0)
            op->magnitude = (int)i;
        return rc;
    case SPW_FK_NUM:
        return get_num(c, loc, v, f->lo, f->hi, f->flags, (double *)(void *)base);
    case SPW_FK_BOOL:
        return get_bool(c, loc, v, (bool *)(void *)base);
    case SPW_FK_INTERP:
        if ((rc = get_enum(c, loc, v, spw_interp_names, spw_interp_names_n, &e)) == 0)
            op->interpolation = (enum spw_interp)e;
        return rc;
    case SPW_FK_DTYPE:
        if ((rc = get_enum(c, loc, v, spw_op_dtype_names, spw_op_dtype_names_n, &e)) == 0)
            op->dtype = (enum spw_dtype)e;
        return rc;
    case SPW_FK_POLICY:
        if ((rc = get_enum(c, loc, v, spw_aa_policy_names, spw_aa_policy_names_n, &e)) == 0)
            op->policy = (enum spw_aa_policy)e;
        return rc;
    case SPW_FK_RANGE:
        return get_range(c, loc, v, f, (double *)(void *)base);
    case SPW_FK_PAIR:
        return get_numbers(c, loc, v, 2, f->lo, f->hi, f->flags, "[x, y]", (double *)(void *)base);
    case SPW_FK_SHEAR:
        return get_shear(c, loc, v, op->shear);
    case SPW_FK_FILL:
        return get_broadcast(c, loc, v, 3, f->lo, f->hi, 0, op->fill);
    case SPW_FK_OPT_FILL:
        op->has_fill = !json_is_null(v);
        if (!op->has_fill) {
            op->fill[0] = op->fill[1] = op->fill[2] = 0;
            return 0;
        }
        return get_broadcast(c, loc, v, 3, f->lo, f->hi, 0, op->fill);
    case SPW_FK_JITTER:
        return get_jitter(c, loc, v, f, (double *)(void *)base);
    case SPW_FK_ERASE_VALUE:
        return get_erase_value(c, loc, v, op);
    case SPW_FK_TRIPLE:         /* a number or [v]: every channel (torch broadcasts it) */
        return get_broadcast(c, loc, v, 3, f->lo, f->hi, f->flags, (double *)(void *)base);
    case SPW_FK_OPT_NUM:
        if (json_is_null(v)) {
            *(double *)(void *)base = 0;
            return 0;
        }
        return get_num(c, loc, v, f->lo, f->hi, f->flags, (double *)(void *)base);
    case SPW_FK_WINDOW:
        return get_enum(c, loc, v, spw_window_names, spw_window_names_n, &e);
    case SPW_FK_MEL_SCALE:
        if ((rc = get_enum(c, loc, v, spw_mel_scale_names, spw_mel_scale_names_n, &e)) == 0)
            op->mel_scale = (enum spw_mel_scale)e;
        return rc;
    case SPW_FK_MEL_NORM:
        if (json_is_null(v)) {
            op->mel_norm = SPW_MEL_NORM_NONE;
            return 0;
        }
        if ((rc = get_enum(c, loc, v, spw_mel_norm_names, spw_mel_norm_names_n, &e)) == 0)
            op->mel_norm = (enum spw_mel_norm)e;
        return rc;
    case SPW_FK_STYPE:
        if ((rc = get_enum(c, loc, v, spw_db_stype_names, spw_db_stype_names_n, &e)) == 0)
            op->stype = (enum spw_db_stype)e;
        return rc;
    case SPW_FK_FUNCTION:
        return get_function(c, loc, v, &op->function);
    case SPW_FK_KWARGS:
        return get_kwargs(c, loc, v, &op->kwargs);
    case SPW_FK_SHAPE:
        return get_shape(c, loc, v, op);
    case SPW_FK_ARRAY_DTYPE:
        if (json_is_null(v)) {
            op->has_out_dtype = false;
            return 0;
        }
        if ((rc = get_enum(c, loc, v, spw_array_dtype_names, spw_array_dtype_names_n, &e)) == 0)
            op->out_dtype = (enum spw_dtype)e, op->has_out_dtype = true;
        return rc;
    case SPW_FK_OPS:
        return parse_children(c, loc, v, op);
    case SPW_FK_WEIGHTS:
        return get_weights(c, loc, v, op);
    case SPW_FK_KSIZE:
        return get_ksize(c, loc, v, f, (int *)(void *)base);
    case SPW_FK_SIZES:
        return get_sizes(c, loc, v, f, op);
    case SPW_FK_PADDING:
        return get_padding(c, loc, v, f, op->padding);
    case SPW_FK_PAD_MODE:
        if ((rc = get_enum(c, loc, v, spw_pad_mode_names, spw_pad_mode_names_n, &e)) == 0)
            op->padding_mode = (enum spw_pad_mode)e;
        return rc;
    case SPW_FK_KALDI_WINDOW:
        if ((rc = get_enum(c, loc, v, spw_kaldi_window_names, spw_kaldi_window_names_n, &e)) == 0)
            op->window_type = (enum spw_kaldi_window)e;
        return rc;
    case SPW_FK_SIGMA:
        return get_sigma(c, loc, v, f, (double *)(void *)base);
    case SPW_FK_XY:
        return get_broadcast(c, loc, v, 2, f->lo, f->hi, f->flags, (double *)(void *)base);
    }
    return fail(c, loc, "internal: unhandled field kind");
}

/* ---- ops ------------------------------------------------------------------------------------------ */

static const struct spw_op_field *find_field(const struct spw_op_field *fields, const char *name)
{
    for (const struct spw_op_field *f = fields; f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

/* Checks that need more than one field. */
/* The op's own checks that need more than one field (its row's check). */
static int op_check(struct vctx *c, const char *where, struct spw_op_spec *op)
{
    const struct spw_op_def *def = spw_op_def(op->kind);
    const char *field = NULL;
    char msg[160], loc[96];
    if (!def->check || def->check(op, &field, msg, sizeof msg) == 0)
        return 0;
    snprintf(loc, sizeof(loc), "%s.%s", where, field);
    return fail(c, loc, "%s", msg);
}

/* Where an audio op may stand: after decode_wav or decode_audio, waveform ops before stft, spectrogram ops
 * after it.
 * stft_at is the index of stft, or -1. */
static int check_audio_order(struct vctx *c, const char *where, int i, const struct spw_op_spec *ops, int *stft_at)
{
    const enum spw_op_class cls = spw_op_def(ops[i].kind)->cls;
    const char *name = spw_op_name(ops[i].kind);
    if (cls == SPW_OPC_DECODE_AUDIO)
        return i == 0 ? 0 : fail(c, where, "\"%s\" must be the first op and appear once", name);
    if (i == 0 || spw_op_def(ops[0].kind)->cls != SPW_OPC_DECODE_AUDIO)
        return fail(c, where, "audio op \"%s\" needs \"decode_audio\" or \"decode_wav\" as the first op", name);
    if (cls == SPW_OPC_WAVE && *stft_at >= 0)
        return fail(c, where, "waveform op \"%s\" must come before \"%s\" (ops[%d])", name,
                    spw_op_name(ops[*stft_at].kind), *stft_at);
    if (cls == SPW_OPC_STFT && *stft_at >= 0)
        return fail(c, where, "at most one of stft/fbank (ops[%d] is \"%s\")", *stft_at,
                    spw_op_name(ops[*stft_at].kind));
    if (cls == SPW_OPC_SPECTRAL && *stft_at < 0)
        return fail(c, where, "\"%s\" works on spectrograms and must come after \"stft\"", name);
    if (ops[i].kind == SPW_OP_MEL && *stft_at >= 0 && ops[*stft_at].kind == SPW_OP_FBANK)
        return fail(c, where, "\"mel\" after \"fbank\" (ops[%d]): fbank's rows are mel bins already", *stft_at);
    if (cls == SPW_OPC_STFT)
        *stft_at = i;
    return 0;
}

/* Where each op may stand (see enum spw_op_class). tensor_at is the index of normalize/to_tensor (images) or
 * stft (audio), or -1. */
static int check_order(struct vctx *c, int i, const struct spw_op_spec *ops, int *tensor_at)
{
    char where[48], at[48];
    const char *name = ops[i].plugin ? ops[i].plugin->name : spw_op_name(ops[i].kind);
    op_where(c, i, where, sizeof where);
    const enum spw_op_class cls = spw_op_def(ops[i].kind)->cls;
    if (cls == SPW_OPC_USER)            /* an image or a tensor, image or audio pipeline: after the decode */
        return i == 0 ? fail(c, where, "\"%s\" needs a decode op (decode_jpeg, decode_audio, ...) before it", name)
                      : 0;
    if (spw_op_class_audio(cls))
        return check_audio_order(c, where, i, ops, tensor_at);
    if (i > 0 && spw_op_def(ops[0].kind)->cls == SPW_OPC_DECODE_AUDIO)
        return fail(c, where, "image op \"%s\" in an audio pipeline (ops[0] is \"%s\")", name,
                    spw_op_name(ops[0].kind));
    switch (cls) {
    case SPW_OPC_DECODE_IMAGE:
        if (i != 0)
            return fail(c, where, "\"%s\" must be the first op and appear once", name);
        return 0;
    case SPW_OPC_IMAGE:
        if (i == 0)
            return fail(c, where, "\"decode_jpeg\" must come before image ops");
        if (*tensor_at >= 0)
            return fail(c, where, "image op \"%s\" must come before \"%s\" (%s)", name,
                        spw_op_name(ops[*tensor_at].kind), op_where(c, *tensor_at, at, sizeof at));
        return 0;
    case SPW_OPC_TO_TENSOR:
        if (i == 0)
            return fail(c, where, "\"decode_jpeg\" must come before \"%s\"", name);
        if (*tensor_at >= 0)
            return fail(c, where, "at most one of normalize/to_tensor (%s is \"%s\")",
                        op_where(c, *tensor_at, at, sizeof at), spw_op_name(ops[*tensor_at].kind));
        *tensor_at = i;
        return 0;
    case SPW_OPC_TENSOR:
        if (i == 0)
            return fail(c, where, "\"decode_jpeg\" must come before \"%s\"", name);
        if (*tensor_at < 0)
            return fail(c, where, "\"%s\" works on tensors and must come after normalize or to_tensor", name);
        return 0;
    default:
        return 0;
    }
}

/* A plugin op's fields from obj into op->params, by the plugin's table: types, ranges, required ones. */
static int parse_plugin_fields(struct vctx *c, const char *where, json_t *obj, struct spw_op_spec *op)
{
    const struct spw_plugin_op *pop = op->plugin->op;
    char loc[160];
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int i = 0;
        while (i < pop->n_fields && strcmp(pop->fields[i].name, key) != 0)
            i++;
        if (strcmp(key, "op") != 0 && i == pop->n_fields) {
            char q[80];
            fmt_str(q, sizeof(q), key);
            return fail(c, where, "unknown field %s for \"%s\"", q, op->plugin->name);
        }
    }
    if (!(op->params = calloc((size_t)pop->n_fields + 1, sizeof *op->params)))
        return fail_oom(c);
    for (int i = 0; i < pop->n_fields; i++) {
        const struct spw_plugin_field *f = &pop->fields[i];
        snprintf(loc, sizeof loc, "%s.%s", where, f->name);
        if (!(v = json_object_get(obj, f->name))) {
            if (f->required)
                return fail(c, loc, "required");
            op->params[i] = f->type == SPW_PLUGIN_BOOL ? (f->default_value != 0) : f->default_value;
            continue;
        }
        long long n = 0;
        bool b = false;
        int rc = f->type == SPW_PLUGIN_BOOL ? get_bool(c, loc, v, &b)
                 : f->type == SPW_PLUGIN_INT ? get_int(c, loc, v, (long long)ceil(f->min), (long long)floor(f->max), &n)
                                              : get_num(c, loc, v, f->min, f->max, 0, &op->params[i]);
        if (rc)
            return rc;
        if (f->type != SPW_PLUGIN_NUMBER)
            op->params[i] = f->type == SPW_PLUGIN_BOOL ? b : (double)n;
    }
    return 0;
}

/* Which op obj names, into *op with that op's defaults (a plugin op's too). */
static int op_begin(struct vctx *c, const char *where, json_t *obj, struct spw_op_spec *op)
{
    char loc[SPW_LOC_BYTES - 8];
    if (!json_is_object(obj))
        return fail_type(c, where, "an object", obj);
    json_t *name = json_object_get(obj, "op");
    if (!name)
        return fail(c, where, "missing \"op\"");
    if (!json_is_string(name)) {
        snprintf(loc, sizeof(loc), "%s.op", where);
        return fail_type(c, loc, "a string", name);
    }
    int kind = spw_op_find(json_string_value(name));
    const struct spw_plugin_op_ref *plugin = kind < 0 ? spw_plugin_find(json_string_value(name)) : NULL;
    if (kind < 0 && !plugin) {
        char q[80];
        fmt_str(q, sizeof(q), json_string_value(name));
        if (strchr(json_string_value(name), '.'))
            return fail(c, where, "unknown op %s: no loaded op plugin has it (SPILLWAY_OP_PLUGINS lists the "
                        "plugins this process loads; `spillctl ops` shows them)", q);
        return fail(c, where, "unknown op %s", q);
    }
    op_defaults(op, plugin ? SPW_OP_PLUGIN : (enum spw_op_kind)kind);
    op->plugin = plugin;
    return 0;
}

/* The fields of the op op_begin found, then its row's checks. */
static int op_fields(struct vctx *c, const char *where, json_t *obj, struct spw_op_spec *op)
{
    if (op->plugin)
        return parse_plugin_fields(c, where, obj, op);
    const struct spw_op_def *def = spw_op_def(op->kind);
    char loc[SPW_LOC_BYTES - 8];
    const char *key;
    json_t *v;
    int rc;
    json_object_foreach(obj, key, v) {
        if (strcmp(key, "op") != 0 && !find_field(def->fields, key)) {
            char q[80];
            fmt_str(q, sizeof(q), key);
            return fail(c, where, "unknown field %s for \"%s\"", q, def->name);
        }
    }
    for (const struct spw_op_field *f = def->fields; f->name; f++) {
        snprintf(loc, sizeof(loc), "%s.%s", where, f->name);
        v = json_object_get(obj, f->name);
        if (!v) {
            if (f->flags & SPW_F_REQ)
                return fail(c, loc, "required");
            continue;
        }
        if ((rc = parse_field(c, loc, v, f, op)))
            return rc;
    }
    return op_check(c, where, op);
}

/* ops[idx] from obj: which op, whether it may stand there, then its fields. */
static int parse_op(struct vctx *c, int idx, json_t *obj, struct spw_op_spec *ops, int *tensor_at)
{
    char where[48];
    op_where(c, idx, where, sizeof where);
    int rc = op_begin(c, where, obj, &ops[idx]);
    if (rc == 0)
        rc = check_order(c, idx, ops, tensor_at);
    return rc ? rc : op_fields(c, where, obj, &ops[idx]);
}

/* A combinator's ops (at loc, e.g. "ops[3].ops"): 1 to SPW_OP_MAX_NESTED image ops that keep the image's
 * size (colour ops, flips, warps, policies, other combinators), nested at most SPW_OP_MAX_DEPTH deep. They
 * run wherever their combinator runs, on the image it has, so no crop, decode, tensor or user op. */
static int parse_children(struct vctx *c, const char *loc, const json_t *v, struct spw_op_spec *op)
{
    if (!json_is_array(v))
        return fail_type(c, loc, "an array of ops", v);
    const size_t n = json_array_size(v);
    if (n == 0 || n > SPW_OP_MAX_NESTED)
        return fail(c, loc, "%zu ops: give 1 to %d", n, SPW_OP_MAX_NESTED);
    if (c->depth + 2 > SPW_OP_MAX_DEPTH)
        return fail(c, loc, "combinators nested more than %d deep", SPW_OP_MAX_DEPTH);
    if ((c->total += (int)n) > SPW_SPEC_MAX_OPS)
        return fail(c, loc, "more than %d ops in all, a combinator's counted too", SPW_SPEC_MAX_OPS);
    if (!(op->ops = calloc(n, sizeof *op->ops)))
        return fail_oom(c);
    op->n_ops = (int)n;
    int rc = 0;
    c->depth++;
    for (size_t k = 0; k < n && rc == 0; k++) {
        char where[SPW_WHERE_BYTES];
        if (snprintf(where, sizeof where, "%s[%zu]", loc, k) >= (int)sizeof where) {
            rc = fail(c, loc, "combinators nested too deep to name");    /* cannot happen within the caps */
            break;
        }
        struct spw_op_spec *child = &op->ops[k];
        if ((rc = op_begin(c, where, json_array_get(v, k), child)))
            break;
        const struct spw_op_def *def = spw_op_def(child->kind);
        if (child->plugin || def->cls != SPW_OPC_IMAGE || def->size != SPW_SIZE_KEEPS || !def->cpu) {
            rc = fail(c, where, "\"%s\" cannot be one of %s's ops: only image ops that keep the image's size "
                      "(colour ops, flips, warps, policies, combinators) can", child->plugin ? child->plugin->name
                      : def->name, spw_op_name(op->kind));
            break;
        }
        rc = op_fields(c, where, json_array_get(v, k), child);
    }
    c->depth--;
    return rc;
}

/* random_choice's p: null (equal weights) or a list of numbers >= 0 (its length is the row's check). */
static int get_weights(struct vctx *c, const char *loc, const json_t *v, struct spw_op_spec *op)
{
    if (json_is_null(v))
        return 0;
    if (!json_is_array(v))
        return fail_type(c, loc, "null or a list of weights", v);
    const size_t n = json_array_size(v);
    if (n == 0 || n > SPW_OP_MAX_NESTED)
        return fail(c, loc, "%zu weights: give one per op (1 to %d)", n, SPW_OP_MAX_NESTED);
    if (!(op->weights = calloc(n, sizeof *op->weights)))
        return fail_oom(c);
    op->n_weights = (int)n;
    for (size_t k = 0; k < n; k++) {
        char el[SPW_LOC_BYTES];
        elem_loc(el, sizeof el, loc, k);
        const int rc = get_num(c, el, json_array_get(v, k), 0, INF, 0, &op->weights[k]);
        if (rc)
            return rc;
    }
    return 0;
}

static int parse_ops(struct vctx *c, json_t *arr, struct spw_pipeline_spec *spec)
{
    if (!json_is_array(arr))
        return fail_type(c, "ops", "an array", arr);
    size_t n = json_array_size(arr);
    if (n == 0)
        return fail(c, "ops", "must start with \"decode_jpeg\", \"decode_image\", \"decode_audio\" or \"decode_wav\"");
    if (n > SPW_SPEC_MAX_OPS)
        return fail(c, "ops", "%zu ops, more than the cap of %d", n, SPW_SPEC_MAX_OPS);
    spec->ops = calloc(n, sizeof(*spec->ops));
    if (!spec->ops)
        return fail_oom(c);
    spec->n_ops = (int)n;
    c->total = (int)n;
    int tensor_at = -1;
    for (size_t i = 0; i < n; i++) {
        int rc = parse_op(c, (int)i, json_array_get(arr, i), spec->ops, &tensor_at);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- source, batch, top level --------------------------------------------------------------------- */

static int check_keys(struct vctx *c, json_t *obj, const char *where, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        size_t i = 0;
        while (known[i] && strcmp(known[i], key) != 0)
            i++;
        if (!known[i]) {
            char q[80];
            fmt_str(q, sizeof(q), key);
            if (!where)
                return fail(c, NULL, "unknown top-level key %s", q);
            return fail(c, where, "unknown key %s", q);
        }
    }
    return 0;
}

static const char *const field_kind_names[] = {"text", "raw", "mask", "boxes", NULL};
static const char *const box_format_names[] = {"xyxy", "xywh", NULL};

const char *spw_sample_field_kind_name(enum spw_sample_field_kind v)
{
    return (unsigned)v < NAMES_COUNT(field_kind_names) ? field_kind_names[v] : NULL;
}

const char *spw_box_format_name(enum spw_box_format v)
{
    return (unsigned)v < NAMES_COUNT(box_format_names) ? box_format_names[v] : NULL;
}

/* A string of 1 to max bytes without NUL into a new copy at *dst. */
static int get_str(struct vctx *c, const char *loc, json_t *v, size_t max, char **dst)
{
    if (!json_is_string(v))
        return fail_type(c, loc, "a string", v);
    const size_t len = json_string_length(v);
    if (len == 0 || len > max)
        return fail(c, loc, "%zu bytes, outside [1, %zu]", len, max);
    if (strlen(json_string_value(v)) != len)
        return fail(c, loc, "must not contain NUL");
    return (*dst = strdup(json_string_value(v))) ? 0 : fail_oom(c);
}

/* Names a batch already uses for its own parts, or for a field's companions. */
static bool field_name_taken(const char *name)
{
    static const char *const own[] = {"data", "labels", "lengths", NULL};
    for (int i = 0; own[i]; i++)
        if (!strcmp(name, own[i]))
            return true;
    const size_t n = strlen(name);
    static const char *const suffixes[] = {"_lengths", "_labels", "_counts", NULL};
    for (int i = 0; suffixes[i]; i++) {
        const size_t k = strlen(suffixes[i]);
        if (n > k && !strcmp(name + n - k, suffixes[i]))
            return true;
    }
    return !strncmp(name, "view", 4) && n > 4 && strspn(name + 4, "0123456789") == n - 4;
}

/* source.fields: {"NAME": {"from": EXT, "as": "text" | "raw", "key": FIELD}, ...}, in the object's order. */
static int parse_fields(struct vctx *c, json_t *obj, struct spw_source_spec *src)
{
    static const char *const known[] = {"from", "as", "key", "ignore_index", "format", "labels_key", "min_size",
                                        "path", NULL};
    const bool members = src->format == SPW_SOURCE_TAR_SHARDS || src->format == SPW_SOURCE_COCO;  /* no "path" */
    if (!json_is_object(obj))
        return fail_type(c, "source.fields", "an object", obj);
    if (json_object_size(obj) > SPW_SAMPLE_FIELDS_MAX)
        return fail(c, "source.fields", "%zu fields, more than the cap of %d", json_object_size(obj), SPW_SAMPLE_FIELDS_MAX);
    const char *name;
    json_t *f, *v;
    int rc, e = 0;
    json_object_foreach(obj, name, f) {
        char loc[96], sub[112], q[80];
        fmt_str(q, sizeof q, name);
        const size_t len = strlen(name);
        bool ok = len >= 1 && len <= SPW_SAMPLE_FIELD_NAME_MAX && (isalpha((unsigned char)name[0]) || name[0] == '_');
        for (size_t i = 1; ok && i < len; i++)
            ok = isalnum((unsigned char)name[i]) || name[i] == '_';
        if (!ok)
            return fail(c, "source.fields", "name %s: use 1 to %d of A-Z a-z 0-9 _, not starting with a digit", q,
                        SPW_SAMPLE_FIELD_NAME_MAX);
        if (field_name_taken(name))
            return fail(c, "source.fields", "name %s is a batch part's own name (data, labels, lengths, viewN, "
                        "NAME_lengths, NAME_labels, NAME_counts)", q);
        snprintf(loc, sizeof loc, "source.fields.%s", name);
        if (!json_is_object(f))
            return fail_type(c, loc, "an object", f);
        if ((rc = check_keys(c, f, loc, known)))
            return rc;
        struct spw_sample_field_spec *fs = &src->fields[src->n_fields++];
        snprintf(fs->name, sizeof fs->name, "%s", name);
        snprintf(sub, sizeof sub, "%s.as", loc);
        if ((v = json_object_get(f, "as"))) {
            if ((rc = get_enum(c, sub, v, field_kind_names, NAMES_COUNT(field_kind_names), &e)))
                return rc;
            fs->kind = (enum spw_sample_field_kind)e;
        }
        snprintf(sub, sizeof sub, "%s.path", loc);
        if ((v = json_object_get(f, "path")) && members)
            return fail(c, sub, "only for folders (a tar_shards field is a member of the sample's key: \"from\")");
        if (!v && !members)
            return fail(c, sub, "required for a folder source (the folder of each sample's file, under the same "
                        "relative name)");
        if (v && (rc = get_str(c, sub, v, MAX_PATH_BYTES, &fs->path)))
            return rc;
        snprintf(sub, sizeof sub, "%s.from", loc);
        if (!(v = json_object_get(f, "from")))
            return fail(c, sub, members ? "required (the member's extension, e.g. \"txt\" for KEY.txt)"
                                    : "required (the extension of the files in path, e.g. \"png\")");
        if ((rc = get_str(c, sub, v, 64, &fs->from)))
            return rc;
        if (fs->from[0] == '.' || strchr(fs->from, '/'))
            return fail(c, sub, "the extension after KEY., without a leading dot or a slash");
        for (int k = 0; members && k + 1 < src->n_fields; k++)
            if (!strcasecmp(src->fields[k].from, fs->from) && !fs->key && !src->fields[k].key)
                return fail(c, sub, "\"%s\" is field %s's member too", fs->from, src->fields[k].name);
        fs->ignore_index = 255;
        snprintf(sub, sizeof sub, "%s.ignore_index", loc);
        if ((v = json_object_get(f, "ignore_index"))) {
            long long ii;
            if (fs->kind != SPW_SAMPLE_FIELD_MASK)
                return fail(c, sub, "only for a mask (\"as\": \"mask\")");
            if ((rc = get_int(c, sub, v, 0, 255, &ii)))
                return rc;
            fs->ignore_index = (int)ii;
        }
        const char *last = strrchr(fs->from, '.');
        const bool coco = src->format == SPW_SOURCE_COCO;
        const bool json_member = !strcasecmp(last ? last + 1 : fs->from, "json") || coco;
        const bool boxes = fs->kind == SPW_SAMPLE_FIELD_BOXES;
        if (coco && (!boxes || strcmp(fs->from, "annotations")))
            return fail(c, loc, "a coco source's field is its boxes: {\"from\": \"annotations\", \"as\": \"boxes\"}");
        snprintf(sub, sizeof sub, "%s.key", loc);
        if ((v = json_object_get(f, "key"))) {
            if (!json_member)
                return fail(c, sub, "only for a .json member (from is \"%s\")", fs->from);
            if (fs->kind != SPW_SAMPLE_FIELD_TEXT && !boxes)
                return fail(c, sub, "only for a text field (the string at that key) or boxes (their list)");
            if ((rc = get_str(c, sub, v, MAX_LABEL_KEY_BYTES, &fs->key)))
                return rc;
        }
        static const char *const box_keys[] = {"format", "labels_key", "min_size"};
        for (size_t i = 0; !boxes && i < sizeof box_keys / sizeof *box_keys; i++)
            if (json_object_get(f, box_keys[i]))
                return fail(c, loc, "\"%s\" is for boxes (\"as\": \"boxes\")", box_keys[i]);
        snprintf(sub, sizeof sub, "%s.from", loc);
        if (boxes && !json_member)
            return fail(c, sub, "boxes come from a .json member, not \"%s\"", fs->from);
        if (boxes && !fs->key && !(fs->key = strdup("boxes")))
            return fail_oom(c);
        snprintf(sub, sizeof sub, "%s.format", loc);
        if ((v = json_object_get(f, "format"))) {
            if ((rc = get_enum(c, sub, v, box_format_names, NAMES_COUNT(box_format_names), &e)))
                return rc;
            fs->box_format = (enum spw_box_format)e;
        }
        snprintf(sub, sizeof sub, "%s.labels_key", loc);
        if ((v = json_object_get(f, "labels_key")) && (rc = get_str(c, sub, v, MAX_LABEL_KEY_BYTES, &fs->labels_key)))
            return rc;
        if (boxes && !fs->labels_key && !(fs->labels_key = strdup("labels")))
            return fail_oom(c);
        snprintf(sub, sizeof sub, "%s.min_size", loc);
        if ((v = json_object_get(f, "min_size")) && (rc = get_num(c, sub, v, 0, 1e6, 0, &fs->min_size)))
            return rc;
    }
    return 0;
}

/* A mask or boxes field needs an image pipeline whose ops it can follow: every geometric op moves it (the same
 * draws); ops that move pixels otherwise (policies, elastic, user code) and combinators holding a geometric
 * op are refused for now, naming the op (views and batch.mix where they are parsed). */
static int check_mask_ops(struct vctx *c, const struct spw_pipeline_spec *spec, const struct spw_sample_field_spec *f)
{
    if (spw_media_is_audio(spec->source.media))
        return fail(c, "source.fields", "field %s: %s for image pipelines", f->name,
                    f->kind == SPW_SAMPLE_FIELD_MASK ? "a mask is" : "boxes are");
    for (int i = 1; i < spec->n_ops; i++) {
        const struct spw_op_spec *op = &spec->ops[i];
        const struct spw_op_def *d = spw_op_def(op->kind);
        bool refused = d->targets == SPW_TARGET_REFUSED || d->cls == SPW_OPC_USER;
        for (int k = 0; !refused && k < op->n_ops; k++)
            refused = spw_op_def(op->ops[k].kind)->targets != SPW_TARGET_KEEPS;
        if (refused) {
            char loc[32];
            snprintf(loc, sizeof loc, "ops[%d]", i);
            return fail(c, loc, "\"%s\" moves pixels in a way %s (field %s) cannot follow yet", d->name,
                        f->kind == SPW_SAMPLE_FIELD_MASK ? "a mask" : "boxes", f->name);
        }
    }
    return 0;
}

static int parse_source(struct vctx *c, json_t *obj, struct spw_source_spec *src)
{
    static const char *const known[] = {"format", "path", "shuffle", "seed", "epochs", "label_key", "ca_file",
                                        "header_file", "labels", "fields", "annotations", NULL};
    json_t *v;
    int rc, e = 0;
    long long i;
    if (!json_is_object(obj))
        return fail_type(c, "source", "an object", obj);
    if ((rc = check_keys(c, obj, "source", known)))
        return rc;
    if (!(v = json_object_get(obj, "format")))
        return fail(c, "source.format", "required");
    if ((rc = get_enum(c, "source.format", v, format_names, NAMES_COUNT(format_names), &e)))
        return rc;
    src->format = (enum spw_source_format)e;
    if (!(v = json_object_get(obj, "path")))
        return fail(c, "source.path", "required");
    if (!json_is_string(v))
        return fail_type(c, "source.path", "a string", v);
    size_t len = json_string_length(v);
    if (len == 0)
        return fail(c, "source.path", "must not be empty");
    if (len > MAX_PATH_BYTES)
        return fail(c, "source.path", "%zu bytes, more than the cap of %d", len, MAX_PATH_BYTES);
    if (!(src->path = strdup(json_string_value(v))))
        return fail_oom(c);
    src->shuffle = true;
    if ((v = json_object_get(obj, "shuffle")) && (rc = get_bool(c, "source.shuffle", v, &src->shuffle)))
        return rc;
    src->seed = 0;
    if ((v = json_object_get(obj, "seed"))) {
        if ((rc = get_int(c, "source.seed", v, 0, LLONG_MAX, &i)))
            return rc;
        src->seed = (uint64_t)i;
    }
    src->epochs = 1;
    if ((v = json_object_get(obj, "epochs"))) {
        if ((rc = get_int(c, "source.epochs", v, 0, LLONG_MAX, &i)))
            return rc;
        src->epochs = i;
    }
    static const struct {
        const char *key, *field, *why;
        size_t max, offset;
    } tar_strings[] = {
        {"label_key", "source.label_key", "it names a field of KEY.json members", MAX_LABEL_KEY_BYTES,
         offsetof(struct spw_source_spec, label_key)},
        {"ca_file", "source.ca_file", "it verifies https:// shard servers", MAX_PATH_BYTES,
         offsetof(struct spw_source_spec, ca_file)},
        {"header_file", "source.header_file", "it holds a header for shard URLs", MAX_PATH_BYTES,
         offsetof(struct spw_source_spec, header_file)},
    };
    for (size_t k = 0; k < sizeof tar_strings / sizeof *tar_strings; k++) {
        if (!(v = json_object_get(obj, tar_strings[k].key)))
            continue;
        const char *f = tar_strings[k].field;
        if (src->format != SPW_SOURCE_TAR_SHARDS)
            return fail(c, f, "only for tar_shards (%s)", tar_strings[k].why);
        if (!json_is_string(v))
            return fail_type(c, f, "a string", v);
        len = json_string_length(v);
        if (len == 0 || len > tar_strings[k].max)
            return fail(c, f, "%zu bytes, outside [1, %zu]", len, tar_strings[k].max);
        if (strlen(json_string_value(v)) != len)
            return fail(c, f, "must not contain NUL");
        char **dst = (char **)((char *)src + tar_strings[k].offset);
        if (!(*dst = strdup(json_string_value(v))))
            return fail_oom(c);
    }
    const bool coco = src->format == SPW_SOURCE_COCO;
    if ((v = json_object_get(obj, "annotations")) && !coco)
        return fail(c, "source.annotations", "only for coco (its instances_*.json)");
    if (coco && !v)
        return fail(c, "source.annotations", "required for coco (the instances_*.json of the images in path)");
    if (v && (rc = get_str(c, "source.annotations", v, MAX_PATH_BYTES, &src->annotations)))
        return rc;
    bool labels = !coco;
    if ((v = json_object_get(obj, "labels")) && (rc = get_bool(c, "source.labels", v, &labels)))
        return rc;
    if (coco && labels)
        return fail(c, "source.labels", "a coco source has boxes, not a class per image (leave labels out)");
    src->no_labels = !labels;
    if (src->no_labels && src->label_key)
        return fail(c, "source.label_key", "is for labels, and source.labels is false");
    if ((v = json_object_get(obj, "fields")) && (rc = parse_fields(c, v, src)))
        return rc;
    if (coco && src->n_fields != 1) {           /* its boxes: one field, "boxes" unless named otherwise */
        if (src->n_fields)
            return fail(c, "source.fields", "a coco source has one field, its boxes");
        struct spw_sample_field_spec *fs = &src->fields[src->n_fields++];
        *fs = (struct spw_sample_field_spec){.name = "boxes", .kind = SPW_SAMPLE_FIELD_BOXES, .ignore_index = 255};
        if (!(fs->from = strdup("annotations")) || !(fs->key = strdup("boxes")) || !(fs->labels_key = strdup("labels")))
            return fail_oom(c);
    }
    return 0;
}

/* batch.mix: MixUp / CutMix on float32 image batches (the references' RandomMixup / RandomCutmix). */
static int parse_mix(struct vctx *c, json_t *obj, const struct spw_pipeline_spec *spec, struct spw_mix_spec *m)
{
    static const char *const known[] = {"num_classes", "mixup_alpha", "cutmix_alpha", "p", "switch_prob", NULL};
    json_t *v;
    long long i;
    int rc;
    if (!json_is_object(obj))
        return fail_type(c, "batch.mix", "an object", obj);
    if ((rc = check_keys(c, obj, "batch.mix", known)))
        return rc;
    if (spec->source.no_labels)
        return fail(c, "batch.mix", "mixes labels, and source.labels is false");
    for (int k = 0; k < spec->source.n_fields; k++)
        if (spec->source.fields[k].kind >= SPW_SAMPLE_FIELD_MASK)
            return fail(c, "batch.mix", "not with a %s field (%s)",
                        field_kind_names[spec->source.fields[k].kind], spec->source.fields[k].name);
    if (!(v = json_object_get(obj, "num_classes")))
        return fail(c, "batch.mix.num_classes", "required");
    if ((rc = get_int(c, "batch.mix.num_classes", v, 1, SPW_MIX_MAX_CLASSES, &i)))
        return rc;
    m->num_classes = (int)i;
    m->p = 1.0, m->switch_prob = 0.5;
    const struct {
        const char *key, *loc;
        double *at, hi;
    } nums[] = {{"mixup_alpha", "batch.mix.mixup_alpha", &m->mixup_alpha, INF},
                {"cutmix_alpha", "batch.mix.cutmix_alpha", &m->cutmix_alpha, INF},
                {"p", "batch.mix.p", &m->p, 1}, {"switch_prob", "batch.mix.switch_prob", &m->switch_prob, 1}};
    for (size_t k = 0; k < sizeof nums / sizeof *nums; k++)
        if ((v = json_object_get(obj, nums[k].key)) && (rc = get_num(c, nums[k].loc, v, 0, nums[k].hi, 0, nums[k].at)))
            return rc;
    if (m->mixup_alpha == 0 && m->cutmix_alpha == 0)
        return fail(c, "batch.mix", "mixup_alpha and cutmix_alpha are both 0: set one above 0 (or drop \"mix\")");
    const struct spw_op_spec *last = &spec->ops[spec->n_ops - 1];
    int tensor_at = -1;
    for (int k = 0; k < spec->n_ops; k++)
        if (spw_op_def(spec->ops[k].kind)->cls == SPW_OPC_TO_TENSOR)
            tensor_at = k;
    if (spw_media_is_audio(spec->source.media) || tensor_at < 0 || spec->ops[tensor_at].dtype != SPW_DTYPE_F32 ||
        spw_op_def(last->kind)->cls == SPW_OPC_USER)
        return fail(c, "batch.mix", "needs float32 image tensors: end an image pipeline with normalize or "
                    "to_tensor (dtype float32) and no python op after them, as RandomMixup and RandomCutmix do");
    return 0;
}

static int parse_batch(struct vctx *c, json_t *obj, const struct spw_pipeline_spec *spec, struct spw_batch_spec *b)
{
    static const char *const known[] = {"size", "drop_remainder", "layout", "pad", "mix", NULL};
    const enum spw_media media = spec->source.media;
    json_t *v;
    int rc, e = 0;
    long long i;
    if (!json_is_object(obj))
        return fail_type(c, "batch", "an object", obj);
    if ((rc = check_keys(c, obj, "batch", known)))
        return rc;
    if (!(v = json_object_get(obj, "size")))
        return fail(c, "batch.size", "required");
    if ((rc = get_int(c, "batch.size", v, 1, MAX_BATCH, &i)))
        return rc;
    b->size = (int)i;
    b->drop_remainder = false;
    if ((v = json_object_get(obj, "drop_remainder")) &&
        (rc = get_bool(c, "batch.drop_remainder", v, &b->drop_remainder)))
        return rc;
    b->layout = SPW_LAYOUT_HWC;
    if ((v = json_object_get(obj, "layout"))) {
        if ((rc = get_enum(c, "batch.layout", v, layout_names, NAMES_COUNT(layout_names), &e)))
            return rc;
        b->layout = (enum spw_layout)e;
    }
    b->pad = spw_media_is_audio(media);     /* clips differ in length: pad to the longest (torch's pad_sequence) */
    if ((v = json_object_get(obj, "pad")) && (rc = get_bool(c, "batch.pad", v, &b->pad)))
        return rc;
    b->mix = (struct spw_mix_spec){0};
    if ((v = json_object_get(obj, "mix")) && (rc = parse_mix(c, v, spec, &b->mix)))
        return rc;
    if (b->pad && b->mix.num_classes && !spw_media_is_audio(media))
        return fail(c, "batch.pad", "true and batch.mix together: MixUp and CutMix need images of one size");
    return 0;
}

static void op_free(struct spw_op_spec *op);

/* Ops in ops[0, n), a combinator's own counted too (as vctx.total counts them). */
static int count_parsed(const struct spw_op_spec *ops, int n)
{
    int total = n;
    for (int i = 0; ops && i < n; i++)
        total += count_parsed(ops[i].ops, ops[i].n_ops);
    return total;
}

/* views[v]: its ops parsed as the list (prefix ops, then its own), so the order rules hold from the state the
 * prefix leaves; the view keeps its own ops only, as a pipeline of their own with the spec's seed and caps. */
static int parse_view(struct vctx *c, int v, json_t *obj, json_t *prefix, struct spw_pipeline_spec *spec)
{
    static const char *const known[] = {"repeat", "ops", NULL};
    char where[32], loc[48];
    snprintf(where, sizeof where, "views[%d]", v);
    if (!json_is_object(obj))
        return fail_type(c, where, "an object with \"ops\" (and \"repeat\")", obj);
    int rc = check_keys(c, obj, where, known);
    if (rc)
        return rc;
    struct spw_view_spec *view = &spec->views[v];
    long long repeat = 1;
    json_t *x = json_object_get(obj, "repeat");
    snprintf(loc, sizeof loc, "%s.repeat", where);
    if (x && (rc = get_int(c, loc, x, 1, SPW_VIEWS_MAX_INSTANCES, &repeat)))
        return rc;
    view->repeat = (int)repeat;
    snprintf(loc, sizeof loc, "%s.ops", where);
    json_t *ops = json_object_get(obj, "ops");
    if (!ops)
        return fail(c, loc, "required");
    if (!json_is_array(ops) || json_array_size(ops) == 0)
        return json_is_array(ops) ? fail(c, loc, "empty: give the view's ops") : fail_type(c, loc, "an array", ops);
    const int n_prefix = (int)json_array_size(prefix), total = c->total;
    json_t *all = json_array();
    if (!all || json_array_extend(all, prefix) || json_array_extend(all, ops)) {
        json_decref(all);
        return fail_oom(c);
    }
    struct spw_pipeline_spec *sub = view->ops = calloc(1, sizeof *sub);
    c->view = v, c->prefix_n = n_prefix;
    rc = sub ? parse_ops(c, all, sub) : fail_oom(c);
    c->view = -1;
    json_decref(all);
    /* the prefix's ops were counted already: this view adds its own */
    c->total = total + (rc == 0 ? c->total - count_parsed(sub->ops, n_prefix) : 0);
    if (rc == 0 && c->total > SPW_SPEC_MAX_OPS - 1)
        rc = fail(c, loc, "more than %d ops in all, the views' counted too", SPW_SPEC_MAX_OPS - 1);
    for (int i = n_prefix; rc == 0 && i < sub->n_ops; i++)
        if (spw_op_def(sub->ops[i].kind)->cls == SPW_OPC_USER) {
            snprintf(loc, sizeof loc, "%s.ops[%d]", where, i - n_prefix);
            rc = fail(c, loc, "user code (python and plugin ops) cannot be in a view yet: put it in \"ops\" "
                      "before the views");
        }
    if (!sub)
        return rc;
    /* keep the view's own ops: the prefix's copies go */
    for (int i = 0; i < n_prefix && i < sub->n_ops; i++)
        op_free(&sub->ops[i]);
    const int own = sub->n_ops > n_prefix ? sub->n_ops - n_prefix : 0;
    memmove(sub->ops, sub->ops + (sub->n_ops - own), (size_t)own * sizeof *sub->ops);
    sub->n_ops = own;
    sub->source = (struct spw_source_spec){.seed = spec->source.seed, .media = spec->source.media};
    return rc;
}

static int parse_views(struct vctx *c, json_t *arr, json_t *prefix, struct spw_pipeline_spec *spec)
{
    for (int k = 0; k < spec->source.n_fields; k++)
        if (spec->source.fields[k].kind >= SPW_SAMPLE_FIELD_MASK)
            return fail(c, "views", "not with a %s field (%s) yet", field_kind_names[spec->source.fields[k].kind],
                        spec->source.fields[k].name);
    if (!json_is_array(arr))
        return fail_type(c, "views", "an array of views ({\"repeat\": 2, \"ops\": [...]})", arr);
    const size_t n = json_array_size(arr);
    if (n == 0 || n > SPW_VIEWS_MAX)
        return fail(c, "views", "%zu views: give 1 to %d", n, SPW_VIEWS_MAX);
    if (spw_media_is_audio(spec->source.media))
        return fail(c, "views", "views are for image pipelines (ops[0] is \"%s\")", spw_op_name(spec->ops[0].kind));
    if (spec->batch.mix.num_classes)
        return fail(c, "views", "views and batch.mix together: no recipe does both; drop one");
    if (spec->batch.pad)
        return fail(c, "views", "not with batch.pad (each view instance is its own part of one size: end each view "
                    "with a crop or a fixed-size resize)");
    if (!(spec->views = calloc(n, sizeof *spec->views)))
        return fail_oom(c);
    spec->n_views = (int)n;
    int instances = 0;
    for (size_t v = 0; v < n; v++) {
        const int rc = parse_view(c, (int)v, json_array_get(arr, v), prefix, spec);
        if (rc)
            return rc;
        if ((instances += spec->views[v].repeat) > SPW_VIEWS_MAX_INSTANCES)
            return fail(c, "views", "%d view instances (repeats summed) or more: at most %d", instances,
                        SPW_VIEWS_MAX_INSTANCES);
    }
    /* the views run as one op after the prefix's (pipeline/views.h) */
    struct spw_op_spec *ops = realloc(spec->ops, (size_t)(spec->n_ops + 1) * sizeof *ops);
    if (!ops)
        return fail_oom(c);
    spec->ops = ops;
    op_defaults(&spec->ops[spec->n_ops++], SPW_OP_VIEWS);
    return 0;
}

static int parse_root(struct vctx *c, json_t *root, struct spw_pipeline_spec *spec)
{
    static const char *const known[] = {"source", "ops", "views", "batch", "on_error", "max_pixels",
                                        "max_file_bytes", "max_samples", NULL};
    json_t *v;
    int rc, e = 0;
    long long i;
    if (!json_is_object(root))
        return fail_type(c, "spec", "an object", root);
    if ((rc = check_keys(c, root, NULL, known)))
        return rc;
    if (!(v = json_object_get(root, "source")))
        return fail(c, "source", "required");
    if ((rc = parse_source(c, v, &spec->source)))
        return rc;
    if (!(v = json_object_get(root, "ops")))
        return fail(c, "ops", "required");
    if ((rc = parse_ops(c, v, spec)))
        return rc;
    const enum spw_op_kind decode = spec->ops[0].kind;
    spec->source.media = decode == SPW_OP_DECODE_WAV     ? SPW_MEDIA_AUDIO
                         : decode == SPW_OP_DECODE_AUDIO ? SPW_MEDIA_ANY_AUDIO
                         : decode == SPW_OP_DECODE_IMAGE ? SPW_MEDIA_ANY_IMAGE
                                                         : SPW_MEDIA_IMAGE;
    const bool audio = spw_media_is_audio(spec->source.media);
    const bool audio_folder = spec->source.format == SPW_SOURCE_WAV_FOLDER ||
                              spec->source.format == SPW_SOURCE_AUDIO_FOLDER;
    if (audio ? spec->source.format == SPW_SOURCE_IMAGE_FOLDER || spec->source.format == SPW_SOURCE_COCO
              : audio_folder)
        return fail(c, "source.format", "\"%s\" does not hold %s (ops[0] is \"%s\"; use %s)",
                    format_names[spec->source.format], audio ? "audio" : "images", spw_op_name(decode),
                    !audio ? "image_folder or tar_shards"
                    : decode == SPW_OP_DECODE_WAV ? "wav_folder or tar_shards" : "audio_folder or tar_shards");
    for (int k = 0; k < spec->source.n_fields; k++) {
        const struct spw_sample_field_spec *f = &spec->source.fields[k];
        if (!f->path && !strchr(f->from, '.') && spw_tar_media_ext(f->from, spec->source.media))
            return fail(c, "source.fields", "field %s: \"%s\" members are the samples' own media (ops[0] \"%s\")",
                        f->name, f->from, spw_op_name(decode));
        if ((f->kind == SPW_SAMPLE_FIELD_MASK || f->kind == SPW_SAMPLE_FIELD_BOXES) && (rc = check_mask_ops(c, spec, f)))
            return rc;
    }
    if (!(v = json_object_get(root, "batch")))
        return fail(c, "batch", "required");
    if ((rc = parse_batch(c, v, spec, &spec->batch)))
        return rc;
    spec->on_error = SPW_ON_ERROR_SKIP;
    if ((v = json_object_get(root, "on_error"))) {
        if ((rc = get_enum(c, "on_error", v, on_error_names, NAMES_COUNT(on_error_names), &e)))
            return rc;
        spec->on_error = (enum spw_on_error)e;
    }
    spec->max_pixels = DEFAULT_MAX_PIXELS;
    if ((v = json_object_get(root, "max_pixels"))) {
        if ((rc = get_int(c, "max_pixels", v, 1, LLONG_MAX, &i)))
            return rc;
        spec->max_pixels = i;
    }
    spec->max_file_bytes = DEFAULT_MAX_FILE_BYTES;
    if ((v = json_object_get(root, "max_file_bytes"))) {
        if ((rc = get_int(c, "max_file_bytes", v, 1, LLONG_MAX, &i)))
            return rc;
        spec->max_file_bytes = i;
    }
    spec->max_samples = DEFAULT_MAX_SAMPLES;
    if ((v = json_object_get(root, "max_samples"))) {
        if ((rc = get_int(c, "max_samples", v, 1, LLONG_MAX, &i)))
            return rc;
        spec->max_samples = i;
    }
    if ((v = json_object_get(root, "views"))) {      /* last: it copies the caps and checks the batch */
        if ((rc = parse_views(c, v, json_object_get(root, "ops"), spec)))
            return rc;
        for (int k = 0; k < spec->n_views; k++) {
            spec->views[k].ops->max_pixels = spec->max_pixels;
            spec->views[k].ops->max_file_bytes = spec->max_file_bytes;
            spec->views[k].ops->max_samples = spec->max_samples;
            spec->views[k].ops->batch.layout = spec->batch.layout;
        }
    }
    char loc[SPW_LOC_BYTES], msg[256];
    if (spw_spec_check_channels(spec, loc, sizeof loc, msg, sizeof msg))
        return fail(c, loc, "%s", msg);
    return 0;
}

int spw_spec__from_json_value(struct json_t *root, struct spw_pipeline_spec **out, char *err, size_t errlen)
{
    struct vctx c = {err, errlen, 0, 0, -1, 0};
    struct spw_pipeline_spec *spec = calloc(1, sizeof(*spec));
    if (!spec)
        return fail_oom(&c);
    int rc = parse_root(&c, root, spec);
    if (rc) {
        spw_spec_free(spec);
        return rc;
    }
    *out = spec;
    return 0;
}

/* name: NULL for text given directly, else the file name that prefixes messages. */
static int parse_buffer(const char *buf, size_t len, const char *name, struct spw_pipeline_spec **out,
                        char *err, size_t errlen)
{
    struct vctx c = {err, errlen, 0, 0, -1, 0};
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (name)
            return fail(&c, NULL, "%s:%d:%d: %s", name, je.line, je.column, je.text);
        return fail(&c, NULL, "%d:%d: %s", je.line, je.column, je.text);
    }
    int rc = spw_spec__from_json_value(root, out, err, errlen);
    json_decref(root);
    if (rc && name && err && errlen) {
        char *msg = strdup(err);
        if (msg) {
            snprintf(err, errlen, "%s: %s", name, msg);
            free(msg);
        }
    }
    return rc;
}

int spw_spec_parse_json(const char *text, struct spw_pipeline_spec **out, char *err, size_t errlen)
{
    struct vctx c = {err, errlen, 0, 0, -1, 0};
    if (!text)
        return fail(&c, NULL, "no spec text");
    size_t len = strnlen(text, (size_t)SPW_SPEC_MAX_JSON_BYTES + 1);
    if (len > SPW_SPEC_MAX_JSON_BYTES)
        return fail(&c, NULL, "spec text is longer than the cap of %d bytes", SPW_SPEC_MAX_JSON_BYTES);
    return parse_buffer(text, len, NULL, out, err, errlen);
}

int spw_spec_load_file(const char *path, struct spw_pipeline_spec **out, char *err, size_t errlen)
{
    struct vctx c = {err, errlen, 0, 0, -1, 0};
    char *buf = NULL;
    int rc;
    if (!path)
        return fail(&c, NULL, "no spec file name");
    FILE *f = fopen(path, "rb");
    if (!f) {
        rc = -errno;
        fail(&c, NULL, "%s: %s", path, strerror(errno));
        return rc;
    }
    /* read one byte past the cap to tell "exactly the cap" from "too big" without trusting st_size */
    buf = malloc((size_t)SPW_SPEC_MAX_JSON_BYTES + 1);
    if (!buf) {
        rc = fail_oom(&c);
        goto out;
    }
    errno = 0;
    size_t len = fread(buf, 1, (size_t)SPW_SPEC_MAX_JSON_BYTES + 1, f);
    if (ferror(f)) {
        rc = errno ? -errno : -EIO;
        fail(&c, NULL, "%s: %s", path, strerror(-rc));
        goto out;
    }
    if (len > SPW_SPEC_MAX_JSON_BYTES) {
        rc = fail(&c, NULL, "%s: larger than the cap of %d bytes", path, SPW_SPEC_MAX_JSON_BYTES);
        goto out;
    }
    rc = parse_buffer(buf, len, path, out, err, errlen);
out:
    free(buf);
    fclose(f);
    return rc;
}

/* What op owns (not op itself). */
static void op_free(struct spw_op_spec *op)
{
    free(op->function);
    free(op->kwargs);
    free(op->params);
    free(op->weights);
    for (int k = 0; op->ops && k < op->n_ops; k++)
        op_free(&op->ops[k]);
    free(op->ops);
}

void spw_spec_free(struct spw_pipeline_spec *spec)
{
    if (!spec)
        return;
    free(spec->source.path);
    free(spec->source.label_key);
    free(spec->source.annotations);
    for (int k = 0; k < spec->source.n_fields; k++) {
        free(spec->source.fields[k].from);
        free(spec->source.fields[k].key);
        free(spec->source.fields[k].labels_key);
        free(spec->source.fields[k].path);
    }
    free(spec->source.ca_file);
    free(spec->source.header_file);
    for (int i = 0; spec->ops && i < spec->n_ops; i++)
        op_free(&spec->ops[i]);
    free(spec->ops);
    for (int v = 0; spec->views && v < spec->n_views; v++)
        spw_spec_free(spec->views[v].ops);
    free(spec->views);
    free(spec);
}

/* ---- canonical output ----------------------------------------------------------------------------- */

struct jb { /* json builder: remembers the first allocation failure so callers check once */
    bool oom;
};

static json_t *jb_new(struct jb *b, json_t *v)
{
    if (!v)
        b->oom = true;
    return v;
}

static void jb_set(struct jb *b, json_t *obj, const char *key, json_t *v)
{
    if (!v || !obj || json_object_set_new(obj, key, v))
        b->oom = true;
}

static json_t *jb_numbers(struct jb *b, const double *v, size_t n)
{
    json_t *a = jb_new(b, json_array());
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, jb_new(b, json_real(v[i]))))
            b->oom = true;
    return a;
}

/* An enum's JSON name; NULL (reported as a failure) for a value no parser could have produced. */
static json_t *name_json(const char *name)
{
    return name ? json_string(name) : NULL;
}

static json_t *op_json(struct jb *b, const struct spw_op_spec *op);

static json_t *field_to_json(struct jb *b, const struct spw_op_field *f, const struct spw_op_spec *op)
{
    const char *base = (const char *)op + f->off;
    switch (f->kind) {
    case SPW_FK_SIZE:
        if (op->size_w == 0)
            return json_integer(op->size_h);
        return json_pack("[ii]", op->size_h, op->size_w);
    case SPW_FK_MAX_SIZE:
        return op->max_size ? json_integer(op->max_size) : json_null();
    case SPW_FK_INT:
        return json_integer(*(const int *)(const void *)base);
    case SPW_FK_MAGNITUDE:
        return json_integer(op->magnitude);
    case SPW_FK_NUM:
        return json_real(*(const double *)(const void *)base);
    case SPW_FK_BOOL:
        return json_boolean(*(const bool *)(const void *)base);
    case SPW_FK_INTERP:
        return name_json(spw_interp_name(op->interpolation));
    case SPW_FK_DTYPE:
        return name_json(spw_dtype_name(op->dtype));
    case SPW_FK_POLICY:
        return name_json(spw_aa_policy_name(op->policy));
    case SPW_FK_RANGE:
    case SPW_FK_PAIR:
        return jb_numbers(b, (const double *)(const void *)base, 2);
    case SPW_FK_SHEAR:
        return jb_numbers(b, op->shear, 2);
    case SPW_FK_FILL:
        return jb_numbers(b, op->fill, 3);
    case SPW_FK_OPT_FILL:
        return op->has_fill ? jb_numbers(b, op->fill, 3) : json_null();
    case SPW_FK_JITTER: {
        const double *r = (const double *)(const void *)base;
        if (r[0] == 0 && r[1] == 0)
            return json_integer(0); /* off: torchvision's default argument */
        return jb_numbers(b, r, 2);
    }
    case SPW_FK_ERASE_VALUE:
        if (op->erase_random_value)
            return json_string("random");
        return jb_numbers(b, op->erase_value, 3);
    case SPW_FK_TRIPLE:
        return jb_numbers(b, (const double *)(const void *)base, 3);
    case SPW_FK_OPT_NUM: {
        const double d = *(const double *)(const void *)base;
        return d != 0 ? json_real(d) : json_null();
    }
    case SPW_FK_WINDOW:
        return json_string("hann");
    case SPW_FK_MEL_SCALE:
        return name_json(spw_mel_scale_name(op->mel_scale));
    case SPW_FK_MEL_NORM:
        return op->mel_norm == SPW_MEL_NORM_NONE ? json_null() : name_json(spw_mel_norm_name(op->mel_norm));
    case SPW_FK_STYPE:
        return name_json(spw_db_stype_name(op->stype));
    case SPW_FK_FUNCTION:
        return json_string(op->function ? op->function : "");
    case SPW_FK_KWARGS:
        return op->kwargs ? json_loads(op->kwargs, 0, NULL) : json_object();
    case SPW_FK_SHAPE: {
        if (!op->out_ndim)
            return json_null();
        json_t *a = jb_new(b, json_array());
        for (int i = 0; a && i < op->out_ndim; i++)
            if (json_array_append_new(a, jb_new(b, json_integer(op->out_shape[i]))))
                b->oom = true;
        return a;
    }
    case SPW_FK_ARRAY_DTYPE:
        return op->has_out_dtype ? name_json(spw_dtype_name(op->out_dtype)) : json_null();
    case SPW_FK_OPS: {
        json_t *a = jb_new(b, json_array());
        for (int k = 0; a && k < op->n_ops; k++)
            if (json_array_append_new(a, op_json(b, &op->ops[k])))
                b->oom = true;
        return a;
    }
    case SPW_FK_WEIGHTS:
        return op->weights ? jb_numbers(b, op->weights, (size_t)op->n_weights) : json_null();
    case SPW_FK_KSIZE: {
        const int *k = (const int *)(const void *)base;
        return json_pack("[ii]", k[0], k[1]);
    }
    case SPW_FK_SIZES: {            /* one number for one size */
        if (op->n_min_size == 1)
            return json_integer(op->min_size[0]);
        json_t *a = jb_new(b, json_array());
        for (int i = 0; a && i < op->n_min_size; i++)
            if (json_array_append_new(a, jb_new(b, json_integer(op->min_size[i]))))
                b->oom = true;
        return a;
    }
    case SPW_FK_SIGMA:
    case SPW_FK_XY:
        return jb_numbers(b, (const double *)(const void *)base, 2);
    case SPW_FK_PADDING: {          /* one number when the sides agree (the form specs had before) */
        const int *p = op->padding;
        if (p[0] == p[1] && p[0] == p[2] && p[0] == p[3])
            return json_integer(p[0]);
        return json_pack("[iiii]", p[0], p[1], p[2], p[3]);
    }
    case SPW_FK_PAD_MODE:
        return name_json(spw_pad_mode_name(op->padding_mode));
    case SPW_FK_KALDI_WINDOW:
        return name_json(spw_kaldi_window_name(op->window_type));
    }
    return NULL;
}

/* One op as the canonical JSON writes it: its name and every field of its row (a plugin op: its table's). */
static json_t *op_json(struct jb *b, const struct spw_op_spec *op)
{
    json_t *o = jb_new(b, json_object());
    const char *name = op->plugin ? op->plugin->name : spw_op_name(op->kind);
    jb_set(b, o, "op", name_json(name));
    for (int k = 0; op->plugin && k < op->plugin->op->n_fields; k++) {
        const struct spw_plugin_field *f = &op->plugin->op->fields[k];
        jb_set(b, o, f->name, f->type == SPW_PLUGIN_BOOL  ? json_boolean(op->params[k] != 0)
                              : f->type == SPW_PLUGIN_INT ? json_integer((json_int_t)op->params[k])
                                                          : json_real(op->params[k]));
    }
    if (name && !op->plugin)
        for (const struct spw_op_field *f = spw_op_def(op->kind)->fields; f->name; f++)
            jb_set(b, o, f->name, field_to_json(b, f, op));
    return o;
}

json_t *spw_spec__op_field_json(const struct spw_op_field *f, const struct spw_op_spec *op)
{
    struct jb b = {false};
    json_t *v = field_to_json(&b, f, op);
    if (b.oom) {
        json_decref(v);
        return NULL;
    }
    return v;
}

json_t *spw_spec__to_json_value(const struct spw_pipeline_spec *spec)
{
    struct jb b = {false};
    if (!spec)
        return NULL;
    json_t *root = jb_new(&b, json_object());
    json_t *src = jb_new(&b, json_object());
    jb_set(&b, src, "format", name_json(spw_source_format_name(spec->source.format)));
    jb_set(&b, src, "path", json_string(spec->source.path ? spec->source.path : ""));
    jb_set(&b, src, "shuffle", json_boolean(spec->source.shuffle));
    jb_set(&b, src, "seed", json_integer((json_int_t)spec->source.seed));
    jb_set(&b, src, "epochs", json_integer(spec->source.epochs));
    if (spec->source.label_key)             /* absent unless set, so older specs keep their canonical text */
        jb_set(&b, src, "label_key", json_string(spec->source.label_key));
    if (spec->source.ca_file)
        jb_set(&b, src, "ca_file", json_string(spec->source.ca_file));
    if (spec->source.header_file)
        jb_set(&b, src, "header_file", json_string(spec->source.header_file));
    if (spec->source.annotations)
        jb_set(&b, src, "annotations", json_string(spec->source.annotations));
    if (spec->source.no_labels)
        jb_set(&b, src, "labels", json_false());
    if (spec->source.n_fields) {
        json_t *fields = jb_new(&b, json_object());
        for (int k = 0; fields && k < spec->source.n_fields; k++) {
            const struct spw_sample_field_spec *f = &spec->source.fields[k];
            json_t *fo = jb_new(&b, json_object());
            jb_set(&b, fo, "from", json_string(f->from));
            if (f->path)
                jb_set(&b, fo, "path", json_string(f->path));
            jb_set(&b, fo, "as", json_string(field_kind_names[f->kind]));
            if (f->key)
                jb_set(&b, fo, "key", json_string(f->key));
            if (f->kind == SPW_SAMPLE_FIELD_MASK)
                jb_set(&b, fo, "ignore_index", json_integer(f->ignore_index));
            if (f->kind == SPW_SAMPLE_FIELD_BOXES) {
                jb_set(&b, fo, "format", json_string(box_format_names[f->box_format]));
                jb_set(&b, fo, "labels_key", json_string(f->labels_key));
                jb_set(&b, fo, "min_size", json_real(f->min_size));
            }
            jb_set(&b, fields, f->name, fo);
        }
        jb_set(&b, src, "fields", fields);
    }
    jb_set(&b, root, "source", src);

    json_t *ops = jb_new(&b, json_array());
    for (int i = 0; ops && i < spec->n_ops; i++)
        if (spec->ops[i].kind != SPW_OP_VIEWS && json_array_append_new(ops, op_json(&b, &spec->ops[i])))
            b.oom = true;
    jb_set(&b, root, "ops", ops);
    if (spec->n_views) {                /* absent when none, so specs without them keep their canonical text */
        json_t *views = jb_new(&b, json_array());
        for (int v = 0; views && v < spec->n_views; v++) {
            const struct spw_pipeline_spec *sub = spec->views[v].ops;
            json_t *view = jb_new(&b, json_object()), *vops = jb_new(&b, json_array());
            jb_set(&b, view, "repeat", json_integer(spec->views[v].repeat));
            for (int i = 0; vops && i < sub->n_ops; i++)
                if (json_array_append_new(vops, op_json(&b, &sub->ops[i])))
                    b.oom = true;
            jb_set(&b, view, "ops", vops);
            if (json_array_append_new(views, view))
                b.oom = true;
        }
        jb_set(&b, root, "views", views);
    }

    json_t *batch = jb_new(&b, json_object());
    jb_set(&b, batch, "size", json_integer(spec->batch.size));
    jb_set(&b, batch, "drop_remainder", json_boolean(spec->batch.drop_remainder));
    if (spw_media_is_audio(spec->source.media) || spec->batch.pad)     /* images: only true, as before */
        jb_set(&b, batch, "pad", json_boolean(spec->batch.pad));
    jb_set(&b, batch, "layout", name_json(spw_layout_name(spec->batch.layout)));
    const struct spw_mix_spec *m = &spec->batch.mix;
    if (m->num_classes) {               /* absent when off, so specs without it keep their canonical text */
        json_t *mix = jb_new(&b, json_object());
        jb_set(&b, mix, "num_classes", json_integer(m->num_classes));
        jb_set(&b, mix, "mixup_alpha", json_real(m->mixup_alpha));
        jb_set(&b, mix, "cutmix_alpha", json_real(m->cutmix_alpha));
        jb_set(&b, mix, "p", json_real(m->p));
        jb_set(&b, mix, "switch_prob", json_real(m->switch_prob));
        jb_set(&b, batch, "mix", mix);
    }
    jb_set(&b, root, "batch", batch);
    jb_set(&b, root, "on_error", name_json(spw_on_error_name(spec->on_error)));
    jb_set(&b, root, "max_pixels", json_integer(spec->max_pixels));
    jb_set(&b, root, "max_file_bytes", json_integer(spec->max_file_bytes));
    jb_set(&b, root, "max_samples", json_integer(spec->max_samples));
    if (b.oom) {
        json_decref(root);
        return NULL;
    }
    return root;
}

/* Text output. jansson prints every real with 17 digits (0.48499999999999999), so values are written
 * here with the shortest digits that read back exactly; layout: one top-level key and one op per line. */
struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void sb_add(struct sbuf *s, const char *text, size_t n)
{
    if (s->oom)
        return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 1024;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p) {
            s->oom = true;
            return;
        }
        s->p = p, s->cap = cap;
    }
    memcpy(s->p + s->len, text, n);
    s->len += n;
    s->p[s->len] = '\0';
}

static void sb_str(struct sbuf *s, const char *text)
{
    sb_add(s, text, strlen(text));
}

static void emit(struct sbuf *s, json_t *v, int depth);

static void emit_string(struct sbuf *s, const char *str)
{
    json_t *t = json_string(str);
    char *q = t ? json_dumps(t, JSON_ENCODE_ANY) : NULL;
    if (q)
        sb_str(s, q);
    else
        s->oom = true;
    free(q);
    json_decref(t);
}

/* depth 0: the root object, one key per line; depth 1 arrays ("ops"): one element per line. */
static void emit(struct sbuf *s, json_t *v, int depth)
{
    char num[40];
    const char *key;
    json_t *x;
    size_t i;
    bool first = true;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        sb_str(s, "{");
        json_object_foreach(v, key, x) {
            if (!first)
                sb_str(s, depth == 0 ? ",\n " : ", ");
            first = false;
            emit_string(s, key);
            sb_str(s, ": ");
            emit(s, x, depth + 1);
        }
        sb_str(s, "}");
        break;
    case JSON_ARRAY:
        sb_str(s, depth == 1 && json_array_size(v) ? "[\n  " : "[");
        json_array_foreach(v, i, x) {
            if (i)
                sb_str(s, depth == 1 ? ",\n  " : ", ");
            emit(s, x, depth + 1);
        }
        sb_str(s, depth == 1 && json_array_size(v) ? "\n ]" : "]");
        break;
    case JSON_STRING:
        emit_string(s, json_string_value(v));
        break;
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        sb_str(s, num);
        break;
    case JSON_REAL:
        fmt_num(num, sizeof(num) - 2, json_real_value(v));
        if (!strpbrk(num, ".eEn")) /* keep it a real: 1 -> 1.0 */
            strcat(num, ".0");
        sb_str(s, num);
        break;
    case JSON_TRUE: sb_str(s, "true"); break;
    case JSON_FALSE: sb_str(s, "false"); break;
    case JSON_NULL: sb_str(s, "null"); break;
    }
}

char *spw_spec_to_json(const struct spw_pipeline_spec *spec)
{
    json_t *root = spw_spec__to_json_value(spec);
    if (!root)
        return NULL;
    struct sbuf s = {NULL, 0, 0, false};
    emit(&s, root, 0);
    json_decref(root);
    if (s.oom) {
        free(s.p);
        return NULL;
    }
    return s.p;
}
