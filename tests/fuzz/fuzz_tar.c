/* tests/fuzz/fuzz_tar.c - libFuzzer target: the tar shard index (a WebDataset source's listing through
 * libarchive: ustar, pax, GNU, gzip), on the input written as a shard file and opened as a source, then
 * every sample read back. Single-threaded; the shard lives in a private temporary directory under $TMPDIR
 * (default /tmp). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], shard[96];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        spw_log_set_level(SPW_LOG_ERROR);
        const char *tmp = getenv("TMPDIR");    /* a long run: TMPDIR=/dev/shm */
        snprintf(dir, sizeof dir, "%s/spw-fuzz-tar-XXXXXX", tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
        if (!mkdtemp(dir))
            abort();
        snprintf(shard, sizeof shard, "%s/s.tar", dir);
    }
    FILE *f = fopen(shard, "wb");
    if (!f || fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    /* label_key: .json members are parsed too (pipeline/tar_index.c), not only .cls/.txt */
    struct spw_source_spec ss = {.format = SPW_SOURCE_TAR_SHARDS, .path = shard, .media = SPW_MEDIA_IMAGE,
                                 .label_key = "label"};
    struct spw_source *src;
    char err[512];
    if (spw_source_open(&ss, &src, err, sizeof err) == 0) {
        for (int64_t i = 0; i < src->n && i < 64; i++) {
            uint8_t *buf = NULL;
            size_t len = 0;
            if (spw_source_read(src, i, 1 << 20, &buf, &len) == 0)
                free(buf);
        }
        spw_source_close(src);
    }
    return 0;
}
