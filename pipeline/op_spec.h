/* pipeline/op_spec.h - one op of a pipeline spec as the parser leaves it: its kind and every parameter,
 * the ops' own enums and their JSON names. The types the op registry (op_registry.h) and the spec
 * (spec.h) share, so that neither needs the other's header for them. Constant data; any thread. */
#ifndef SPW_PIPELINE_OP_SPEC_H
#define SPW_PIPELINE_OP_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/tensor.h"   /* enum spw_dtype */
#include "ops/image.h"    /* enum spw_interp */
#include "ops/mel.h"      /* enum spw_mel_scale, spw_mel_norm */
#include "ops/fbank.h"    /* enum spw_kaldi_window */
#include "ops/pad.h"      /* enum spw_pad_mode */

struct spw_plugin_op_ref;

/* The ops, in wire order (append only); each one's name, fields and behaviour are its row in
 * pipeline/op_registry.c. */
enum spw_op_kind {
    SPW_OP_DECODE_JPEG,
    SPW_OP_RESIZE,
    SPW_OP_CENTER_CROP,
    SPW_OP_CROP,
    SPW_OP_RANDOM_CROP,
    SPW_OP_RANDOM_RESIZED_CROP,
    SPW_OP_HORIZONTAL_FLIP,
    SPW_OP_VERTICAL_FLIP,
    SPW_OP_RANDOM_HORIZONTAL_FLIP,
    SPW_OP_RANDOM_VERTICAL_FLIP,
    SPW_OP_ROTATE,
    SPW_OP_AFFINE,
    SPW_OP_ADJUST_BRIGHTNESS,
    SPW_OP_ADJUST_CONTRAST,
    SPW_OP_ADJUST_SATURATION,
    SPW_OP_ADJUST_HUE,
    SPW_OP_ADJUST_SHARPNESS,
    SPW_OP_POSTERIZE,
    SPW_OP_SOLARIZE,
    SPW_OP_EQUALIZE,
    SPW_OP_AUTOCONTRAST,
    SPW_OP_INVERT,
    SPW_OP_COLOR_JITTER,
    SPW_OP_RAND_AUGMENT,
    SPW_OP_AUTO_AUGMENT,
    SPW_OP_TRIVIAL_AUGMENT_WIDE,
    SPW_OP_RANDOM_ERASING,
    SPW_OP_NORMALIZE,
    SPW_OP_TO_TENSOR,
    SPW_OP_DECODE_WAV,
    SPW_OP_RESAMPLE,
    SPW_OP_RANDOM_CROP_AUDIO,
    SPW_OP_PAD_AUDIO,
    SPW_OP_NORMALIZE_AUDIO,
    SPW_OP_STFT,
    SPW_OP_MEL,
    SPW_OP_LOG,
    SPW_OP_AMPLITUDE_TO_DB,
    SPW_OP_SPEC_AUGMENT,
    SPW_OP_DECODE_IMAGE,
    SPW_OP_DECODE_AUDIO,
    SPW_OP_PYTHON,
    SPW_OP_PLUGIN,          /* any op of a loaded C plugin (pipeline/plugin_ops.h): named "<plugin>.<op>" */
    SPW_OP_GRAYSCALE,
    SPW_OP_RANDOM_GRAYSCALE,
    SPW_OP_RANDOM_POSTERIZE,
    SPW_OP_RANDOM_SOLARIZE,
    SPW_OP_RANDOM_EQUALIZE,
    SPW_OP_RANDOM_AUTOCONTRAST,
    SPW_OP_RANDOM_INVERT,
    SPW_OP_RANDOM_ADJUST_SHARPNESS,
    SPW_OP_RANDOM_APPLY,    /* the combinators: their own ops (below), run by pipeline/combinators.c */
    SPW_OP_RANDOM_CHOICE,
    SPW_OP_RANDOM_ORDER,
    SPW_OP_GAUSSIAN_BLUR,
    SPW_OP_PAD,
    SPW_OP_FBANK,
    SPW_OP_PIL_GAUSSIAN_BLUR,
    SPW_OP_TRIM_FRAMES,
    SPW_OP_SCALE_SHIFT,
    SPW_OP_RANDOM_PERSPECTIVE,
    SPW_OP_VIEWS,           /* the spec's "views" (pipeline/views.h): appended after its ops by the parser */
    SPW_OP_AUG_MIX,
    SPW_OP_ELASTIC_TRANSFORM,
    SPW_OP_RANDOM_RESIZE,           /* the references' segmentation RandomResize */
    SPW_OP_RANDOM_SHORTEST_SIZE,    /* the references' detection RandomShortestSize */
    SPW_OP_PAD_IF_SMALLER,          /* the references' segmentation pad_if_smaller */
    SPW_OP_COUNT
};

