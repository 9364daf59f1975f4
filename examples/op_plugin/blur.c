/* examples/op_plugin/blur.c - a Spillway op plugin (spillway/op_plugin.h) with two ops on uint8 images:
 *   blur.box     {"radius": R}: each channel the mean of the (2R+1)^2 pixels around it, the image's edge
 *                repeated outward, rounded half up: (sum + n/2) / n. Integer arithmetic, so a reference in
 *                any language gives the same bytes (tests/integration/plugin.sh compares it with numpy).
 *   blur.flip_h  {"p": P}: mirror left-right with probability P, drawn from the element's random stream (the
 *                same draw wherever the element is made).
 * Build: make (the Makefile beside this file: cc -shared with `pkg-config --cflags spillway`); load:
 * SPILLWAY_OP_PLUGINS=/path/to/libspw_blur.so. Thread model: no state; run may be called from many threads. */
#include <spillway/op_plugin.h>

#include <stdio.h>
#include <string.h>

/* An RGB image in, the same shape out (the check every op here makes first). */
static int image_shape(const struct spw_plugin_call *call, const struct spw_plugin_array *in,
                       struct spw_plugin_array *out, char *err, size_t errlen)
{
    (void)call;
    if (in->dtype != SPW_PLUGIN_U8 || in->ndim != 3 || in->shape[2] != 3) {
        snprintf(err, errlen, "needs a uint8 RGB image [h, w, 3] (put it before normalize)");
        return 1;
    }
    *out = *in;
    return 0;
}

static int clamp(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static int box(const struct spw_plugin_call *call, const struct spw_plugin_array *in, struct spw_plugin_array *out,
               char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const int r = (int)call->params[0], h = (int)in->shape[0], w = (int)in->shape[1];
    const unsigned n = (unsigned)((2 * r + 1) * (2 * r + 1));
    const unsigned char *src = in->data;
    unsigned char *dst = out->data;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                unsigned sum = 0;
                for (int dy = -r; dy <= r; dy++)
                    for (int dx = -r; dx <= r; dx++)
                        sum += src[((size_t)clamp(y + dy, 0, h - 1) * (size_t)w + (size_t)clamp(x + dx, 0, w - 1)) * 3 +
                                   (size_t)c];
                dst[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)c] = (unsigned char)((sum + n / 2) / n);
            }
    return 0;
}

static int flip_h(const struct spw_plugin_call *call, const struct spw_plugin_array *in,
                  struct spw_plugin_array *out, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    const double u = (double)(call->random_u64(call) >> 11) * 0x1.0p-53;      /* uniform in [0, 1) */
    const size_t h = (size_t)in->shape[0], w = (size_t)in->shape[1];
    const unsigned char *src = in->data;
    unsigned char *dst = out->data;
    if (u >= call->params[0]) {
        memcpy(dst, src, h * w * 3);
        return 0;
    }
    for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < w; x++)
            memcpy(dst + (y * w + x) * 3, src + (y * w + (w - 1 - x)) * 3, 3);
    return 0;
}

static const struct spw_plugin_field box_fields[] = {
    {"radius", SPW_PLUGIN_INT, 0, 16, 1, 0, "half the window's side, in pixels (0: a copy)"},
};
static const struct spw_plugin_field flip_fields[] = {
    {"p", SPW_PLUGIN_NUMBER, 0, 1, 0.5, 0, "the probability of a flip"},
};
static const struct spw_plugin_op ops[] = {
    {"box", "A box blur of the given radius, edges repeated.", box_fields, 1, image_shape, box, NULL, NULL},
    {"flip_h", "Mirror left-right with probability p.", flip_fields, 1, image_shape, flip_h, NULL, NULL},
};
static const struct spw_op_plugin plugin = {SPW_OP_PLUGIN_ABI, "blur", "1.0", ops, 2};

__attribute__((visibility("default"))) const struct spw_op_plugin *spw_op_plugin(void)
{
    return &plugin;
}
