/* pipeline/source.c - image_folder and tar_shards enumeration (sorted, hashed) and sample reads; a shard's
 * listing is pipeline/tar_index.c's, its bytes pipeline/shard_io.c's (a file or a URL). Enumeration runs on
 * one thread at open; spw_source_read (pread, a range, or a compressed shard's streamed read) is safe from
 * many threads. */
#include "pipeline/source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/err.h"
#include "pipeline/brace.h"
#include "pipeline/tar_index.h"

struct vec {
    struct spw_sample *v;
    int64_t n, cap;
    int n_fields;
    struct spw_member_loc *locs;    /* [cap * n_fields] */
};

/* Append a sample and its n_fields field locations (locs may be NULL without fields). */
static int vec_push(struct vec *a, struct spw_sample s, const struct spw_member_loc *locs)
{
    if (a->n == a->cap) {
        int64_t cap = a->cap ? a->cap * 2 : 1024;
        void *p = realloc(a->v, (size_t)cap * sizeof *a->v);
        if (!p)
            return -ENOMEM;
        a->v = p;
        if (a->n_fields) {
            void *l = realloc(a->locs, (size_t)cap * (size_t)a->n_fields * sizeof *a->locs);
            if (!l)
                return -ENOMEM;
            a->locs = l;
        }
        a->cap = cap;
    }
    if (a->n_fields && locs)
        memcpy(a->locs + a->n * a->n_fields, locs, sizeof *locs * (size_t)a->n_fields);
    a->v[a->n++] = s;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_media_name(const char *name, enum spw_media media)
{
    const char *dot = strrchr(name, '.');
    return dot && spw_tar_media_ext(dot + 1, media);
}

static const char *media_name(enum spw_media media)
{
    switch (media) {
    case SPW_MEDIA_AUDIO: return "WAV";
    case SPW_MEDIA_ANY_AUDIO: return "WAV, FLAC, MP3, Ogg or Opus";
    case SPW_MEDIA_ANY_IMAGE: return "JPEG, PNG or WebP";
    case SPW_MEDIA_IMAGE: break;
    }
    return "JPEG";
}

/* Sorted names of directory entries (files or dirs, per want_dir), skipping dot files. */
static int list_dir(const char *path, int want_dir, char ***names, int *count)
{
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    char **v = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char full[4096];
        struct stat st;
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &st) != 0)
            continue;
        if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(v, (size_t)cap * sizeof *v);
            if (!p) {
                rc = -ENOMEM;
                break;
            }
            v = p;
        }
        if (!(v[n] = strdup(e->d_name))) {
            rc = -ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc) {
        for (int i = 0; i < n; i++)
            free(v[i]);
        free(v);
        return rc;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_str);
    *names = v;
    *count = n;
    return 0;
}

static void free_names(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The sample files among names[n] (files of dir) as samples of that label; the others count as ignored. */
static int add_files(struct spw_source *src, const char *dir, char *const *names, int n, enum spw_media media,
                     int64_t label, struct vec *out)
{
    for (int i = 0; i < n; i++) {
        if (!is_media_name(names[i], media)) {
            src->ignored++;
            continue;
        }
        struct spw_sample s = {.label = label, .file = -1};
        struct stat st;
        const size_t len = strlen(dir) + strlen(names[i]) + 2;
        if (!(s.path = malloc(len)))
            return -ENOMEM;
        snprintf(s.path, len, "%s/%s", dir, names[i]);
        s.size = stat(s.path, &st) == 0 ? st.st_size : -1;
        const int rc = vec_push(out, s, NULL);
        if (rc) {
            free(s.path);
            return rc;
        }
    }
    return 0;
}

/* Class sub-folders of root (sorted names = labels 0, 1, ...), each holding sample files, as torchvision's
 * ImageFolder. */
static int open_class_folders(struct spw_source *src, const char *root, enum spw_media media, struct vec *out,
                              char *err, size_t errlen)
{
    char **classes = NULL;
    int n_classes = 0;
    int rc = list_dir(root, 1, &classes, &n_classes);
    if (rc) {
        snprintf(err, errlen, "source.path: cannot read directory \"%s\": %s", root, spw_strerror(rc));
        return SPW_ESOURCE;
    }
    if (n_classes == 0) {
        snprintf(err, errlen, "source.path: \"%s\" has no class sub-folders", root);
        free_names(classes, n_classes);
        return SPW_ESOURCE;
    }
    for (int c = 0; c < n_classes && rc == 0; c++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, classes[c]);
        char **files = NULL;
        int n_files = 0;
        if ((rc = list_dir(dir, 0, &files, &n_files)) != 0) {
            snprintf(err, errlen, "cannot read \"%s\": %s", dir, spw_strerror(rc));
            rc = SPW_ESOURCE;
            break;
        }
        rc = add_files(src, dir, files, n_files, media, c, out);
        free_names(files, n_files);
    }
    src->classes = classes;
    src->n_classes = n_classes;
    return rc;
}

