/* pipeline/geometry.c - torchvision's geometric parameter rules (see geometry.h). Pure; thread-safe. */
#include "pipeline/geometry.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "ops/geometry.h"

/* torchvision RandomResizedCrop.get_params, with Python's round-half-even. */
struct spw_rect spw_rrc_params(const struct spw_op_spec *op, struct spw_rng *r, int W, int H)
{
    const double area = (double)W * H;
    const double lr0 = log(op->ratio[0]), lr1 = log(op->ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * spw_rng_range(r, op->scale[0], op->scale[1]);
        double aspect = exp(spw_rng_range(r, lr0, lr1));
        int w = (int)nearbyint(sqrt(target * aspect));
        int h = (int)nearbyint(sqrt(target / aspect));
        if (0 < w && w <= W && 0 < h && h <= H) {
            int i = (int)spw_rng_below(r, (uint32_t)(H - h + 1));
            int j = (int)spw_rng_below(r, (uint32_t)(W - w + 1));
            return (struct spw_rect){j, i, w, h};
        }
    }
    double in_ratio = (double)W / H;
    double rmin = fmin(op->ratio[0], op->ratio[1]), rmax = fmax(op->ratio[0], op->ratio[1]);
    int w = W, h = H;
    if (in_ratio < rmin)
        h = (int)nearbyint(w / rmin);
    else if (in_ratio > rmax)
        w = (int)nearbyint(h * rmax);
    return (struct spw_rect){(W - w) / 2, (H - h) / 2, w, h};
}

/* torchvision _compute_resized_output_size. */
void spw_resize_size(const struct spw_op_spec *op, int W, int H, int *ow, int *oh)
{
    if (op->size_w > 0) {
        *ow = op->size_w;
        *oh = op->size_h;
        return;
    }
    int shrt = W <= H ? W : H, lng = W <= H ? H : W;
    int ns = op->size_h, nl = (int)((double)op->size_h * lng / shrt);
    if (op->max_size > 0 && nl > op->max_size) {
        ns = (int)((double)op->max_size * ns / nl);
        nl = op->max_size;
    }
    *ow = W <= H ? ns : nl;
    *oh = W <= H ? nl : ns;
}

int spw_random_resize_draw(const struct spw_op_spec *op, struct spw_rng *r)
{
    if (op->kind == SPW_OP_RANDOM_RESIZE) {
        const int lo = op->min_size[0], hi = op->max_size > lo ? op->max_size : lo;
        return lo + (int)spw_rng_below(r, (uint32_t)(hi - lo + 1));
    }
    return op->n_min_size > 1 ? op->min_size[spw_rng_below(r, (uint32_t)op->n_min_size)] : op->min_size[0];
}

void spw_random_resize_size(const struct spw_op_spec *op, int edge, int W, int H, int *ow, int *oh)
{
    if (op->kind == SPW_OP_RANDOM_RESIZE) {
        const struct spw_op_spec one = {.size_h = edge};
        spw_resize_size(&one, W, H, ow, oh);
        return;
    }
    const double s = fmin((double)edge / (W < H ? W : H), (double)op->max_size / (W > H ? W : H));
    *ow = (int)(W * s);
    *oh = (int)(H * s);
    *ow = *ow > 0 ? *ow : 1;
    *oh = *oh > 0 ? *oh : 1;
}

void spw_pad_if_smaller_size(const struct spw_op_spec *op, int W, int H, int *ow, int *oh)
{
    const int th = spw_crop_h(op), tw = spw_crop_w(op);
    *ow = W < tw ? tw : W;
    *oh = H < th ? th : H;
}

int spw_crop_h(const struct spw_op_spec *op) { return op->size_h; }
int spw_crop_w(const struct spw_op_spec *op) { return op->size_w > 0 ? op->size_w : op->size_h; }

/* torchvision center_crop: offsets of the crop in the image (negative = zero padding, as its pad+crop). */
struct spw_rect spw_center_crop_rect(const struct spw_op_spec *op, int W, int H)
{
    int ch = spw_crop_h(op), cw = spw_crop_w(op);
    int top = ch > H ? -((ch - H) / 2) : (int)nearbyint((H - ch) / 2.0);
    int left = cw > W ? -((cw - W) / 2) : (int)nearbyint((W - cw) / 2.0);
    return (struct spw_rect){left, top, cw, ch};
}

/* torchvision RandomCrop: pad (padding, then pad_if_needed), then a uniform offset. Offsets are in the
 * unpadded image, negative where the crop reads padding. */
