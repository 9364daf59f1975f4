/* pipeline/manifest.c - a source's listing packed into one zstd frame and rebuilt from it (manifest.h), and
 * GetManifest's chunked fetch. Layout, little-endian: magic, format, counts, ignored, hash; then classes
 * (u32 length, bytes), shards (u32 length, bytes, u8 streamed) and samples (u32 length, path, i64 label,
 * i32 file, i64 offset, i64 size); the frame carries a checksum. Pure but for the fetch, which blocks on its
 * channel. */
#include "pipeline/manifest.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#include "lib/err.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "pipeline/brace.h"
#include "proto/spillway.pb-c.h"

static const char MAGIC[8] = "SPWMAN1\n";
static const char MAGIC_FIELDS[8] = "SPWMAN2\n";  /* then u32 fields after the hash; each sample's field
                                                      members (i64 offset, i64 size) after its size */
#define SAMPLE_MIN_BYTES (4 + 1 + 8 + 4 + 8 + 8)    /* a one-byte path */

struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool failed;
};

static void put(struct wbuf *w, const void *v, size_t n)
{
    if (w->failed)
        return;
    if (w->n + n > SPW_MANIFEST_MAX_RAW) {
        w->failed = true;
        return;
    }
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 1 << 16;
        while (cap < w->n + n)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) {
            w->failed = true;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->n, v, n);
    w->n += n;
}

static void put_u32(struct wbuf *w, uint32_t v) { put(w, &v, sizeof v); }
static void put_i64(struct wbuf *w, int64_t v) { put(w, &v, sizeof v); }

static void put_str(struct wbuf *w, const char *s)
{
    const size_t n = strlen(s);
    put_u32(w, (uint32_t)n);
    put(w, s, n);
}

int spw_manifest_pack(const struct spw_source *src, uint8_t **out, size_t *len)
{
    struct wbuf w = {0};
    put(&w, src->n_fields ? MAGIC_FIELDS : MAGIC, sizeof MAGIC);     /* without fields, as before them */
    put_u32(&w, (uint32_t)src->format);
    put_u32(&w, (uint32_t)src->n_classes);
    put_u32(&w, (uint32_t)src->n_shards);
    put_i64(&w, src->n);
    put_i64(&w, src->ignored);
    put_i64(&w, (int64_t)src->manifest_hash);
    if (src->n_fields)
        put_u32(&w, (uint32_t)src->n_fields);
    for (int i = 0; i < src->n_classes; i++)
        put_str(&w, src->classes[i]);
    for (int i = 0; i < src->n_shards; i++) {
        const uint8_t streamed = src->streamed[i];
        put_str(&w, spw_shard_name(src->shards[i]));
        put(&w, &streamed, 1);
    }
    for (int64_t i = 0; i < src->n; i++) {
        const struct spw_sample *s = &src->samples[i];
        const int32_t file = s->file;
        put_str(&w, s->path);
        put_i64(&w, s->label);
        put(&w, &file, sizeof file);
        put_i64(&w, s->offset);
        put_i64(&w, s->size);
        for (int f = 0; f < src->n_fields; f++) {
            put_i64(&w, src->field_locs[i * src->n_fields + f].offset);
            put_i64(&w, src->field_locs[i * src->n_fields + f].size);
        }
        if (src->coco) {        /* a COCO set's boxes travel in its listing */
            put(&w, src->coco[i].boxes, sizeof(float) * 4 * (size_t)src->coco[i].n_boxes);
            put(&w, src->coco[i].labels, sizeof(int64_t) * (size_t)src->coco[i].n_boxes);
        }
    }
    if (w.failed) {
        free(w.p);
        return w.n + 64 > SPW_MANIFEST_MAX_RAW ? SPW_ETOOBIG : -ENOMEM;
    }
    const size_t bound = ZSTD_compressBound(w.n);
    uint8_t *z = malloc(bound);
    ZSTD_CCtx *c = ZSTD_createCCtx();       /* with a checksum: a changed byte anywhere is refused */
    const size_t zn = z && c && !ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1))
                      ? ZSTD_compress2(c, z, bound, w.p, w.n) : 0;
    ZSTD_freeCCtx(c);
    free(w.p);
    if (!z || !zn || ZSTD_isError(zn)) {
        free(z);
        return -ENOMEM;
    }
    if (zn > SPW_MANIFEST_MAX_BYTES) {
        free(z);
        return SPW_ETOOBIG;
    }
    *out = z;
    *len = zn;
    return 0;
}