enum spw_db_stype { SPW_DB_POWER = 0, SPW_DB_MAGNITUDE = 1 };
enum spw_aa_policy { SPW_AA_IMAGENET = 0 };

/* One op with its parameters. Only the fields of `kind` are meaningful; the parser fills the others with
 * torchvision's defaults for that op. Sizes are (height, width) as in torchvision. */
struct spw_op_spec {
    enum spw_op_kind kind;
    /* resize / crops: size_w == 0 means a single int (resize: match the smaller edge to size_h;
     * crops: square size_h x size_h) */
    int size_h, size_w;
    int max_size;                       /* resize: 0 = none; random_resize: the largest smaller edge (0: min_size);
                                           random_shortest_size: the longer edge's cap */
    int min_size[16];                   /* random_resize: [0], the smallest smaller edge; random_shortest_size:
                                           the smaller edges drawn from, n_min_size of them */
    int n_min_size;
    enum spw_interp interpolation;      /* resize/rrc: bilinear; rotate/affine/policies: nearest */
    bool antialias;                     /* resize/rrc: true (PIL always antialiases) */
    double scale[2], ratio[2];          /* random_resized_crop, random_erasing */
    double p;                           /* random flips 0.5, random_erasing 0.5, random_grayscale 0.1,
                                           random_<colour op> 0.5: the chance the op runs */
    int top, left, height, width;       /* crop */
    int padding[4];                     /* random_crop (0), pad: left, top, right, bottom */
    enum spw_pad_mode padding_mode;     /* random_crop, pad: constant */
    bool pad_if_needed;                 /* random_crop */
    double angle;                       /* rotate, affine (degrees) */
    double translate[2];                /* affine: pixels (x, y) */
    double affine_scale;                /* affine: 1.0 */
    double shear[2];                    /* affine: degrees (x, y) */
    bool expand;                        /* rotate */
    double fill[3];                     /* rotate/affine/policies/random_crop: 0 */
    bool has_fill;                      /* aug_mix: fill given (false: JSON null, torchvision's None) */
    double factor;                      /* adjust_*: brightness/contrast/saturation/sharpness >= 0,
                                           hue in [-0.5, 0.5] */
    int bits;                           /* posterize: [0, 8] */
    int num_output_channels;            /* grayscale: 1 (torchvision's default) or 3 */
    int kernel_size[2];                 /* gaussian_blur: [kx, ky] (width, height as torchvision), odd */
    double sigma[2];                    /* gaussian_blur: drawn from [min, max] per sample; (0.1, 2.0);
                                           pil_gaussian_blur: its radius, the same way */
    double threshold;                   /* solarize: [0, 255] */
    double brightness[2], contrast[2], saturation[2], hue[2]; /* color_jitter ranges (min, max);
                                           0,0 = off */
    int num_ops, magnitude, num_magnitude_bins;   /* rand_augment: 2, 9, 31 */
    enum spw_aa_policy policy;          /* auto_augment */
    int severity, mixture_width, chain_depth;     /* aug_mix: 3, 3, -1 (1 to 3 per chain) */
    double alpha;                       /* aug_mix: 1.0 */
    double elastic_alpha[2];            /* elastic_transform: [50, 50] (x, y); its sigma in sigma */
    bool all_ops;                       /* aug_mix: true */
    bool erase_random_value;            /* random_erasing: value "random" (normal noise) */
    double erase_value[3];              /* random_erasing: constant value per channel (default 0) */
    double mean[3], std[3];             /* normalize */
    enum spw_dtype dtype;               /* normalize / to_tensor output: f32 (default) or f16 */
    bool exif_transpose;                /* decode_jpeg / decode_image: apply the EXIF Orientation (false) */
    /* audio (torchaudio's names and defaults) */
    bool mono;                          /* decode_wav / decode_audio: downmix to one channel (default true) */
    int rate;                           /* resample: the new rate (Hz) */
    int lowpass_filter_width;           /* resample: 6 */
    double rolloff;                     /* resample: 0.99 */
    int samples;                        /* random_crop_audio / pad_audio: the length (samples) */
    bool trim;                          /* pad_audio: longer clips are cut to their first `samples` */
    int frames;                         /* trim_frames: the frames kept */
    double offset;                      /* scale_shift: x * factor + offset */
    double distortion_scale;            /* random_perspective: 0.5 */
    int n_fft, hop_length, win_length;  /* stft: n_fft required; hop n_fft / 4, win n_fft (torch.stft) */
    bool center;                        /* stft: true (reflect padding) */
    double power;                       /* stft: 2 (power) or 1 (magnitude) */
    int sample_rate;                    /* mel: 16000; the audio must have this rate */
    int n_mels;                         /* mel: 128 */
    double f_min, f_max;                /* mel: 0 and 0 = sample_rate / 2 (JSON null) */
    enum spw_mel_scale mel_scale;       /* mel: htk */
    enum spw_mel_norm mel_norm;         /* mel: none (JSON null) */
    double eps;                         /* log: 1e-6 (log(x + eps)) */
    enum spw_db_stype stype;            /* amplitude_to_db: power (10 log10) or magnitude (20 log10) */
    double top_db;                      /* amplitude_to_db: 0 = none (JSON null) */
    int freq_mask_param, time_mask_param;       /* spec_augment: widths drawn from [0, param] */
    /* fbank (torchaudio.compliance.kaldi's names; num_mel_bins in n_mels, low/high_freq in f_min/f_max) */
    double frame_length, frame_shift, sample_frequency, dither, preemphasis_coefficient, energy_floor;
    enum spw_kaldi_window window_type;
    bool remove_dc_offset, raw_energy, use_energy, htk_compat, snip_edges;
    int num_freq_masks, num_time_masks;         /* spec_augment: 1 each */
    /* user code (pipeline/python_op.h) */
    char *function;                     /* python: "package.module:qualname" (owned by the spec) */
    char *kwargs;                       /* python: its keyword arguments, canonical JSON object text (owned) */
    double timeout_s;                   /* python: per element, then the helper is killed (60) */
    int64_t out_shape[5];               /* python: the declared output shape (out_ndim 0: not declared) */
    int out_ndim;
    bool has_out_dtype;                 /* python: whether out_dtype is declared */
    enum spw_dtype out_dtype;
    const struct spw_plugin_op_ref *plugin;     /* plugin: the loaded op (lives as long as the process) */
    double *params;                     /* plugin: its fields' values in its field order (owned) */
    /* combinators (random_apply, random_choice, random_order) */
    struct spw_op_spec *ops;            /* their ops, in order (owned, each with what it owns) */
    int n_ops;                          /* 1 to SPW_OP_MAX_NESTED */
    double *weights;                    /* random_choice's p: one weight per op (owned); NULL: all equal */
    int n_weights;
};

