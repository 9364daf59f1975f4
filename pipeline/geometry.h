/* pipeline/geometry.h - the parameters of the geometric ops as torchvision computes them (crop rectangles,
 * resize targets). One definition each, used by the fused decode group and the op-by-op path alike.
 * Pure functions (randomness comes from the caller's RNG); thread-safe. */
#ifndef SPW_PIPELINE_GEOMETRY_H
#define SPW_PIPELINE_GEOMETRY_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/rng.h"
#include "pipeline/spec.h"

struct spw_rect {
    int x, y, w, h;     /* left, top, width, height; may extend past the image (zero padding) */
};

/* RandomResizedCrop.get_params: 10 tries of (area ~ U(scale), log-ratio ~ U(log ratio)), then a central
 * fallback; Python's round-half-even. */
struct spw_rect spw_rrc_params(const struct spw_op_spec *op, struct spw_rng *r, int W, int H);
/* resize's output size (_compute_resized_output_size: smaller edge, max_size). */
void spw_resize_size(const struct spw_op_spec *op, int W, int H, int *ow, int *oh);
/* random_resize's and random_shortest_size's draw: the smaller edge they aim at (the segmentation references'
 * RandomResize: uniform in [min_size, max_size]; the detection references' RandomShortestSize: one of
 * min_size at random). */
int spw_random_resize_draw(const struct spw_op_spec *op, struct spw_rng *r);
/* Their output size for a W x H image and a drawn edge: RandomResize as resize's rule; RandomShortestSize the
 * scale that takes the smaller edge to `edge`, capped where the longer edge passes max_size, int() of each
 * side (at least 1). */
void spw_random_resize_size(const struct spw_op_spec *op, int edge, int W, int H, int *ow, int *oh);
/* pad_if_smaller's output: each side below its size padded up to it (on the right and at the bottom). */
void spw_pad_if_smaller_size(const struct spw_op_spec *op, int W, int H, int *ow, int *oh);
/* center_crop's rectangle (negative offsets where torchvision pads). */
struct spw_rect spw_center_crop_rect(const struct spw_op_spec *op, int W, int H);
/* RandomCrop's rectangle after padding / pad_if_needed, in unpadded coordinates. */
struct spw_rect spw_random_crop_rect(const struct spw_op_spec *op, struct spw_rng *r, int W, int H);
/* Crop size of a crop op (size_w == 0 means square). */
int spw_crop_h(const struct spw_op_spec *op);
int spw_crop_w(const struct spw_op_spec *op);
/* Toggle *h / *v as flip op `op` decides (random flips: U(0,1) < p, as torchvision). */
void spw_flip_decision(const struct spw_op_spec *op, struct spw_rng *r, bool *h, bool *v);
/* RandomPerspective's draws for a W x H image: whether it runs (< p; false: end untouched) and, when it does,
 * the corners the image's corners go to ([top-left, top-right, bottom-right, bottom-left], get_params). */
bool spw_perspective_draw(const struct spw_op_spec *op, struct spw_rng *r, int W, int H, int end[4][2]);
/* Whether c lies inside a W x H image. */
int spw_rect_inside(struct spw_rect c, int W, int H);

/* Where a geometric op (pipeline/op_registry.h: targets GEOMETRIC) takes the points of a W x H image, with
 * its draws taken from r as its run takes them: m, a 3x3 projective matrix (row-major) from the input's
 * continuous pixel coordinates (0 at the top-left corner's edge, x right, y down) to the output's, and the
 * output's size. For rotate, affine and random_perspective m is the inverse of the map the image is
 * sampled through. Returns 0, or -EINVAL (an op that is not geometric, a singular map). */
int spw_geo_map(const struct spw_op_spec *op, struct spw_rng *r, int W, int H, double m[9], int *ow, int *oh);
/* Boxes (n of them, x0 y0 x1 y1, with their labels) through m into an ow x oh image, as torchvision's detection
 * transforms move them: each box's corners mapped, the box spanning them taken, clipped to the image; those
 * left narrower or lower than min_size (or empty, with min_size 0) dropped with their labels, the rest kept in
 * order. Updates *n. */
void spw_geo_boxes(const double m[9], int ow, int oh, double min_size, float *boxes, int64_t *labels, int *n);

#endif
