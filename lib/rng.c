/* lib/rng.c - Philox4x32-10 (Salmon et al., SC'11) as a counter-based generator.
 * Key = mix(seed, epoch); counter = (draw block, op, sample lo, sample hi). Pure; no shared state. */
#include "lib/rng.h"

#include <math.h>
#include <string.h>

#include "lib/fastmath.h"
#include "lib/simd.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

uint64_t spw_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void philox_block(const uint32_t key_in[2], const uint32_t ctr_in[4], uint32_t out[4])
{
    uint32_t k0 = key_in[0], k1 = key_in[1];
    uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
    for (int i = 0; i < 10; i++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

void spw_rng_init(struct spw_rng *r, uint64_t seed, uint64_t epoch, uint64_t sample, uint32_t op)
{
    uint64_t k = spw_mix64(seed ^ spw_mix64(epoch + 0x5157u));
    r->key[0] = (uint32_t)k;
    r->key[1] = (uint32_t)(k >> 32);
    r->ctr[0] = 0;
    r->ctr[1] = op;
    r->ctr[2] = (uint32_t)sample;
    r->ctr[3] = (uint32_t)(sample >> 32);
    r->used = 4;
}

uint32_t spw_rng_u32(struct spw_rng *r)
{
    if (r->used == 4) {
        philox_block(r->key, r->ctr, r->buf);
        r->ctr[0]++;
        r->used = 0;
    }
    return r->buf[r->used++];
}

uint64_t spw_rng_u64(struct spw_rng *r)
{
    uint64_t hi = spw_rng_u32(r);
    return (hi << 32) | spw_rng_u32(r);
}

double spw_rng_uniform(struct spw_rng *r)
{
    return (double)(spw_rng_u64(r) >> 11) * 0x1.0p-53;
}

double spw_rng_range(struct spw_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * spw_rng_uniform(r);
}

uint32_t spw_rng_below(struct spw_rng *r, uint32_t n)
{
    /* Lemire's multiply-shift with rejection: unbiased. */
    uint64_t m = (uint64_t)spw_rng_u32(r) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t t = (uint32_t)(-n) % n;
        while (low < t) {
            m = (uint64_t)spw_rng_u32(r) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

double spw_rng_normal(struct spw_rng *r)
{
    double u1 = spw_rng_uniform(r), u2 = spw_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double spw_rng_gamma(struct spw_rng *r, double alpha)
{
    if (alpha < 1.0) {                  /* Gamma(a) = Gamma(a + 1) U^(1/a) */
        double u = spw_rng_uniform(r);
        if (u < 1e-300)
            u = 1e-300;
        return spw_rng_gamma(r, alpha + 1.0) * pow(u, 1.0 / alpha);
    }
    const double d = alpha - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        const double x = spw_rng_normal(r), t = 1.0 + c * x;
        if (t <= 0)
            continue;
        const double v = t * t * t, u = spw_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x || log(u) < 0.5 * x * x + d * (1.0 - v + log(v)))
            return d * v;
    }
}

double spw_rng_beta(struct spw_rng *r, double a, double b)
{
    const double x = spw_rng_gamma(r, a), y = spw_rng_gamma(r, b);
    return x + y > 0 ? x / (x + y) : 0.5;
}

/* ---- the fast stream ---- */

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void spw_fastrng_seed(struct spw_fastrng *f, struct spw_rng *from)
{
    for (int i = 0; i < 4; i++)
        f->s[i] = spw_rng_u64(from);
    if (!(f->s[0] | f->s[1] | f->s[2] | f->s[3]))   /* the one state xoshiro cannot leave */
        f->s[0] = 1;
}

uint64_t spw_fastrng_u64(struct spw_fastrng *f)
{
    uint64_t *s = f->s;
    const uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

/* Box-Muller in float32 over blocks (torch.randn's method on the CPU: float uniforms, r = sqrt(-2 ln u1)
 * and the angle from u2), written so the compiler vectorizes it: one xoshiro word gives a pair's two 24-bit
 * uniforms; the angle is a quarter turn q (2 bits) plus a uniform x in (-pi/4, pi/4) (22 bits), whose sin
 * and cos are rotated by q. |z| <= sqrt(-2 ln 2^-24) = 5.77. (The build's -fno-math-errno lets sqrtf be the
 * instruction.) */
SPW_VECTOR_CLONES static void normal_pairs(const uint64_t *restrict w, float *restrict c_out,
                                           float *restrict s_out, int n)
{
    for (int k = 0; k < n; k++) {
        const uint32_t lo = (uint32_t)w[k], hi = (uint32_t)(w[k] >> 32);
        const float u1 = (float)((lo >> 8) + 1u) * 0x1p-24f;                     /* (0, 1] */
        const int q = (int)(hi >> 30);
        const float x = ((float)((hi >> 8) & 0x3fffffu) + 0.5f) * (0x1p-22f * 1.57079632679f) - 0.785398163397f;
        const float r = sqrtf(fabsf(-2.0f * spw_fast_ln(u1)));
        const float c = spw_fast_cos_q(x), s = spw_fast_sin_q(x);
        const float ca = (float)((1 - (q & 2)) * (1 - (q & 1))), sa = (float)((1 - (q & 2)) * (q & 1));
        c_out[k] = r * (c * ca - s * sa);
        s_out[k] = r * (s * ca + c * sa);
    }
}

void spw_fastrng_normals(struct spw_fastrng *f, float *out, int64_t n)
{
    enum { PAIRS = 64 };
    uint64_t w[PAIRS];
    float z[2 * PAIRS];
    for (int64_t i = 0; i < n; i += 2 * PAIRS) {
        const int64_t len = n - i < 2 * PAIRS ? n - i : 2 * PAIRS;
        const int pairs = (int)((len + 1) / 2);
        for (int k = 0; k < pairs; k++)
            w[k] = spw_fastrng_u64(f);
        normal_pairs(w, z, z + PAIRS, pairs);
        for (int64_t k = 0; k < len; k++)      /* a word's pair side by side: even splits give the same run */
            out[i + k] = z[(k & 1) * PAIRS + k / 2];
    }
}
