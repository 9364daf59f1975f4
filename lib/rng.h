/* lib/rng.h - counter-based random numbers (Philox4x32-10) keyed by (seed, epoch, sample, op).
 * The same key gives the same stream in any thread or process, so every element's randomness is
 * independent of who makes it. A struct spw_rng is a small value owned by one thread at a time. */
#ifndef SPW_LIB_RNG_H
#define SPW_LIB_RNG_H

#include <stdint.h>

struct spw_rng {
    uint32_t key[2];
    uint32_t ctr[4];
    uint32_t buf[4];
    int used;           /* words of buf consumed */
};

/* Start the stream for (seed, epoch, sample index, op index). */
void spw_rng_init(struct spw_rng *r, uint64_t seed, uint64_t epoch, uint64_t sample, uint32_t op);
uint32_t spw_rng_u32(struct spw_rng *r);
uint64_t spw_rng_u64(struct spw_rng *r);
/* Uniform double in [0, 1) with 53 random bits. */
double spw_rng_uniform(struct spw_rng *r);
/* Uniform double in [lo, hi). */
double spw_rng_range(struct spw_rng *r, double lo, double hi);
/* Uniform integer in [0, n), unbiased; n > 0. */
uint32_t spw_rng_below(struct spw_rng *r, uint32_t n);
/* Standard normal (Box-Muller). */
double spw_rng_normal(struct spw_rng *r);
/* Gamma(alpha, 1), alpha > 0 (Marsaglia-Tsang; alpha < 1 boosted by U^(1 / alpha)). */
double spw_rng_gamma(struct spw_rng *r, double alpha);
/* Beta(a, b) = X / (X + Y), X ~ Gamma(a), Y ~ Gamma(b) (torch._sample_dirichlet([a, b])[0]). */
double spw_rng_beta(struct spw_rng *r, double a, double b);
/* A fast stream for bulk draws (fbank's dither: a normal per sample), seeded from a Philox stream so it is
 * keyed as that one is: xoshiro256**, about 1 ns a word against Philox's 7. One owner at a time. */
struct spw_fastrng {
    uint64_t s[4];
};
void spw_fastrng_seed(struct spw_fastrng *f, struct spw_rng *from);
uint64_t spw_fastrng_u64(struct spw_fastrng *f);
/* n standard normals in float32, as torch.randn makes them on the CPU (Box-Muller on float uniforms), in
 * vectorized blocks: about 1 ns a draw. One word of the stream makes two consecutive values, so a run split
 * into calls of even lengths gives the same values. */
void spw_fastrng_normals(struct spw_fastrng *f, float *out, int64_t n);
/* One round of a stateless 64-bit mixer (splitmix64 finaliser): handy for hashing keys. */
uint64_t spw_mix64(uint64_t x);

#endif
