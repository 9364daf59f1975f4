/* pipeline/fusion.c - computes fusion groups from the op list (see fusion.h), by the ops' fusion roles and
 * groups in the op registry. Images: decode_jpeg, a crop or a resize (with a center_crop window), flips, then
 * normalize/to_tensor. Audio: decode_wav and the waveform ops after it. Then runs of augment ops and of
 * tensor ops (stft, mel and the log scales are tensor ops; spec_augment augments). Pure. */
#include "pipeline/fusion.h"

const char *spw_group_kind_name(enum spw_group_kind kind)
{
    switch (kind) {
    case SPW_GROUP_DECODE: return "decode";
    case SPW_GROUP_AUGMENT: return "augment";
    case SPW_GROUP_TENSOR: return "tensor";
    case SPW_GROUP_USER: return "user";
    case SPW_GROUP_VIEWS: return "views";
    }
    return "?";
}

/* Whether op j exists and may join a decode group in that role. */
static int joins(const struct spw_pipeline_spec *spec, int j, unsigned role)
{
    return j < spec->n_ops && (spw_op_def(spec->ops[j].kind)->fuse & role);
}

/* How many ops the decode group headed by ops[0] holds. */
static int decode_group_len(const struct spw_pipeline_spec *spec)
{
    int j = 1;
    if (spw_op_def(spec->ops[0].kind)->cls == SPW_OPC_DECODE_AUDIO) {
        while (joins(spec, j, SPW_FUSE_WAVE))
            j++;
        return j;
    }
    if (joins(spec, j, SPW_FUSE_CROP)) {
        j++;
    } else if (joins(spec, j, SPW_FUSE_RESIZE)) {
        j++;
        j += joins(spec, j, SPW_FUSE_WINDOW);
    }
    while (joins(spec, j, SPW_FUSE_FLIP))
        j++;
    if (joins(spec, j, SPW_FUSE_TENSOR_STEP))
        j++;
    return j;
}

int spw_fusion_groups(const struct spw_pipeline_spec *spec, struct spw_group *groups)
{
    const int n = spec->n_ops;
    int ng = 0, i = 0;
    if (n > 0 && spw_op_def(spec->ops[0].kind)->group == SPW_GROUP_DECODE) {
        i = decode_group_len(spec);
        groups[ng++] = (struct spw_group){SPW_GROUP_DECODE, 0, i};
    }
    while (i < n) {
        const enum spw_group_kind kind = spw_op_def(spec->ops[i].kind)->group;
        int j = i;
        while (j < n && spw_op_def(spec->ops[j].kind)->group == kind)
            j++;
        groups[ng++] = (struct spw_group){kind, i, j - i};
        i = j;
    }
    return ng;
}
