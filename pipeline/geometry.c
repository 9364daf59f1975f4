/* pipeline/geometry.c - torchvision's geometric parameter rules (see geometry.h). Pure; thread-safe. */
#include "pipeline/geometry.h"

#include <math.h>

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