/* ---- reading: every length checked against what is left ---- */

struct rbuf {
    const uint8_t *p;
    size_t n, at;
    bool bad;
};

static void get(struct rbuf *r, void *v, size_t n)
{
    if (r->bad || n > r->n - r->at) {
        r->bad = true;
        memset(v, 0, n);
        return;
    }
    memcpy(v, r->p + r->at, n);
    r->at += n;
}

static uint32_t get_u32(struct rbuf *r) { uint32_t v; get(r, &v, sizeof v); return v; }
static int64_t get_i64(struct rbuf *r) { int64_t v; get(r, &v, sizeof v); return v; }

/* A malloc'd NUL-terminated copy of the next string; NULL (r->bad, or no memory: *nomem) when it cannot be. */
static char *get_str(struct rbuf *r, bool *nomem)
{
    const uint32_t n = get_u32(r);
    if (r->bad || n == 0 || n > r->n - r->at || memchr(r->p + r->at, 0, n)) {
        r->bad = true;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        *nomem = true;
        return NULL;
    }
    memcpy(s, r->p + r->at, n);
    s[n] = 0;
    r->at += n;
    return s;
}

/* A COCO sample's n boxes and ids from the listing into *im (n checked against the cap and the bytes left).
 * Returns true when out of memory (r->bad on a count that does not fit). */
static bool coco_boxes(struct rbuf *r, struct spw_coco_image *im, int64_t n)
{
    if (n > SPW_BOXES_MAX || (uint64_t)n * 24 > r->n - r->at) {
        r->bad = true;
        return false;
    }
    im->boxes = malloc(sizeof *im->boxes * 4 * (size_t)(n ? n : 1));
    im->labels = malloc(sizeof *im->labels * (size_t)(n ? n : 1));
    if (!im->boxes || !im->labels)
        return true;
    get(r, im->boxes, sizeof *im->boxes * 4 * (size_t)n);
    get(r, im->labels, sizeof *im->labels * (size_t)n);
    im->n_boxes = (int)n;
    for (int64_t k = 0; k < 4 * n; k++)
        r->bad |= !isfinite(im->boxes[k]);
    return false;
}

/* The listing from the unpacked bytes into src, whose format and n_fields are the spec's (shards not opened:
 * their names in *names). */
