/* ops/image.c - allocation helpers for struct spw_image. Thread-safe. */
#include "ops/image.h"

#include <errno.h>
#include <stdlib.h>

int spw_image_alloc(struct spw_image *img, int w, int h, int c)
{
    if (w <= 0 || h <= 0 || (c != 1 && c != 3))
        return -EINVAL;
    size_t n = (size_t)w * (size_t)h * (size_t)c;
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        return -ENOMEM;
    img->w = w;
    img->h = h;
    img->c = c;
    img->stride = (size_t)w * (size_t)c;
    img->data = p;
    return 0;
}

void spw_image_free(struct spw_image *img)
{
    if (!img)
        return;
    free(img->data);
    img->data = NULL;
}
