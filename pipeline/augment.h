/* pipeline/augment.h - adapter from an op spec to the image kernels of ops/color, ops/geometry and
 * ops/policy (everything between the decode group and normalize). Thread-safe: state is per call. */
#ifndef SPW_PIPELINE_AUGMENT_H
#define SPW_PIPELINE_AUGMENT_H

#include <stddef.h>

#include "lib/rng.h"
#include "ops/image.h"
#include "pipeline/spec.h"

/* Apply op (index op_index) to *img in place (the pixels may be replaced by a new allocation).
 * Returns 0, or a negative code with a message in err. */
int spw_augment_run(const struct spw_op_spec *op, int op_index, struct spw_rng *rng, struct spw_image *img,
                    char *err, size_t errlen);

#endif
