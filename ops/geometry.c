/* ops/geometry.c - affine warp / rotate with Pillow 9.4's sampling rules (Geometry.c) and torchvision
 * 0.14's matrices, so nearest output matches PIL pixel for pixel and bilinear to within float noise.
 * Not a general warp library: RGB only, no bicubic, no expand. Pure; no allocation; thread-safe.
 * Relies on -std=c11 (no FMA contraction) to repeat Pillow's and CPython's double arithmetic. */
#include "ops/geometry.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/warp_px.h"

/* CPython's math.radians multiplies by this constant (pi / 180 rounded once). */
#define DEG2RAD (M_PI / 180.0)

static int check_views(const struct spw_image *in, const struct spw_image *out)
{
    if (!in || !out || !in->data || !out->data || in->data == out->data)
        return -EINVAL;
    if (in->c != 3 || out->c != 3 || in->w <= 0 || in->h <= 0 || out->w <= 0 || out->h <= 0)
        return -EINVAL;
    if (in->stride < (size_t)in->w * 3 || out->stride < (size_t)out->w * 3)
        return -EINVAL;
    return 0;
}

static int fill_color(const double fill[3], uint8_t rgb[3])
{
    for (int c = 0; c < 3; c++) {
        const double v = fill ? fill[c] : 0.0;
        if (!isfinite(v))
            return -EINVAL;
        /* torchvision's _parse_fill takes int(v) (toward zero); Image.new clips the ink to a byte. */
        rgb[c] = v <= 0.0 ? 0 : v >= 255.0 ? 255 : (uint8_t)(int)v;
    }
    return 0;
}

/* Floor division by 65536 of a 16.16 value (Pillow's arithmetic `>> 16`). */
static inline int64_t fix_int(int64_t v)
{
    return v >= 0 ? v >> 16 : -((-v + 65535) >> 16);
}

static inline void put_px(uint8_t *d, const uint8_t *s)
{
    d[0] = s[0];
    d[1] = s[1];
    d[2] = s[2];
}

/* ImagingScaleAffine: no rotation or shear terms; positions accumulated per row and per column. */
static void nearest_scale(const struct spw_image *in, const double a[6], const uint8_t fill[3],
                          struct spw_image *out)
{
    double yo = a[5] + a[4] * 0.5;
    for (int y = 0; y < out->h; y++, yo += a[4]) {
        uint8_t *d = out->data + (size_t)y * out->stride;
        const int yi = spw_px_coord(yo);
        const int yok = yi >= 0 && yi < in->h;
        const uint8_t *s = yok ? in->data + (size_t)yi * in->stride : NULL;
        double xo = a[2] + a[0] * 0.5;
        for (int x = 0; x < out->w; x++, xo += a[0], d += 3) {
            const int xi = spw_px_coord(xo);
            if (yok && xi >= 0 && xi < in->w)
                put_px(d, s + (size_t)xi * 3);
            else
                put_px(d, fill);
        }
    }
}

static int check_fixed(const double a[6], int x, int y)
{
    return fabs(x * a[0] + y * a[1] + a[2]) < 32768.0 && fabs(x * a[3] + y * a[4] + a[5]) < 32768.0;
}

/* Pillow FIX(): round to 16.16 fixed point. */
static int64_t fix16(double v)
{
    return spw_px_floor(v * 65536.0 + 0.5);
}

/* affine_fixed: 16.16 fixed-point stepping, which is what decides PIL's nearest-neighbour picks. */
static void nearest_fixed(const struct spw_image *in, const double a[6], const uint8_t fill[3],
                          struct spw_image *out)
{
    const int64_t a0 = fix16(a[0]), a1 = fix16(a[1]), a3 = fix16(a[3]), a4 = fix16(a[4]);
    int64_t a2 = fix16(a[2] + a[0] * 0.5 + a[1] * 0.5);
    int64_t a5 = fix16(a[5] + a[3] * 0.5 + a[4] * 0.5);
    for (int y = 0; y < out->h; y++, a2 += a1, a5 += a4) {
        uint8_t *d = out->data + (size_t)y * out->stride;
        int64_t xx = a2, yy = a5;
        for (int x = 0; x < out->w; x++, xx += a0, yy += a3, d += 3) {
            const int64_t xi = fix_int(xx), yi = fix_int(yy);
            if (xi >= 0 && xi < in->w && yi >= 0 && yi < in->h)
                put_px(d, in->data + (size_t)yi * in->stride + (size_t)xi * 3);
            else
                put_px(d, fill);
        }
    }
}

