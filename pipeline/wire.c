/* pipeline/wire.c - hand-made protobuf encoding/decoding of ElementBatch (field numbers from
 * proto/spillway.proto) so tensor bytes are never copied by the codec (see wire.h). Pure; thread-safe. */
#include "pipeline/wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

/* ElementBatch fields */
enum { F_JOB = 1, F_EPOCH = 2, F_SPLIT = 3, F_GENERATION = 4, F_CUT = 5, F_POSITIONS = 6, F_TENSORS = 7,
       F_END = 8, F_TOMBSTONES = 9, F_SAMPLES = 10, F_TOMBSTONE_ERRORS = 11, F_DIRECT_PORT = 12,
       F_DIRECT_TICKET = 13 };
/* Tensor fields */
enum { T_DTYPE = 1, T_SHAPE = 2, T_DATA = 3, T_ENCODING = 4 };
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* proto DType values are the C enum's values (spec_proto.c relies on the same). */

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static uint8_t *put_tag(uint8_t *p, int field, int wt)
{
    return put_varint(p, ((uint64_t)field << 3) | (uint64_t)wt);
}

static size_t packed_size(const int64_t *v, size_t n)
{
    size_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += varint_size((uint64_t)v[i]);
    return s;
}

static size_t error_len(const char *e)
{
    return e ? strnlen(e, SPW_WIRE_MAX_ERROR) : 0;
}

static size_t header_size(const struct spw_wire_batch *b)
{
    size_t s = 0;
    const uint64_t u[4] = {b->job, b->epoch, b->split, b->generation};
    for (int i = 0; i < 4; i++)
        if (u[i])
            s += 1 + varint_size(u[i]);
    if (b->cut)
        s += 1 + varint_size((uint64_t)(int64_t)b->cut);
    if (b->end_of_split)
        s += 2;
    const int64_t *arr[3] = {b->positions, b->tombstones, b->samples};
    const size_t cnt[3] = {b->n_positions, b->n_tombstones, b->n_samples};
    for (int i = 0; i < 3; i++)
        if (cnt[i]) {
            size_t ps = packed_size(arr[i], cnt[i]);
            s += 1 + varint_size(ps) + ps;
        }
    for (size_t i = 0; i < b->n_tombstone_errors; i++) {
        size_t len = error_len(b->tombstone_errors[i]);
        s += 1 + varint_size(len) + len;
    }
    if (b->direct_port)
        s += 1 + varint_size(b->direct_port) + 2 + SPW_DIRECT_TICKET_BYTES;
    return s;
}

/* Tensor submessage without its data bytes: dtype, encoding, packed shape, data tag + length. */
static size_t tensor_meta_size(const struct spw_wire_tensor *t)
{
    size_t s = 0;
    if (t->dtype)
        s += 1 + varint_size((uint64_t)t->dtype);
    if (t->encoding)
        s += 1 + varint_size((uint64_t)t->encoding);
    if (t->ndim) {
        size_t ps = packed_size(t->shape, (size_t)t->ndim);
        s += 1 + varint_size(ps) + ps;
    }
    s += 1 + varint_size(t->nbytes);
    return s;
}

size_t spw_wire_scratch_size(const struct spw_wire_batch *b)
{
    size_t s = header_size(b);
    for (int i = 0; i < b->n_tensors; i++) {
        size_t sub = tensor_meta_size(&b->tensors[i]) + b->tensors[i].nbytes;
        s += 1 + varint_size(sub) + tensor_meta_size(&b->tensors[i]);
    }
    return s;
}

size_t spw_wire_encoded_size(const struct spw_wire_batch *b)
{
    size_t s = spw_wire_scratch_size(b);
    for (int i = 0; i < b->n_tensors; i++)
        s += b->tensors[i].nbytes;
    return s;
}

static uint8_t *put_packed(uint8_t *p, int field, const int64_t *v, size_t n)
{
    if (!n)
        return p;
    p = put_tag(p, field, WT_LEN);
    p = put_varint(p, packed_size(v, n));
    for (size_t i = 0; i < n; i++)
        p = put_varint(p, (uint64_t)v[i]);
    return p;
}

