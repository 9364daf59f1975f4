/* tests/fuzz/fuzz_wire.c - libFuzzer target: the ElementBatch decoder a client runs on every worker message,
 * whole and cut into parts at a point the input chooses. Single-threaded. */
#include <stdint.h>
#include <sys/uio.h>

#include "pipeline/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct spw_wire_batch b;
    char err[256];
    if (spw_wire_decode(data, size, &b, err, sizeof err) == 0)
        spw_wire_batch_free(&b);
    if (size > 1) {
        const size_t cut = data[0] % size;
        struct iovec parts[2] = {{(void *)data, cut}, {(void *)(data + cut), size - cut}};
        if (spw_wire_decode_parts(parts, 2, &b, err, sizeof err) == 0)
            spw_wire_batch_free(&b);
    }
    return 0;
}
