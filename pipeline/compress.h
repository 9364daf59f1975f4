/* pipeline/compress.h - lossless compression of element payloads on the wire: a stacked tensor of n elements
 * travels as n zstd frames, one per element, each with its content size and checksum. Compressing is the
 * worker's (its producer threads, one context each); checking and decompressing is the client's, which trusts
 * nothing a frame declares: every frame must say exactly one element's size, end inside the payload, pass its
 * checksum, and the payload must hold exactly n frames. Not thread-safe per context; contexts are per thread. */
#ifndef SPW_PIPELINE_COMPRESS_H
#define SPW_PIPELINE_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#define SPW_ZSTD_MIN_LEVEL 1
#define SPW_ZSTD_MAX_LEVEL 19
#define SPW_ZSTD_DEFAULT_LEVEL 1    /* the fastest: links slow enough to gain are far slower than level 1 */

struct spw_zstd;                    /* a compression or decompression context (reused: no per-call setup) */

/* A context for compressing at level (SPW_ZSTD_MIN_LEVEL..MAX) or, with level 0, for decompressing.
 * Returns 0, -EINVAL or -ENOMEM. */
int spw_zstd_create(int level, struct spw_zstd **out);
void spw_zstd_destroy(struct spw_zstd *z);

/* The most bytes spw_zstd_compress may write for n elements of elem bytes each. */
size_t spw_zstd_bound(size_t n, size_t elem);
/* Compress n elements of elem bytes each (contiguous at src) into dst (cap bytes, at least spw_zstd_bound),
 * one frame each. Returns the bytes written, or 0 when it does not fit or zstd fails. */
size_t spw_zstd_compress(struct spw_zstd *z, const uint8_t *src, size_t n, size_t elem, uint8_t *dst, size_t cap);

/* Check and decompress a payload of len bytes that must hold exactly n frames of elem bytes each into raw
 * (n * elem bytes). Returns 0 or SPW_EFORMAT with the reason in err (nothing in raw is to be used then). */
int spw_zstd_decompress(struct spw_zstd *z, const uint8_t *src, size_t len, size_t n, size_t elem, uint8_t *raw,
                        char *err, size_t errlen);

#endif