/* Without labels: every sample file under dir at any depth, no classes: a folder's files in name order, then
 * its sub-folders' in name order. At most 64 folders deep (a link loop stops there). */
static int open_any_folder(struct spw_source *src, const char *dir, int depth, enum spw_media media, struct vec *out,
                           char *err, size_t errlen)
{
    if (depth > 64)
        return spw_fail(err, errlen, SPW_ESOURCE, "source.path: \"%.200s\" is more than 64 folders deep (a link "
                        "loop?)", dir);
    char **files = NULL, **dirs = NULL;
    int n_files = 0, n_dirs = 0;
    int rc = list_dir(dir, 0, &files, &n_files);
    if (rc == 0 && (rc = list_dir(dir, 1, &dirs, &n_dirs)) != 0)
        free_names(files, n_files), files = NULL, n_files = 0;
    if (rc)
        return spw_fail(err, errlen, SPW_ESOURCE, "%s: cannot read directory \"%.200s\": %s",
                        depth ? "source" : "source.path", dir, spw_strerror(rc));
    rc = add_files(src, dir, files, n_files, media, -1, out);
    for (int i = 0; i < n_dirs && rc == 0; i++) {
        char sub[4096];
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", dir, dirs[i]) >= sizeof sub)
            rc = spw_fail(err, errlen, SPW_ESOURCE, "source: a path under \"%.200s\" is longer than 4095 bytes", dir);
        else
            rc = open_any_folder(src, sub, depth + 1, media, out, err, errlen);
    }
    free_names(files, n_files);
    free_names(dirs, n_dirs);
    return rc;
}

/* ---- fields of folder sources: a parallel folder of the same relative names ---- */