int spw_wire_encode(const struct spw_wire_batch *b, uint8_t *scratch, size_t scratch_cap, struct iovec *iov,
                    int cap)
{
    if (b->n_tensors < 0 || b->n_tensors > SPW_WIRE_MAX_TENSORS)
        return -EINVAL;
    if (scratch_cap < spw_wire_scratch_size(b) || cap < 1 + 2 * b->n_tensors)
        return -ENOSPC;
    uint8_t *p = scratch;
    const uint64_t u[4] = {b->job, b->epoch, b->split, b->generation};
    for (int i = 0; i < 4; i++)
        if (u[i]) {
            p = put_tag(p, F_JOB + i, WT_VARINT);
            p = put_varint(p, u[i]);
        }
    if (b->cut) {
        p = put_tag(p, F_CUT, WT_VARINT);
        p = put_varint(p, (uint64_t)(int64_t)b->cut);
    }
    p = put_packed(p, F_POSITIONS, b->positions, b->n_positions);
    if (b->end_of_split) {
        p = put_tag(p, F_END, WT_VARINT);
        *p++ = 1;
    }
    p = put_packed(p, F_TOMBSTONES, b->tombstones, b->n_tombstones);
    p = put_packed(p, F_SAMPLES, b->samples, b->n_samples);
    for (size_t i = 0; i < b->n_tombstone_errors; i++) {
        const size_t len = error_len(b->tombstone_errors[i]);
        p = put_tag(p, F_TOMBSTONE_ERRORS, WT_LEN);
        p = put_varint(p, len);
        memcpy(p, b->tombstone_errors[i], len);
        p += len;
    }
    if (b->direct_port) {
        p = put_tag(p, F_DIRECT_PORT, WT_VARINT);
        p = put_varint(p, b->direct_port);
        p = put_tag(p, F_DIRECT_TICKET, WT_LEN);
        *p++ = SPW_DIRECT_TICKET_BYTES;
        memcpy(p, b->direct_ticket, SPW_DIRECT_TICKET_BYTES);
        p += SPW_DIRECT_TICKET_BYTES;
    }
    int n = 0;
    iov[n++] = (struct iovec){scratch, (size_t)(p - scratch)};
    for (int i = 0; i < b->n_tensors; i++) {
        const struct spw_wire_tensor *t = &b->tensors[i];
        uint8_t *start = p;
        p = put_tag(p, F_TENSORS, WT_LEN);
        p = put_varint(p, tensor_meta_size(t) + t->nbytes);
        if (t->dtype) {
            p = put_tag(p, T_DTYPE, WT_VARINT);
            p = put_varint(p, (uint64_t)t->dtype);
        }
        if (t->encoding) {
            p = put_tag(p, T_ENCODING, WT_VARINT);
            p = put_varint(p, (uint64_t)t->encoding);
        }
        p = put_packed(p, T_SHAPE, t->shape, (size_t)t->ndim);
        p = put_tag(p, T_DATA, WT_LEN);
        p = put_varint(p, t->nbytes);
        iov[n++] = (struct iovec){start, (size_t)(p - start)};
        iov[n++] = (struct iovec){(void *)t->data, t->nbytes};
    }
    return n;
}

/* ---- decoding ---- */

/* A reader over a message in parts (gRPC hands a message over as slices): a position and a limit in the
 * whole message, and where that position is in the parts. */
struct reader {
    const struct iovec *iov;
    int n, i;                   /* parts; the current one */
    const uint8_t *p, *pe;      /* position in the current part, its end */
    size_t pos, end;            /* absolute position; limit */
};

static void reader_init(struct reader *r, const struct iovec *iov, int n)
{
    size_t total = 0;
    for (int k = 0; k < n; k++)
        total += iov[k].iov_len;
    *r = (struct reader){.iov = iov, .n = n, .i = 0, .pos = 0, .end = total};
    r->p = n ? iov[0].iov_base : NULL;
    r->pe = n ? r->p + iov[0].iov_len : NULL;
}

static size_t left(const struct reader *r)
{
    return r->end - r->pos;
}

/* Move to the next part while the current one is used up (and there are bytes left). */
static void settle(struct reader *r)
{
    while (r->p == r->pe && r->i + 1 < r->n) {
        r->i++;
        r->p = r->iov[r->i].iov_base;
        r->pe = r->p + r->iov[r->i].iov_len;
    }
}

static int get_byte(struct reader *r, uint8_t *c)
{
    if (r->pos >= r->end)
        return -1;
    settle(r);
    *c = *r->p++;
    r->pos++;
    return 0;
}

