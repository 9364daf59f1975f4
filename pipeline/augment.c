/* pipeline/augment.c - op spec -> image kernel adapter (see augment.h). Thread-safe. */
#include "pipeline/augment.h"

#include <stdio.h>

#include "lib/err.h"

int spw_augment_run(const struct spw_op_spec *op, int op_index, struct spw_rng *rng, struct spw_image *img,
                    char *err, size_t errlen)
{
    (void)rng;
    (void)img;
    snprintf(err, errlen, "ops[%d] %s is not implemented yet", op_index, spw_op_name(op->kind));
    return SPW_EUNSUPPORTED;
}
