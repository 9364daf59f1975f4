/* lib/simd.h - SPW_VECTOR_CLONES marks a hot loop's function to be compiled for AVX2 as well as the
 * baseline (x86-64-v2) and chosen when the process loads (GCC target_clones, glibc ifunc). The build keeps
 * -ffp-contract=off and "avx2" does not enable FMA, so both clones do the same float operations per element:
 * results are bit-identical whichever runs (a worker and a client on different CPUs agree). SPW_FMA_CLONES
 * marks code that calls fmaf() where the reference fuses: the "fma" clone inlines the instruction, the other
 * calls libm's correctly rounded fmaf, so both give the same bits. Empty on other
 * compilers and architectures, and with -DSPW_NO_VECTOR_CLONES. Thread-safe (a declaration attribute). */
#ifndef SPW_LIB_SIMD_H
#define SPW_LIB_SIMD_H

/* Not under sanitizers: ifunc resolvers run before their runtimes start (a TSan build crashes at load). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(SPW_NO_VECTOR_CLONES) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define SPW_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#define SPW_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define SPW_VECTOR_CLONES
#define SPW_FMA_CLONES
#endif

#endif
