/* ops/sink.h - where an image kernel's output rows go: a uint8 HWC image, or CHW float32/float16 planes
 * through a per-channel 256-entry table (normalize / to_tensor), optionally mirrored, in three channels or,
 * from grey rows, one. Every path that
 * flips or normalizes writes through spw_sink_put_row, so fused and separate runs give identical bytes.
 * Pure; thread-safe on distinct outputs. */
#ifndef SPW_OPS_SINK_H
#define SPW_OPS_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum spw_sink_kind { SPW_SINK_U8_HWC = 0, SPW_SINK_F32_CHW = 1, SPW_SINK_F16_CHW = 2, SPW_SINK_U8_CHW = 3 };

/* value = ((v / 255) - mean) / std in float32, exactly as torchvision's ToTensor + Normalize compute it. */
struct spw_normalize_lut {
    float v[3][256];
    uint16_t h[3][256];       /* the same values as IEEE half */
};

struct spw_sink {
    enum spw_sink_kind kind;
    int w, h;                 /* output size; rows are RGB, w pixels */
    void *data;               /* HWC: h rows of `stride` bytes; CHW: 3 planes of w*h values */
    size_t stride;            /* HWC only */
    const struct spw_normalize_lut *lut;   /* float kinds only */
    bool hflip, vflip;
    bool grey;                /* one channel out (rows are grey RGB): channel 0, table 0 */
};

/* Fill a table for mean/std (to_tensor: mean 0, std 1). */
void spw_normalize_lut_init(struct spw_normalize_lut *lut, const double mean[3], const double std[3]);
/* Write RGB row y (w pixels) into the sink, applying the flips and the table. */
void spw_sink_put_row(const struct spw_sink *s, int y, const uint8_t *row);

#endif
