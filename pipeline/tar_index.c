/* pipeline/tar_index.c - WebDataset shard listing through libarchive: every member header (ustar, pax,
 * GNU long names; plain or gzip) is read once, members are grouped by key as WebDataset does (adjacent
 * members sharing the path up to the basename's first dot), and each key with a sample member and a label
 * becomes a sample. libarchive reads through callbacks on the caller's shard (pipeline/shard_io.h: a file or
 * a URL), so a listing and any number of streamed reads share one open shard. Listing is single-threaded;
 * streamed reads are not. */
#include "pipeline/tar_index.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/err.h"

/* ---- libarchive over shard reads ---- */

struct reader {
    struct spw_shard *sh;
    int64_t off, end;                  /* next byte to read; the shard's size when opened */
    uint8_t *buf;                      /* the last chunk read: [buf_off, buf_off + buf_len) of the shard */
    size_t cap, buf_len;
    int64_t buf_off;
};

/* The next bytes from off: what the last chunk still holds (a skip often lands inside it: a remote shard's
 * small members then cost no request), else a new chunk of the shard's preferred read size. */
static la_ssize_t reader_read(struct archive *a, void *p, const void **out)
{
    struct reader *r = p;
    if (r->off >= r->buf_off && r->off < r->buf_off + (int64_t)r->buf_len) {
        const size_t at = (size_t)(r->off - r->buf_off), n = r->buf_len - at;
        r->off += (int64_t)n;
        *out = r->buf + at;
        return (la_ssize_t)n;
    }
    const int64_t left = r->end - r->off;
    if (left <= 0)
        return 0;
    const size_t n = left < (int64_t)r->cap ? (size_t)left : r->cap;
    int rc = spw_shard_pread(r->sh, r->buf, n, r->off);
    if (rc) {
        archive_set_error(a, -rc, "read error: %s", spw_strerror(rc));
        return -1;
    }
    r->buf_off = r->off;
    r->buf_len = n;
    r->off += (int64_t)n;
    *out = r->buf;
    return (la_ssize_t)n;
}

/* Skipping member data of a plain tar costs no read; a skip past the end stops there and the next read
 * reports the truncation. */
static la_int64_t reader_skip(struct archive *a, void *p, la_int64_t want)
{
    struct reader *r = p;
    int64_t left = r->end > r->off ? r->end - r->off : 0;
    int64_t k = want < left ? want : left;
    r->off += k;
    return k;
}

static int reader_open(struct reader *r, struct spw_shard *sh, struct archive **out)
{
    *r = (struct reader){.sh = sh, .end = spw_shard_size(sh), .cap = spw_shard_read_size(sh)};
    if (!(r->buf = malloc(r->cap)))
        return -ENOMEM;
    struct archive *a = archive_read_new();
    if (!a)
        return -ENOMEM;
    archive_read_support_filter_gzip(a);
    archive_read_support_format_tar(a);
    archive_read_support_format_empty(a);   /* an empty shard holds nothing, as before */
    if (archive_read_open2(a, r, NULL, reader_read, reader_skip, NULL) != ARCHIVE_OK) {
        *out = a;                            /* the caller reports archive_error_string, then frees */
        return SPW_ESOURCE;
    }
    *out = a;
    return 0;
}

/* ---- WebDataset member rules ---- */

bool spw_tar_media_ext(const char *ext, enum spw_media media)
{
    const char *dot = strrchr(ext, '.');
    const char *last = dot ? dot + 1 : ext;
    if (media == SPW_MEDIA_AUDIO)
        return !strcasecmp(last, "wav");
    if (media == SPW_MEDIA_ANY_AUDIO)
        return !strcasecmp(last, "wav") || !strcasecmp(last, "flac") || !strcasecmp(last, "mp3") ||
               !strcasecmp(last, "ogg") || !strcasecmp(last, "opus");
    if (media == SPW_MEDIA_ANY_IMAGE && (!strcasecmp(last, "png") || !strcasecmp(last, "webp")))
        return true;
    return !strcasecmp(last, "jpg") || !strcasecmp(last, "jpeg");
}

