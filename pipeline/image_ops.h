/* pipeline/image_ops.h - the image geometry ops (crops, resizes, flips), the uint8 -> float tensor step
 * (normalize / to_tensor) and random_erasing on element values, as the op registry's CPU runs; and the
 * output sinks they write through, shared with the fused JPEG decode group (jpeg_group.c). The same
 * geometry functions (pipeline/geometry.h) and sinks serve both paths, so fused and op-by-op runs give
 * identical bytes. Thread-safe: all state is per call. */
#ifndef SPW_PIPELINE_IMAGE_OPS_H
#define SPW_PIPELINE_IMAGE_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops/jpeg.h"
#include "ops/resample.h"
#include "ops/sink.h"
#include "pipeline/element.h"
#include "pipeline/geometry.h"
#include "pipeline/op_registry.h"

/* The registry's runs (see spw_op_run_fn). */
int spw_image_op_resize(struct spw_op_call *c, struct spw_value *v);
int spw_image_op_center_crop(struct spw_op_call *c, struct spw_value *v);
int spw_image_op_crop(struct spw_op_call *c, struct spw_value *v);
int spw_image_op_random_crop(struct spw_op_call *c, struct spw_value *v);
int spw_image_op_pad(struct spw_op_call *c, struct spw_value *v);
int spw_image_op_random_resize(struct spw_op_call *c, struct spw_value *v);     /* and random_shortest_size */
int spw_image_op_pad_if_smaller(struct spw_op_call *c, struct spw_value *v);
int spw_image_op_random_resized_crop(struct spw_op_call *c, struct spw_value *v);
int spw_image_op_flip(struct spw_op_call *c, struct spw_value *v);
int spw_image_op_to_tensor(struct spw_op_call *c, struct spw_value *v);
int spw_image_op_random_erasing(struct spw_op_call *c, struct spw_value *v);
/* A resize whose size is drawn (random_resize, random_shortest_size), optionally a flip, pad_if_smaller and
 * a random_crop without padding, run as one resample of the crop's window (the whole frame without one): the ops' draws (taken by the
 * caller, each from its own stream) and what they make. Byte-equal to running the ops one by one. */
struct spw_resize_crop {
    int ow, oh;                 /* the resize's output */
    bool hflip, vflip;
    int pw, ph;                 /* after pad_if_smaller (the resize's output without it) */
    struct spw_rect crop;       /* inside the padded frame */
    int interp;
    bool antialias;
    uint8_t fill[3];            /* where the crop reads pad_if_smaller's padding */
    int tensor_op;              /* >= 0: a normalize / to_tensor after them, run as well (-1: none) */
};
/* How many ops after ops[i] run with it that way, none past end (its group's end): 0 unless ops[i] is
 * random_resize or random_shortest_size and the ones after it are [a flip] [pad_if_smaller] [random_crop]
 * (constant mode, no padding, no pad_if_needed), one of them at least. */
int spw_resize_crop_span(const struct spw_pipeline_spec *spec, int i, int end);
/* Replace v's image (W x H, three channels) by f's crop (and its tensor, into dest where it takes it).
 * Returns 0, SPW_ETOOBIG (the resize's output over max_pixels, as the resize alone refuses it) or -ENOMEM,
 * with a message in err. */
int spw_image_resize_crop(const struct spw_element_ctx *ctx, struct spw_value *v, const struct spw_resize_crop *f,
                          const struct spw_element_dest *dest, char *err, size_t errlen);
/* RandomErasing's draws for an H x W tensor, split so the GPU run draws what the CPU's does: whether and
 * where (true with *rect), then the values in c, y, x order (the constant or normal noise, in dtype) into
 * dst, row y of channel c at dst + c * plane_pitch + y * row_pitch. */
bool spw_erasing_rect(const struct spw_op_spec *op, struct spw_rng *r, int H, int W, struct spw_rect *rect);
void spw_erasing_values(const struct spw_op_spec *op, struct spw_rng *r, int C, struct spw_rect rect,
                        enum spw_dtype dt, uint8_t *dst, size_t row_pitch, size_t plane_pitch);
/* decode_jpeg's and decode_image's run: the whole fusion group at once (jpeg_group.c). */
int spw_jpeg_group_decode(struct spw_op_call *c, const struct spw_group *g, const uint8_t *buf, size_t len,
                          struct spw_value *v, int *consumed);

/* The same in two steps, so that another device can do the second: prepare reads the header, works out the
 * geometry and flips and decodes the region the output needs (at a DCT scale when it shrinks); finish makes
 * the output on the CPU. Free the work in any case. */
enum spw_jpeg_how {
    SPW_JPEG_CROP,              /* the output is rectangle crop of the region (inside the image) */
    SPW_JPEG_RESAMPLE,          /* the output is the plan run over the region */
    SPW_JPEG_SEPARATE,          /* a crop that pads: the whole image; the group's other ops run one by one */
};

struct spw_jpeg_work {
    enum spw_jpeg_how how;
    struct spw_jpeg_region reg;         /* the decoded region: its pixel (0, 0) is image pixel (x0, y0) */
    struct spw_resample_plan plan;      /* SPW_JPEG_RESAMPLE */
    struct spw_rect crop;               /* SPW_JPEG_CROP, in image pixels */
    int out_w, out_h;
    int norm;                           /* the op index of normalize / to_tensor ending the group, or -1 */
    bool hflip, vflip;
};

int spw_jpeg_group_prepare(struct spw_op_call *c, const struct spw_group *g, const uint8_t *buf, size_t len,
                           struct spw_jpeg_work *w);
int spw_jpeg_group_finish(struct spw_op_call *c, const struct spw_group *g, struct spw_jpeg_work *w,
                          struct spw_value *v, int *consumed);
void spw_jpeg_work_free(struct spw_jpeg_work *w);

/* A w x h output: a new image, or with norm_op >= 0 a float tensor through that op's table, or (dest set:
 * the run's final write) memory from dest; rows written through *s are mirrored as hflip/vflip say.
 * Returns 0, SPW_ETOOBIG (over max_pixels) or -ENOMEM, explained in err. */
int spw_image_sink(const struct spw_element_ctx *ctx, int norm_op, int w, int h, bool hflip, bool vflip,
                   const struct spw_element_dest *dest, struct spw_value *out, struct spw_sink *s, char *err,
                   size_t errlen);
/* Copy rect c of img, whose pixel (0, 0) is at (in_x0, in_y0) of the full image, through the sink; fill
 * where c lies outside img. row has room for c.w pixels. */
void spw_image_crop_rows(const struct spw_image *img, int in_x0, int in_y0, struct spw_rect c,
                         const uint8_t fill[3], uint8_t *row, const struct spw_sink *s);

#endif