static int skip(struct reader *r, uint64_t n)
{
    if (n > left(r))
        return -1;
    r->pos += n;
    while (n) {
        settle(r);
        size_t here = (size_t)(r->pe - r->p) < n ? (size_t)(r->pe - r->p) : (size_t)n;
        r->p += here;
        n -= here;
    }
    return 0;
}

/* A reader limited to the next len bytes (the caller then skips them in r). */
static int sub_reader(const struct reader *r, uint64_t len, struct reader *sub)
{
    if (len > left(r))
        return -1;
    *sub = *r;
    sub->end = r->pos + len;
    return 0;
}

static int get_varint(struct reader *r, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint8_t c;
        if (get_byte(r, &c))
            return -1;
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static int skip_field(struct reader *r, int wt)
{
    uint64_t n;
    switch (wt) {
    case WT_VARINT: return get_varint(r, &n);
    case WT_I64: return skip(r, 8);
    case WT_I32: return skip(r, 4);
    case WT_LEN: return get_varint(r, &n) ? -1 : skip(r, n);
    default: return -1;
    }
}

/* Append a packed (or single varint) repeated int64 field to *arr. */
static int get_repeated(struct reader *r, int wt, int64_t **arr, size_t *n, size_t cap)
{
    uint64_t v;
    if (wt == WT_VARINT) {
        if (get_varint(r, &v) || *n >= cap)
            return -1;
        int64_t *a = realloc(*arr, (*n + 1) * sizeof **arr);
        if (!a)
            return -1;
        *arr = a;
        a[(*n)++] = (int64_t)v;
        return 0;
    }
    uint64_t len;
    struct reader sub, count_r;
    if (wt != WT_LEN || get_varint(r, &len) || sub_reader(r, len, &sub) || skip(r, len))
        return -1;
    size_t count = 0;                       /* count first, then allocate once */
    uint8_t c;
    for (count_r = sub; !get_byte(&count_r, &c);)
        count += !(c & 0x80);
    if (*n + count > cap)
        return -1;
    int64_t *a = realloc(*arr, (*n + count + 1) * sizeof **arr);
    if (!a)
        return -1;
    *arr = a;
    while (left(&sub)) {
        if (get_varint(&sub, &v))
            return -1;
        a[(*n)++] = (int64_t)v;
    }
    return 0;
}

static int get_tensor(struct reader *r, struct spw_wire_tensor *t, char *err, size_t errlen)
{
    uint64_t len, key, v = 0;
    struct reader sub;
    if (get_varint(r, &len) || sub_reader(r, len, &sub) || skip(r, len)) {
        snprintf(err, errlen, "tensor: bad length");
        return SPW_EFORMAT;
    }
    memset(t, 0, sizeof *t);
    while (left(&sub)) {
        if (get_varint(&sub, &key))
            goto bad;
        int field = (int)(key >> 3), wt = (int)(key & 7);
        if (field == T_DTYPE && wt == WT_VARINT) {
            if (get_varint(&sub, &v) || v > SPW_DTYPE_I64)
                goto bad;
            t->dtype = (enum spw_dtype)v;
        } else if (field == T_ENCODING && wt == WT_VARINT) {
            if (get_varint(&sub, &v) || v > SPW_WIRE_ZSTD) {
                snprintf(err, errlen, "tensor: unknown encoding");
                return SPW_EFORMAT;
            }
            t->encoding = (enum spw_wire_encoding)v;
        } else if (field == T_SHAPE && (wt == WT_VARINT || wt == WT_LEN)) {
            struct reader vals = sub;
            if (wt == WT_LEN) {                      /* packed */
                if (get_varint(&sub, &v) || sub_reader(&sub, v, &vals) || skip(&sub, v))
                    goto bad;
            }
            bool first = true;
            while (wt == WT_VARINT ? first : left(&vals) > 0) {
                first = false;
                if (t->ndim >= SPW_TENSOR_MAX_DIMS) {
                    snprintf(err, errlen, "tensor: more than %d dims", SPW_TENSOR_MAX_DIMS);
                    return SPW_ETOOBIG;
                }
                if (get_varint(&vals, &v))
                    goto bad;
                t->shape[t->ndim++] = (int64_t)v;
            }
            if (wt == WT_VARINT)
                sub = vals;
        } else if (field == T_DATA && wt == WT_LEN) {
            if (get_varint(&sub, &v) || v > left(&sub))
                goto bad;
            settle(&sub);
            t->offset = sub.pos;
            t->nbytes = (size_t)v;
            /* Contiguous in one part (always, for a message in one piece): point at it. */
            t->data = (size_t)(sub.pe - sub.p) >= v ? sub.p : NULL;
            skip(&sub, v);
        } else if (skip_field(&sub, wt)) {
            goto bad;
        }
    }
    /* The shape must describe the data exactly. */
    size_t expect = spw_dtype_size(t->dtype);
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0 || (t->shape[i] && expect > SIZE_MAX / (size_t)t->shape[i]))
            goto bad;
        expect *= (size_t)t->shape[i];
    }
    t->raw_bytes = expect;
    if (t->encoding == SPW_WIRE_ZSTD) {     /* n frames, each at least a frame header, for n >= 1 elements */
        if (expect > SPW_WIRE_MAX_RAW_BYTES) {
            snprintf(err, errlen, "tensor: decompresses to %zu bytes, over the %zu MiB cap", expect,
                     SPW_WIRE_MAX_RAW_BYTES >> 20);
            return SPW_ETOOBIG;
        }
        if (t->ndim < 1 || t->shape[0] < 1 || t->nbytes < (size_t)t->shape[0]) {
            snprintf(err, errlen, "tensor: a compressed payload of %zu bytes for %lld elements", t->nbytes,
                     t->ndim ? (long long)t->shape[0] : 0LL);
            return SPW_EFORMAT;
        }
    } else if (expect != t->nbytes) {
        snprintf(err, errlen, "tensor: shape and dtype say %zu bytes, data has %zu", expect, t->nbytes);
        return SPW_EFORMAT;
    }
    return 0;