int spw_source_field_path(const struct spw_source_spec *spec, int f, const char *sample_path, char *out, size_t len)
{
    const char *rel = sample_path + strlen(spec->path);
    while (*rel == '/')
        rel++;
    const char *base = strrchr(rel, '/'), *dot = strrchr(base ? base : rel, '.');
    const int stem = (int)(dot ? (size_t)(dot - rel) : strlen(rel));
    const int n = snprintf(out, len, "%s/%.*s.%s", spec->fields[f].path, stem, rel, spec->fields[f].from);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Keep the listed samples whose every field file is there (their sizes into v->locs); the others count as
 * ignored. */
static int attach_folder_fields(struct spw_source *src, const struct spw_source_spec *spec, struct vec *v)
{
    const int nf = spec->n_fields;
    struct spw_member_loc *locs = malloc(sizeof *locs * (size_t)nf * (size_t)(v->n ? v->n : 1));
    if (!locs)
        return -ENOMEM;
    int64_t kept = 0;
    for (int64_t i = 0; i < v->n; i++) {
        bool all = true;
        for (int f = 0; f < nf && all; f++) {
            char path[8192];
            struct stat st = {0};
            all = spw_source_field_path(spec, f, v->v[i].path, path, sizeof path) == 0 && stat(path, &st) == 0 &&
                  S_ISREG(st.st_mode);
            locs[kept * nf + f] = (struct spw_member_loc){-1, all ? st.st_size : 0};
        }
        if (!all) {
            free(v->v[i].path);
            src->ignored++;
            continue;
        }
        v->v[kept++] = v->v[i];
    }
    v->n = kept;
    free(v->locs);
    v->locs = locs;
    return 0;
}

/* ---- a COCO set: the images its annotations list, with their boxes ---- */

static int open_coco(struct spw_source *src, const struct spw_source_spec *spec, struct vec *v, char *err,
                     size_t errlen)
{
    struct spw_coco_image *ims = NULL;
    int64_t n = 0, dropped = 0;
    int rc = spw_coco_read(spec->annotations, &ims, &n, &dropped, err, errlen);
    if (rc)
        return rc;
    if (!(src->coco = calloc((size_t)(n ? n : 1), sizeof *src->coco)))
        rc = -ENOMEM;
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        struct spw_sample s = {.label = -1, .file = -1};
        struct stat st;
        const size_t len = strlen(spec->path) + strlen(ims[i].file_name) + 2;
        if (!(s.path = malloc(len))) {
            rc = -ENOMEM;
            break;
        }
        snprintf(s.path, len, "%s/%s", spec->path, ims[i].file_name);
        if (stat(s.path, &st) != 0 || !S_ISREG(st.st_mode)) {     /* listed, not here: not a sample */
            free(s.path);
            src->ignored++;
            continue;
        }
        s.size = st.st_size;
        const struct spw_member_loc loc = {-2, ims[i].n_boxes};
        src->coco[v->n] = ims[i];
        ims[i] = (struct spw_coco_image){0};
        if ((rc = vec_push(v, s, &loc)) != 0)
            free(s.path);
    }
    spw_coco_free(ims, n);
    return rc;
}

/* ---- tar shards ---- */

static bool has_glob_chars(const char *s)
{
    return strpbrk(s, "*?[") != NULL;
}

/* The shard paths of a tar_shards path: brace groups expanded in order, then each result globbed (glob
 * sorts its matches) when it has glob characters, else taken as one shard that must exist. */
static int shard_paths(const char *pattern, char ***paths, int64_t *count, char *err, size_t errlen)
{
    char **items = NULL, **v = NULL;
    int64_t n_items = 0, n = 0, cap = 0;
    int rc = spw_brace_expand(pattern, SPW_BRACE_MAX_ITEMS, &items, &n_items, err, errlen);
    for (int64_t i = 0; rc == 0 && i < n_items; i++) {
        glob_t g = {0};
        const bool globbed = !spw_shard_is_url(items[i]) && has_glob_chars(items[i]);   /* a URL is not a file name */
        if (globbed && (glob(items[i], 0, NULL, &g) != 0 || g.gl_pathc == 0)) {
            globfree(&g);
            rc = spw_fail(err, errlen, SPW_ESOURCE, "source.path: no tar shards match \"%s\"", items[i]);
            break;
        }
        const int64_t add = globbed ? (int64_t)g.gl_pathc : 1;
        if (n + add > SPW_BRACE_MAX_ITEMS)
            rc = spw_fail(err, errlen, SPW_ESOURCE, "source.path: \"%.200s\" names more than %d shards", pattern,
                          SPW_BRACE_MAX_ITEMS);
        if (rc == 0 && n + add > cap) {
            int64_t want = cap ? cap : 64;
            while (want < n + add)
                want *= 2;
            char **grown = realloc(v, (size_t)want * sizeof *v);
            if (grown)
                v = grown, cap = want;
            else
                rc = -ENOMEM;
        }
        for (int64_t k = 0; rc == 0 && k < add; k++)
            if (!(v[n] = strdup(globbed ? g.gl_pathv[k] : items[i])))
                rc = -ENOMEM;
            else
                n++;
        if (globbed)
            globfree(&g);
    }
    spw_brace_free(items, n_items);
    if (rc) {
        free_names(v, (int)n);
        return rc;
    }
    *paths = v;
    *count = n;
    return 0;
}

