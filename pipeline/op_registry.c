/* pipeline/op_registry.c - the table of ops (see op_registry.h): each op's fields with their ranges,
 * torchvision's (and torchaudio's) defaults, cross-field checks, class, fusion role, size effect and CPU run.
 * Everything here is constant; the runs live beside their kernels' adapters (image_ops.c, jpeg_group.c,
 * augment.c, audio.c). Thread-safe. */
#include "pipeline/op_registry.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/augmix.h"
#include "ops/blur.h"
#include "ops/elastic.h"
#include "pipeline/audio.h"
#include "pipeline/augment.h"
#include "pipeline/combinators.h"
#include "pipeline/gpu_ops.h"
#include "pipeline/image_ops.h"
#include "pipeline/plugin_ops.h"
#include "pipeline/python_op.h"
#include "pipeline/views.h"

#define MAX_EDGE 65535          /* JPEG's own limit on a side; larger outputs cannot come from a decode */
#define MAX_NUM_OPS 32          /* rand_augment num_ops */
#define MAX_BINS 1024           /* num_magnitude_bins */

/* ---- fields --------------------------------------------------------------------------------------- */

#define OFF(f) offsetof(struct spw_op_spec, f)
#define INF HUGE_VAL
#define F_END {NULL, SPW_FK_INT, 0, 0, 0, 0, NULL}

static const struct spw_op_field no_fields[] = {F_END};
static const struct spw_op_field decode_image_fields[] = {
    {"exif_transpose", SPW_FK_BOOL, OFF(exif_transpose), 0, 0, 0, NULL}, F_END};
static const struct spw_op_field resize_fields[] = {
    {"size", SPW_FK_SIZE, 0, 0, 0, SPW_F_REQ, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"max_size", SPW_FK_MAX_SIZE, 0, 1, MAX_EDGE, 0, NULL},
    {"antialias", SPW_FK_BOOL, OFF(antialias), 0, 0, 0, NULL},
    F_END};
static const struct spw_op_field center_crop_fields[] = {{"size", SPW_FK_SIZE, 0, 0, 0, SPW_F_REQ, NULL}, F_END};
static const struct spw_op_field crop_fields[] = {
    {"top", SPW_FK_INT, OFF(top), -MAX_EDGE, MAX_EDGE, SPW_F_REQ, NULL},
    {"left", SPW_FK_INT, OFF(left), -MAX_EDGE, MAX_EDGE, SPW_F_REQ, NULL},
    {"height", SPW_FK_INT, OFF(height), 1, MAX_EDGE, SPW_F_REQ, NULL},
    {"width", SPW_FK_INT, OFF(width), 1, MAX_EDGE, SPW_F_REQ, NULL},
    F_END};
static const struct spw_op_field random_crop_fields[] = {
    {"size", SPW_FK_SIZE, 0, 0, 0, SPW_F_REQ, NULL},
    {"padding", SPW_FK_PADDING, 0, 0, MAX_EDGE, 0, NULL},
    {"pad_if_needed", SPW_FK_BOOL, OFF(pad_if_needed), 0, 0, 0, NULL},
    {"fill", SPW_FK_FILL, 0, 0, 255, 0, NULL},
    {"padding_mode", SPW_FK_PAD_MODE, 0, 0, 0, 0, NULL},
    F_END};
static const struct spw_op_field pad_fields[] = {
    {"padding", SPW_FK_PADDING, 0, 0, MAX_EDGE, SPW_F_REQ, NULL},
    {"fill", SPW_FK_FILL, 0, 0, 255, 0, NULL},
    {"padding_mode", SPW_FK_PAD_MODE, 0, 0, 0, 0, NULL},
    F_END};
static const struct spw_op_field random_resize_fields[] = {
    {"min_size", SPW_FK_INT, OFF(min_size), 1, MAX_EDGE, SPW_F_REQ, NULL},
    {"max_size", SPW_FK_MAX_SIZE, 0, 1, MAX_EDGE, 0, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"antialias", SPW_FK_BOOL, OFF(antialias), 0, 0, 0, NULL},
    F_END};
static const struct spw_op_field shortest_size_fields[] = {
    {"min_size", SPW_FK_SIZES, 0, 1, MAX_EDGE, SPW_F_REQ, NULL},
    {"max_size", SPW_FK_INT, OFF(max_size), 1, MAX_EDGE, SPW_F_REQ, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"antialias", SPW_FK_BOOL, OFF(antialias), 0, 0, 0, NULL},
    F_END};
static const struct spw_op_field pad_if_smaller_fields[] = {
    {"size", SPW_FK_SIZE, 0, 0, 0, SPW_F_REQ, NULL},
    {"fill", SPW_FK_FILL, 0, 0, 255, 0, NULL},
    F_END};
static const struct spw_op_field rrc_fields[] = {
    {"size", SPW_FK_SIZE, 0, 0, 0, SPW_F_REQ, NULL},
    {"scale", SPW_FK_RANGE, OFF(scale), 0, 1, 0, NULL},
    {"ratio", SPW_FK_RANGE, OFF(ratio), 0, INF, SPW_F_LO_OPEN, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"antialias", SPW_FK_BOOL, OFF(antialias), 0, 0, 0, NULL},
    F_END};
static const struct spw_op_field p_fields[] = {{"p", SPW_FK_NUM, OFF(p), 0, 1, 0, NULL}, F_END};
static const struct spw_op_field rotate_fields[] = {
    {"angle", SPW_FK_NUM, OFF(angle), -INF, INF, SPW_F_REQ, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"expand", SPW_FK_BOOL, OFF(expand), 0, 0, 0, NULL},
    {"fill", SPW_FK_FILL, 0, 0, 255, 0, NULL},
    F_END};
static const struct spw_op_field affine_fields[] = {
    {"angle", SPW_FK_NUM, OFF(angle), -INF, INF, 0, NULL},
    {"translate", SPW_FK_PAIR, OFF(translate), -INF, INF, 0, NULL},
    {"scale", SPW_FK_NUM, OFF(affine_scale), 0, INF, SPW_F_LO_OPEN, NULL},
    {"shear", SPW_FK_SHEAR, 0, -INF, INF, 0, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"fill", SPW_FK_FILL, 0, 0, 255, 0, NULL},
    F_END};
static const struct spw_op_field factor_fields[] = {
    {"factor", SPW_FK_NUM, OFF(factor), 0, INF, SPW_F_REQ, NULL}, F_END};
static const struct spw_op_field hue_fields[] = {
    {"factor", SPW_FK_NUM, OFF(factor), -0.5, 0.5, SPW_F_REQ, NULL}, F_END};
static const struct spw_op_field posterize_fields[] = {{"bits", SPW_FK_INT, OFF(bits), 0, 8, SPW_F_REQ, NULL}, F_END};
static const struct spw_op_field solarize_fields[] = {
    {"threshold", SPW_FK_NUM, OFF(threshold), 0, 255, SPW_F_REQ, NULL}, F_END};
