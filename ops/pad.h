/* ops/pad.h - torchvision's F.pad on PIL images (RGB HWC uint8): constant (PIL's expand: the fill around the
 * image) or numpy's np.pad modes edge, reflect (the edge not repeated) and symmetric (the edge repeated), any
 * width, wider than the image included (np.pad's periodic mirror). Pure kernels: no allocation, no I/O, no
 * globals; thread-safe. */
#ifndef SPW_OPS_PAD_H
#define SPW_OPS_PAD_H

#include <stdint.h>

#include "ops/image.h"

/* Values are stable: they travel in specs (PadMode in the proto). */
enum spw_pad_mode { SPW_PAD_CONSTANT = 0, SPW_PAD_EDGE = 1, SPW_PAD_REFLECT = 2, SPW_PAD_SYMMETRIC = 3 };

/* The column (row) of an n-wide (high) image that padded position i (0 .. n - 1 inside) reads under mode m;
 * -1 for constant's fill. */
int spw_pad_source(int i, int n, enum spw_pad_mode m);
/* out (w + pad[0] + pad[2]) x (h + pad[1] + pad[3]) = in padded by pad = {left, top, right, bottom} (each >= 0)
 * under mode, fill for constant. in and out distinct, c == 3. Returns 0 or -EINVAL. */
int spw_pad_run(const struct spw_image *in, const int pad[4], enum spw_pad_mode mode, const uint8_t fill[3],
                struct spw_image *out);

#endif