struct spw_rect spw_random_crop_rect(const struct spw_op_spec *op, struct spw_rng *r, int W, int H)
{
    int th = spw_crop_h(op), tw = spw_crop_w(op);
    int pl = op->padding[0], pt = op->padding[1];
    int pw = W + op->padding[0] + op->padding[2], ph = H + op->padding[1] + op->padding[3];
    if (op->pad_if_needed && pw < tw) {
        pl += tw - pw;
        pw += 2 * (tw - pw);
    }
    if (op->pad_if_needed && ph < th) {
        pt += th - ph;
        ph += 2 * (th - ph);
    }
    int i = 0, j = 0;
    if (!(ph == th && pw == tw)) {
        i = ph - th + 1 > 0 ? (int)spw_rng_below(r, (uint32_t)(ph - th + 1)) : 0;
        j = pw - tw + 1 > 0 ? (int)spw_rng_below(r, (uint32_t)(pw - tw + 1)) : 0;
    }
    return (struct spw_rect){j - pl, i - pt, tw, th};
}

int spw_rect_inside(struct spw_rect c, int W, int H)
{
    return c.x >= 0 && c.y >= 0 && c.x + c.w <= W && c.y + c.h <= H;
}


bool spw_perspective_draw(const struct spw_op_spec *op, struct spw_rng *r, int W, int H, int end[4][2])
{
    if (!(spw_rng_uniform(r) < op->p))
        return false;
    const int dw = (int)(op->distortion_scale * (W / 2)), dh = (int)(op->distortion_scale * (H / 2));
    const uint32_t nw = (uint32_t)dw + 1, nh = (uint32_t)dh + 1;
    /* torch.randint(lo, hi) each, in get_params' order: top-left x y, top-right, bottom-right, bottom-left */
    end[0][0] = (int)spw_rng_below(r, nw), end[0][1] = (int)spw_rng_below(r, nh);
    end[1][0] = W - dw - 1 + (int)spw_rng_below(r, nw), end[1][1] = (int)spw_rng_below(r, nh);
    end[2][0] = W - dw - 1 + (int)spw_rng_below(r, nw), end[2][1] = H - dh - 1 + (int)spw_rng_below(r, nh);
    end[3][0] = (int)spw_rng_below(r, nw), end[3][1] = H - dh - 1 + (int)spw_rng_below(r, nh);
    return true;
}

void spw_flip_decision(const struct spw_op_spec *op, struct spw_rng *r, bool *h, bool *v)
{
    switch (op->kind) {
    case SPW_OP_HORIZONTAL_FLIP: *h = !*h; break;
    case SPW_OP_VERTICAL_FLIP: *v = !*v; break;
    case SPW_OP_RANDOM_HORIZONTAL_FLIP:
        if (spw_rng_uniform(r) < op->p)
            *h = !*h;
        break;
    case SPW_OP_RANDOM_VERTICAL_FLIP:
        if (spw_rng_uniform(r) < op->p)
            *v = !*v;
        break;
    default: break;
    }
}

/* ---- the point maps, for boxes ---- */

static void map_scale_translate(double m[9], double sx, double sy, double tx, double ty)
{
    const double r[9] = {sx, 0, tx, 0, sy, ty, 0, 0, 1};
    memcpy(m, r, sizeof r);
}

/* The inverse of a 3x3 matrix; false when it is singular. */
static bool invert3(const double a[9], double out[9])
{
    const double c00 = a[4] * a[8] - a[5] * a[7], c01 = a[5] * a[6] - a[3] * a[8], c02 = a[3] * a[7] - a[4] * a[6];
    const double det = a[0] * c00 + a[1] * c01 + a[2] * c02;
    if (!isfinite(det) || fabs(det) < 1e-12)
        return false;
    const double r[9] = {c00 / det, (a[2] * a[7] - a[1] * a[8]) / det, (a[1] * a[5] - a[2] * a[4]) / det,
                         c01 / det, (a[0] * a[8] - a[2] * a[6]) / det, (a[2] * a[3] - a[0] * a[5]) / det,
                         c02 / det, (a[1] * a[6] - a[0] * a[7]) / det, (a[0] * a[4] - a[1] * a[3]) / det};
    memcpy(out, r, sizeof r);
    return true;
}

/* A crop rectangle c (then scaled to sw x sh when sw > 0) as a map. */
static void map_rect(double m[9], struct spw_rect c, int sw, int sh, int *ow, int *oh)
{
    const double sx = sw > 0 ? (double)sw / c.w : 1.0, sy = sw > 0 ? (double)sh / c.h : 1.0;
    map_scale_translate(m, sx, sy, -c.x * sx, -c.y * sy);
    *ow = sw > 0 ? sw : c.w;
    *oh = sw > 0 ? sh : c.h;
}