static const struct spw_op_field grayscale_fields[] = {
    {"num_output_channels", SPW_FK_INT, OFF(num_output_channels), 1, 3, 0, NULL}, F_END};
static const struct spw_op_field random_posterize_fields[] = {
    {"bits", SPW_FK_INT, OFF(bits), 0, 8, SPW_F_REQ, NULL}, {"p", SPW_FK_NUM, OFF(p), 0, 1, 0, NULL}, F_END};
static const struct spw_op_field random_solarize_fields[] = {
    {"threshold", SPW_FK_NUM, OFF(threshold), 0, 255, SPW_F_REQ, NULL}, {"p", SPW_FK_NUM, OFF(p), 0, 1, 0, NULL},
    F_END};
static const struct spw_op_field random_sharpness_fields[] = {
    {"sharpness_factor", SPW_FK_NUM, OFF(factor), 0, INF, SPW_F_REQ, NULL}, {"p", SPW_FK_NUM, OFF(p), 0, 1, 0, NULL},
    F_END};
static const struct spw_op_field random_apply_fields[] = {
    {"ops", SPW_FK_OPS, 0, 0, 0, SPW_F_REQ, NULL}, {"p", SPW_FK_NUM, OFF(p), 0, 1, 0, NULL}, F_END};
static const struct spw_op_field random_choice_fields[] = {
    {"ops", SPW_FK_OPS, 0, 0, 0, SPW_F_REQ, NULL}, {"p", SPW_FK_WEIGHTS, 0, 0, INF, 0, NULL}, F_END};
static const struct spw_op_field random_order_fields[] = {{"ops", SPW_FK_OPS, 0, 0, 0, SPW_F_REQ, NULL}, F_END};
static const struct spw_op_field blur_fields[] = {
    {"kernel_size", SPW_FK_KSIZE, OFF(kernel_size), 1, SPW_BLUR_MAX_KERNEL, SPW_F_REQ, NULL},
    {"sigma", SPW_FK_SIGMA, OFF(sigma), 0, INF, SPW_F_LO_OPEN, NULL},
    F_END};
static const struct spw_op_field pil_blur_fields[] = {
    {"radius", SPW_FK_SIGMA, OFF(sigma), 0, 1000, 0, NULL}, F_END};
static const struct spw_op_field perspective_fields[] = {
    {"distortion_scale", SPW_FK_NUM, OFF(distortion_scale), 0, 1, 0, NULL},
    {"p", SPW_FK_NUM, OFF(p), 0, 1, 0, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"fill", SPW_FK_FILL, 0, 0, 255, 0, NULL},
    F_END};
static const struct spw_op_field jitter_fields[] = {
    {"brightness", SPW_FK_JITTER, OFF(brightness), 0, INF, 0, NULL},
    {"contrast", SPW_FK_JITTER, OFF(contrast), 0, INF, 0, NULL},
    {"saturation", SPW_FK_JITTER, OFF(saturation), 0, INF, 0, NULL},
    {"hue", SPW_FK_JITTER, OFF(hue), -0.5, 0.5, SPW_F_HUE, NULL},
    F_END};
static const struct spw_op_field rand_augment_fields[] = {
    {"num_ops", SPW_FK_INT, OFF(num_ops), 0, MAX_NUM_OPS, 0, NULL},
    {"num_magnitude_bins", SPW_FK_INT, OFF(num_magnitude_bins), 2, MAX_BINS, 0, NULL},
    {"magnitude", SPW_FK_MAGNITUDE, 0, 0, 0, 0, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"fill", SPW_FK_FILL, 0, 0, 255, 0, NULL},
    F_END};
static const struct spw_op_field auto_augment_fields[] = {
    {"policy", SPW_FK_POLICY, 0, 0, 0, 0, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"fill", SPW_FK_FILL, 0, 0, 255, 0, NULL},
    F_END};
static const struct spw_op_field augmix_fields[] = {
    {"severity", SPW_FK_INT, OFF(severity), 1, SPW_AUGMIX_MAX_SEVERITY, 0, NULL},
    {"mixture_width", SPW_FK_INT, OFF(mixture_width), 1, SPW_AUGMIX_MAX_WIDTH, 0, NULL},
    {"chain_depth", SPW_FK_INT, OFF(chain_depth), -1, SPW_AUGMIX_MAX_DEPTH, 0, NULL},
    {"alpha", SPW_FK_NUM, OFF(alpha), 0, 1e6, SPW_F_LO_OPEN, NULL},
    {"all_ops", SPW_FK_BOOL, OFF(all_ops), 0, 0, 0, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"fill", SPW_FK_OPT_FILL, 0, 0, 255, 0, NULL},
    F_END};
static const struct spw_op_field elastic_fields[] = {
    {"alpha", SPW_FK_XY, OFF(elastic_alpha), 0, 1e6, 0, NULL},
    {"sigma", SPW_FK_XY, OFF(sigma), 0, SPW_ELASTIC_MAX_SIGMA, 0, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"fill", SPW_FK_FILL, 0, 0, 255, 0, NULL},
    F_END};
static const struct spw_op_field trivial_fields[] = {
    {"num_magnitude_bins", SPW_FK_INT, OFF(num_magnitude_bins), 2, MAX_BINS, 0, NULL},
    {"interpolation", SPW_FK_INTERP, 0, 0, 0, 0, NULL},
    {"fill", SPW_FK_FILL, 0, 0, 255, 0, NULL},
    F_END};
static const struct spw_op_field erasing_fields[] = {
    {"p", SPW_FK_NUM, OFF(p), 0, 1, 0, NULL},
    {"scale", SPW_FK_RANGE, OFF(scale), 0, 1, 0, NULL},
    {"ratio", SPW_FK_RANGE, OFF(ratio), 0, INF, SPW_F_LO_OPEN, NULL},
    {"value", SPW_FK_ERASE_VALUE, 0, -INF, INF, 0, NULL},
    F_END};
static const struct spw_op_field normalize_fields[] = {
    {"mean", SPW_FK_TRIPLE, OFF(mean), -INF, INF, SPW_F_REQ, NULL},
    {"std", SPW_FK_TRIPLE, OFF(std), 0, INF, SPW_F_REQ | SPW_F_LO_OPEN, NULL},
    {"dtype", SPW_FK_DTYPE, 0, 0, 0, 0, NULL},
    F_END};
static const struct spw_op_field to_tensor_fields[] = {{"dtype", SPW_FK_DTYPE, 0, 0, 0, 0, NULL}, F_END};
#define MAX_RATE 1000000        /* Hz, as ops/wav.h */
#define MAX_SAMPLES 0x7fffffff
#define MAX_MASK 1000000
static const struct spw_op_field decode_wav_fields[] = {{"mono", SPW_FK_BOOL, OFF(mono), 0, 0, 0, NULL}, F_END};
static const struct spw_op_field resample_fields[] = {
    {"rate", SPW_FK_INT, OFF(rate), 1, MAX_RATE, SPW_F_REQ, NULL},
    {"lowpass_filter_width", SPW_FK_INT, OFF(lowpass_filter_width), 1, 64, 0, NULL},
    {"rolloff", SPW_FK_NUM, OFF(rolloff), 0, 1, SPW_F_LO_OPEN, NULL},
    F_END};
