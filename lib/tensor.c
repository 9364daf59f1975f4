/* lib/tensor.c - tensor allocation and the .npy writer. No shared state; thread-safe on distinct tensors. */
#include "lib/tensor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

size_t spw_dtype_size(enum spw_dtype dtype)
{
    switch (dtype) {
    case SPW_DTYPE_U8: return 1;
    case SPW_DTYPE_F16: return 2;
    case SPW_DTYPE_F32: return 4;
    case SPW_DTYPE_I64: return 8;
    }
    return 0;
}

const char *spw_dtype_name(enum spw_dtype dtype)
{
    switch (dtype) {
    case SPW_DTYPE_U8: return "uint8";
    case SPW_DTYPE_F16: return "float16";
    case SPW_DTYPE_F32: return "float32";
    case SPW_DTYPE_I64: return "int64";
    }
    return "?";
}

static const char *npy_descr(enum spw_dtype dtype)
{
    switch (dtype) {
    case SPW_DTYPE_U8: return "|u1";
    case SPW_DTYPE_F16: return "<f2";
    case SPW_DTYPE_F32: return "<f4";
    case SPW_DTYPE_I64: return "<i8";
    }
    return "?";
}

int64_t spw_tensor_numel(const struct spw_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

int spw_tensor_alloc(struct spw_tensor *t, enum spw_dtype dtype, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > SPW_TENSOR_MAX_DIMS)
        return -EINVAL;
    size_t n = spw_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] && n > SIZE_MAX / (size_t)shape[i]))
            return -EINVAL;
        n *= (size_t)shape[i];
    }
    void *p = malloc(n ? n : 1);
    if (!p)
        return -ENOMEM;
    t->dtype = dtype;
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->nbytes = n;
    t->data = p;
    return 0;
}

void spw_tensor_free(struct spw_tensor *t)
{
    if (!t)
        return;
    free(t->data);
    t->data = NULL;
    t->nbytes = 0;
}

int spw_tensor_write_npy(const struct spw_tensor *t, const char *path)
{
    char hdr[256], shape[160];
    int off = 0;
    shape[0] = 0;
    for (int i = 0; i < t->ndim; i++)
        off += snprintf(shape + off, sizeof shape - (size_t)off, "%lld,%s", (long long)t->shape[i],
                        (t->ndim > 1 && i < t->ndim - 1) ? " " : "");
    if (t->ndim > 1 && off > 0 && shape[off - 1] == ',')
        shape[off - 1] = 0;
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                     npy_descr(t->dtype), shape);
    /* magic(6) + version(2) + len(2) + header, padded with spaces to a multiple of 64, ending in \n */
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    unsigned hlen = (unsigned)(n + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    int rc = 0;
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(hdr, 1, (size_t)n, f) != (size_t)n)
        rc = -EIO;
    for (int i = 0; rc == 0 && i < pad; i++)
        if (fputc(' ', f) == EOF)
            rc = -EIO;
    if (rc == 0 && fputc('\n', f) == EOF)
        rc = -EIO;
    if (rc == 0 && t->nbytes && fwrite(t->data, 1, t->nbytes, f) != t->nbytes)
        rc = -EIO;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

uint16_t spw_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff)                                  /* inf / nan */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {                                     /* subnormal or zero */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1)))
        half++;                                       /* may carry into the exponent: correct */
    return (uint16_t)half;
}
