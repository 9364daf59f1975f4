/* tests/fuzz/fuzz_audio.c - libFuzzer target: decode_audio's kernel (ops/audio_decode: the sniffer, then
 * libFLAC, libmpg123, libvorbisfile or libopusfile over the buffer, and ops/wav), with and without downmix,
 * samples capped at 1M so that a declared length over the cap is refused before allocating. Single-threaded. */
#include <stdint.h>
#include <stdlib.h>

#include "ops/audio_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct spw_audio_info info;
    char err[256];
    for (int downmix = 0; downmix < 2; downmix++) {
        float *out = NULL;
        if (spw_audio_decode(data, size, downmix, 1 << 20, &info, &out, err, sizeof err) == 0)
            free(out);
    }
    return 0;
}
