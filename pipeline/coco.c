/* pipeline/coco.c - COCO instances_*.json into a listing (see coco.h). Single-threaded; no shared state. */
#include "pipeline/coco.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/err.h"
#include "pipeline/spec.h"

void spw_coco_free(struct spw_coco_image *images, int64_t n)
{
    for (int64_t i = 0; images && i < n; i++) {
        free(images[i].file_name);
        free(images[i].boxes);
        free(images[i].labels);
    }
    free(images);
}

struct entry {                  /* an image while its annotations are gathered */
    int64_t id;
    double w, h;
    struct spw_coco_image im;
    int cap;
};

static int cmp_id(const void *a, const void *b)
{
    const int64_t x = ((const struct entry *)a)->id, y = ((const struct entry *)b)->id;
    return (x > y) - (x < y);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct spw_coco_image *)a)->file_name, ((const struct spw_coco_image *)b)->file_name);
}

/* Annotation k (an object) onto its image, as ConvertCocoPolysToMask keeps it. */
static int add_annotation(struct entry *e, int64_t n, const json_t *a, size_t k, int64_t *dropped, char *err,
                          size_t errlen, const char *path)
{
    const json_t *id = json_object_get(a, "image_id"), *bbox = json_object_get(a, "bbox");
    const json_t *cat = json_object_get(a, "category_id"), *crowd = json_object_get(a, "iscrowd");
    double c[4];
    bool ok = json_is_integer(id) && json_is_integer(cat) && json_is_array(bbox) && json_array_size(bbox) == 4 &&
              (!crowd || json_is_integer(crowd) || json_is_boolean(crowd));
    for (size_t i = 0; ok && i < 4; i++) {
        const json_t *v = json_array_get(bbox, i);
        ok = json_is_number(v) && isfinite(c[i] = json_number_value(v));
    }
    if (!ok)
        return spw_fail(err, errlen, SPW_ESOURCE, "%s: annotations[%zu]: expected image_id, category_id (integers) "
                        "and bbox (4 numbers)", path, k);
    const struct entry key = {.id = json_integer_value(id)};
    struct entry *img = bsearch(&key, e, (size_t)n, sizeof *e, cmp_id);
    if (!img)
        return spw_fail(err, errlen, SPW_ESOURCE, "%s: annotations[%zu]: image_id %lld is no image's", path, k,
                        (long long)key.id);
    if (crowd && (json_is_true(crowd) || (json_is_integer(crowd) && json_integer_value(crowd) != 0))) {
        (*dropped)++;
        return 0;
    }
    const double x0 = fmin(fmax(c[0], 0), img->w), y0 = fmin(fmax(c[1], 0), img->h);
    const double x1 = fmin(fmax(c[0] + c[2], 0), img->w), y1 = fmin(fmax(c[1] + c[3], 0), img->h);
    if (!(x1 > x0 && y1 > y0) || img->im.n_boxes >= SPW_BOXES_MAX) {
        (*dropped)++;
        return 0;
    }
    struct spw_coco_image *im = &img->im;
    if (im->n_boxes == img->cap) {
        const int cap = img->cap ? img->cap * 2 : 4;
        float *b = realloc(im->boxes, sizeof *b * 4 * (size_t)cap);
        if (b)
            im->boxes = b;
        int64_t *l = b ? realloc(im->labels, sizeof *l * (size_t)cap) : NULL;
        if (!b || !l)
            return -ENOMEM;
        im->labels = l;
        img->cap = cap;
    }
    float *o = im->boxes + 4 * im->n_boxes;
    o[0] = (float)x0, o[1] = (float)y0, o[2] = (float)x1, o[3] = (float)y1;
    im->labels[im->n_boxes++] = json_integer_value(cat);
    return 0;
}

int spw_coco_read(const char *path, struct spw_coco_image **out, int64_t *n_out, int64_t *dropped, char *err,
                  size_t errlen)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return spw_fail(err, errlen, SPW_ESOURCE, "source.annotations: cannot read \"%s\": %s", path, strerror(errno));
    if (st.st_size > SPW_COCO_MAX_BYTES)
        return spw_fail(err, errlen, SPW_ESOURCE, "source.annotations: \"%s\" is %lld bytes, over the cap of 4 GiB",
                        path, (long long)st.st_size);
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    const json_t *images = json_object_get(root, "images"), *anns = json_object_get(root, "annotations");
    if (!json_is_array(images) || !json_is_array(anns)) {
        json_decref(root);
        return spw_fail(err, errlen, SPW_ESOURCE, "source.annotations: \"%s\": %s", path,
                        !root ? je.text : "not COCO's layout (an object with \"images\" and \"annotations\" lists)");
    }
    const size_t n = json_array_size(images);
    struct entry *e = n > SPW_COCO_MAX_IMAGES ? NULL : calloc(n ? n : 1, sizeof *e);
    int rc = n > SPW_COCO_MAX_IMAGES ? spw_fail(err, errlen, SPW_ESOURCE, "source.annotations: %zu images, over "
                                                "the cap of %d", n, SPW_COCO_MAX_IMAGES)
             : e ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const json_t *im = json_array_get(images, i);
        const json_t *id = json_object_get(im, "id"), *name = json_object_get(im, "file_name");
        const json_t *w = json_object_get(im, "width"), *h = json_object_get(im, "height");
        if (!json_is_integer(id) || !json_is_string(name) || !json_is_number(w) || !json_is_number(h) ||
            json_string_length(name) == 0 || json_string_length(name) > 4096 || strstr(json_string_value(name), "..") ||
            json_string_value(name)[0] == '/') {
            rc = spw_fail(err, errlen, SPW_ESOURCE, "%s: images[%zu]: expected id (an integer), file_name (a path "
                          "inside the image folder), width and height", path, i);
            break;
        }
        e[i].id = json_integer_value(id);
        e[i].w = json_number_value(w);
        e[i].h = json_number_value(h);
        if (!(e[i].im.file_name = strdup(json_string_value(name))))
            rc = -ENOMEM;
    }
    if (rc == 0)
        qsort(e, n, sizeof *e, cmp_id);
    for (size_t i = 1; rc == 0 && i < n; i++)
        if (e[i].id == e[i - 1].id)
            rc = spw_fail(err, errlen, SPW_ESOURCE, "%s: image id %lld twice", path, (long long)e[i].id);
    *dropped = 0;
    for (size_t k = 0; rc == 0 && k < json_array_size(anns); k++)
        rc = add_annotation(e, (int64_t)n, json_array_get(anns, k), k, dropped, err, errlen, path);
    json_decref(root);
    struct spw_coco_image *ims = rc == 0 ? calloc(n ? n : 1, sizeof *ims) : NULL;
    if (rc == 0 && !ims)
        rc = -ENOMEM;
    for (size_t i = 0; i < n && e; i++) {
        if (ims)
            ims[i] = e[i].im;
        else {
            free(e[i].im.file_name);
            free(e[i].im.boxes);
            free(e[i].im.labels);
        }
    }
    free(e);
    if (rc)
        return rc;
    qsort(ims, n, sizeof *ims, cmp_name);
    *out = ims;
    *n_out = (int64_t)n;
    return 0;
}
