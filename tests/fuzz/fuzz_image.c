/* tests/fuzz/fuzz_image.c - libFuzzer target: decode_image's decoders by content (ops/image_decode: the format
 * sniff, libpng's progressive reader with its longjmp errors, libwebp, the EXIF orientation walk and the
 * turn), the header reader and the whole decode, with exif_transpose from the input's first byte. Pixels
 * capped at 4M so that a claimed size cannot make the fuzzer slow. Single-threaded. */
#include <stdint.h>

#include "ops/image_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const bool exif_transpose = data[0] & 1;
    data++;
    size--;
    int w, h;
    char err[256];
    (void)spw_exif_orientation(data, size, spw_image_sniff(data, size));
    if (spw_image_header(data, size, 4 << 20, exif_transpose, &w, &h, err, sizeof err) != 0)
        return 0;
    struct spw_image img;
    if (spw_image_decode(data, size, 4 << 20, exif_transpose, &img, err, sizeof err) == 0)
        spw_image_free(&img);
    return 0;
}
