/* pipeline/fields.c - sample fields (see fields.h): read from a tar key's members, packed and unpacked.
 * Thread-safe: no shared state. */
#include "pipeline/fields.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/utf8.h"
#include "ops/png.h"
#include "pipeline/value.h"

void spw_fields_free(struct spw_fields *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n; i++) {
        free(f->f[i].data);
        spw_image_free(&f->f[i].mask);
        free(f->f[i].boxes);
        free(f->f[i].box_labels);
    }
    free(f);
}

bool spw_fields_have_targets(const struct spw_source_spec *spec)
{
    for (int k = 0; k < spec->n_fields; k++)
        if (spec->fields[k].kind == SPW_SAMPLE_FIELD_MASK || spec->fields[k].kind == SPW_SAMPLE_FIELD_BOXES)
            return true;
    return false;
}

/* Room for n boxes and their ids in b (n 0: one, so that the arrays exist). Returns 0 or -ENOMEM. */
static int alloc_boxes(struct spw_field *b, size_t n)
{
    b->boxes = malloc(sizeof *b->boxes * 4 * (n ? n : 1));
    b->box_labels = malloc(sizeof *b->box_labels * (n ? n : 1));
    return b->boxes && b->box_labels ? 0 : -ENOMEM;
}

/* A mask member's PNG in b->data decoded into b->mask (the bytes then freed). */
static int decode_mask(const struct spw_pipeline_spec *spec, const struct spw_sample_field_spec *fs,
                       struct spw_field *b, char *err, size_t errlen)
{
    char why[200];
    const int rc = spw_png_decode_labels(b->data, b->len, spec->max_pixels, &b->mask, why, sizeof why);
    if (rc)
        return spw_fail(err, errlen, rc, "field %s: %s", fs->name, why);
    free(b->data);
    b->data = NULL;
    b->len = 0;
    return 0;
}

/* A .json member's string field `key` in place of the member's bytes. */
static int json_text(const struct spw_sample_field_spec *fs, struct spw_field *b, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)b->data, b->len, JSON_REJECT_DUPLICATES, &je);
    json_t *v = json_is_object(root) ? json_object_get(root, fs->key) : NULL;
    int rc = 0;
    if (!json_is_string(v)) {
        rc = spw_fail(err, errlen, SPW_EFORMAT, "field %s: %s", fs->name,
                      !root ? je.text : !json_is_object(root) ? "the .json member is not an object"
                      : !v ? "the .json member has no such key" : "the key's value is not a string");
    } else {
        const size_t n = json_string_length(v);
        uint8_t *t = malloc(n ? n : 1);
        if (!t) {
            rc = -ENOMEM;
        } else {
            memcpy(t, json_string_value(v), n);
            free(b->data);
            b->data = t;
            b->len = n;
        }
    }
    json_decref(root);
    return rc;
}

/* A finite JSON number. */
static bool number(const json_t *v, double *out)
{
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return isfinite(*out);
}

/* A .json member's boxes (fs->key: a list of 4-number lists in fs->box_format) and class ids (fs->labels_key:
 * a list of integers, as many) into b, as x0 y0 x1 y1 float32; the member's bytes then freed. */
static int json_boxes(const struct spw_sample_field_spec *fs, struct spw_field *b, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb((const char *)b->data, b->len, JSON_REJECT_DUPLICATES, &je);
    json_t *list = json_is_object(root) ? json_object_get(root, fs->key) : NULL;
    json_t *ids = json_is_object(root) ? json_object_get(root, fs->labels_key) : NULL;
    int rc = 0;
    const size_t n = json_array_size(list);
    if (!json_is_array(list) || !json_is_array(ids) || json_array_size(ids) != n || n > SPW_BOXES_MAX) {
        rc = spw_fail(err, errlen, SPW_EFORMAT, "field %s: %s", fs->name,
                      !root ? je.text : !json_is_object(root) ? "the .json member is not an object"
                      : !json_is_array(list) ? "no list of boxes at its key"
                      : !json_is_array(ids) ? "no list of class ids at its labels_key"
                      : n > SPW_BOXES_MAX ? "more boxes than the cap of 4096" : "boxes and class ids differ in count");
        goto out;
    }
    if ((rc = alloc_boxes(b, n)) != 0)
        goto out;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const json_t *box = json_array_get(list, i), *id = json_array_get(ids, i);
        double c[4];
        bool ok = json_is_array(box) && json_array_size(box) == 4 && json_is_integer(id);
        for (size_t k = 0; ok && k < 4; k++)
            ok = number(json_array_get(box, k), &c[k]);
        if (ok && fs->box_format == SPW_BOX_XYWH)
            c[2] += c[0], c[3] += c[1];
        if (!ok || c[2] < c[0] || c[3] < c[1]) {
            rc = spw_fail(err, errlen, SPW_EFORMAT, "field %s: box %zu is not 4 finite numbers with an integer class "
                          "id%s", fs->name, i, ok ? " (its far corner is before its near one)" : "");
            break;
        }
        for (int k = 0; k < 4; k++)
            b->boxes[4 * i + (size_t)k] = (float)c[k];
        b->box_labels[i] = json_integer_value(id);
    }
    b->n_boxes = (int)n;