static int parse(struct rbuf *r, struct spw_source *src, char ***names, char *err, size_t errlen)
{
    char magic[sizeof MAGIC];
    get(r, magic, sizeof magic);
    const bool fields = !r->bad && memcmp(magic, MAGIC_FIELDS, sizeof MAGIC) == 0;
    if (r->bad || (!fields && memcmp(magic, MAGIC, sizeof MAGIC) != 0))
        return spw_fail(err, errlen, SPW_ESOURCE, "manifest: not a Spillway manifest (bad magic)");
    const uint32_t format = get_u32(r), n_classes = get_u32(r), n_shards = get_u32(r);
    const int64_t n = get_i64(r);
    src->ignored = get_i64(r);
    src->manifest_hash = (uint64_t)get_i64(r);
    const uint32_t n_fields = fields ? get_u32(r) : 0;
    const bool coco = src->format == SPW_SOURCE_COCO;
    if (coco && n_fields != 1)
        return spw_fail(err, errlen, SPW_ESOURCE, "manifest: a coco listing without its boxes");
    if (!r->bad && n_fields != (uint32_t)src->n_fields)
        return spw_fail(err, errlen, SPW_ESOURCE, "manifest: a listing with %u fields per sample, for a source with "
                        "%d", n_fields, src->n_fields);
    const size_t left = r->n - r->at;
    if (r->bad || format != (uint32_t)src->format || n <= 0 ||
        (uint64_t)n > left / (SAMPLE_MIN_BYTES + 16 * n_fields) ||
        n_classes > left / 5 || n_shards > left / 6 || n_shards > SPW_BRACE_MAX_ITEMS)
        return spw_fail(err, errlen, SPW_ESOURCE, "manifest: a listing of another source kind, or counts (%lld "
                        "samples, %u classes, %u shards) beyond its %zu bytes", (long long)n, n_classes,
                        n_shards, left);
    bool nomem = false;
    if (!(src->classes = calloc(n_classes ? n_classes : 1, sizeof *src->classes)) ||
        !(*names = calloc(n_shards ? n_shards : 1, sizeof **names)) ||
        !(src->shards = calloc(n_shards ? n_shards : 1, sizeof *src->shards)) ||
        !(src->streamed = calloc(n_shards ? n_shards : 1, sizeof *src->streamed)) ||
        !(src->samples = calloc((size_t)n, sizeof *src->samples)) ||
        (n_fields && !(src->field_locs = calloc((size_t)n * n_fields, sizeof *src->field_locs))) ||
        (coco && !(src->coco = calloc((size_t)n, sizeof *src->coco))))
        return -ENOMEM;
    for (; src->n_classes < (int)n_classes && !r->bad && !nomem; src->n_classes++)
        src->classes[src->n_classes] = get_str(r, &nomem);
    for (uint32_t i = 0; i < n_shards && !r->bad && !nomem; i++) {
        uint8_t streamed = 0;
        (*names)[i] = get_str(r, &nomem);
        get(r, &streamed, 1);
        src->streamed[i] = streamed != 0;
    }
    for (; src->n < n && !r->bad && !nomem; src->n++) {
        struct spw_sample *s = &src->samples[src->n];
        int32_t file = 0;
        s->path = get_str(r, &nomem);
        s->label = get_i64(r);
        get(r, &file, sizeof file);
        s->file = file;
        s->offset = get_i64(r);
        s->size = get_i64(r);
        if (file < -1 || file >= (int32_t)n_shards ||
            (file >= 0 && (s->offset < 0 || s->size < 0 || s->size > INT64_MAX - s->offset)))
            r->bad = true;
        for (uint32_t f = 0; f < n_fields; f++) {       /* a member of a shard, or (offset -1) a file */
            struct spw_member_loc *m = &src->field_locs[src->n * n_fields + f];
            m->offset = get_i64(r);
            m->size = get_i64(r);
            r->bad |= m->size < 0 || (file >= 0 ? m->offset < 0 || m->size > INT64_MAX - m->offset
                                                : m->offset != (coco ? -2 : -1));
        }
        if (coco && !r->bad)
            nomem = coco_boxes(r, &src->coco[src->n], src->field_locs[src->n * n_fields].size);
    }
    if (nomem)
        return -ENOMEM;
    if (r->bad || r->at != r->n)
        return spw_fail(err, errlen, SPW_ESOURCE, "manifest: corrupt (%s at byte %zu of %zu)",
                        r->bad ? "a field runs past the end or is out of range" : "bytes left over", r->at, r->n);
    return (int)n_shards;
}

/* Whether the data here is the data listed: every listed file is here with its listed size, and every plain
 * shard is long enough for its members. (A node without the mount, or with other files, refuses the job as
 * a listing of its own would have; extra files do not matter.) */
