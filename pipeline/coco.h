/* pipeline/coco.h - a COCO detection set's annotations (instances_*.json) as a source's listing: each image
 * (file_name under the image folder, width, height) with its boxes as torchvision's detection references take
 * them (coco_utils.ConvertCocoPolysToMask: crowd annotations dropped, [x, y, w, h] to [x0, y0, x1, y1], clamped
 * to the image, empty ones dropped) and their category ids. Read once, with jansson, on the listing thread. */
#ifndef SPW_PIPELINE_COCO_H
#define SPW_PIPELINE_COCO_H

#include <stddef.h>
#include <stdint.h>

/* Caps on what an annotations file controls, checked as it is read. */
#define SPW_COCO_MAX_BYTES ((int64_t)4 << 30)   /* the JSON file */
#define SPW_COCO_MAX_IMAGES (1 << 24)

struct spw_coco_image {
    char *file_name;            /* relative to the image folder (owned) */
    int n_boxes;
    float *boxes;               /* [n_boxes][4] x0 y0 x1 y1 (owned) */
    int64_t *labels;            /* [n_boxes] category ids (owned) */
};

/* The images of the annotations file at path, sorted by file_name, with their boxes. *dropped counts the
 * annotations not kept (crowds, empty after clamping, more than SPW_BOXES_MAX on one image). Returns 0,
 * SPW_ESOURCE (message in err: unreadable, not COCO's layout, an annotation naming no image, a value of the
 * wrong type, over a cap) or -ENOMEM. */
int spw_coco_read(const char *path, struct spw_coco_image **out, int64_t *n, int64_t *dropped, char *err,
                  size_t errlen);
void spw_coco_free(struct spw_coco_image *images, int64_t n);

#endif