struct shard_ctx {
    struct vec *out;
    const char *shard;
    int file;
};

static int add_tar_sample(void *p, const struct spw_tar_sample *t)
{
    const struct shard_ctx *c = p;
    struct spw_sample s = {.label = t->label, .file = c->file, .offset = t->offset, .size = t->size};
    size_t len = strlen(c->shard) + strlen(t->name) + 2;
    if (!(s.path = malloc(len)))
        return -ENOMEM;
    snprintf(s.path, len, "%s:%s", c->shard, t->name);
    int rc = vec_push(c->out, s, t->fields);
    if (rc)
        free(s.path);
    return rc;
}

static int open_tar_shards(struct spw_source *src, const struct spw_source_spec *spec, struct vec *out,
                           char *err, size_t errlen)
{
    char **paths = NULL;
    int64_t n = 0;
    int rc = shard_paths(spec->path, &paths, &n, err, errlen);
    if (rc)
        return rc;
    src->shards = calloc((size_t)n, sizeof *src->shards);
    src->streamed = calloc((size_t)n, sizeof *src->streamed);
    if (!src->shards || !src->streamed)
        rc = -ENOMEM;
    const struct spw_tar_rules rules = {.media = spec->media, .label_key = spec->label_key,
                                        .no_labels = spec->no_labels, .n_fields = spec->n_fields,
                                        .fields = spec->fields};
    const struct spw_http_opts http = {.ca_file = spec->ca_file, .header_file = spec->header_file};
    for (int64_t i = 0; i < n && rc == 0; i++) {
        if ((rc = spw_shard_open(paths[i], &http, &src->io, &src->shards[i], err, errlen)) != 0)
            break;
        src->n_shards++;
        struct shard_ctx c = {.out = out, .shard = paths[i], .file = (int)i};
        rc = spw_tar_index_scan(src->shards[i], paths[i], &rules, add_tar_sample, &c, &src->streamed[i],
                                &src->ignored, err, errlen);
    }
    free_names(paths, (int)n);
    return rc;
}

/* ---- a flat folder with labels.tsv ---- */

#define LABELS_FILE "labels.tsv"
#define LABELS_MAX_BYTES (64 << 20)

static bool has_labels_file(const char *root)
{
    char p[4200];
    struct stat st;
    snprintf(p, sizeof p, "%s/" LABELS_FILE, root);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_sample_path(const void *a, const void *b)
{
    return strcmp(((const struct spw_sample *)a)->path, ((const struct spw_sample *)b)->path);
}

/* The whole labels file into a NUL-terminated buffer (capped). */
static int read_labels(const char *path, char **text, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open \"%s\": %s", path, strerror(errno));
        return SPW_ESOURCE;
    }
    char *buf = malloc(LABELS_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, LABELS_MAX_BYTES + 1, f) : 0;
    const bool bad = ferror(f);
    fclose(f);
    if (!buf)
        return -ENOMEM;
    if (bad || n > LABELS_MAX_BYTES) {
        snprintf(err, errlen, "\"%s\": %s", path, bad ? "read error" : "larger than the cap of 64 MiB");
        free(buf);
        return SPW_ESOURCE;
    }
    buf[n] = 0;
    *text = buf;
    return 0;
}

