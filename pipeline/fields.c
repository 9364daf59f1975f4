/* pipeline/fields.c - sample fields (see fields.h): read from a tar key's members, packed and unpacked.
 * Thread-safe: no shared state. */
#include "pipeline/fields.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/utf8.h"
#include "pipeline/value.h"

void spw_fields_free(struct spw_fields *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n; i++)
        free(f->f[i].data);
    free(f);
}

/* A .json member's string field `key` in place of the member's bytes. */
static int json_text(const struct spw_sample_field_spec *fs, struct spw_field_bytes *b, char *err, size_t errlen)
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

int spw_fields_read(const struct spw_source *src, const struct spw_source_spec *spec, int64_t sample,
                    struct spw_fields **out, char *err, size_t errlen)
{
    struct spw_fields *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    int rc = 0;
    for (; f->n < spec->n_fields && rc == 0; f->n++) {
        const struct spw_sample_field_spec *fs = &spec->fields[f->n];
        struct spw_field_bytes *b = &f->f[f->n];
        rc = spw_source_read_field(src, sample, f->n, &b->data, &b->len);
        if (rc == SPW_ETOOBIG)
            spw_fail(err, errlen, rc, "field %s: a member of %lld bytes, over the cap of %d", fs->name,
                     (long long)src->field_locs[sample * src->n_fields + f->n].size, SPW_SAMPLE_FIELD_MAX_BYTES);
        else if (rc)
            spw_fail(err, errlen, rc, "field %s: read failed: %s", fs->name, spw_strerror(rc));
        if (rc)
            break;
        if (fs->key)
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

int spw_fields_take(struct spw_value *v, const struct spw_source *src, const struct spw_source_spec *spec,
                    int64_t sample, struct spw_fields **out, char *err, size_t errlen)
{
    *out = v->fields;
    v->fields = NULL;
    if (*out || !spec->n_fields)
        return 0;
    return spw_fields_read(src, spec, sample, out, err, errlen);
}

size_t spw_fields_packed_size(const struct spw_fields *f)
{
    size_t n = 0;
    for (int i = 0; i < f->n; i++)
        n += 4 + f->f[i].len;
    return n;
}

void spw_fields_pack(const struct spw_fields *f, uint8_t *dst)
{
    for (int i = 0; i < f->n; i++) {
        const uint32_t len = (uint32_t)f->f[i].len;
        memcpy(dst, &len, 4);
        memcpy(dst + 4, f->f[i].data, len);
        dst += 4 + len;
    }
}

int spw_fields_unpack(const struct spw_source_spec *spec, const uint8_t *p, size_t len, struct spw_fields **out,
                      char *err, size_t errlen)
{
    struct spw_fields *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    size_t at = 0;
    int rc = 0;
    for (; f->n < spec->n_fields && rc == 0; f->n++) {
        const struct spw_sample_field_spec *fs = &spec->fields[f->n];
        uint32_t n = 0;
        if (len - at < 4 || (memcpy(&n, p + at, 4), n > SPW_SAMPLE_FIELD_MAX_BYTES) || n > len - at - 4) {
            rc = spw_fail(err, errlen, SPW_EFORMAT, "field %s: a length past the cap of 1 MiB or the %zu bytes "
                          "sent", fs->name, len);
            break;
        }
        at += 4;
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