static const struct spw_op_field samples_fields[] = {
    {"samples", SPW_FK_INT, OFF(samples), 1, MAX_SAMPLES, SPW_F_REQ, NULL}, F_END};
static const struct spw_op_field pad_audio_fields[] = {
    {"samples", SPW_FK_INT, OFF(samples), 1, MAX_SAMPLES, SPW_F_REQ, NULL},
    {"trim", SPW_FK_BOOL, OFF(trim), 0, 0, 0, NULL}, F_END};
static const struct spw_op_field trim_frames_fields[] = {
    {"frames", SPW_FK_INT, OFF(frames), 1, MAX_SAMPLES, SPW_F_REQ, NULL}, F_END};
static const struct spw_op_field scale_shift_fields[] = {
    {"factor", SPW_FK_NUM, OFF(factor), -INF, INF, 0, NULL},
    {"offset", SPW_FK_NUM, OFF(offset), -INF, INF, 0, NULL}, F_END};
static const struct spw_op_field stft_fields[] = {
    {"n_fft", SPW_FK_INT, OFF(n_fft), 2, 65536, SPW_F_REQ, NULL},
    {"hop_length", SPW_FK_INT, OFF(hop_length), 1, 65536, 0, "n_fft / 4"},
    {"win_length", SPW_FK_INT, OFF(win_length), 1, 65536, 0, "n_fft"},
    {"window", SPW_FK_WINDOW, 0, 0, 0, 0, NULL},
    {"center", SPW_FK_BOOL, OFF(center), 0, 0, 0, NULL},
    {"power", SPW_FK_NUM, OFF(power), 1, 2, 0, NULL},
    F_END};
static const struct spw_op_field mel_fields[] = {
    {"sample_rate", SPW_FK_INT, OFF(sample_rate), 1, MAX_RATE, 0, NULL},
    {"n_mels", SPW_FK_INT, OFF(n_mels), 1, 4096, 0, NULL},
    {"f_min", SPW_FK_NUM, OFF(f_min), 0, MAX_RATE, 0, NULL},
    {"f_max", SPW_FK_OPT_NUM, OFF(f_max), 0, MAX_RATE, SPW_F_LO_OPEN, NULL},
    {"mel_scale", SPW_FK_MEL_SCALE, 0, 0, 0, 0, NULL},
    {"norm", SPW_FK_MEL_NORM, 0, 0, 0, 0, NULL},
    F_END};
static const struct spw_op_field log_fields[] = {{"eps", SPW_FK_NUM, OFF(eps), 0, 1, 0, NULL}, F_END};
static const struct spw_op_field db_fields[] = {
    {"stype", SPW_FK_STYPE, 0, 0, 0, 0, NULL},
    {"top_db", SPW_FK_OPT_NUM, OFF(top_db), 0, INF, SPW_F_LO_OPEN, NULL},
    F_END};
static const struct spw_op_field fbank_fields[] = {
    {"num_mel_bins", SPW_FK_INT, OFF(n_mels), 4, 4096, 0, NULL},
    {"frame_length", SPW_FK_NUM, OFF(frame_length), 0, 10000, SPW_F_LO_OPEN, NULL},
    {"frame_shift", SPW_FK_NUM, OFF(frame_shift), 0, 10000, SPW_F_LO_OPEN, NULL},
    {"sample_frequency", SPW_FK_NUM, OFF(sample_frequency), 0, MAX_RATE, SPW_F_LO_OPEN, NULL},
    {"dither", SPW_FK_NUM, OFF(dither), 0, INF, 0, NULL},
    {"preemphasis_coefficient", SPW_FK_NUM, OFF(preemphasis_coefficient), 0, 1, 0, NULL},
    {"window_type", SPW_FK_KALDI_WINDOW, 0, 0, 0, 0, NULL},
    {"remove_dc_offset", SPW_FK_BOOL, OFF(remove_dc_offset), 0, 0, 0, NULL},
    {"energy_floor", SPW_FK_NUM, OFF(energy_floor), 0, INF, 0, NULL},
    {"raw_energy", SPW_FK_BOOL, OFF(raw_energy), 0, 0, 0, NULL},
    {"use_energy", SPW_FK_BOOL, OFF(use_energy), 0, 0, 0, NULL},
    {"htk_compat", SPW_FK_BOOL, OFF(htk_compat), 0, 0, 0, NULL},
    {"low_freq", SPW_FK_NUM, OFF(f_min), 0, MAX_RATE, 0, NULL},
    {"high_freq", SPW_FK_NUM, OFF(f_max), -MAX_RATE, MAX_RATE, 0, NULL},
    {"snip_edges", SPW_FK_BOOL, OFF(snip_edges), 0, 0, 0, NULL},
    F_END};
static const struct spw_op_field spec_augment_fields[] = {
    {"freq_mask_param", SPW_FK_INT, OFF(freq_mask_param), 0, MAX_MASK, 0, NULL},
    {"time_mask_param", SPW_FK_INT, OFF(time_mask_param), 0, MAX_MASK, 0, NULL},
    {"num_freq_masks", SPW_FK_INT, OFF(num_freq_masks), 0, 64, 0, NULL},
    {"num_time_masks", SPW_FK_INT, OFF(num_time_masks), 0, 64, 0, NULL},
    F_END};

static const struct spw_op_field python_fields[] = {
    {"function", SPW_FK_FUNCTION, 0, 0, 0, SPW_F_REQ, NULL},
    {"kwargs", SPW_FK_KWARGS, 0, 0, 0, 0, NULL},
    {"timeout_s", SPW_FK_NUM, OFF(timeout_s), 0, 86400, SPW_F_LO_OPEN, NULL},
    {"output_shape", SPW_FK_SHAPE, 0, 0, 0, 0, NULL},
    {"output_dtype", SPW_FK_ARRAY_DTYPE, 0, 0, 0, 0, NULL},
    F_END};

/* ---- checks that need more than one field --------------------------------------------------------- */

/* torchvision F.resize: max_size only with a single-int size, and strictly greater than it. */
static int resize_check(struct spw_op_spec *op, const char **field, char *msg, size_t msglen)
{
    *field = "max_size";
    if (op->max_size && op->size_w)
        return snprintf(msg, msglen, "only allowed when size is a single integer, not [%d, %d]", op->size_h,
                        op->size_w), 1;
    if (op->max_size && op->max_size <= op->size_h)
        return snprintf(msg, msglen, "%d must be greater than size %d", op->max_size, op->size_h), 1;
    return 0;
}

