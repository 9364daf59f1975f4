/* ops/px.h - SPW_PX, the qualifier of per-pixel arithmetic written once for the CPU ops and the CUDA
 * plugin's kernels: static inline for a C compiler, __host__ __device__ under nvcc. Both sides evaluate
 * such code without FMA contraction (-ffp-contract=off here, -fmad=false for nvcc), so float results agree
 * bit for bit. */
#ifndef SPW_OPS_PX_H
#define SPW_OPS_PX_H

#ifdef __CUDACC__
#define SPW_PX static __host__ __device__ __forceinline__
#else
#define SPW_PX static inline
#endif

#endif
