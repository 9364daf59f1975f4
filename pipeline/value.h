/* pipeline/value.h - one element's value between ops: a uint8 HWC RGB image until normalize/to_tensor,
 * then a tensor (CHW float for images, float32 waveforms and spectrograms for audio), and how a value is
 * laid out as one element of a batch. A value is owned by one thread at a time. */
#ifndef SPW_PIPELINE_VALUE_H
#define SPW_PIPELINE_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/tensor.h"
#include "ops/image.h"
#include "pipeline/spec.h"  /* enum spw_layout */

struct spw_fields;

struct spw_value {
    bool is_tensor;
    bool placed;                /* the data went to memory from spw_element_dest.place (not owned) */
    bool borrowed;              /* the data is not owned: it lies in memory the thread that made it reuses
                                   for its next micro-batch (a Python op's shared memory): spw_value_own
                                   what is kept past the micro-batch's done, or changed by an op */
    struct spw_image img;       /* owned, when !is_tensor */
    struct spw_tensor t;        /* owned, when is_tensor */
    int sample_rate;            /* audio: Hz; 0 when unknown (a tensor that came over the wire) */
    struct spw_fields *fields;  /* owned: the sample's source.fields (pipeline/fields.h) riding with it from
                                   its read to its batch; the element runner holds them while ops run, so no
                                   op sees them (NULL: none) */
};

/* Free the value's data (unless placed or borrowed) and its fields; *v is left empty. */
void spw_value_free(struct spw_value *v);
/* A borrowed value made to own a copy of its data (others are left as they are). Returns 0, or -ENOMEM with
 * *v freed (empty). */
int spw_value_own(struct spw_value *v);
/* Make *dst an owned copy of src (an image or a tensor; not its fields). Returns 0, or -ENOMEM with *dst
 * empty. */
int spw_value_copy(const struct spw_value *src, struct spw_value *dst);
/* The value's shape as one element of a batch with that layout (uint8 images: HWC, or CHW planes). */
void spw_value_out_shape(const struct spw_value *v, enum spw_layout layout, enum spw_dtype *dt, int *ndim,
                         int64_t *shape);
/* Copy the value into dst (spw_value_bytes of room) in that layout. */
void spw_value_copy_out(const struct spw_value *v, enum spw_layout layout, uint8_t *dst);
/* Bytes of the value's pixels or tensor data. */
size_t spw_value_bytes(const struct spw_value *v);
/* Make *v an empty value for an array of that dtype and shape, as user code returns one: an image when it
 * is uint8 [h, w, 3], a tensor otherwise; *data is where its C-contiguous bytes go. Returns 0, or -ENOMEM /
 * -EINVAL (then *v is left zeroed). */
int spw_value_alloc_array(struct spw_value *v, enum spw_dtype dt, int ndim, const int64_t *shape, void **data);
/* Make *v a borrowed value (not owned) of the C-contiguous array at data, an image or a tensor as
 * spw_value_alloc_array decides. */
void spw_value_borrow_array(struct spw_value *v, enum spw_dtype dt, int ndim, const int64_t *shape, void *data);

#endif
