/* tests/fuzz/fuzz_wav.c - libFuzzer target: the WAV header parser and decoder, with and without downmix,
 * samples capped at 1M before allocating. Single-threaded. */
#include <stdint.h>
#include <stdlib.h>

#include "ops/wav.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct spw_wav_info info;
    char err[256];
    if (spw_wav_header(data, size, &info, err, sizeof err) != 0)
        return 0;
    for (int downmix = 0; downmix < 2; downmix++) {
        float *out = NULL;
        if (spw_wav_decode(data, size, downmix, 1 << 20, &info, &out, err, sizeof err) == 0)
            free(out);
    }
    return 0;
}
