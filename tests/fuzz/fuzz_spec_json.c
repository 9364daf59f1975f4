/* tests/fuzz/fuzz_spec_json.c - libFuzzer target: the pipeline spec JSON parser and validator (what a user
 * or a peer's CLI hands in), then its proto round trip. Single-threaded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct spw_pipeline_spec *spec;
    char err[512];
    if (spw_spec_parse_json(text, &spec, err, sizeof err) == 0) {
        Spillway__V1__Pipeline *p;
        if (spw_spec_to_proto(spec, &p) == 0) {
            struct spw_pipeline_spec *back;
            if (spw_spec_from_proto(p, &back, err, sizeof err) == 0)
                spw_spec_free(back);
            spw_spec_proto_free(p);
        }
        spw_spec_free(spec);
    }
    free(text);
    return 0;
}
