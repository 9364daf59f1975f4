/* pipeline/element_size.c - static element sizes (see element_size.h): walks the ops' size effects (op
 * registry), tracking whether the spec fixes the image's height and width and what dtype the last op
 * writes. Pure. */
#include "pipeline/element_size.h"

#include <stdbool.h>

#include "lib/tensor.h"
#include "pipeline/channels.h"
#include "pipeline/op_registry.h"

int spw_element_fixed_bytes(const struct spw_pipeline_spec *spec, int n_ops, int64_t *bytes, int *op)
{
    bool fixed = false;
    int64_t h = 0, w = 0, tensor = 0;   /* tensor: a declared output that is no image, in bytes */
    int at = -1, channels = 3;
    enum spw_dtype dt = SPW_DTYPE_U8;
    for (int i = 0; i < n_ops && i < spec->n_ops; i++) {
        const struct spw_op_spec *o = &spec->ops[i];
        const enum spw_size_effect effect = spw_op_def(o->kind)->size;
        if (effect != SPW_SIZE_KEEPS && effect != SPW_SIZE_TO_TENSOR)
            tensor = 0;
        switch (effect) {
        case SPW_SIZE_DECLARED:
            fixed = o->out_ndim > 0 && o->has_out_dtype;
            at = i;
            if (fixed && o->out_dtype == SPW_DTYPE_U8 && o->out_ndim == 3 && o->out_shape[2] == 3) {
                h = o->out_shape[0], w = o->out_shape[1], dt = SPW_DTYPE_U8;    /* an image again */
            } else if (fixed) {
                tensor = (int64_t)spw_dtype_size(o->out_dtype);
                for (int d = 0; d < o->out_ndim; d++)
                    tensor *= o->out_shape[d];
            }
            break;
        case SPW_SIZE_DECODED:
            fixed = false;
            dt = SPW_DTYPE_U8;
            break;
        case SPW_SIZE_RESIZE:       /* one size: the smaller edge, the other follows the image */
            fixed = o->size_w > 0;
            h = o->size_h;
            w = o->size_w;
            at = i;
            break;
        case SPW_SIZE_SIZE_FIELD:
            fixed = true;
            h = o->size_h;
            w = o->size_w > 0 ? o->size_w : o->size_h;
            at = i;
            break;
        case SPW_SIZE_BOX:
            fixed = true;
            h = o->height;
            w = o->width;
            at = i;
            break;
        case SPW_SIZE_TO_TENSOR:
            dt = o->dtype == SPW_DTYPE_F16 ? SPW_DTYPE_F16 : SPW_DTYPE_F32;
            channels = spw_out_channels(spec, i);   /* the tensor's: one after a one-channel grayscale */
            at = fixed ? i : at;
            break;
        case SPW_SIZE_VARIES:
            fixed = false;          /* clip lengths vary */
            break;
        case SPW_SIZE_PADDED:
            h += o->padding[1] + o->padding[3];
            w += o->padding[0] + o->padding[2];
            at = fixed ? i : at;
            break;
        case SPW_SIZE_KEEPS:        /* flips, colour ops, policies, rotate, affine, erasing */
            break;
        }
    }
    if (!fixed || (!tensor && (h <= 0 || w <= 0)))
        return 0;
    if (n_ops >= spec->n_ops)       /* the pipeline's output: its image in one channel after such a grayscale */
        channels = spw_out_channels(spec, spec->n_ops);
    *bytes = tensor ? tensor : h * w * channels * (int64_t)spw_dtype_size(dt);
    *op = at;
    return 1;
}
