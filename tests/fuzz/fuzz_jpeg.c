/* tests/fuzz/fuzz_jpeg.c - libFuzzer target: the JPEG header reader and the region decoder (libjpeg-turbo
 * underneath, ROI and DCT scaling, the damaged-tail verdict), on a crop and scale the input's first bytes
 * choose. Pixels capped at 4M so that a claimed size cannot make the fuzzer slow. Single-threaded. */
#include <stdint.h>

#include "lib/tensor.h"
#include "ops/jpeg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    const int x = data[0] * 4, y = data[1] * 4, w = data[2] * 2, denom = 1 << (data[3] % 4);
    data += 4;
    size -= 4;
    struct spw_jpeg_info info;
    char err[256];
    if (spw_jpeg_header(data, size, 4 << 20, &info, err, sizeof err) != 0)
        return 0;
    struct spw_jpeg_region r;
    if (spw_jpeg_decode_region(data, size, 4 << 20, x, y, w, w, denom, &r, err, sizeof err) == 0)
        spw_image_free(&r.img);
    return 0;
}