out:
    json_decref(root);
    free(b->data);
    b->data = NULL;
    b->len = 0;
    return rc;
}

int spw_fields_read(const struct spw_source *src, const struct spw_pipeline_spec *pspec, int64_t sample,
                    struct spw_fields **out, char *err, size_t errlen)
{
    const struct spw_source_spec *spec = &pspec->source;
    struct spw_fields *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    int rc = 0;
    for (; f->n < spec->n_fields && rc == 0; f->n++) {
        const struct spw_sample_field_spec *fs = &spec->fields[f->n];
        struct spw_field *b = &f->f[f->n];
        const bool mask = fs->kind == SPW_SAMPLE_FIELD_MASK;
        b->kind = fs->kind;
        if (src->coco) {                    /* a COCO set's boxes, from its listing */
            const struct spw_coco_image *im = &src->coco[sample];
            if ((rc = alloc_boxes(b, (size_t)im->n_boxes)) != 0)
                continue;
            memcpy(b->boxes, im->boxes, sizeof *b->boxes * 4 * (size_t)im->n_boxes);
            memcpy(b->box_labels, im->labels, sizeof *b->box_labels * (size_t)im->n_boxes);
            b->n_boxes = im->n_boxes;
            continue;
        }
        rc = spw_source_read_field(src, sample, f->n, mask ? pspec->max_file_bytes : SPW_SAMPLE_FIELD_MAX_BYTES,
                                   &b->data, &b->len);
        if (rc == SPW_ETOOBIG)
            spw_fail(err, errlen, rc, "field %s: a member of %lld bytes, over the cap of %lld", fs->name,
                     (long long)src->field_locs[sample * src->n_fields + f->n].size,
                     mask ? (long long)pspec->max_file_bytes : (long long)SPW_SAMPLE_FIELD_MAX_BYTES);
        else if (rc)
            spw_fail(err, errlen, rc, "field %s: read failed: %s", fs->name, spw_strerror(rc));
        if (rc)
            break;
        if (mask)
            rc = decode_mask(pspec, fs, b, err, errlen);
        else if (fs->kind == SPW_SAMPLE_FIELD_BOXES)
            rc = json_boxes(fs, b, err, errlen);
        else if (fs->key)
            rc = json_text(fs, b, err, errlen);
        else if (fs->kind == SPW_SAMPLE_FIELD_TEXT && !spw_utf8_valid(b->data, b->len))
            rc = spw_fail(err, errlen, SPW_EFORMAT, "field %s: not UTF-8 text (\"as\": \"raw\" takes any bytes)",
                          fs->name);
    }
    if (rc) {
        spw_fields_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

int spw_fields_take(struct spw_value *v, const struct spw_source *src, const struct spw_pipeline_spec *spec,
                    int64_t sample, struct spw_fields **out, char *err, size_t errlen)
{
    *out = v->fields;
    v->fields = NULL;
    if (*out || !spec->source.n_fields)
        return 0;
    return spw_fields_read(src, spec, sample, out, err, errlen);
}

/* The packed bytes of one field after its u32 length. */
static size_t payload_size(const struct spw_field *f)
{
    switch (f->kind) {
    case SPW_SAMPLE_FIELD_MASK: return 8 + (size_t)f->mask.w * (size_t)f->mask.h;
    case SPW_SAMPLE_FIELD_BOXES: return 4 + (size_t)f->n_boxes * (16 + 8);
    default: return f->len;
    }
}

size_t spw_fields_packed_size(const struct spw_fields *f)
{
    size_t n = 0;
    for (int i = 0; i < f->n; i++)
        n += 4 + payload_size(&f->f[i]);
    return n;
}

static uint8_t *put_u32(uint8_t *dst, uint32_t v)
{
    memcpy(dst, &v, 4);
    return dst + 4;
}

void spw_fields_pack(const struct spw_fields *f, uint8_t *dst)
{
    for (int i = 0; i < f->n; i++) {
        const struct spw_field *b = &f->f[i];
        dst = put_u32(dst, (uint32_t)payload_size(b));
        if (b->kind == SPW_SAMPLE_FIELD_MASK) {
            dst = put_u32(put_u32(dst, (uint32_t)b->mask.w), (uint32_t)b->mask.h);
            for (int y = 0; y < b->mask.h; y++)     /* one byte a pixel: the first channel */
                for (int x = 0; x < b->mask.w; x++)
                    *dst++ = spw_image_at(&b->mask, x, y)[0];
        } else if (b->kind == SPW_SAMPLE_FIELD_BOXES) {
            dst = put_u32(dst, (uint32_t)b->n_boxes);
            memcpy(dst, b->boxes, (size_t)b->n_boxes * 16);
            dst += (size_t)b->n_boxes * 16;
            memcpy(dst, b->box_labels, (size_t)b->n_boxes * 8);
            dst += (size_t)b->n_boxes * 8;
        } else {
            memcpy(dst, b->data, b->len);
            dst += b->len;
        }
    }
}

/* Packed boxes (u32 count, count * 4 float32, count int64; n bytes in all, checked) into b. */
static int unpack_boxes(const struct spw_sample_field_spec *fs, const uint8_t *p, uint32_t n, struct spw_field *b,
                        char *err, size_t errlen)
{
    uint32_t k = 0;
    if (n >= 4)
        memcpy(&k, p, 4);
    if (n < 4 || k > SPW_BOXES_MAX || n != 4 + (uint64_t)k * 24)
        return spw_fail(err, errlen, SPW_EFORMAT, "field %s: %u boxes in %u bytes (at most %d)", fs->name, k, n,
                        SPW_BOXES_MAX);
    if (alloc_boxes(b, k) != 0)
        return -ENOMEM;
    memcpy(b->boxes, p + 4, 16 * (size_t)k);
    memcpy(b->box_labels, p + 4 + 16 * (size_t)k, 8 * (size_t)k);
    b->n_boxes = (int)k;
    for (uint32_t i = 0; i < 4 * k; i++)
        if (!isfinite(b->boxes[i]))
            return spw_fail(err, errlen, SPW_EFORMAT, "field %s: box %u is not finite", fs->name, i / 4);
    return 0;
}

/* A packed mask (u32 w, u32 h, w * h bytes; n bytes in all, checked) into b->mask, three equal channels. */
static int unpack_mask(const struct spw_pipeline_spec *spec, const struct spw_sample_field_spec *fs,
                       const uint8_t *p, uint32_t n, struct spw_field *b, char *err, size_t errlen)
{
    uint32_t w = 0, h = 0;
    if (n >= 8) {
        memcpy(&w, p, 4);
        memcpy(&h, p + 4, 4);
    }
    if (n < 8 || w == 0 || h == 0 || (uint64_t)w * h > (uint64_t)spec->max_pixels || (uint64_t)w * h != n - 8)
        return spw_fail(err, errlen, SPW_EFORMAT, "field %s: a mask of %ux%u in %u bytes (max_pixels %lld)",
                        fs->name, w, h, n, (long long)spec->max_pixels);
    if (spw_image_alloc(&b->mask, (int)w, (int)h, 3) != 0)
        return -ENOMEM;
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint8_t *px = spw_image_at(&b->mask, (int)x, (int)y);
            px[0] = px[1] = px[2] = p[8 + (size_t)y * w + x];
        }
    return 0;
}

int spw_fields_unpack(const struct spw_pipeline_spec *pspec, const uint8_t *p, size_t len, struct spw_fields **out,
                      char *err, size_t errlen)
{
    const struct spw_source_spec *spec = &pspec->source;
    struct spw_fields *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    size_t at = 0;
    int rc = 0;
    for (; f->n < spec->n_fields && rc == 0; f->n++) {
        const struct spw_sample_field_spec *fs = &spec->fields[f->n];
        const bool mask = fs->kind == SPW_SAMPLE_FIELD_MASK, boxes = fs->kind == SPW_SAMPLE_FIELD_BOXES;
        f->f[f->n].kind = fs->kind;
        uint32_t n = 0;
        if (len - at < 4 || (memcpy(&n, p + at, 4), !mask && !boxes && n > SPW_SAMPLE_FIELD_MAX_BYTES) ||
            n > len - at - 4) {
            rc = spw_fail(err, errlen, SPW_EFORMAT, "field %s: a length past the cap of 1 MiB or the %zu bytes "
                          "sent", fs->name, len);
            break;
        }
        at += 4;
        if (mask || boxes) {
            rc = mask ? unpack_mask(pspec, fs, p + at, n, &f->f[f->n], err, errlen)
                      : unpack_boxes(fs, p + at, n, &f->f[f->n], err, errlen);
            at += n;
            continue;
        }
        if (!(f->f[f->n].data = malloc(n ? n : 1))) {
            rc = -ENOMEM;
            break;
        }
        memcpy(f->f[f->n].data, p + at, n);
        f->f[f->n].len = n;
        at += n;
        if (fs->kind == SPW_SAMPLE_FIELD_TEXT && !spw_utf8_valid(f->f[f->n].data, n))
            rc = spw_fail(err, errlen, SPW_EFORMAT, "field %s: not UTF-8 text", fs->name);
    }
    if (rc == 0 && at != len)
        rc = spw_fail(err, errlen, SPW_EFORMAT, "fields: %zu bytes left over", len - at);
    if (rc) {
        spw_fields_free(f);
        return rc;
    }
    *out = f;
    return 0;
}
