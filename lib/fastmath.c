/* lib/fastmath.c - the vectorized loops over lib/fastmath.h's kernels, built for AVX2 and the baseline
 * (lib/simd.h). Pure; thread-safe. */
#include "lib/fastmath.h"

#include "lib/simd.h"

/* Static: GCC exports a target_clones function's ifunc whatever -fvisibility says, so the API calls it. */
SPW_VECTOR_CLONES static void log_block(float *restrict v, int len, float eps)
{
    for (int k = 0; k < len; k++)
        v[k] = spw_fast_ln(v[k] + eps);
}

void spw_fast_log_block(float *restrict v, int len, float eps)
{
    log_block(v, len, eps);
}