struct pending {               /* the key being gathered: adjacent members sharing it */
    char *key;                 /* NULL before the first member */
    char *media;               /* the sample member's path */
    int64_t media_off, media_size;
    bool media_exact;          /* its whole extension is the media one ("jpg", not "seg.jpg") */
    bool have_cls, have_json;
    int64_t cls, json;         /* labels from .cls and from .json's label_key */
    char *txt;                 /* a .txt member's path, its text read only if it is the label */
    char txt_text[SPW_TAR_MAX_LABEL_BYTES + 1];
    bool txt_long;
    struct spw_member_loc field[SPW_SAMPLE_FIELDS_MAX];
    bool have_field[SPW_SAMPLE_FIELDS_MAX];
};

static void pending_clear(struct pending *pd)
{
    free(pd->key);
    free(pd->media);
    free(pd->txt);
    memset(pd, 0, sizeof *pd);
}

/* A class index written as text: digits, optional surrounding whitespace. */
static bool parse_class(const char *txt, int64_t *out)
{
    char *end;
    while (isspace((unsigned char)*txt))
        txt++;
    if (!isdigit((unsigned char)*txt))
        return false;
    errno = 0;
    long long v = strtoll(txt, &end, 10);
    while (*end && isspace((unsigned char)*end))
        end++;
    if (*end || errno)
        return false;
    *out = v;
    return true;
}

struct scan {
    struct archive *a;
    const char *shard;
    const struct spw_tar_rules *rules;
    spw_tar_sample_fn add;
    void *ctx;
    int64_t *ignored;
    char *err;
    size_t errlen;
    struct pending pd;
};

/* The pending key becomes a sample (sample member, every field member and a label: .cls, else .json's
 * label_key, else .txt; none with no_labels) or one ignored key. */
static int flush(struct scan *sc)
{
    struct pending *pd = &sc->pd;
    int rc = 0;
    if (!pd->key)
        return 0;
    int64_t label = -1;
    if (!pd->media) {                     /* a key of metadata only: its .txt is never judged */
        (*sc->ignored)++;
        goto out;
    }
    for (int f = 0; f < sc->rules->n_fields; f++)
        if (!pd->have_field[f]) {
            (*sc->ignored)++;
            goto out;
        }
    if (sc->rules->no_labels)
        goto add;
    if (pd->have_cls)
        label = pd->cls;
    else if (pd->have_json)
        label = pd->json;
    else if (pd->txt && (pd->txt_long || !parse_class(pd->txt_text, &label))) {
        rc = spw_fail(sc->err, sc->errlen, SPW_ESOURCE, "%s: member %s: \"%.40s%s\" is not a class index",
                      sc->shard, pd->txt, pd->txt_text, pd->txt_long ? "..." : "");
        goto out;
    }
    if (label < 0) {
        (*sc->ignored)++;
        goto out;
    }
add:;
    const struct spw_tar_sample s = {.name = pd->media, .offset = pd->media_off, .size = pd->media_size,
                                     .label = label, .fields = pd->field};
    rc = sc->add(sc->ctx, &s);
out:
    pending_clear(pd);
    return rc;
}

/* Read the current member's data (size bytes, capped by the caller) into buf. */
static int read_member(struct scan *sc, const char *name, void *buf, int64_t size)
{
    int64_t got = 0;
    while (got < size) {
        la_ssize_t r = archive_read_data(sc->a, (char *)buf + got, (size_t)(size - got));
        if (r <= 0)
            return spw_fail(sc->err, sc->errlen, SPW_ESOURCE, "%s: member %s: %s", sc->shard, name,
                            r < 0 ? archive_error_string(sc->a) : "truncated data");
        got += r;
    }
    return 0;
}

static int read_cls(struct scan *sc, const char *name, int64_t size)
{
    char txt[SPW_TAR_MAX_LABEL_BYTES + 1] = {0};
    if (size <= 0 || size > SPW_TAR_MAX_LABEL_BYTES)
        return spw_fail(sc->err, sc->errlen, SPW_ESOURCE, "%s: member %s is not a class index (%lld bytes)",
                        sc->shard, name, (long long)size);
    int rc = read_member(sc, name, txt, size);
    if (rc)
        return rc;
    if (!parse_class(txt, &sc->pd.cls))
        return spw_fail(sc->err, sc->errlen, SPW_ESOURCE, "%s: member %s: \"%s\" is not a class index", sc->shard,
                        name, txt);
    sc->pd.have_cls = true;
    return 0;
}

