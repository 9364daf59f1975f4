/* lib/parallel.h - run fn(ctx, i) for every i in [0, n) on up to max_threads threads, the caller's among
 * them: each thread takes the next index from one atomic counter, so slow items do not hold up the rest.
 * Meant for blocking calls to many peers at once (asking workers for their profiles). fn must be safe to
 * call concurrently for different i. Returns when every call has returned. */
#ifndef SPW_LIB_PARALLEL_H
#define SPW_LIB_PARALLEL_H

#define SPW_PARALLEL_MAX_THREADS 64

/* max_threads is clamped to [1, SPW_PARALLEL_MAX_THREADS] and to n; a thread that cannot be started is
 * simply not there (the others, the caller's at least, do its share). */
void spw_parallel_for(int n, int max_threads, void (*fn)(void *ctx, int i), void *ctx);

#endif