/* The sorted distinct class names of names[n] into src->classes (copies); 0 or -ENOMEM. */
static int sorted_classes(struct spw_source *src, const char **names, int64_t n)
{
    const char **sorted = malloc(sizeof *sorted * (size_t)(n ? n : 1));
    if (!sorted)
        return -ENOMEM;
    memcpy(sorted, names, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str);
    int rc = 0;
    if (!(src->classes = calloc((size_t)(n ? n : 1), sizeof *src->classes)))
        rc = -ENOMEM;
    for (int64_t k = 0; rc == 0 && k < n; k++)
        if ((k == 0 || strcmp(sorted[k], sorted[k - 1]) != 0) &&
            !(src->classes[src->n_classes++] = strdup(sorted[k])))
            rc = -ENOMEM;
    free(sorted);
    return rc;
}

static int class_label(const struct spw_source *src, const char *name)
{
    const char *const *hit = bsearch(&name, src->classes, (size_t)src->n_classes, sizeof *src->classes, cmp_str);
    return (int)(hit - (const char *const *)src->classes);
}

/* True when FILE (a labels.tsv path) could name something outside the folder: absolute, or with a ".."
 * component. A ".." inside a name ("take..2.wav") or in the class is harmless. */
static bool escapes_folder(const char *file)
{
    if (file[0] == '/')
        return true;
    for (const char *p = file;; ) {
        const size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return true;
        if (!p[n])
            return false;
        p += n + 1;
    }
}

/* A flat folder whose labels.tsv lists "FILE<TAB>CLASS" per line (FILE relative to the folder). Classes are
 * the sorted distinct names (labels 0, 1, ...), as class folders would be; samples are sorted by path. */
static int open_labeled_folder(struct spw_source *src, const char *root, struct vec *out, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" LABELS_FILE, root);
    char *text = NULL, *save = NULL;
    const char **names = NULL;
    int rc = read_labels(path, &text, err, errlen), line = 0;
    for (char *l = rc ? NULL : strtok_r(text, "\n", &save); l && rc == 0; l = strtok_r(NULL, "\n", &save)) {
        line++;
        l[strcspn(l, "\r")] = 0;
        if (!*l)
            continue;
        char *tab = strchr(l, '\t');
        if (!tab || tab == l || !tab[1] || strchr(tab + 1, '\t')) {
            snprintf(err, errlen, "%s:%d: expected \"FILE<TAB>CLASS\" with FILE inside the folder", path, line);
            rc = SPW_ESOURCE;
            break;
        }
        *tab = 0;
        if (escapes_folder(l)) {
            snprintf(err, errlen, "%s:%d: \"%.200s\" is not inside the folder (absolute, or with a \"..\" component)",
                     path, line, l);
            rc = SPW_ESOURCE;
            break;
        }
        struct spw_sample smp = {.file = -1};
        struct stat st;
        size_t len = strlen(root) + strlen(l) + 2;
        const char **grown = realloc(names, sizeof *names * (size_t)(out->n + 1));
        if (grown)
            names = grown;
        if (!grown || !(smp.path = malloc(len))) {
            rc = -ENOMEM;
            break;
        }
        snprintf(smp.path, len, "%s/%s", root, l);
        if (stat(smp.path, &st) != 0 || !S_ISREG(st.st_mode)) {
            snprintf(err, errlen, "%s:%d: \"%s\" is not a file", path, line, l);
            free(smp.path);
            rc = SPW_ESOURCE;
            break;
        }
        smp.size = st.st_size;
        names[out->n] = tab + 1;
        if ((rc = vec_push(out, smp, NULL)) != 0)
            free(smp.path);
    }
    if (rc == 0)
        rc = sorted_classes(src, names, out->n);
    for (int64_t k = 0; rc == 0 && k < out->n; k++)
        out->v[k].label = class_label(src, names[k]);
    if (rc == 0)
        qsort(out->v, (size_t)out->n, sizeof *out->v, cmp_sample_path);
    free(names);
    free(text);
    return rc;
}