/* Which of Pillow's nearest paths an out_w x out_h output of matrix m takes. */
static enum spw_warp_kind nearest_kind(const double m[6], int out_w, int out_h)
{
    if (m[1] == 0 && m[3] == 0)
        return SPW_WARP_SCALE;
    if (check_fixed(m, 0, 0) && check_fixed(m, out_w, out_h) && check_fixed(m, 0, out_h) &&
        check_fixed(m, out_w, 0))
        return SPW_WARP_FIXED;
    return SPW_WARP_FLOAT;
}

/* Pillow's floating-point fallback for maps beyond the 16.16 range. */
static void nearest_float(const struct spw_image *in, const double a[6], const uint8_t fill[3],
                          struct spw_image *out)
{
    double xo = a[2] + a[1] * 0.5 + a[0] * 0.5;
    double yo = a[5] + a[4] * 0.5 + a[3] * 0.5;
    for (int y = 0; y < out->h; y++, xo += a[1], yo += a[4]) {
        uint8_t *d = out->data + (size_t)y * out->stride;
        double xx = xo, yy = yo;
        for (int x = 0; x < out->w; x++, xx += a[0], yy += a[3], d += 3) {
            const int xi = spw_px_coord(xx), yi = spw_px_coord(yy);
            if (xi >= 0 && xi < in->w && yi >= 0 && yi < in->h)
                put_px(d, in->data + (size_t)yi * in->stride + (size_t)xi * 3);
            else
                put_px(d, fill);
        }
    }
}

/* ImagingGenericTransform + bilinear_filter32RGB (ops/warp_px.h, shared with the CUDA kernel). */
static void bilinear(const struct spw_image *in, const double a[6], const uint8_t fill[3],
                     struct spw_image *out)
{
    for (int y = 0; y < out->h; y++) {
        uint8_t *d = out->data + (size_t)y * out->stride;
        for (int x = 0; x < out->w; x++, d += 3)
            spw_px_bilinear(in->data, in->stride, in->w, in->h, a, fill, x, y, d);
    }
}

/* A transform's arguments: the views, n finite coefficients, nearest or bilinear, the fill as ink. */
static int transform_args(const struct spw_image *in, struct spw_image *out, const double *m, int n,
                          int interpolation, const double fill[3], uint8_t ink[3])
{
    int rc = check_views(in, out);
    if (rc)
        return rc;
    if (!m || (interpolation != SPW_INTERP_NEAREST && interpolation != SPW_INTERP_BILINEAR))
        return -EINVAL;
    for (int i = 0; i < n; i++)
        if (!isfinite(m[i]))
            return -EINVAL;
    return fill_color(fill, ink);
}

int spw_transform_affine_run(const struct spw_image *in, const double m[6], int interpolation,
                             const double fill[3], struct spw_image *out)
{
    uint8_t ink[3];
    const int rc = transform_args(in, out, m, 6, interpolation, fill, ink);
    if (rc)
        return rc;

    if (interpolation == SPW_INTERP_BILINEAR)
        bilinear(in, m, ink, out);
    else if (nearest_kind(m, out->w, out->h) == SPW_WARP_SCALE)
        nearest_scale(in, m, ink, out);
    else if (nearest_kind(m, out->w, out->h) == SPW_WARP_FIXED)
        nearest_fixed(in, m, ink, out);
    else
        nearest_float(in, m, ink, out);
    return 0;
}

int spw_perspective_coeffs(const int start[4][2], const int end[4][2], double c[8])
{
    double a[8][9];                         /* [A | b], the rows torchvision builds */
    for (int i = 0; i < 4; i++) {
        const double ex = end[i][0], ey = end[i][1], sx = start[i][0], sy = start[i][1];
        const double r0[9] = {ex, ey, 1, 0, 0, 0, -sx * ex, -sx * ey, sx};
        const double r1[9] = {0, 0, 0, ex, ey, 1, -sy * ex, -sy * ey, sy};
        memcpy(a[2 * i], r0, sizeof r0);
        memcpy(a[2 * i + 1], r1, sizeof r1);
    }
    for (int col = 0; col < 8; col++) {     /* Gaussian elimination, partial pivoting */
        int piv = col;
        for (int r = col + 1; r < 8; r++)
            if (fabs(a[r][col]) > fabs(a[piv][col]))
                piv = r;
        if (fabs(a[piv][col]) < 1e-12)
            return -EINVAL;
        for (int k = 0; k < 9; k++) {
            const double t = a[col][k];
            a[col][k] = a[piv][k];
            a[piv][k] = t;
        }
        for (int r = 0; r < 8; r++) {
            if (r == col)
                continue;
            const double f = a[r][col] / a[col][col];
            for (int k = col; k < 9; k++)
                a[r][k] -= f * a[col][k];
        }
    }
    for (int i = 0; i < 8; i++)
        c[i] = (float)(a[i][8] / a[i][i]);
    return 0;
}