static int read_txt(struct scan *sc, const char *name, int64_t size)
{
    struct pending *pd = &sc->pd;
    free(pd->txt);
    if (!(pd->txt = strdup(name)))
        return -ENOMEM;
    memset(pd->txt_text, 0, sizeof pd->txt_text);
    pd->txt_long = size > SPW_TAR_MAX_LABEL_BYTES;
    return read_member(sc, name, pd->txt_text, pd->txt_long ? SPW_TAR_MAX_LABEL_BYTES : size);
}

/* A .json member's label_key field: absent is no label; anything but a non-negative integer is an error. */
static int read_json(struct scan *sc, const char *name, int64_t size)
{
    if (size > SPW_TAR_MAX_JSON_BYTES)
        return spw_fail(sc->err, sc->errlen, SPW_ESOURCE, "%s: member %s: %lld bytes, more than the cap of %d "
                        "for a JSON label file", sc->shard, name, (long long)size, SPW_TAR_MAX_JSON_BYTES);
    char *text = malloc(size ? (size_t)size : 1);
    if (!text)
        return -ENOMEM;
    int rc = read_member(sc, name, text, size);
    json_t *root = NULL;
    if (rc)
        goto out;
    json_error_t je;
    if (!(root = json_loadb(text, (size_t)size, JSON_REJECT_DUPLICATES, &je)) || !json_is_object(root)) {
        rc = spw_fail(sc->err, sc->errlen, SPW_ESOURCE, "%s: member %s: %s", sc->shard, name,
                      root ? "not a JSON object" : je.text);
        goto out;
    }
    json_t *v = json_object_get(root, sc->rules->label_key);
    if (!v)
        goto out;
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        rc = spw_fail(sc->err, sc->errlen, SPW_ESOURCE, "%s: member %s: field \"%.100s\" is not a class index "
                      "(a non-negative integer)", sc->shard, name, sc->rules->label_key);
        goto out;
    }
    sc->pd.json = json_integer_value(v);
    sc->pd.have_json = true;
out:
    json_decref(root);
    free(text);
    return rc;
}

/* One regular member: find its key (a new key flushes the pending one) and its role by extension. */
static int member(struct scan *sc, const char *name, int64_t offset, int64_t size)
{
    struct pending *pd = &sc->pd;
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    const char *dot = strchr(base, '.');
    if (!dot || dot == base) {            /* WebDataset's pattern needs a key and a dot */
        (*sc->ignored)++;
        return 0;
    }
    const size_t key_len = (size_t)(dot - name);
    int rc;
    if (!pd->key || strlen(pd->key) != key_len || memcmp(pd->key, name, key_len) != 0) {
        if ((rc = flush(sc)) != 0)
            return rc;
        if (!(pd->key = strndup(name, key_len)))
            return -ENOMEM;
    }
    const char *ext = dot + 1;
    bool field = false;                   /* a field's member ("seg.png") is not the sample's media */
    for (int f = 0; f < sc->rules->n_fields; f++)
        if (!strcasecmp(ext, sc->rules->fields[f].from) && !pd->have_field[f]) {
            pd->field[f] = (struct spw_member_loc){offset, size};
            pd->have_field[f] = field = true;
        }
    if (field && strcasecmp(ext, "json"))
        return 0;                         /* nor a label, though a .json may hold one beside a field */
    if (spw_tar_media_ext(ext, sc->rules->media)) {
        const bool exact = !strchr(ext, '.');
        if (pd->media && (pd->media_exact || !exact))
            return 0;                     /* the first, or the first with exactly the media extension */
        free(pd->media);
        if (!(pd->media = strdup(name)))
            return -ENOMEM;
        pd->media_off = offset;
        pd->media_size = size;
        pd->media_exact = exact;
        return 0;
    }
    if (sc->rules->no_labels)
        return 0;
    if (!strcasecmp(ext, "cls"))
        return read_cls(sc, name, size);
    if (!strcasecmp(ext, "txt"))
        return read_txt(sc, name, size);
    if (!strcasecmp(ext, "json") && sc->rules->label_key)
        return read_json(sc, name, size);
    return 0;
}

