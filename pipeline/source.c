/* pipeline/source.c - image_folder and tar_shards enumeration (sorted, hashed) and sample reads.
 * Enumeration runs on one thread at open; spw_source_read uses pread and is safe from many threads. */
#include "pipeline/source.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/err.h"

struct vec {
    struct spw_sample *v;
    int64_t n, cap;
};

static int vec_push(struct vec *a, struct spw_sample s)
{
    if (a->n == a->cap) {
        int64_t cap = a->cap ? a->cap * 2 : 1024;
        void *p = realloc(a->v, (size_t)cap * sizeof *a->v);
        if (!p)
            return -ENOMEM;
        a->v = p;
        a->cap = cap;
    }
    a->v[a->n++] = s;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A sample file's extension (after the dot) for this media: jpg/jpeg images, wav audio (any case). */
static bool is_media_ext(const char *ext, enum spw_media media)
{
    if (media == SPW_MEDIA_AUDIO)
        return !strcasecmp(ext, "wav");
    return !strcasecmp(ext, "jpg") || !strcasecmp(ext, "jpeg");
}

static bool is_media_name(const char *name, enum spw_media media)
{
    const char *dot = strrchr(name, '.');
    return dot && is_media_ext(dot + 1, media);
}

static const char *media_name(enum spw_media media)
{
    return media == SPW_MEDIA_AUDIO ? "WAV" : "JPEG";
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
        for (int i = 0; i < n_files && rc == 0; i++) {
            if (!is_media_name(files[i], media)) {
                src->ignored++;
                continue;
            }
            struct spw_sample s = {.label = c, .file = -1};
            struct stat st;
            size_t len = strlen(dir) + strlen(files[i]) + 2;
            if (!(s.path = malloc(len))) {
                rc = -ENOMEM;
                break;
            }
            snprintf(s.path, len, "%s/%s", dir, files[i]);
            s.size = stat(s.path, &st) == 0 ? st.st_size : -1;
            if ((rc = vec_push(out, s)) != 0)
                free(s.path);
        }
        free_names(files, n_files);
    }
    src->classes = classes;
    src->n_classes = n_classes;
    return rc;
}

/* Parse an octal tar header field. */
static int64_t tar_octal(const char *p, int n)
{
    int64_t v = 0;
    for (int i = 0; i < n && p[i]; i++) {
        if (p[i] == ' ')
            continue;
        if (p[i] < '0' || p[i] > '7')
            return -1;
        v = v * 8 + (p[i] - '0');
    }
    return v;
}

struct pending {      /* the last member key seen in a shard, waiting for its .jpg (.wav) / .cls pair */
    char key[256];
    int64_t jpg_off, jpg_size;
    int64_t label;
    int have_jpg, have_cls;
};

static int flush_pending(struct spw_source *src, struct pending *pd, const char *shard, int fd_index,
                         enum spw_media media, struct vec *out)
{
    if (!pd->key[0])
        return 0;
    if (!pd->have_jpg || !pd->have_cls) {
        src->ignored++;
        memset(pd, 0, sizeof *pd);
        return 0;
    }
    struct spw_sample s = {.label = pd->label, .file = fd_index, .offset = pd->jpg_off, .size = pd->jpg_size};
    size_t len = strlen(shard) + strlen(pd->key) + 6;
    if (!(s.path = malloc(len)))
        return -ENOMEM;
    snprintf(s.path, len, "%s:%s.%s", shard, pd->key, media == SPW_MEDIA_AUDIO ? "wav" : "jpg");
    memset(pd, 0, sizeof *pd);
    int rc = vec_push(out, s);
    if (rc)
        free(s.path);
    return rc;
}

static int scan_tar(struct spw_source *src, const char *shard, int fd, int fd_index, enum spw_media media,
                    struct vec *out, char *err, size_t errlen)
{
    struct pending pd = {0};
    int64_t off = 0;
    char hdr[512];
    int rc = 0;
    for (;;) {
        ssize_t r = pread(fd, hdr, 512, off);
        if (r == 0)
            break;
        if (r != 512) {
            snprintf(err, errlen, "%s: truncated tar header at offset %lld", shard, (long long)off);
            return SPW_ESOURCE;
        }
        if (hdr[0] == 0)
            break;                                      /* end-of-archive block */
        int64_t size = tar_octal(hdr + 124, 12);
        if (size < 0) {
            snprintf(err, errlen, "%s: malformed tar header at offset %lld", shard, (long long)off);
            return SPW_ESOURCE;
        }
        char name[512];
        int nl = 0;
        if (hdr[345] && memcmp(hdr + 257, "ustar", 5) == 0)        /* ustar prefix/name split */
            nl = snprintf(name, sizeof name, "%.155s/", hdr + 345);
        snprintf(name + nl, sizeof name - (size_t)nl, "%.100s", hdr);
        char type = hdr[156];
        int64_t data = off + 512;
        off = data + (size + 511) / 512 * 512;
        if (type != '0' && type != 0)
            continue;
        /* WebDataset key: the member path up to the first dot of its basename. */
        const char *base = strrchr(name, '/');
        base = base ? base + 1 : name;
        const char *dot = strchr(base, '.');
        if (!dot) {
            src->ignored++;
            continue;
        }
        char key[256];
        if (dot - name >= (ptrdiff_t)sizeof key) {
            src->ignored++;
            continue;
        }
        snprintf(key, sizeof key, "%.*s", (int)(dot - name), name);
        if (strcmp(key, pd.key) != 0) {
            if ((rc = flush_pending(src, &pd, shard, fd_index, media, out)) != 0)
                return rc;
            snprintf(pd.key, sizeof pd.key, "%s", key);
        }
        const char *ext = dot + 1;
        if (is_media_ext(ext, media)) {
            pd.have_jpg = 1;
            pd.jpg_off = data;
            pd.jpg_size = size;
        } else if (!strcasecmp(ext, "cls")) {
            char txt[32] = {0};
            if (size <= 0 || size >= (int64_t)sizeof txt || pread(fd, txt, (size_t)size, data) != size) {
                snprintf(err, errlen, "%s: member %s is not a class index", shard, name);
                return SPW_ESOURCE;
            }
            char *end;
            long long v = strtoll(txt, &end, 10);
            while (*end && isspace((unsigned char)*end))
                end++;
            if (*end || v < 0) {
                snprintf(err, errlen, "%s: member %s: \"%s\" is not a class index", shard, name, txt);
                return SPW_ESOURCE;
            }
            pd.label = v;
            pd.have_cls = 1;
        }
    }
    return flush_pending(src, &pd, shard, fd_index, media, out);
}

