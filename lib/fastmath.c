/* lib/fastmath.c - the vectorized loops over lib/fastmath.h's kernels, built for AVX2 and the baseline
 * (lib/simd.h). Pure; thread-safe. */
#include "lib/fastmath.h"

#include "lib/simd.h"

SPW_VECTOR_CLONES void spw_fast_log_block(float *restrict v, int len, float eps)
{
    for (int k = 0; k < len; k++)
        v[k] = spw_fast_ln(v[k] + eps);
}