int spw_geo_map(const struct spw_op_spec *op, struct spw_rng *r, int W, int H, double m[9], int *ow, int *oh)
{
    *ow = W;
    *oh = H;
    map_scale_translate(m, 1, 1, 0, 0);
    switch (op->kind) {
    case SPW_OP_RESIZE:
        spw_resize_size(op, W, H, ow, oh);
        map_scale_translate(m, (double)*ow / W, (double)*oh / H, 0, 0);
        return 0;
    case SPW_OP_RANDOM_RESIZE:
    case SPW_OP_RANDOM_SHORTEST_SIZE:
        spw_random_resize_size(op, spw_random_resize_draw(op, r), W, H, ow, oh);
        map_scale_translate(m, (double)*ow / W, (double)*oh / H, 0, 0);
        return 0;
    case SPW_OP_PAD_IF_SMALLER:
        spw_pad_if_smaller_size(op, W, H, ow, oh);
        return 0;
    case SPW_OP_CENTER_CROP:
        map_rect(m, spw_center_crop_rect(op, W, H), 0, 0, ow, oh);
        return 0;
    case SPW_OP_CROP:
        map_rect(m, (struct spw_rect){op->left, op->top, op->width, op->height}, 0, 0, ow, oh);
        return 0;
    case SPW_OP_RANDOM_CROP:
        map_rect(m, spw_random_crop_rect(op, r, W, H), 0, 0, ow, oh);
        return 0;
    case SPW_OP_RANDOM_RESIZED_CROP:
        map_rect(m, spw_rrc_params(op, r, W, H), spw_crop_w(op), spw_crop_h(op), ow, oh);
        return 0;
    case SPW_OP_PAD:
        *ow = W + op->padding[0] + op->padding[2];
        *oh = H + op->padding[1] + op->padding[3];
        map_scale_translate(m, 1, 1, op->padding[0], op->padding[1]);
        return 0;
    case SPW_OP_HORIZONTAL_FLIP:
    case SPW_OP_VERTICAL_FLIP:
    case SPW_OP_RANDOM_HORIZONTAL_FLIP:
    case SPW_OP_RANDOM_VERTICAL_FLIP: {
        bool h = false, v = false;
        spw_flip_decision(op, r, &h, &v);
        map_scale_translate(m, h ? -1 : 1, v ? -1 : 1, h ? W : 0, v ? H : 0);
        return 0;
    }
    case SPW_OP_ROTATE:
    case SPW_OP_AFFINE: {
        double inv[6];          /* F.rotate(a) turns the image as F.affine(-a) does, about the centre */
        if (op->kind == SPW_OP_ROTATE)
            spw_affine_inverse_matrix(W, H, -op->angle, NULL, 1.0, NULL, NULL, inv);
        else
            spw_affine_inverse_matrix(W, H, op->angle, op->translate, op->affine_scale, op->shear, NULL, inv);
        const double a[9] = {inv[0], inv[1], inv[2], inv[3], inv[4], inv[5], 0, 0, 1};
        return invert3(a, m) ? 0 : -EINVAL;
    }
    case SPW_OP_RANDOM_PERSPECTIVE: {
        int end[4][2];
        if (!spw_perspective_draw(op, r, W, H, end))
            return 0;
        const int start[4][2] = {{0, 0}, {W - 1, 0}, {W - 1, H - 1}, {0, H - 1}};
        double c[8];
        if (spw_perspective_coeffs(start, end, c) != 0)
            return -EINVAL;
        const double a[9] = {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], 1};
        return invert3(a, m) ? 0 : -EINVAL;
    }
    default:
        return -EINVAL;
    }
}

void spw_geo_boxes(const double m[9], int ow, int oh, double min_size, float *boxes, int64_t *labels, int *n)
{
    int kept = 0;
    for (int i = 0; i < *n; i++) {
        const float *b = boxes + 4 * i;
        const double xs[4] = {b[0], b[2], b[2], b[0]}, ys[4] = {b[1], b[1], b[3], b[3]};
        double x0 = INFINITY, y0 = INFINITY, x1 = -INFINITY, y1 = -INFINITY;
        for (int k = 0; k < 4; k++) {
            const double w = m[6] * xs[k] + m[7] * ys[k] + m[8];
            const double x = (m[0] * xs[k] + m[1] * ys[k] + m[2]) / w, y = (m[3] * xs[k] + m[4] * ys[k] + m[5]) / w;
            x0 = fmin(x0, x), y0 = fmin(y0, y), x1 = fmax(x1, x), y1 = fmax(y1, y);
        }
        x0 = fmin(fmax(x0, 0), ow), x1 = fmin(fmax(x1, 0), ow);
        y0 = fmin(fmax(y0, 0), oh), y1 = fmin(fmax(y1, 0), oh);
        const bool keep = min_size > 0 ? x1 - x0 >= min_size && y1 - y0 >= min_size : x1 > x0 && y1 > y0;
        if (!keep || !isfinite(x0 + y0 + x1 + y1))
            continue;
        float *o = boxes + 4 * kept;
        o[0] = (float)x0, o[1] = (float)y0, o[2] = (float)x1, o[3] = (float)y1;
        labels[kept++] = labels[i];
    }
    *n = kept;
}