static int check_here(const struct spw_source *src, char *err, size_t errlen)
{
    for (int64_t i = 0; i < src->n; i++) {
        const struct spw_sample *s = &src->samples[i];
        struct stat st;
        int64_t end = s->offset + s->size;
        for (int f = 0; f < src->n_fields; f++) {
            const struct spw_member_loc *m = &src->field_locs[i * src->n_fields + f];
            end = m->offset + m->size > end ? m->offset + m->size : end;
        }
        if (s->file >= 0 && !src->streamed[s->file] && end > spw_shard_size(src->shards[s->file]))
            return spw_fail(err, errlen, SPW_ESOURCE, "the dispatcher's listing has \"%s\" and its members up to "
                            "byte %lld of a shard of %lld bytes here", s->path, (long long)end,
                            (long long)spw_shard_size(src->shards[s->file]));
        if (s->file < 0 && stat(s->path, &st) != 0)
            return spw_fail(err, errlen, SPW_ESOURCE, "the dispatcher's listing names \"%s\": %s here", s->path,
                            strerror(errno));
        if (s->file < 0 && (!S_ISREG(st.st_mode) || st.st_size != s->size))
            return spw_fail(err, errlen, SPW_ESOURCE, "the dispatcher's listing has \"%s\" of %lld bytes; here it "
                            "is %lld bytes%s", s->path, (long long)s->size, (long long)st.st_size,
                            S_ISREG(st.st_mode) ? "" : " and not a file");
        for (int f = 0; s->file < 0 && !src->coco && f < src->n_fields; f++) {    /* a folder field's file */
            char path[8192];
            const int64_t size = src->field_locs[i * src->n_fields + f].size;
            if (spw_source_field_path(src->spec, f, s->path, path, sizeof path) != 0 || stat(path, &st) != 0 ||
                !S_ISREG(st.st_mode) || st.st_size != size)
                return spw_fail(err, errlen, SPW_ESOURCE, "the dispatcher's listing has field %s of \"%s\" in a "
                                "file of %lld bytes; here it is not, or of another size", src->spec->fields[f].name,
                                s->path, (long long)size);
        }
    }
    return 0;
}

int spw_manifest_open(const struct spw_source_spec *spec, const uint8_t *buf, size_t len, uint64_t expect_hash,
                      struct spw_source **out, char *err, size_t errlen)
{
    const unsigned long long raw = len <= SPW_MANIFEST_MAX_BYTES ? ZSTD_getFrameContentSize(buf, len)
                                                                 : ZSTD_CONTENTSIZE_ERROR;
    if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN || raw > SPW_MANIFEST_MAX_RAW)
        return spw_fail(err, errlen, SPW_ESOURCE, "manifest: %zu bytes that are not one zstd frame of at most "
                        "%u MiB packed, %u MiB unpacked", len, SPW_MANIFEST_MAX_BYTES >> 20, SPW_MANIFEST_MAX_RAW >> 20);
    uint8_t *plain = malloc(raw ? (size_t)raw : 1);
    struct spw_source *src = calloc(1, sizeof *src);
    char **names = NULL;
    int rc = 0, n_shards = 0;
    if (!plain || !src) {
        rc = -ENOMEM;
        goto out;
    }
    const size_t got = ZSTD_decompress(plain, (size_t)raw, buf, len);
    if (ZSTD_isError(got) || got != raw) {
        rc = spw_fail(err, errlen, SPW_ESOURCE, "manifest: corrupt zstd frame (%s)",
                      ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
        goto out;
    }
    src->format = spec->format;
    src->n_fields = spec->n_fields;
    src->spec = spec->format != SPW_SOURCE_TAR_SHARDS && spec->n_fields ? spec : NULL;
    struct rbuf r = {.p = plain, .n = got};
    if ((rc = n_shards = parse(&r, src, &names, err, errlen)) < 0)
        goto out;
    rc = 0;
    const uint64_t h = spw_source_hash(src);
    if (h != src->manifest_hash || (expect_hash && h != expect_hash)) {
        rc = spw_fail(err, errlen, SPW_ESOURCE, "manifest: its listing hashes to %016llx, not %016llx",
                      (unsigned long long)h,
                      (unsigned long long)(h != src->manifest_hash ? src->manifest_hash : expect_hash));
        goto out;
    }
    const struct spw_http_opts http = {.ca_file = spec->ca_file, .header_file = spec->header_file};
    for (int i = 0; i < n_shards && rc == 0; i++)
        if ((rc = spw_shard_open(names[i], &http, &src->io, &src->shards[i], err, errlen)) == 0)
            src->n_shards++;
    if (rc == 0)
        rc = check_here(src, err, errlen);
out:
    for (int i = 0; names && i < n_shards; i++)
        free(names[i]);
    free(names);
    free(plain);
    if (rc) {
        spw_source_close(src);
        return rc;
    }
    *out = src;
    return 0;
}