bad:
    snprintf(err, errlen, "tensor: malformed");
    return SPW_EFORMAT;
}

/* One tombstone error string, appended to out's (capped in count and length before allocating). */
static int get_error(struct reader *r, struct spw_wire_batch *out, char *err, size_t errlen)
{
    uint64_t len;
    struct reader sub;
    if (get_varint(r, &len) || sub_reader(r, len, &sub))
        return SPW_EFORMAT;
    if (len > SPW_WIRE_MAX_ERROR || out->n_tombstone_errors >= SPW_WIRE_MAX_ELEMENTS) {
        snprintf(err, errlen, "a tombstone error over %d bytes, or more than %d", SPW_WIRE_MAX_ERROR,
                 SPW_WIRE_MAX_ELEMENTS);
        return SPW_ETOOBIG;
    }
    char **a = realloc(out->tombstone_errors, (out->n_tombstone_errors + 1) * sizeof *a);
    char *s = malloc(len + 1);
    if (a)
        out->tombstone_errors = a;
    if (!a || !s) {
        free(s);
        return -ENOMEM;
    }
    uint8_t c;
    for (size_t i = 0; !get_byte(&sub, &c); i++)
        s[i] = c ? (char)c : '?';           /* a NUL would cut the text short */
    s[len] = '\0';
    skip(r, len);
    a[out->n_tombstone_errors++] = s;
    return 0;
}

int spw_wire_decode(const uint8_t *msg, size_t len, struct spw_wire_batch *out, char *err, size_t errlen)
{
    struct iovec one = {(void *)msg, len};
    return spw_wire_decode_parts(&one, 1, out, err, errlen);
}