static int random_resize_check(struct spw_op_spec *op, const char **field, char *msg, size_t msglen)
{
    *field = "max_size";
    if (op->max_size && op->max_size < op->min_size[0])
        return snprintf(msg, msglen, "%d is below min_size %d", op->max_size, op->min_size[0]), 1;
    return 0;
}

/* What the kernels implement: the warps (rotate, affine, the policies' shears, translations and rotations)
 * sample nearest or bilinear. */
static int interp_check(struct spw_op_spec *op, const char **field, char *msg, size_t msglen)
{
    if (op->interpolation != SPW_INTERP_BICUBIC)
        return 0;
    *field = "interpolation";
    return snprintf(msg, msglen, "\"%s\" is not supported for \"%s\" (use nearest or bilinear)",
                    spw_interp_name(op->interpolation), spw_op_name(op->kind)), 1;
}

static int warp_check(struct spw_op_spec *op, const char **field, char *msg, size_t msglen)
{
    if (op->kind == SPW_OP_ROTATE && op->expand) {
        *field = "expand";
        return snprintf(msg, msglen, "true is not supported (the output keeps the input's size)"), 1;
    }
    return interp_check(op, field, msg, msglen);
}

/* torchvision's blur in get_params refuses a zero sigma beside a positive one; both zero is no blur. */
static int elastic_check(struct spw_op_spec *op, const char **field, char *msg, size_t msglen)
{
    if ((op->sigma[0] > 0) != (op->sigma[1] > 0)) {
        *field = "sigma";
        return snprintf(msg, msglen, "[%g, %g]: give both > 0, or both 0 (no blur)", op->sigma[0], op->sigma[1]), 1;
    }
    return interp_check(op, field, msg, msglen);
}

/* torchvision's Grayscale takes 1 or 3 (pipeline/channels.h: what 1 allows after it). */
static int grayscale_check(struct spw_op_spec *op, const char **field, char *msg, size_t msglen)
{
    if (op->num_output_channels == 1 || op->num_output_channels == 3)
        return 0;
    *field = "num_output_channels";
    return snprintf(msg, msglen, "%d: give 1 or 3", op->num_output_channels), 1;
}

/* random_choice's p: a weight per op, not all zero (random.choices). */
static int choice_check(struct spw_op_spec *op, const char **field, char *msg, size_t msglen)
{
    *field = "p";
    if (!op->weights)
        return 0;
    if (op->n_weights != op->n_ops)
        return snprintf(msg, msglen, "%d weights for %d ops: one per op", op->n_weights, op->n_ops), 1;
    double total = 0;
    for (int k = 0; k < op->n_weights; k++)
        total += op->weights[k];
    if (!(total > 0))
        return snprintf(msg, msglen, "the weights are all 0: at least one must be above 0"), 1;
    return 0;
}

/* torch.stft's defaults: hop n_fft / 4, window n_fft. */
static int stft_check(struct spw_op_spec *op, const char **field, char *msg, size_t msglen)
{
    if (!op->hop_length)
        op->hop_length = op->n_fft / 4 > 0 ? op->n_fft / 4 : 1;
    if (!op->win_length)
        op->win_length = op->n_fft;
    if (op->win_length > op->n_fft) {
        *field = "win_length";
        return snprintf(msg, msglen, "%d is more than n_fft %d", op->win_length, op->n_fft), 1;
    }
    if (op->power != 1 && op->power != 2) {
        *field = "power";
        return snprintf(msg, msglen, "%g is not 1 (magnitude) or 2 (power)", op->power), 1;
    }
    return 0;
}

static int mel_check(struct spw_op_spec *op, const char **field, char *msg, size_t msglen)
{
    const double nyquist = op->sample_rate / 2.0, f_max = op->f_max ? op->f_max : (double)(op->sample_rate / 2);
    if (f_max > nyquist) {
        *field = "f_max";
        return snprintf(msg, msglen, "%g is above the Nyquist frequency %g of sample_rate %d", f_max, nyquist,
                        op->sample_rate), 1;
    }
    if (op->f_min >= f_max) {
        *field = "f_min";
        return snprintf(msg, msglen, "%g must be below f_max %g", op->f_min, f_max), 1;
    }
    return 0;
}

/* ---- the table ------------------------------------------------------------------------------------ */

#define IMAGE_OP(nm, flds, run, gpu_run, ...) \
    {.name = nm, .cls = SPW_OPC_IMAGE, .group = SPW_GROUP_AUGMENT, .fields = flds, .cpu = run, .gpu = gpu_run, \
     __VA_ARGS__}
#define SPECTRAL(nm, flds, grp, run, ...) \
    {.name = nm, .cls = SPW_OPC_SPECTRAL, .group = grp, .size = SPW_SIZE_VARIES, .fields = flds, .cpu = run, \
     __VA_ARGS__}
#define BILINEAR_AA .interpolation = SPW_INTERP_BILINEAR, .antialias = true