static int open_tar_shards(struct spw_source *src, const char *pattern, enum spw_media media, struct vec *out,
                           char *err, size_t errlen)
{
    glob_t g;
    int gr = glob(pattern, 0, NULL, &g);
    if (gr != 0 || g.gl_pathc == 0) {
        snprintf(err, errlen, "source.path: no tar shards match \"%s\"", pattern);
        if (gr == 0)
            globfree(&g);
        return SPW_ESOURCE;
    }
    int rc = 0;
    if (!(src->fds = calloc(g.gl_pathc, sizeof *src->fds))) {
        globfree(&g);
        return -ENOMEM;
    }
    for (size_t i = 0; i < g.gl_pathc && rc == 0; i++) {   /* glob sorts its results */
        int fd = open(g.gl_pathv[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            snprintf(err, errlen, "cannot open shard \"%s\": %s", g.gl_pathv[i], strerror(errno));
            rc = SPW_ESOURCE;
            break;
        }
        src->fds[src->n_fds++] = fd;
        rc = scan_tar(src, g.gl_pathv[i], fd, (int)i, media, out, err, errlen);
    }
    globfree(&g);
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
        if ((rc = vec_push(out, smp)) != 0)
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
    int rc;
    if (spec->format == SPW_SOURCE_TAR_SHARDS)
        rc = open_tar_shards(src, spec->path, spec->media, &v, err, errlen);
    else if (spec->format == SPW_SOURCE_WAV_FOLDER && has_labels_file(spec->path))
        rc = open_labeled_folder(src, spec->path, &v, err, errlen);
    else
        rc = open_class_folders(src, spec->path, spec->media, &v, err, errlen);
    if (rc == 0 && v.n == 0) {
        snprintf(err, errlen, "source.path: \"%s\" holds no %s samples (%lld other files ignored)", spec->path,
                 media_name(spec->media), (long long)src->ignored);
        rc = SPW_ESOURCE;
    }
    src->samples = v.v;
    src->n = v.n;
    if (rc) {
        spw_source_close(src);
        return rc;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < src->n; i++) {
        const struct spw_sample *s = &src->samples[i];
        h = fnv1a(h, s->path, strlen(s->path) + 1);
        h = fnv1a(h, &s->label, sizeof s->label);
        h = fnv1a(h, &s->size, sizeof s->size);
    }
    src->manifest_hash = h;
    *out = src;
    return 0;
}

int spw_source_read(const struct spw_source *src, int64_t i, int64_t max_bytes, uint8_t **buf, size_t *len)
{
    const struct spw_sample *s = &src->samples[i];
    int fd = -1, own = 0;
    int64_t off = 0, size = s->size;
    if (s->file >= 0) {
        fd = src->fds[s->file];
        off = s->offset;
    } else {
        fd = open(s->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        own = 1;
        struct stat st;
        if (fstat(fd, &st) != 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        size = st.st_size;
    }
    int rc = 0;
    uint8_t *p = NULL;
    if (size > max_bytes) {
        rc = SPW_ETOOBIG;
        goto out;
    }
    if (!(p = malloc(size ? (size_t)size : 1))) {
        rc = -ENOMEM;
        goto out;
    }
    int64_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, p + got, (size_t)(size - got), off + got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? -errno : -EIO;
            goto out;
        }
        got += r;
    }
    *buf = p;
    *len = (size_t)size;
    p = NULL;
out:
    free(p);
    if (own)
        close(fd);
    return rc;
}

void spw_source_close(struct spw_source *src)
{
    if (!src)
        return;
    for (int64_t i = 0; i < src->n; i++)
        free(src->samples[i].path);
    free(src->samples);
    free_names(src->classes, src->n_classes);
    for (int i = 0; i < src->n_fds; i++)
        close(src->fds[i]);
    free(src->fds);
    free(src);
}