int spw_source_open(const struct spw_source_spec *spec, struct spw_source **out, char *err, size_t errlen)
{
    struct spw_source *src = calloc(1, sizeof *src);
    struct vec v = {0};
    if (!src)
        return -ENOMEM;
    src->format = spec->format;
    src->n_fields = v.n_fields = spec->n_fields;
    src->spec = spec->format != SPW_SOURCE_TAR_SHARDS && spec->format != SPW_SOURCE_COCO && spec->n_fields ? spec
                                                                                                        : NULL;
    int rc;
    if (spec->format == SPW_SOURCE_TAR_SHARDS)
        rc = open_tar_shards(src, spec, &v, err, errlen);
    else if (spec->format == SPW_SOURCE_COCO)
        rc = open_coco(src, spec, &v, err, errlen);
    else if (spec->no_labels)
        rc = open_any_folder(src, spec->path, 0, spec->media, &v, err, errlen);
    else if ((spec->format == SPW_SOURCE_WAV_FOLDER || spec->format == SPW_SOURCE_AUDIO_FOLDER) &&
             has_labels_file(spec->path))
        rc = open_labeled_folder(src, spec->path, &v, err, errlen);
    else
        rc = open_class_folders(src, spec->path, spec->media, &v, err, errlen);
    if (rc == 0 && spec->format != SPW_SOURCE_TAR_SHARDS && spec->format != SPW_SOURCE_COCO && spec->n_fields)
        rc = attach_folder_fields(src, spec, &v);
    if (rc == 0 && v.n == 0) {
        snprintf(err, errlen, "source.path: \"%s\" holds no %s samples (%lld other files ignored)", spec->path,
                 media_name(spec->media), (long long)src->ignored);
        rc = SPW_ESOURCE;
    }
    src->samples = v.v;
    src->n = v.n;
    src->field_locs = v.locs;
    if (rc) {
        spw_source_close(src);
        return rc;
    }
    src->manifest_hash = spw_source_hash(src);
    *out = src;
    return 0;
}

uint64_t spw_source_hash(const struct spw_source *src)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < src->n; i++) {
        const struct spw_sample *s = &src->samples[i];
        h = fnv1a(h, s->path, strlen(s->path) + 1);
        h = fnv1a(h, &s->label, sizeof s->label);
        h = fnv1a(h, &s->size, sizeof s->size);
    }
    for (int64_t k = 0; k < src->n * src->n_fields; k++)
        h = fnv1a(h, &src->field_locs[k].size, sizeof src->field_locs[k].size);
    for (int64_t i = 0; src->coco && i < src->n; i++) {
        h = fnv1a(h, src->coco[i].boxes, sizeof *src->coco[i].boxes * 4 * (size_t)src->coco[i].n_boxes);
        h = fnv1a(h, src->coco[i].labels, sizeof *src->coco[i].labels * (size_t)src->coco[i].n_boxes);
    }
    return h;
}

static int pread_all(int fd, uint8_t *p, int64_t size)
{
    int64_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, p + got, (size_t)(size - got), got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -errno : -EIO;
        got += r;
    }
    return 0;
}

/* size bytes at off of tar file `file` (its shard) into a new buffer; SPW_ETOOBIG over max_bytes. */
static int read_member(const struct spw_source *src, int file, int64_t off, int64_t size, int64_t max_bytes,
                       uint8_t **buf, size_t *len)
{
    if (size > max_bytes)
        return SPW_ETOOBIG;
    uint8_t *p = malloc(size ? (size_t)size : 1);
    if (!p)
        return -ENOMEM;
    const int rc = src->streamed[file] ? spw_tar_read_streamed(src->shards[file], off, size, p)
                                       : spw_shard_pread(src->shards[file], p, (size_t)size, off);
    if (rc) {
        free(p);
        return rc;
    }
    *buf = p;
    *len = (size_t)size;
    return 0;
}

