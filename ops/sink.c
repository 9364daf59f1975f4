/* ops/sink.c - row writer for uint8 HWC/CHW and normalized float CHW outputs (see sink.h). Thread-safe. */
#include "ops/sink.h"

#include <string.h>

#include "lib/tensor.h"

void spw_normalize_lut_init(struct spw_normalize_lut *lut, const double mean[3], const double std[3])
{
    for (int c = 0; c < 3; c++) {
        const float m = (float)mean[c], s = (float)std[c];
        for (int v = 0; v < 256; v++) {
            float x = (float)v / 255.0f;
            lut->v[c][v] = (x - m) / s;
            lut->h[c][v] = spw_f32_to_f16(lut->v[c][v]);
        }
    }
}

/* A grey row's channel 0 into one plane (HWC and CHW are the same then). */
static void put_grey_row(const struct spw_sink *s, int oy, const uint8_t *row)
{
    const int w = s->w;
    const size_t at = s->kind == SPW_SINK_U8_HWC ? (size_t)oy * s->stride : (size_t)oy * (size_t)w;
    for (int x = 0; x < w; x++) {
        const uint8_t v = row[3 * (size_t)(s->hflip ? w - 1 - x : x)];
        switch (s->kind) {
        case SPW_SINK_U8_HWC:
        case SPW_SINK_U8_CHW: ((uint8_t *)s->data)[at + (size_t)x] = v; break;
        case SPW_SINK_F32_CHW: ((float *)s->data)[at + (size_t)x] = s->lut->v[0][v]; break;
        case SPW_SINK_F16_CHW: ((uint16_t *)s->data)[at + (size_t)x] = s->lut->h[0][v]; break;
        }
    }
}

void spw_sink_put_row(const struct spw_sink *s, int y, const uint8_t *row)
{
    const int w = s->w;
    const int oy = s->vflip ? s->h - 1 - y : y;
    const size_t plane = (size_t)s->w * (size_t)s->h;
    if (s->grey) {
        put_grey_row(s, oy, row);
        return;
    }
    switch (s->kind) {
    case SPW_SINK_U8_HWC: {
        uint8_t *dst = (uint8_t *)s->data + (size_t)oy * s->stride;
        if (!s->hflip) {
            memcpy(dst, row, (size_t)w * 3);
        } else {
            for (int x = 0; x < w; x++) {
                const uint8_t *p = row + 3 * (size_t)(w - 1 - x);
                dst[3 * x] = p[0];
                dst[3 * x + 1] = p[1];
                dst[3 * x + 2] = p[2];
            }
        }
        break;
    }
    case SPW_SINK_U8_CHW: {
        uint8_t *d0 = (uint8_t *)s->data + (size_t)oy * w, *d1 = d0 + plane, *d2 = d1 + plane;
        for (int x = 0; x < w; x++) {
            const uint8_t *p = row + 3 * (size_t)(s->hflip ? w - 1 - x : x);
            d0[x] = p[0];
            d1[x] = p[1];
            d2[x] = p[2];
        }
        break;
    }
    case SPW_SINK_F32_CHW: {
        float *d0 = (float *)s->data + (size_t)oy * w, *d1 = d0 + plane, *d2 = d1 + plane;
        const float *l0 = s->lut->v[0], *l1 = s->lut->v[1], *l2 = s->lut->v[2];
        for (int x = 0; x < w; x++) {
            const uint8_t *p = row + 3 * (size_t)(s->hflip ? w - 1 - x : x);
            d0[x] = l0[p[0]];
            d1[x] = l1[p[1]];
            d2[x] = l2[p[2]];
        }
        break;
    }
    case SPW_SINK_F16_CHW: {
        uint16_t *d0 = (uint16_t *)s->data + (size_t)oy * w, *d1 = d0 + plane, *d2 = d1 + plane;
        const uint16_t *l0 = s->lut->h[0], *l1 = s->lut->h[1], *l2 = s->lut->h[2];
        for (int x = 0; x < w; x++) {
            const uint8_t *p = row + 3 * (size_t)(s->hflip ? w - 1 - x : x);
            d0[x] = l0[p[0]];
            d1[x] = l1[p[1]];
            d2[x] = l2[p[2]];
        }
        break;
    }
    }
}
