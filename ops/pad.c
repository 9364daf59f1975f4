/* ops/pad.c - padding (see pad.h). Thread-safe: no state. */
#include "ops/pad.h"

#include <errno.h>
#include <string.h>

int spw_pad_source(int i, int n, enum spw_pad_mode m)
{
    if (i >= 0 && i < n)
        return i;
    switch (m) {
    case SPW_PAD_EDGE:
        return i < 0 ? 0 : n - 1;
    case SPW_PAD_REFLECT: {             /* period 2 (n - 1): ... 2 1 | 0 1 2 ... n-1 | n-2 ... */
        if (n == 1)
            return 0;
        const long p = 2L * (n - 1), k = ((i % p) + p) % p;
        return (int)(k < n ? k : p - k);
    }
    case SPW_PAD_SYMMETRIC: {           /* period 2 n: ... 1 0 | 0 1 ... n-1 | n-1 n-2 ... */
        const long p = 2L * n, k = ((i % p) + p) % p;
        return (int)(k < n ? k : p - 1 - k);
    }
    default:
        return -1;
    }
}

int spw_pad_run(const struct spw_image *in, const int pad[4], enum spw_pad_mode mode, const uint8_t fill[3],
                struct spw_image *out)
{
    if (!in || !out || !in->data || !out->data || in->data == out->data || in->c != 3 || out->c != 3 ||
        in->w <= 0 || in->h <= 0 || pad[0] < 0 || pad[1] < 0 || pad[2] < 0 || pad[3] < 0 ||
        out->w != in->w + pad[0] + pad[2] || out->h != in->h + pad[1] + pad[3] ||
        (unsigned)mode > SPW_PAD_SYMMETRIC)
        return -EINVAL;
    for (int y = 0; y < out->h; y++) {
        uint8_t *d = out->data + (size_t)y * out->stride;
        const int sy = spw_pad_source(y - pad[1], in->h, mode);
        if (sy < 0) {                   /* a fill row */
            for (int x = 0; x < out->w; x++)
                memcpy(d + 3 * (size_t)x, fill, 3);
            continue;
        }
        const uint8_t *s = in->data + (size_t)sy * in->stride;
        for (int x = 0; x < pad[0]; x++) {
            const int sx = spw_pad_source(x - pad[0], in->w, mode);
            memcpy(d + 3 * (size_t)x, sx < 0 ? fill : s + 3 * (size_t)sx, 3);
        }
        memcpy(d + 3 * (size_t)pad[0], s, 3 * (size_t)in->w);
        for (int x = pad[0] + in->w; x < out->w; x++) {
            const int sx = spw_pad_source(x - pad[0], in->w, mode);
            memcpy(d + 3 * (size_t)x, sx < 0 ? fill : s + 3 * (size_t)sx, 3);
        }
    }
    return 0;
}