/* A whole file into a new buffer; SPW_ETOOBIG over max_bytes (before allocating). */
static int read_file(const char *path, int64_t max_bytes, uint8_t **buf, size_t *len)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    uint8_t *p = NULL;
    int rc = fstat(fd, &st) != 0 ? -errno : st.st_size > max_bytes ? SPW_ETOOBIG : 0;
    if (rc == 0 && !(p = malloc(st.st_size ? (size_t)st.st_size : 1)))
        rc = -ENOMEM;
    if (rc == 0 && (rc = pread_all(fd, p, st.st_size)) == 0) {
        *buf = p;
        *len = (size_t)st.st_size;
        p = NULL;
    }
    free(p);
    close(fd);
    return rc;
}

int spw_source_read_field(const struct spw_source *src, int64_t i, int f, int64_t max_bytes, uint8_t **buf,
                          size_t *len)
{
    const struct spw_member_loc *m = &src->field_locs[i * src->n_fields + f];
    if (src->samples[i].file >= 0)
        return read_member(src, src->samples[i].file, m->offset, m->size, max_bytes, buf, len);
    char path[8192];
    const int rc = spw_source_field_path(src->spec, f, src->samples[i].path, path, sizeof path);
    return rc ? rc : read_file(path, max_bytes, buf, len);
}

int spw_source_read(const struct spw_source *src, int64_t i, int64_t max_bytes, uint8_t **buf, size_t *len)
{
    const struct spw_sample *s = &src->samples[i];
    return s->file >= 0 ? read_member(src, s->file, s->offset, s->size, max_bytes, buf, len)
                        : read_file(s->path, max_bytes, buf, len);
}

int spw_source_take(struct spw_source *src, const int64_t *idx, int64_t k)
{
    const size_t nf = (size_t)src->n_fields;
    uint8_t *taken = calloc((size_t)src->n + 1, 1);
    struct spw_sample *samples = malloc(((size_t)k + 1) * sizeof *samples);
    int64_t *listed = malloc(((size_t)k + 1) * sizeof *listed);
    struct spw_member_loc *locs = nf ? malloc(((size_t)k * nf + 1) * sizeof *locs) : NULL;
    struct spw_coco_image *coco = src->coco ? malloc(((size_t)k + 1) * sizeof *coco) : NULL;
    int rc = !taken || !samples || !listed || (nf && !locs) || (src->coco && !coco) ? -ENOMEM : 0;
    for (int64_t i = 0; rc == 0 && i < k; i++) {
        if (idx[i] < 0 || idx[i] >= src->n || taken[idx[i]])
            rc = -EINVAL;
        else
            taken[idx[i]] = 1;
    }
    if (rc) {
        free(taken), free(samples), free(listed), free(locs), free(coco);
        return rc;
    }
    for (int64_t i = 0; i < k; i++) {
        samples[i] = src->samples[idx[i]];
        listed[i] = src->listed ? src->listed[idx[i]] : idx[i];
        if (nf)
            memcpy(locs + (size_t)i * nf, src->field_locs + (size_t)idx[i] * nf, nf * sizeof *locs);
        if (coco)
            coco[i] = src->coco[idx[i]];
    }
    for (int64_t i = 0; i < src->n; i++) {
        if (taken[i])
            continue;
        free(src->samples[i].path);
        if (coco) {
            free(src->coco[i].file_name);
            free(src->coco[i].boxes);
            free(src->coco[i].labels);
        }
    }
    free(taken);
    free(src->samples);
    free(src->listed);
    free(src->field_locs);
    free(src->coco);
    src->samples = samples, src->listed = listed, src->field_locs = locs, src->coco = coco, src->n = k;
    return 0;
}

void spw_source_close(struct spw_source *src)
{
    if (!src)
        return;
    for (int64_t i = 0; i < src->n; i++)
        free(src->samples[i].path);
    free(src->samples);
    free(src->listed);
    free(src->field_locs);
    spw_coco_free(src->coco, src->coco ? src->n : 0);
    free_names(src->classes, src->n_classes);
    for (int i = 0; i < src->n_shards; i++)
        spw_shard_close(src->shards[i]);
    free(src->shards);
    free(src->streamed);
    free(src);
}
