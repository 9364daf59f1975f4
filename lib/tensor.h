/* lib/tensor.h - dense tensors (uint8, float32, float16, int64) with up to 4 dims, and a NumPy .npy writer.
 * A tensor owns its data (malloc). Not synchronised: one owner at a time. */
#ifndef SPW_LIB_TENSOR_H
#define SPW_LIB_TENSOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifndef SPW_DTYPE_DEFINED     /* spillway/client.h repeats it for users (tests/unit/check_api.c) */
#define SPW_DTYPE_DEFINED
enum spw_dtype { SPW_DTYPE_U8 = 0, SPW_DTYPE_F32 = 1, SPW_DTYPE_F16 = 2, SPW_DTYPE_I64 = 3 };
#endif

#define SPW_TENSOR_MAX_DIMS 5

struct spw_tensor {
    enum spw_dtype dtype;
    int ndim;
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    size_t nbytes;
    void *data;
};

/* Bytes per element of dtype. */
size_t spw_dtype_size(enum spw_dtype dtype);
/* "uint8", "float32", ... */
const char *spw_dtype_name(enum spw_dtype dtype);
/* Allocate data for the given shape (contents undefined). Returns 0 or -ENOMEM/-EINVAL. */
int spw_tensor_alloc(struct spw_tensor *t, enum spw_dtype dtype, int ndim, const int64_t *shape);
/* Free data; accepts a zeroed tensor. */
void spw_tensor_free(struct spw_tensor *t);
/* Number of elements. */
int64_t spw_tensor_numel(const struct spw_tensor *t);
/* Write t as a .npy (format 1.0, little-endian, C order). Returns 0 or -errno. */
int spw_tensor_write_npy(const struct spw_tensor *t, const char *path);
/* IEEE half from float (round to nearest even), as numpy/torch do. */
uint16_t spw_f32_to_f16(float f);

#endif