/* ---- GetManifest, chunk after chunk ---- */

int spw_manifest_fetch(struct spw_rpc_channel *ch, uint64_t job, const struct ProtobufCMessage *pipeline,
                       int plan_ahead_workers, int first_timeout_ms, uint8_t **out, size_t *len, uint64_t *hash,
                       char *err, size_t errlen)
{
    uint8_t *all = NULL;
    uint64_t total = 0, got = 0, want_hash = 0;
    int rc = 0;
    do {
        Spillway__V1__GetManifestRequest req = SPILLWAY__V1__GET_MANIFEST_REQUEST__INIT;
        req.job = job;
        req.pipeline = (Spillway__V1__Pipeline *)pipeline;
        req.offset = got;
        req.manifest_hash = want_hash;
        req.plan_ahead = got == 0 && plan_ahead_workers >= 0;
        req.max_workers = plan_ahead_workers > 0 ? plan_ahead_workers : 0;
        ProtobufCMessage *reply = NULL;
        char msg[512] = "";
        const int st = spw_rpc_call_reply(ch, SPW_PATH(GET_MANIFEST), &req.base,
                                          got ? 60000 : first_timeout_ms, &spillway__v1__get_manifest_response__descriptor,
                                          &reply, msg, sizeof msg);
        const Spillway__V1__GetManifestResponse *m = (const Spillway__V1__GetManifestResponse *)reply;
        if (st != SPW_RPC_OK || !m) {
            rc = spw_fail(err, errlen, SPW_ESOURCE, "GetManifest: %s: %s", spw_rpc_status_name(st), msg);
        } else if (got == 0 && (m->total_bytes == 0 || m->total_bytes > SPW_MANIFEST_MAX_BYTES)) {
            rc = spw_fail(err, errlen, SPW_ESOURCE, "GetManifest: a manifest of %llu bytes (the cap is %u MiB)",
                          (unsigned long long)m->total_bytes, SPW_MANIFEST_MAX_BYTES >> 20);
        } else if (got && (m->manifest_hash != want_hash || m->total_bytes != total)) {
            rc = spw_fail(err, errlen, SPW_ESOURCE, "GetManifest: the listing changed while it was fetched");
        } else if (m->chunk.len == 0 || m->chunk.len > SPW_MANIFEST_CHUNK || m->chunk.len > m->total_bytes - got) {
            rc = spw_fail(err, errlen, SPW_ESOURCE, "GetManifest: a chunk of %zu bytes at %llu of %llu",
                          m->chunk.len, (unsigned long long)got, (unsigned long long)m->total_bytes);
        } else {
            if (got == 0) {
                total = m->total_bytes;
                want_hash = m->manifest_hash;
                if (!(all = malloc((size_t)total)))
                    rc = -ENOMEM;
            }
            if (all) {
                memcpy(all + got, m->chunk.data, m->chunk.len);
                got += m->chunk.len;
            }
        }
        if (reply)
            protobuf_c_message_free_unpacked(reply, NULL);
    } while (rc == 0 && got < total);
    if (rc) {
        free(all);
        return rc;
    }
    *out = all;
    *len = (size_t)total;
    *hash = want_hash;
    return 0;
}