int spw_wire_decode_parts(const struct iovec *iov, int nparts, struct spw_wire_batch *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (errlen)
        err[0] = 0;
    struct reader r;
    reader_init(&r, iov, nparts);
    uint64_t key, v = 0;
    int rc = 0;
    bool has_ticket = false;
    while (left(&r) && rc == 0) {
        if (get_varint(&r, &key)) {
            rc = SPW_EFORMAT;
            break;
        }
        int field = (int)(key >> 3), wt = (int)(key & 7);
        if (field >= F_JOB && field <= F_CUT && wt == WT_VARINT) {
            if (get_varint(&r, &v)) {
                rc = SPW_EFORMAT;
                break;
            }
            switch (field) {
            case F_JOB: out->job = v; break;
            case F_EPOCH: out->epoch = v; break;
            case F_SPLIT: out->split = v; break;
            case F_GENERATION: out->generation = v; break;
            default: out->cut = (int32_t)(int64_t)v; break;
            }
        } else if (field == F_END && wt == WT_VARINT) {
            rc = get_varint(&r, &v) ? SPW_EFORMAT : 0;
            out->end_of_split = v != 0;
        } else if (field == F_POSITIONS || field == F_TOMBSTONES || field == F_SAMPLES) {
            int64_t **arr = field == F_POSITIONS ? &out->positions : field == F_TOMBSTONES ? &out->tombstones
                                                                                             : &out->samples;
            size_t *n = field == F_POSITIONS ? &out->n_positions : field == F_TOMBSTONES ? &out->n_tombstones
                                                                                           : &out->n_samples;
            if (get_repeated(&r, wt, arr, n, SPW_WIRE_MAX_ELEMENTS)) {
                snprintf(err, errlen, "field %d: malformed or more than %d entries", field, SPW_WIRE_MAX_ELEMENTS);
                rc = SPW_ETOOBIG;
            }
        } else if (field == F_TOMBSTONE_ERRORS && wt == WT_LEN) {
            rc = get_error(&r, out, err, errlen);
        } else if (field == F_DIRECT_PORT && wt == WT_VARINT) {
            rc = get_varint(&r, &v) || v == 0 || v > 65535 ? SPW_EFORMAT : 0;
            out->direct_port = (uint32_t)v;
        } else if (field == F_DIRECT_TICKET && wt == WT_LEN) {
            rc = get_varint(&r, &v) || v != SPW_DIRECT_TICKET_BYTES ? SPW_EFORMAT : 0;
            for (int i = 0; rc == 0 && i < SPW_DIRECT_TICKET_BYTES; i++)
                rc = get_byte(&r, &out->direct_ticket[i]) ? SPW_EFORMAT : 0;
            has_ticket = true;
        } else if (field == F_TENSORS && wt == WT_LEN) {
            if (out->n_tensors >= SPW_WIRE_MAX_TENSORS) {
                snprintf(err, errlen, "more than %d tensors", SPW_WIRE_MAX_TENSORS);
                rc = SPW_ETOOBIG;
            } else {
                rc = get_tensor(&r, &out->tensors[out->n_tensors++], err, errlen);
            }
        } else if (skip_field(&r, wt)) {
            rc = SPW_EFORMAT;
        }
    }
    if (rc == 0 && (out->direct_port != 0) != has_ticket) {
        snprintf(err, errlen, "a data connection's port without its ticket, or a ticket without a port");
        rc = SPW_EFORMAT;
    }
    if (rc == 0 && out->n_tombstone_errors > out->n_tombstones) {
        snprintf(err, errlen, "%zu tombstone errors for %zu tombstones", out->n_tombstone_errors, out->n_tombstones);
        rc = SPW_EFORMAT;
    }
    if (rc == SPW_EFORMAT && !err[0])
        snprintf(err, errlen, "malformed ElementBatch");
    if (rc)
        spw_wire_batch_free(out);
    return rc;
}

void spw_wire_copy(const struct iovec *iov, int n, size_t offset, size_t len, uint8_t *dst)
{
    for (int i = 0; i < n && len; i++) {
        if (offset >= iov[i].iov_len) {
            offset -= iov[i].iov_len;
            continue;
        }
        size_t here = iov[i].iov_len - offset < len ? iov[i].iov_len - offset : len;
        memcpy(dst, (const uint8_t *)iov[i].iov_base + offset, here);
        dst += here;
        len -= here;
        offset = 0;
    }
}

const uint8_t *spw_wire_view(const struct iovec *iov, int n, size_t offset, size_t len, uint8_t *spill)
{
    int i = 0;
    while (i < n && offset >= iov[i].iov_len)
        offset -= iov[i++].iov_len;
    if (i < n && iov[i].iov_len - offset >= len)
        return (const uint8_t *)iov[i].iov_base + offset;
    size_t got = 0;
    for (; spill && i < n && got < len; i++, offset = 0) {
        const size_t here = iov[i].iov_len - offset < len - got ? iov[i].iov_len - offset : len - got;
        memcpy(spill + got, (const uint8_t *)iov[i].iov_base + offset, here);
        got += here;
    }
    return spill && got == len ? spill : NULL;
}

void spw_wire_batch_free(struct spw_wire_batch *b)
{
    if (!b)
        return;
    free(b->positions);
    free(b->tombstones);
    free(b->samples);
    for (size_t i = 0; i < b->n_tombstone_errors; i++)
        free(b->tombstone_errors[i]);
    free(b->tombstone_errors);
    b->tombstone_errors = NULL;
    b->n_tombstone_errors = 0;
    b->positions = b->tombstones = b->samples = NULL;
    b->n_positions = b->n_tombstones = b->n_samples = 0;
}