static const struct spw_op_def op_defs[SPW_OP_COUNT] = {
    [SPW_OP_DECODE_JPEG] = {.name = "decode_jpeg",
                            .doc = "Decode a JPEG to RGB uint8 HWC; a crop or resize right after it is fused "
                                   "into the decode.",
                            .args = "", .cls = SPW_OPC_DECODE_IMAGE, .group = SPW_GROUP_DECODE,
                            .size = SPW_SIZE_DECODED, .fields = decode_image_fields,
                            .decode = spw_jpeg_group_decode},
    /* JPEG, PNG or WebP by content; the same group run (JPEG keeps the region-of-interest path) */
    [SPW_OP_DECODE_IMAGE] = {.name = "decode_image",
                             .doc = "Decode a JPEG, PNG or WebP, chosen by content, to RGB uint8 HWC.",
                             .args = "", .cls = SPW_OPC_DECODE_IMAGE, .group = SPW_GROUP_DECODE,
                             .size = SPW_SIZE_DECODED, .fields = decode_image_fields,
                             .decode = spw_jpeg_group_decode},
    [SPW_OP_RESIZE] = IMAGE_OP("resize", resize_fields, spw_image_op_resize, NULL, .fuse = SPW_FUSE_RESIZE,
                               .targets = SPW_TARGET_GEOMETRIC,
                               .size = SPW_SIZE_RESIZE, .defaults = {BILINEAR_AA}, .check = resize_check,
                               .doc = "Resize to size: an int matches the smaller edge (torchvision "
                                      "F.resize), [h, w] is exact.",
                               .args = "size"),
    [SPW_OP_CENTER_CROP] = IMAGE_OP("center_crop", center_crop_fields, spw_image_op_center_crop,
                                    spw_gpu_op_center_crop, .targets = SPW_TARGET_GEOMETRIC,
                                    .fuse = SPW_FUSE_CROP | SPW_FUSE_WINDOW, .size = SPW_SIZE_SIZE_FIELD,
                                    .doc = "Crop the centre to size, padding with 0 where the image is smaller.",
                                    .args = "size"),
    [SPW_OP_CROP] = IMAGE_OP("crop", crop_fields, spw_image_op_crop, spw_gpu_op_crop, .fuse = SPW_FUSE_CROP,
                             .targets = SPW_TARGET_GEOMETRIC, .size = SPW_SIZE_BOX,
                             .doc = "Crop height x width at (top, left); outside the image is padded with 0 "
                                    "(F.crop).",
                             .args = "top left height width"),
    [SPW_OP_RANDOM_CROP] = IMAGE_OP("random_crop", random_crop_fields, spw_image_op_random_crop,
                                    spw_gpu_op_random_crop, .targets = SPW_TARGET_GEOMETRIC,
                                    .size = SPW_SIZE_SIZE_FIELD,
                                    .doc = "Crop a random window of size, after optional padding (RandomCrop).",
                                    .args = "size"),
    [SPW_OP_PAD] = IMAGE_OP("pad", pad_fields, spw_image_op_pad, NULL, .size = SPW_SIZE_PADDED,
                            .targets = SPW_TARGET_GEOMETRIC,
                            .doc = "Pad the sides by padding with fill, or the edge, reflect or symmetric mode "
                                   "(Pad).",
                            .args = "padding fill padding_mode"),
    [SPW_OP_RANDOM_RESIZED_CROP] = IMAGE_OP("random_resized_crop", rrc_fields, spw_image_op_random_resized_crop,
                                            NULL, .fuse = SPW_FUSE_CROP, .size = SPW_SIZE_SIZE_FIELD,
                                            .targets = SPW_TARGET_GEOMETRIC,
                                            .defaults = {.scale = {0.08, 1.0}, .ratio = {3.0 / 4.0, 4.0 / 3.0},
                                                         BILINEAR_AA},
                                            .doc = "Crop a random area and aspect ratio and resize it to size "
                                                   "(RandomResizedCrop).",
                                            .args = "size"),
    [SPW_OP_HORIZONTAL_FLIP] = IMAGE_OP("horizontal_flip", no_fields, spw_image_op_flip, spw_gpu_op_flip,
                                        .targets = SPW_TARGET_GEOMETRIC, .fuse = SPW_FUSE_FLIP,
                                        .doc = "Mirror left-right.",
                                        .args = ""),
    [SPW_OP_VERTICAL_FLIP] = IMAGE_OP("vertical_flip", no_fields, spw_image_op_flip, spw_gpu_op_flip,
                                      .targets = SPW_TARGET_GEOMETRIC, .fuse = SPW_FUSE_FLIP,
                                      .doc = "Mirror top-bottom.",
                                      .args = ""),
    [SPW_OP_RANDOM_HORIZONTAL_FLIP] = IMAGE_OP("random_horizontal_flip", p_fields, spw_image_op_flip, spw_gpu_op_flip,
                                               .targets = SPW_TARGET_GEOMETRIC,
                                               .fuse = SPW_FUSE_FLIP, .defaults = {.p = 0.5},
                                               .doc = "Mirror left-right with probability p.",
                                               .args = "p"),
    [SPW_OP_RANDOM_VERTICAL_FLIP] = IMAGE_OP("random_vertical_flip", p_fields, spw_image_op_flip, spw_gpu_op_flip,
                                             .targets = SPW_TARGET_GEOMETRIC,
                                             .fuse = SPW_FUSE_FLIP, .defaults = {.p = 0.5},
                                             .doc = "Mirror top-bottom with probability p.",
                                             .args = "p"),
    [SPW_OP_ROTATE] = IMAGE_OP("rotate", rotate_fields, spw_augment_rotate, spw_gpu_op_rotate,
                               .targets = SPW_TARGET_GEOMETRIC,
                               .defaults = {.interpolation = SPW_INTERP_NEAREST}, .check = warp_check,
                               .doc = "Rotate by angle degrees counter-clockwise about the centre (F.rotate).",
                               .args = "angle"),
    [SPW_OP_AFFINE] = IMAGE_OP("affine", affine_fields, spw_augment_affine, spw_gpu_op_affine,
                               .targets = SPW_TARGET_GEOMETRIC,
                               .defaults = {.interpolation = SPW_INTERP_NEAREST, .affine_scale = 1.0},
                               .check = warp_check,
                               .doc = "Rotate, translate, scale and shear about the centre (F.affine).",
                               .args = "angle"),
    [SPW_OP_ADJUST_BRIGHTNESS] = IMAGE_OP("adjust_brightness", factor_fields, spw_augment_brightness,
                                          spw_gpu_op_brightness,
                                          .doc = "Multiply by factor (F.adjust_brightness).",
                                          .args = "factor"),
    [SPW_OP_ADJUST_CONTRAST] = IMAGE_OP("adjust_contrast", factor_fields, spw_augment_contrast, spw_gpu_op_contrast,
                                        .doc = "Blend with the mean grey by factor (F.adjust_contrast).",
                                        .args = "factor"),
    [SPW_OP_ADJUST_SATURATION] = IMAGE_OP("adjust_saturation", factor_fields, spw_augment_saturation,
                                          spw_gpu_op_saturation,
                                          .doc = "Blend with the greyscale image by factor (F.adjust_saturation).",
                                          .args = "factor"),
    [SPW_OP_ADJUST_HUE] = IMAGE_OP("adjust_hue", hue_fields, spw_augment_hue, spw_gpu_op_hue,
                                   .doc = "Shift the hue by factor of a turn (F.adjust_hue).",
                                   .args = "factor"),
    [SPW_OP_ADJUST_SHARPNESS] = IMAGE_OP("adjust_sharpness", factor_fields, spw_augment_sharpness,
                                         spw_gpu_op_sharpness,
                                         .doc = "Blend with a smoothed image by factor (F.adjust_sharpness).",
                                         .args = "factor"),
    [SPW_OP_POSTERIZE] = IMAGE_OP("posterize", posterize_fields, spw_augment_posterize, spw_gpu_op_posterize,
                                  .doc = "Keep the top bits of each channel (F.posterize).",
                                  .args = "bits"),
    [SPW_OP_SOLARIZE] = IMAGE_OP("solarize", solarize_fields, spw_augment_solarize, spw_gpu_op_solarize,
                                 .doc = "Invert every value at or above threshold (F.solarize).",
                                 .args = "threshold"),
    [SPW_OP_EQUALIZE] = IMAGE_OP("equalize", no_fields, spw_augment_equalize, spw_gpu_op_equalize,
                                 .doc = "Equalize each channel's histogram (F.equalize).",
                                 .args = ""),
    [SPW_OP_AUTOCONTRAST] = IMAGE_OP("autocontrast", no_fields, spw_augment_autocontrast, spw_gpu_op_autocontrast,
                                     .doc = "Stretch each channel to the full range (F.autocontrast).",
                                     .args = ""),
    [SPW_OP_INVERT] = IMAGE_OP("invert", no_fields, spw_augment_invert, spw_gpu_op_invert,
                               .doc = "Invert every value (F.invert).",
                               .args = ""),
    [SPW_OP_GRAYSCALE] = IMAGE_OP("grayscale", grayscale_fields, spw_augment_grayscale, spw_gpu_op_grayscale,
                                  .defaults = {.num_output_channels = 1}, .check = grayscale_check,
                                  .doc = "Grey (PIL's convert('L')) in num_output_channels channels (Grayscale).",
                                  .args = "num_output_channels"),
    [SPW_OP_RANDOM_GRAYSCALE] = IMAGE_OP("random_grayscale", p_fields, spw_augment_random, spw_gpu_op_random,
                                         .gated = SPW_OP_GRAYSCALE, .defaults = {.p = 0.1, .num_output_channels = 3},
                                         .doc = "Grey in all three channels with probability p (RandomGrayscale).",
                                         .args = "p"),
    [SPW_OP_RANDOM_POSTERIZE] = IMAGE_OP("random_posterize", random_posterize_fields, spw_augment_random,
                                         spw_gpu_op_random,
                                         .gated = SPW_OP_POSTERIZE, .defaults = {.p = 0.5},
                                         .doc = "posterize with probability p (RandomPosterize).",
                                         .args = "bits p"),
    [SPW_OP_RANDOM_SOLARIZE] = IMAGE_OP("random_solarize", random_solarize_fields, spw_augment_random,
                                        spw_gpu_op_random,
                                        .gated = SPW_OP_SOLARIZE, .defaults = {.p = 0.5},
                                        .doc = "solarize with probability p (RandomSolarize).",
                                        .args = "threshold p"),
    [SPW_OP_RANDOM_EQUALIZE] = IMAGE_OP("random_equalize", p_fields, spw_augment_random, spw_gpu_op_random,
                                        .gated = SPW_OP_EQUALIZE, .defaults = {.p = 0.5},
                                        .doc = "equalize with probability p (RandomEqualize).",
                                        .args = "p"),
    [SPW_OP_RANDOM_AUTOCONTRAST] = IMAGE_OP("random_autocontrast", p_fields, spw_augment_random, spw_gpu_op_random,
                                            .gated = SPW_OP_AUTOCONTRAST, .defaults = {.p = 0.5},
                                            .doc = "autocontrast with probability p (RandomAutocontrast).",
                                            .args = "p"),
    [SPW_OP_RANDOM_INVERT] = IMAGE_OP("random_invert", p_fields, spw_augment_random, spw_gpu_op_random,
                                      .gated = SPW_OP_INVERT, .defaults = {.p = 0.5},
                                      .doc = "invert with probability p (RandomInvert).",
                                      .args = "p"),
    [SPW_OP_RANDOM_ADJUST_SHARPNESS] = IMAGE_OP("random_adjust_sharpness", random_sharpness_fields,
                                                spw_augment_random, spw_gpu_op_random,
                                                .gated = SPW_OP_ADJUST_SHARPNESS, .defaults = {.p = 0.5},
                                                .doc = "adjust_sharpness by sharpness_factor with probability p "
                                                       "(RandomAdjustSharpness).",
                                                .args = "sharpness_factor p"),
    [SPW_OP_RANDOM_APPLY] = IMAGE_OP("random_apply", random_apply_fields, spw_combinator_run, spw_gpu_op_combinator,
                                     .defaults = {.p = 0.5},
                                     .doc = "Its ops in order with probability p, else none (RandomApply).",
                                     .args = "ops p"),
    [SPW_OP_RANDOM_CHOICE] = IMAGE_OP("random_choice", random_choice_fields, spw_combinator_run, spw_gpu_op_combinator,
                                      .check = choice_check,
                                      .doc = "One of its ops, chosen with the weights p (default: equally) "
                                             "(RandomChoice).",
                                      .args = "ops p"),
    [SPW_OP_RANDOM_ORDER] = IMAGE_OP("random_order", random_order_fields, spw_combinator_run, spw_gpu_op_combinator,
                                     .doc = "All its ops, in a random order (RandomOrder).",
                                     .args = "ops"),
    [SPW_OP_GAUSSIAN_BLUR] = IMAGE_OP("gaussian_blur", blur_fields, spw_augment_gaussian_blur, NULL,
                                      .defaults = {.sigma = {0.1, 2.0}},
                                      .doc = "Blur with a kernel_size Gaussian, sigma drawn from [min, max] per "
                                             "sample (GaussianBlur).",
                                      .args = "kernel_size sigma"),
    [SPW_OP_PIL_GAUSSIAN_BLUR] = IMAGE_OP("pil_gaussian_blur", pil_blur_fields, spw_augment_pil_gaussian_blur, NULL,
                                          .defaults = {.sigma = {0.1, 2.0}},
                                          .doc = "Pillow's ImageFilter.GaussianBlur(radius), radius drawn from "
                                                 "[min, max] per sample (DINO's and DeiT III's GaussianBlur).",
                                          .args = "radius"),
    [SPW_OP_RANDOM_PERSPECTIVE] = IMAGE_OP("random_perspective", perspective_fields, spw_augment_random_perspective,
                                           NULL, .targets = SPW_TARGET_GEOMETRIC, .check = interp_check,
                                           .defaults = {.distortion_scale = 0.5, .p = 0.5,
                                                        .interpolation = SPW_INTERP_BILINEAR},
                                           .doc = "With probability p, a random perspective warp of the corners "
                                                  "by up to distortion_scale (RandomPerspective).",
                                           .args = "distortion_scale p interpolation"),
    [SPW_OP_COLOR_JITTER] = IMAGE_OP("color_jitter", jitter_fields, spw_augment_color_jitter,
                                     spw_gpu_op_color_jitter,
                                     .doc = "Random brightness, contrast, saturation and hue, in a random "
                                            "order (ColorJitter).",
                                     .args = "brightness contrast saturation hue"),
    [SPW_OP_RAND_AUGMENT] = IMAGE_OP("rand_augment", rand_augment_fields, spw_augment_rand, spw_gpu_op_rand_augment,
                                     .targets = SPW_TARGET_REFUSED,
                                     .defaults = {.num_ops = 2, .magnitude = 9, .num_magnitude_bins = 31,
                                                  .interpolation = SPW_INTERP_NEAREST},
                                     .check = interp_check,
                                     .doc = "num_ops random ops at the given magnitude (RandAugment).",
                                     .args = "num_ops magnitude"),
    [SPW_OP_AUTO_AUGMENT] = IMAGE_OP("auto_augment", auto_augment_fields, spw_augment_auto, spw_gpu_op_auto_augment,
                                     .targets = SPW_TARGET_REFUSED,
                                     .defaults = {.policy = SPW_AA_IMAGENET, .interpolation = SPW_INTERP_NEAREST},
                                     .check = interp_check,
                                     .doc = "A random sub-policy of the ImageNet policy (AutoAugment).",
                                     .args = "policy"),
    [SPW_OP_AUG_MIX] = IMAGE_OP("aug_mix", augmix_fields, spw_augment_aug_mix, NULL, .targets = SPW_TARGET_REFUSED,
                                .defaults = {.severity = 3, .mixture_width = 3, .chain_depth = -1, .alpha = 1.0,
                                             .all_ops = true, .interpolation = SPW_INTERP_BILINEAR},
                                .check = interp_check,
                                .doc = "Chains of random ops mixed with the image by Dirichlet weights, on "
                                       "torchvision's tensor path (AugMix).",
                                .args = "severity mixture_width chain_depth alpha"),
    [SPW_OP_ELASTIC_TRANSFORM] = IMAGE_OP("elastic_transform", elastic_fields, spw_augment_elastic, NULL,
                                          .targets = SPW_TARGET_REFUSED,
                                          .defaults = {.elastic_alpha = {50.0, 50.0}, .sigma = {5.0, 5.0},
                                                       .interpolation = SPW_INTERP_BILINEAR},
                                          .check = elastic_check,
                                          .doc = "Displace every pixel by smoothed random offsets, on torchvision's "
                                                 "tensor path (ElasticTransform).",
                                          .args = "alpha sigma interpolation fill"),
    [SPW_OP_RANDOM_RESIZE] = IMAGE_OP("random_resize", random_resize_fields, spw_image_op_random_resize, NULL,
                                      .targets = SPW_TARGET_GEOMETRIC, .size = SPW_SIZE_DECODED,
                                      .defaults = {BILINEAR_AA}, .check = random_resize_check,
                                      .doc = "Resize the smaller edge to a size drawn uniformly from [min_size, "
                                             "max_size] (the segmentation references' RandomResize).",
                                      .args = "min_size max_size"),
    [SPW_OP_RANDOM_SHORTEST_SIZE] = IMAGE_OP("random_shortest_size", shortest_size_fields,
                                             spw_image_op_random_resize, NULL, .targets = SPW_TARGET_GEOMETRIC,
                                             .size = SPW_SIZE_DECODED, .defaults = {BILINEAR_AA},
                                             .doc = "Resize the smaller edge to one of min_size at random, the "
                                                    "longer one to at most max_size (the detection references' "
                                                    "RandomShortestSize).",
                                             .args = "min_size max_size"),
    [SPW_OP_PAD_IF_SMALLER] = IMAGE_OP("pad_if_smaller", pad_if_smaller_fields, spw_image_op_pad_if_smaller, NULL,
                                       .targets = SPW_TARGET_GEOMETRIC, .size = SPW_SIZE_DECODED,
                                       .doc = "Pad on the right and at the bottom with fill (masks: ignore_index) "
                                              "up to size where the image is smaller (the segmentation "
                                              "references' pad_if_smaller).",
                                       .args = "size fill"),
    [SPW_OP_TRIVIAL_AUGMENT_WIDE] = IMAGE_OP("trivial_augment_wide", trivial_fields, spw_augment_trivial,
                                             spw_gpu_op_trivial_augment, .targets = SPW_TARGET_REFUSED,
                                             .defaults = {.num_magnitude_bins = 31,
                                                          .interpolation = SPW_INTERP_NEAREST},
                                             .check = interp_check,
                                             .doc = "One random op at a random magnitude (TrivialAugmentWide).",
                                             .args = "num_magnitude_bins"),
    [SPW_OP_RANDOM_ERASING] = {.name = "random_erasing",
                               .doc = "Erase a random rectangle of a float tensor with probability p "
                                      "(RandomErasing).",
                               .args = "p", .cls = SPW_OPC_TENSOR, .group = SPW_GROUP_TENSOR,
                               .fields = erasing_fields, .cpu = spw_image_op_random_erasing,
                               .gpu = spw_gpu_op_random_erasing,
                               .defaults = {.p = 0.5, .scale = {0.02, 0.33}, .ratio = {0.3, 3.3}}},
    [SPW_OP_NORMALIZE] = {.name = "normalize",
                          .doc = "To a CHW float tensor in [0, 1], then (x - mean) / std per channel "
                                 "(ToTensor + Normalize).",
                          .args = "mean std", .cls = SPW_OPC_TO_TENSOR, .group = SPW_GROUP_TENSOR,
                          .fuse = SPW_FUSE_TENSOR_STEP, .size = SPW_SIZE_TO_TENSOR, .fields = normalize_fields,
                          .cpu = spw_image_op_to_tensor, .defaults = {.dtype = SPW_DTYPE_F32}},
    [SPW_OP_TO_TENSOR] = {.name = "to_tensor",
                          .doc = "To a CHW float tensor in [0, 1] (ToTensor).",
                          .args = "", .cls = SPW_OPC_TO_TENSOR, .group = SPW_GROUP_TENSOR,
                          .fuse = SPW_FUSE_TENSOR_STEP, .size = SPW_SIZE_TO_TENSOR, .fields = to_tensor_fields,
                          .cpu = spw_image_op_to_tensor,
                          .defaults = {.dtype = SPW_DTYPE_F32, .mean = {0, 0, 0}, .std = {1, 1, 1}}},
    [SPW_OP_DECODE_WAV] = {.name = "decode_wav",
                           .doc = "Decode a WAV file to a float32 waveform.",
                           .args = "", .cls = SPW_OPC_DECODE_AUDIO, .group = SPW_GROUP_DECODE,
                           .size = SPW_SIZE_VARIES, .fields = decode_wav_fields, .decode = spw_audio_op_decode,
                           .defaults = {.mono = true}},
    /* WAV, FLAC, MP3, Ogg Vorbis or Opus by content (ops/audio_decode); the same output as decode_wav */
    [SPW_OP_DECODE_AUDIO] = {.name = "decode_audio",
                             .doc = "Decode WAV, FLAC, MP3, Ogg Vorbis or Opus, chosen by content, to a "
                                    "float32 waveform.",
                             .args = "", .cls = SPW_OPC_DECODE_AUDIO, .group = SPW_GROUP_DECODE,
                             .size = SPW_SIZE_VARIES, .fields = decode_wav_fields, .decode = spw_audio_op_decode,
                             .defaults = {.mono = true}},
    [SPW_OP_RESAMPLE] = {.name = "resample",
                         .doc = "Resample to rate Hz with a windowed sinc (torchaudio.functional.resample).",
                         .args = "rate", .cls = SPW_OPC_WAVE, .group = SPW_GROUP_AUGMENT,
                         .fuse = SPW_FUSE_WAVE, .size = SPW_SIZE_VARIES, .fields = resample_fields,
                         .cpu = spw_audio_op_resample, .defaults = {.lowpass_filter_width = 6, .rolloff = 0.99}},
    [SPW_OP_RANDOM_CROP_AUDIO] = {.name = "random_crop_audio",
                                  .doc = "A random window of that many samples; shorter clips pass unchanged.",
                                  .args = "samples", .cls = SPW_OPC_WAVE, .group = SPW_GROUP_AUGMENT,
                                  .fuse = SPW_FUSE_WAVE, .size = SPW_SIZE_VARIES, .fields = samples_fields,
                                  .cpu = spw_audio_op_crop_or_pad},
    [SPW_OP_PAD_AUDIO] = {.name = "pad_audio",
                          .doc = "Zeros at the end up to that many samples; longer clips pass unchanged, or with "
                                 "trim are cut to their first samples (whisper.pad_or_trim).",
                          .args = "samples", .cls = SPW_OPC_WAVE, .group = SPW_GROUP_AUGMENT,
                          .fuse = SPW_FUSE_WAVE, .size = SPW_SIZE_VARIES, .fields = pad_audio_fields,
                          .cpu = spw_audio_op_crop_or_pad},
    [SPW_OP_NORMALIZE_AUDIO] = {.name = "normalize_audio",
                                .doc = "Peak-normalize each channel: max |x| becomes 1 (librosa.util.normalize).",
                                .args = "", .cls = SPW_OPC_WAVE, .group = SPW_GROUP_AUGMENT,
                                .fuse = SPW_FUSE_WAVE, .size = SPW_SIZE_VARIES, .fields = no_fields,
                                .cpu = spw_audio_op_normalize},
    [SPW_OP_STFT] = {.name = "stft",
                     .doc = "Power or magnitude of the one-sided short-time Fourier transform (torch.stft).",
                     .args = "n_fft", .cls = SPW_OPC_STFT, .group = SPW_GROUP_TENSOR, .size = SPW_SIZE_VARIES,
                     .fields = stft_fields, .cpu = spw_audio_op_stft, .defaults = {.center = true, .power = 2},
                     .check = stft_check},
    [SPW_OP_FBANK] = {.name = "fbank",
                      .doc = "Kaldi filterbank features (torchaudio.compliance.kaldi.fbank), [num_mel_bins, "
                             "frames].",
                      .args = "", .cls = SPW_OPC_STFT, .group = SPW_GROUP_TENSOR, .size = SPW_SIZE_VARIES,
                      .fields = fbank_fields, .cpu = spw_audio_op_fbank,
                      .defaults = {.n_mels = 23, .frame_length = 25.0, .frame_shift = 10.0,
                                   .sample_frequency = 16000.0, .preemphasis_coefficient = 0.97,
                                   .window_type = SPW_KALDI_POVEY, .remove_dc_offset = true, .energy_floor = 1.0,
                                   .raw_energy = true, .snip_edges = true, .f_min = 20.0}},
    [SPW_OP_TRIM_FRAMES] = SPECTRAL("trim_frames", trim_frames_fields, SPW_GROUP_TENSOR, spw_audio_op_trim_frames,
                                    .doc = "Keep a spectrogram's first frames (Whisper's [..., :N]); shorter ones "
                                           "pass unchanged.",
                                    .args = "frames"),
    [SPW_OP_SCALE_SHIFT] = SPECTRAL("scale_shift", scale_shift_fields, SPW_GROUP_TENSOR, spw_audio_op_scale_shift,
                                    .defaults = {.factor = 1.0},
                                    .doc = "x * factor + offset on a spectrogram (Whisper's (log_spec + 4) / 4).",
                                    .args = "factor offset"),
    [SPW_OP_MEL] = SPECTRAL("mel", mel_fields, SPW_GROUP_TENSOR, spw_audio_op_mel,
                            .defaults = {.sample_rate = 16000, .n_mels = 128, .mel_scale = SPW_MEL_HTK,
                                         .mel_norm = SPW_MEL_NORM_NONE},
                            .check = mel_check,
                            .doc = "A mel filter bank over a spectrogram (torchaudio MelScale).",
                            .args = "n_mels sample_rate"),
    [SPW_OP_LOG] = SPECTRAL("log", log_fields, SPW_GROUP_TENSOR, spw_audio_op_log_scale, .defaults = {.eps = 1e-6},
                            .doc = "ln(x + eps).",
                            .args = "eps"),
    [SPW_OP_AMPLITUDE_TO_DB] = SPECTRAL("amplitude_to_db", db_fields, SPW_GROUP_TENSOR, spw_audio_op_log_scale,
                                        .defaults = {.stype = SPW_DB_POWER},
                                        .doc = "Decibels: 10 log10 (power) or 20 log10 (magnitude), floored "
                                               "top_db below the max (AmplitudeToDB).",
                                        .args = "stype top_db"),
    [SPW_OP_SPEC_AUGMENT] = SPECTRAL("spec_augment", spec_augment_fields, SPW_GROUP_AUGMENT,
                                     spw_audio_op_spec_augment,
                                     .defaults = {.num_freq_masks = 1, .num_time_masks = 1},
                                     .doc = "Frequency and time masks (SpecAugment: torchaudio "
                                            "FrequencyMasking, TimeMasking).",
                                     .args = ""),
    /* user code: its own group, so a cut may fall right before or after it */
    [SPW_OP_PYTHON] = {.name = "python",
                       .doc = "A module-level Python function of the element (a numpy array), run in a helper "
                              "process.",
                       .args = "function", .cls = SPW_OPC_USER, .group = SPW_GROUP_USER,
                       .size = SPW_SIZE_DECLARED, .fields = python_fields, .cpu = spw_python_op_run, .cpu_many = spw_python_op_run_many,
                       .stage = spw_python_op_stage,
                       .defaults = {.timeout_s = 60}},
    /* every C plugin op: its name, fields and checks are the plugin's (pipeline/plugin_ops.h) */
    [SPW_OP_PLUGIN] = {.name = "<plugin>", .generic = true,
                       .doc = "An op of a loaded C plugin, named \"<plugin>.<op>\".", .args = "",
                       .cls = SPW_OPC_USER, .group = SPW_GROUP_USER, .size = SPW_SIZE_VARIES, .fields = no_fields,
                       .cpu = spw_plugin_op_run},
    /* the spec's top-level "views", never written as an op: the parser appends it after the ops */
    [SPW_OP_VIEWS] = {.name = "views", .generic = true,
                      .doc = "Each view's ops on its own copy of the element, every repeat with its own draws "
                             "(multi-crop views: DINO, SimCLR).", .args = "",
                      .cls = SPW_OPC_USER, .group = SPW_GROUP_VIEWS, .size = SPW_SIZE_VARIES, .fields = no_fields,
                      .cpu = spw_views_run},
};

const struct spw_op_def *spw_op_def(enum spw_op_kind kind)
{
    return (unsigned)kind < SPW_OP_COUNT ? &op_defs[kind] : NULL;
}

const char *spw_op_name(enum spw_op_kind kind)
{
    return (unsigned)kind < SPW_OP_COUNT ? op_defs[kind].name : NULL;
}

int spw_op_find(const char *name)
{
    for (int k = 0; k < SPW_OP_COUNT; k++)
        if (!op_defs[k].generic && strcmp(op_defs[k].name, name) == 0)
            return k;
    return -1;
}
