/* pipeline/value.c - element values (see value.h): freeing, their shape and bytes as a batch element,
 * and the copy into a batch slot in HWC or CHW. Thread-safe: no shared state. */
#include "pipeline/value.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pipeline/fields.h"

void spw_value_free(struct spw_value *v)
{
    if (!v)
        return;
    if (!v->placed && !v->borrowed) {
        spw_image_free(&v->img);
        spw_tensor_free(&v->t);
    }
    spw_fields_free(v->fields);
    memset(v, 0, sizeof *v);
}

int spw_value_own(struct spw_value *v)
{
    if (!v->borrowed)
        return 0;
    struct spw_value own = *v;
    own.borrowed = false;
    int rc;
    if (v->is_tensor) {
        rc = spw_tensor_alloc(&own.t, v->t.dtype, v->t.ndim, v->t.shape);
        if (rc == 0)
            memcpy(own.t.data, v->t.data, v->t.nbytes);
    } else {
        rc = spw_image_alloc(&own.img, v->img.w, v->img.h, v->img.c);
        for (int y = 0; rc == 0 && y < v->img.h; y++)
            memcpy(own.img.data + own.img.stride * (size_t)y, v->img.data + v->img.stride * (size_t)y,
                   (size_t)v->img.w * (size_t)v->img.c);
    }
    if (rc != 0) {
        spw_value_free(v);
        return -ENOMEM;
    }
    *v = own;
    return 0;
}

size_t spw_value_bytes(const struct spw_value *v)
{
    return v->is_tensor ? v->t.nbytes : (size_t)v->img.w * (size_t)v->img.h * (size_t)v->img.c;
}

/* Whether an array of this dtype and shape is an image: uint8 [h, w, 3]. */
static bool is_image(enum spw_dtype dt, int ndim, const int64_t *shape)
{
    return dt == SPW_DTYPE_U8 && ndim == 3 && shape[2] == 3 && shape[0] > 0 && shape[1] > 0 && shape[0] <= INT32_MAX &&
           shape[1] <= INT32_MAX;
}

void spw_value_borrow_array(struct spw_value *v, enum spw_dtype dt, int ndim, const int64_t *shape, void *data)
{
    memset(v, 0, sizeof *v);
    v->borrowed = true;
    if (is_image(dt, ndim, shape)) {
        v->img = (struct spw_image){.w = (int)shape[1], .h = (int)shape[0], .c = 3, .stride = (size_t)shape[1] * 3,
                                    .data = data};
        return;
    }
    v->is_tensor = true;
    v->t = (struct spw_tensor){.dtype = dt, .ndim = ndim, .nbytes = spw_dtype_size(dt), .data = data};
    for (int i = 0; i < ndim; i++) {
        v->t.shape[i] = shape[i];
        v->t.nbytes *= (size_t)shape[i];
    }
}

int spw_value_alloc_array(struct spw_value *v, enum spw_dtype dt, int ndim, const int64_t *shape, void **data)
{
    memset(v, 0, sizeof *v);
    int rc;
    if (is_image(dt, ndim, shape)) {
        rc = spw_image_alloc(&v->img, (int)shape[1], (int)shape[0], 3);
        *data = v->img.data;
    } else {
        v->is_tensor = true;
        rc = spw_tensor_alloc(&v->t, dt, ndim, shape);
        *data = v->t.data;
    }
    if (rc != 0)
        memset(v, 0, sizeof *v);
    return rc;
}

int spw_value_copy(const struct spw_value *src, struct spw_value *dst)
{
    *dst = (struct spw_value){.is_tensor = src->is_tensor, .sample_rate = src->sample_rate};
    if (src->is_tensor) {
        if (spw_tensor_alloc(&dst->t, src->t.dtype, src->t.ndim, src->t.shape) != 0)
            return -ENOMEM;
        memcpy(dst->t.data, src->t.data, src->t.nbytes);
        return 0;
    }
    const struct spw_image *im = &src->img;
    if (spw_image_alloc(&dst->img, im->w, im->h, im->c) != 0)
        return -ENOMEM;
    for (int y = 0; y < im->h; y++)
        memcpy(spw_image_at(&dst->img, 0, y), spw_image_at(im, 0, y), (size_t)im->w * (size_t)im->c);
    return 0;
}

void spw_value_out_shape(const struct spw_value *v, enum spw_layout layout, enum spw_dtype *dt, int *ndim,
                         int64_t *shape)
{
    if (v->is_tensor) {
        *dt = v->t.dtype;
        *ndim = v->t.ndim;
        memcpy(shape, v->t.shape, sizeof(int64_t) * (size_t)v->t.ndim);
        return;
    }
    *dt = SPW_DTYPE_U8;
    *ndim = 3;
    if (layout == SPW_LAYOUT_CHW) {
        shape[0] = v->img.c; shape[1] = v->img.h; shape[2] = v->img.w;
    } else {
        shape[0] = v->img.h; shape[1] = v->img.w; shape[2] = v->img.c;
    }
}

void spw_value_copy_out(const struct spw_value *v, enum spw_layout layout, uint8_t *dst)
{
    if (v->is_tensor) {
        memcpy(dst, v->t.data, v->t.nbytes);
        return;
    }
    const struct spw_image *im = &v->img;
    const size_t row = (size_t)im->w * (size_t)im->c;
    if (layout == SPW_LAYOUT_CHW) {
        const size_t plane = (size_t)im->w * im->h;
        for (int y = 0; y < im->h; y++)
            for (int x = 0; x < im->w; x++)
                for (int c = 0; c < im->c; c++)
                    dst[c * plane + (size_t)y * im->w + x] = im->data[(size_t)y * im->stride + (size_t)x * im->c + c];
        return;
    }
    for (int y = 0; y < im->h; y++)
        memcpy(dst + (size_t)y * row, im->data + (size_t)y * im->stride, row);
}
