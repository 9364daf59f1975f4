/* pipeline/fusion.c - computes fusion groups from the op list (see fusion.h). Audio: decode_wav and the
 * waveform ops after it, then the spectrogram features (stft, mel, log), then spec_augment. Pure. */
#include "pipeline/fusion.h"

static int is_flip(enum spw_op_kind k)
{
    return k == SPW_OP_HORIZONTAL_FLIP || k == SPW_OP_VERTICAL_FLIP || k == SPW_OP_RANDOM_HORIZONTAL_FLIP ||
           k == SPW_OP_RANDOM_VERTICAL_FLIP;
}

/* Tensor groups: images' float ops, audio's spectrogram features (stft, mel and the log scales). */
static int is_tensor_op(enum spw_op_kind k)
{
    return k == SPW_OP_NORMALIZE || k == SPW_OP_TO_TENSOR || k == SPW_OP_RANDOM_ERASING || k == SPW_OP_STFT ||
           k == SPW_OP_MEL || k == SPW_OP_LOG || k == SPW_OP_AMPLITUDE_TO_DB;
}

static int is_waveform_op(enum spw_op_kind k)
{
    return k == SPW_OP_RESAMPLE || k == SPW_OP_RANDOM_CROP_AUDIO || k == SPW_OP_PAD_AUDIO ||
           k == SPW_OP_NORMALIZE_AUDIO;
}

const char *spw_group_kind_name(enum spw_group_kind kind)
{
    switch (kind) {
    case SPW_GROUP_DECODE: return "decode";
    case SPW_GROUP_AUGMENT: return "augment";
    case SPW_GROUP_TENSOR: return "tensor";
    }
    return "?";
}

int spw_fusion_groups(const struct spw_pipeline_spec *spec, struct spw_group *groups)
{
    const struct spw_op_spec *ops = spec->ops;
    const int n = spec->n_ops;
    int ng = 0, i = 0;
    if (n > 0 && ops[0].kind == SPW_OP_DECODE_JPEG) {
        int j = 1;
        if (j < n && (ops[j].kind == SPW_OP_RANDOM_RESIZED_CROP || ops[j].kind == SPW_OP_CENTER_CROP ||
                      ops[j].kind == SPW_OP_CROP)) {
            j++;
        } else if (j < n && ops[j].kind == SPW_OP_RESIZE) {
            j++;
            if (j < n && ops[j].kind == SPW_OP_CENTER_CROP)
                j++;
        }
        while (j < n && is_flip(ops[j].kind))
            j++;
        if (j < n && (ops[j].kind == SPW_OP_NORMALIZE || ops[j].kind == SPW_OP_TO_TENSOR))
            j++;
        groups[ng++] = (struct spw_group){SPW_GROUP_DECODE, 0, j};
        i = j;
    } else if (n > 0 && ops[0].kind == SPW_OP_DECODE_WAV) {
        int j = 1;
        while (j < n && is_waveform_op(ops[j].kind))
            j++;
        groups[ng++] = (struct spw_group){SPW_GROUP_DECODE, 0, j};
        i = j;
    }
    while (i < n) {
        enum spw_group_kind kind = is_tensor_op(ops[i].kind) ? SPW_GROUP_TENSOR : SPW_GROUP_AUGMENT;
        int j = i;
        while (j < n && (is_tensor_op(ops[j].kind) ? SPW_GROUP_TENSOR : SPW_GROUP_AUGMENT) == kind)
            j++;
        groups[ng++] = (struct spw_group){kind, i, j - i};
        i = j;
    }
    return ng;
}