int spw_perspective_run(const struct spw_image *in, const double c[8], int interpolation, const double fill[3],
                        struct spw_image *out)
{
    uint8_t ink[3];
    const int rc = transform_args(in, out, c, 8, interpolation, fill, ink);
    if (rc)
        return rc;
    for (int y = 0; y < out->h; y++) {
        uint8_t *d = out->data + (size_t)y * out->stride;
        for (int x = 0; x < out->w; x++, d += 3) {
            const double xc = x + 0.5, yc = y + 0.5, den = c[6] * xc + c[7] * yc + 1;
            const double xin = (c[0] * xc + c[1] * yc + c[2]) / den, yin = (c[3] * xc + c[4] * yc + c[5]) / den;
            if (interpolation == SPW_INTERP_BILINEAR) {
                spw_px_bilinear_at(in->data, in->stride, in->w, in->h, xin, yin, ink, d);
                continue;
            }
            const int xi = spw_px_coord(xin), yi = spw_px_coord(yin);     /* nearest_filter32 */
            put_px(d, xi >= 0 && xi < in->w && yi >= 0 && yi < in->h
                          ? in->data + (size_t)yi * in->stride + (size_t)xi * 3 : ink);
        }
    }
    return 0;
}

void spw_affine_inverse_matrix(int w, int h, double angle, const double translate[2], double scale,
                               const double shear[2], const double center[2], double m[6])
{
    /* torchvision _get_inverse_affine_matrix, operation for operation. */
    const double cx = center ? center[0] : w * 0.5, cy = center ? center[1] : h * 0.5;
    const double tx = translate ? translate[0] : 0.0, ty = translate ? translate[1] : 0.0;
    const double rot = angle * DEG2RAD;
    const double sx = (shear ? shear[0] : 0.0) * DEG2RAD;
    const double sy = (shear ? shear[1] : 0.0) * DEG2RAD;

    const double a = cos(rot - sy) / cos(sy);
    const double b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    const double c = sin(rot - sy) / cos(sy);
    const double d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);

    m[0] = d / scale;
    m[1] = -b / scale;
    m[2] = 0.0 / scale;
    m[3] = -c / scale;
    m[4] = a / scale;
    m[5] = 0.0 / scale;
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
    m[2] += cx;
    m[5] += cy;
}

int spw_affine_run(const struct spw_image *in, double angle, const double translate[2], double scale,
                   const double shear[2], int interpolation, const double fill[3], const double center[2],
                   struct spw_image *out)
{
    int rc = check_views(in, out);
    if (rc)
        return rc;
    if (out->w != in->w || out->h != in->h || !(scale > 0.0) || !isfinite(angle))
        return -EINVAL;
    double m[6];
    spw_affine_inverse_matrix(in->w, in->h, angle, translate, scale, shear, center, m);
    return spw_transform_affine_run(in, m, interpolation, fill, out);
}

/* Python's round(x, 15): correctly rounded to 15 decimals, then back to the nearest double. glibc's
 * printf/strtod are exact in both directions, as CPython's dtoa is. */
static double round15(double x)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.15f", x);
    return strtod(buf, NULL);
}

/* Python float modulo: the result takes the sign of the divisor. */
static double py_fmod(double x, double y)
{
    double r = fmod(x, y);
    if (r != 0.0) {
        if ((y < 0) != (r < 0))
            r += y;
    } else {
        r = copysign(0.0, y);
    }
    return r;
}

/* Image.rotate's inverse matrix about (w / 2, h / 2), entries rounded to 15 decimals as PIL does. */
static void rotate_matrix(int w, int h, double angle, double m[6])
{
    const double r = -(angle * DEG2RAD);
    m[0] = round15(cos(r));
    m[1] = round15(sin(r));
    m[2] = 0.0;
    m[3] = round15(-sin(r));
    m[4] = round15(cos(r));
    m[5] = 0.0;
    const double cx = w / 2.0, cy = h / 2.0;
    const double m2 = m[0] * -cx + m[1] * -cy + m[2];
    const double m5 = m[3] * -cx + m[4] * -cy + m[5];
    m[2] = m2 + cx;
    m[5] = m5 + cy;
}

