/* pipeline/op_spec.c - the JSON names of the ops' enum values (see op_spec.h). Constant data; any thread. */
#include "pipeline/op_spec.h"

#define LIST(name, ...)                                                                                        \
    const char *const name[] = {__VA_ARGS__, NULL};                                                           \
    const size_t name##_n = sizeof name / sizeof *name - 1;

LIST(spw_interp_names, "nearest", "bilinear", "bicubic")
LIST(spw_op_dtype_names, NULL, "float32", "float16")     /* by spw_dtype value: 1 f32, 2 f16 */
LIST(spw_array_dtype_names, "uint8", "float32", "float16", "int64")     /* by spw_dtype value: all four */
LIST(spw_aa_policy_names, "imagenet")
LIST(spw_window_names, "hann")
LIST(spw_mel_scale_names, "htk", "slaney")
LIST(spw_mel_norm_names, "none", "slaney")                /* "none" is JSON null */
LIST(spw_db_stype_names, "power", "magnitude")
LIST(spw_pad_mode_names, "constant", "edge", "reflect", "symmetric")
LIST(spw_kaldi_window_names, "hamming", "hanning", "povey", "rectangular", "blackman")

static const char *name_at(const char *const *names, size_t n, int v)
{
    return v >= 0 && (size_t)v < n ? names[v] : NULL;
}

const char *spw_interp_name(enum spw_interp v) { return name_at(spw_interp_names, spw_interp_names_n, (int)v); }
const char *spw_aa_policy_name(enum spw_aa_policy v)
{
    return name_at(spw_aa_policy_names, spw_aa_policy_names_n, (int)v);
}
const char *spw_mel_scale_name(enum spw_mel_scale v)
{
    return name_at(spw_mel_scale_names, spw_mel_scale_names_n, (int)v);
}
const char *spw_mel_norm_name(enum spw_mel_norm v)
{
    return name_at(spw_mel_norm_names, spw_mel_norm_names_n, (int)v);
}
const char *spw_db_stype_name(enum spw_db_stype v)
{
    return name_at(spw_db_stype_names, spw_db_stype_names_n, (int)v);
}
const char *spw_pad_mode_name(enum spw_pad_mode v)
{
    return name_at(spw_pad_mode_names, spw_pad_mode_names_n, (int)v);
}
const char *spw_kaldi_window_name(enum spw_kaldi_window v)
{
    return name_at(spw_kaldi_window_names, spw_kaldi_window_names_n, (int)v);
}
