/* pipeline/element_size.h - the size of an element after a pipeline's first ops, when the spec alone fixes
 * it (a crop or a two-sided resize, then ops that keep the size): the dispatcher refuses a job whose
 * elements could never fit a message before any worker makes one. Pure; thread-safe. */
#ifndef SPW_PIPELINE_ELEMENT_SIZE_H
#define SPW_PIPELINE_ELEMENT_SIZE_H

#include <stdint.h>

#include "pipeline/spec.h"

/* Bytes of one element after ops [0, n_ops) of spec, into *bytes, with the op that fixed the last dimension
 * in *op (an index into spec->ops). Returns 1 when the spec fixes the size, 0 when it depends on the data
 * (decoded images, a one-sided resize, audio, user code that does not declare its output). */
int spw_element_fixed_bytes(const struct spw_pipeline_spec *spec, int n_ops, int64_t *bytes, int *op);

#endif