int spw_tar_index_scan(struct spw_shard *sh, const char *shard, const struct spw_tar_rules *rules, spw_tar_sample_fn add,
                       void *ctx, bool *streamed, int64_t *ignored, char *err, size_t errlen)
{
    struct reader *r = malloc(sizeof *r);
    struct scan sc = {.shard = shard, .rules = rules, .add = add, .ctx = ctx, .ignored = ignored, .err = err,
                      .errlen = errlen};
    if (!r)
        return -ENOMEM;
    int rc = reader_open(r, sh, &sc.a);
    if (rc == SPW_ESOURCE)
        rc = spw_fail(err, errlen, rc, "%s: cannot read as a tar archive: %s", shard, archive_error_string(sc.a));
    else if (rc)
        rc = spw_fail(err, errlen, rc, "%s: %s", shard, spw_strerror(rc));
    int64_t members = 0;
    struct archive_entry *e;
    while (rc == 0) {
        int ar = archive_read_next_header(sc.a, &e);
        if (ar == ARCHIVE_EOF)
            break;
        if (ar != ARCHIVE_OK && ar != ARCHIVE_WARN) {
            rc = spw_fail(err, errlen, SPW_ESOURCE, "%s: corrupt or truncated tar after %lld members: %s", shard,
                          (long long)members, archive_error_string(sc.a));
            break;
        }
        if (++members > SPW_TAR_MAX_MEMBERS) {
            rc = spw_fail(err, errlen, SPW_ESOURCE, "%s: more than %d members (the cap)", shard,
                          SPW_TAR_MAX_MEMBERS);
            break;
        }
        /* hard links and sparse files have no contiguous data of their own: not samples */
        if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e) ||
            archive_entry_sparse_count(e) > 0)
            continue;
        const char *name = archive_entry_pathname(e);
        if (!name)
            name = archive_entry_pathname_utf8(e);
        const int64_t size = archive_entry_size(e);
        const int64_t offset = archive_filter_bytes(sc.a, 0);
        if (!name || strnlen(name, SPW_TAR_MAX_NAME + 1) > SPW_TAR_MAX_NAME) {
            rc = spw_fail(err, errlen, SPW_ESOURCE, "%s: member %lld: %s", shard, (long long)members,
                          name ? "path longer than the cap of 4096 bytes" : "no path");
            break;
        }
        if (!archive_entry_size_is_set(e) || size < 0 || offset < 0) {
            rc = spw_fail(err, errlen, SPW_ESOURCE, "%s: member %s: malformed size", shard, name);
            break;
        }
        rc = member(&sc, name, offset, size);
    }
    if (rc == 0)
        rc = flush(&sc);
    if (rc == 0)
        *streamed = archive_filter_code(sc.a, 0) != ARCHIVE_FILTER_NONE;
    pending_clear(&sc.pd);
    archive_read_free(sc.a);
    free(r->buf);
    free(r);
    return rc;
}

int spw_tar_read_streamed(struct spw_shard *sh, int64_t offset, int64_t size, uint8_t *dst)
{
    struct reader *r = malloc(sizeof *r);
    struct archive *a = NULL;
    if (!r)
        return -ENOMEM;
    int rc = reader_open(r, sh, &a);
    struct archive_entry *e;
    while (rc == 0) {
        int ar = archive_read_next_header(a, &e);
        int64_t at = archive_filter_bytes(a, 0);
        if ((ar != ARCHIVE_OK && ar != ARCHIVE_WARN) || at > offset) {
            rc = -EIO;
            break;
        }
        if (at < offset)
            continue;                   /* libarchive skips the data it was not asked for */
        if (archive_entry_size(e) != size) {
            rc = -EIO;
            break;
        }
        for (int64_t got = 0; got < size; ) {
            la_ssize_t k = archive_read_data(a, dst + got, (size_t)(size - got));
            if (k <= 0) {
                rc = -EIO;
                break;
            }
            got += k;
        }
        break;
    }
    if (rc == SPW_ESOURCE)
        rc = -EIO;
    archive_read_free(a);
    free(r->buf);
    free(r);
    return rc;
}
