/* pipeline/fusion.h - fusion groups: runs of consecutive ops that execute as one step. The decode group is
 * decode_jpeg plus the crop/resize that follows it (so only the needed region is decoded, at a DCT scale),
 * any flips, and normalize/to_tensor; then the augmentations; then the tensor ops. Group boundaries are
 * the only places a pipeline may be cut. A pure function of the spec; thread-safe. */
#ifndef SPW_PIPELINE_FUSION_H
#define SPW_PIPELINE_FUSION_H

#include "pipeline/op_registry.h"   /* enum spw_group_kind, the ops' fusion roles */
#include "pipeline/spec.h"

struct spw_group {
    enum spw_group_kind kind;
    int first, count;       /* ops [first, first + count) */
};

/* Fill groups (capacity spec->n_ops) and return how many there are. */
int spw_fusion_groups(const struct spw_pipeline_spec *spec, struct spw_group *groups);
/* "decode", "augment", "tensor". */
const char *spw_group_kind_name(enum spw_group_kind kind);

#endif
