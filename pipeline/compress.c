/* pipeline/compress.c - zstd frames per element (compress.h) over libzstd. A context holds its parameters,
 * set once: compressing never re-reads the level per element. One context per thread. */
#include "pipeline/compress.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>

#include "lib/err.h"

struct spw_zstd {
    ZSTD_CCtx *c;
    ZSTD_DCtx *d;
};

int spw_zstd_create(int level, struct spw_zstd **out)
{
    if (level != 0 && (level < SPW_ZSTD_MIN_LEVEL || level > SPW_ZSTD_MAX_LEVEL))
        return -EINVAL;
    struct spw_zstd *z = calloc(1, sizeof *z);
    if (!z)
        return -ENOMEM;
    if (level) {
        z->c = ZSTD_createCCtx();
        if (!z->c || ZSTD_isError(ZSTD_CCtx_setParameter(z->c, ZSTD_c_compressionLevel, level)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(z->c, ZSTD_c_checksumFlag, 1)) ||
            ZSTD_isError(ZSTD_CCtx_setParameter(z->c, ZSTD_c_contentSizeFlag, 1))) {
            spw_zstd_destroy(z);
            return -ENOMEM;
        }
    } else if (!(z->d = ZSTD_createDCtx())) {
        spw_zstd_destroy(z);
        return -ENOMEM;
    }
    *out = z;
    return 0;
}

void spw_zstd_destroy(struct spw_zstd *z)
{
    if (!z)
        return;
    ZSTD_freeCCtx(z->c);
    ZSTD_freeDCtx(z->d);
    free(z);
}

size_t spw_zstd_bound(size_t n, size_t elem)
{
    return n * ZSTD_compressBound(elem);
}

size_t spw_zstd_compress(struct spw_zstd *z, const uint8_t *src, size_t n, size_t elem, uint8_t *dst, size_t cap)
{
    if (!z || !z->c)
        return 0;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        size_t w = ZSTD_compress2(z->c, dst + used, cap - used, src + i * elem, elem);
        if (ZSTD_isError(w))
            return 0;
        used += w;
    }
    return used;
}

int spw_zstd_decompress(struct spw_zstd *z, const uint8_t *src, size_t len, size_t n, size_t elem, uint8_t *raw,
                        char *err, size_t errlen)
{
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *f = src + at;
        const size_t rest = len - at;
        /* What the frame declares, checked before anything is written: its content size and its own end. */
        unsigned long long declared = ZSTD_getFrameContentSize(f, rest);
        if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN || declared != elem) {
            snprintf(err, errlen, "compressed element %zu of %zu: its frame %s", i, n,
                     declared == ZSTD_CONTENTSIZE_ERROR ? "is malformed or cut short"
                     : declared == ZSTD_CONTENTSIZE_UNKNOWN ? "does not declare its size"
                                                            : "declares another size than its shape");
            return SPW_EFORMAT;
        }
        size_t flen = ZSTD_findFrameCompressedSize(f, rest);
        if (ZSTD_isError(flen) || flen > rest) {
            snprintf(err, errlen, "compressed element %zu of %zu: its frame runs past the payload", i, n);
            return SPW_EFORMAT;
        }
        size_t got = ZSTD_decompressDCtx(z->d, raw + i * elem, elem, f, flen);
        if (ZSTD_isError(got) || got != elem) {
            snprintf(err, errlen, "compressed element %zu of %zu: %s", i, n,
                     ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short frame");
            return SPW_EFORMAT;
        }
        at += flen;
    }
    if (at != len) {
        snprintf(err, errlen, "compressed payload: %zu bytes after its %zu frames", len - at, n);
        return SPW_EFORMAT;
    }
    return 0;
}