int spw_rotate_run(const struct spw_image *in, double angle, int interpolation, const double fill[3],
                   struct spw_image *out)
{
    uint8_t ink[3];   /* validated here so the transpose fast paths reject what the warp would */
    int rc = check_views(in, out);
    if (rc)
        return rc;
    if (out->w != in->w || out->h != in->h || !isfinite(angle) ||
        (interpolation != SPW_INTERP_NEAREST && interpolation != SPW_INTERP_BILINEAR))
        return -EINVAL;
    rc = fill_color(fill, ink);
    if (rc)
        return rc;

    const int w = in->w, h = in->h;
    angle = py_fmod(angle, 360.0);
    /* Image.rotate's exact transposes, taken regardless of the filter. */
    if (angle == 0.0 || angle == 180.0 || ((angle == 90.0 || angle == 270.0) && w == h)) {
        for (int y = 0; y < h; y++) {
            const uint8_t *s = in->data + (size_t)y * in->stride;
            for (int x = 0; x < w; x++, s += 3) {
                int ox = x, oy = y;
                if (angle == 180.0) {
                    ox = w - 1 - x;
                    oy = h - 1 - y;
                } else if (angle == 90.0) {   /* counter-clockwise */
                    ox = y;
                    oy = w - 1 - x;
                } else if (angle == 270.0) {
                    ox = h - 1 - y;
                    oy = x;
                }
                put_px(spw_image_at(out, ox, oy), s);
            }
        }
        return 0;
    }

    double m[6];
    rotate_matrix(w, h, angle, m);
    return spw_transform_affine_run(in, m, interpolation, fill, out);
}

/* ---- plans for another device ---- */

static void plan_matrix(const double m[6], int w, int h, struct spw_warp_plan *p)
{
    memcpy(p->m, m, sizeof p->m);
    p->kind = nearest_kind(m, w, h);
    if (p->kind != SPW_WARP_FIXED)
        return;
    p->fx[0] = fix16(m[0]);
    p->fx[1] = fix16(m[1]);
    p->fx[3] = fix16(m[3]);
    p->fx[4] = fix16(m[4]);
    p->fx[2] = fix16(m[2] + m[0] * 0.5 + m[1] * 0.5);
    p->fx[5] = fix16(m[5] + m[3] * 0.5 + m[4] * 0.5);
}

int spw_rotate_warp_plan(int w, int h, double angle, const double fill[3], struct spw_warp_plan *p)
{
    memset(p, 0, sizeof *p);
    if (w <= 0 || h <= 0 || !isfinite(angle) || fill_color(fill, p->ink) != 0)
        return -EINVAL;
    angle = py_fmod(angle, 360.0);
    if (angle == 0.0 || angle == 180.0 || ((angle == 90.0 || angle == 270.0) && w == h)) {
        p->kind = SPW_WARP_TRANSPOSE;
        p->transpose = (int)angle;
        return 0;
    }
    double m[6];
    rotate_matrix(w, h, angle, m);
    plan_matrix(m, w, h, p);
    return 0;
}

int spw_affine_warp_plan(int w, int h, double angle, const double translate[2], double scale,
                         const double shear[2], const double center[2], const double fill[3],
                         struct spw_warp_plan *p)
{
    memset(p, 0, sizeof *p);
    if (w <= 0 || h <= 0 || !(scale > 0.0) || !isfinite(angle) || fill_color(fill, p->ink) != 0)
        return -EINVAL;
    double m[6];
    spw_affine_inverse_matrix(w, h, angle, translate, scale, shear, center, m);
    for (int i = 0; i < 6; i++)
        if (!isfinite(m[i]))
            return -EINVAL;
    plan_matrix(m, w, h, p);
    return 0;
}

void spw_warp_plan_bilinear(struct spw_warp_plan *p)
{
    if (p->kind != SPW_WARP_TRANSPOSE)
        p->kind = SPW_WARP_BILINEAR;
}

void spw_warp_scale_tables(const struct spw_warp_plan *p, int in_w, int in_h, int out_w, int out_h, int32_t *xi,
                           int32_t *yi)
{
    const double *a = p->m;
    double yo = a[5] + a[4] * 0.5;                      /* nearest_scale's accumulation, step for step */
    for (int y = 0; y < out_h; y++, yo += a[4]) {
        const int v = spw_px_coord(yo);
        yi[y] = v >= 0 && v < in_h ? v : -1;
    }
    double xo = a[2] + a[0] * 0.5;
    for (int x = 0; x < out_w; x++, xo += a[0]) {
        const int v = spw_px_coord(xo);
        xi[x] = v >= 0 && v < in_w ? v : -1;
    }
}