/* A combinator's ops: at most this many, nested at most SPW_OP_MAX_DEPTH deep (a top-level op is depth 1). */
#define SPW_OP_MAX_NESTED 16
#define SPW_OP_MAX_DEPTH 4

/* The largest python op kwargs (and plugin op fields) as JSON text, in bytes; a longer one is refused. */
#define SPW_OP_MAX_KWARGS_BYTES (64 << 10)

/* JSON names of the ops' enum values ("decode_jpeg", "bilinear", "imagenet", "htk", "power"); NULL if out of
 * range. Dtype names come from lib/tensor.h's spw_dtype_name. */
const char *spw_op_name(enum spw_op_kind kind);        /* pipeline/op_registry.c */
const char *spw_interp_name(enum spw_interp v);
const char *spw_aa_policy_name(enum spw_aa_policy v);
const char *spw_mel_scale_name(enum spw_mel_scale v);
const char *spw_mel_norm_name(enum spw_mel_norm v);          /* "none" (JSON null) or "slaney" */
const char *spw_db_stype_name(enum spw_db_stype v);
const char *spw_pad_mode_name(enum spw_pad_mode v);
const char *spw_kaldi_window_name(enum spw_kaldi_window v);

/* The same names as NULL-terminated lists indexed by value, for the parser (tensor dtypes: by spw_dtype
 * value, NULL where a dtype is not an op's output). */
extern const char *const spw_interp_names[], *const spw_op_dtype_names[], *const spw_array_dtype_names[],
    *const spw_aa_policy_names[],
    *const spw_window_names[], *const spw_mel_scale_names[], *const spw_mel_norm_names[], *const spw_db_stype_names[],
    *const spw_pad_mode_names[], *const spw_kaldi_window_names[];
/* How many names each list holds (without its NULL). */
extern const size_t spw_interp_names_n, spw_op_dtype_names_n, spw_array_dtype_names_n, spw_aa_policy_names_n,
    spw_window_names_n,
    spw_mel_scale_names_n, spw_mel_norm_names_n, spw_db_stype_names_n, spw_pad_mode_names_n, spw_kaldi_window_names_n;

#endif
