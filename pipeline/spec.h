/* pipeline/spec.h - the pipeline spec: a source, element-wise ops, then batch. Parsed from JSON
 * (field names follow torchvision.transforms) and mirrored in proto/spillway.proto. Validation happens
 * here, before anything runs; errors name the op index, field and bad value. A parsed spec is immutable
 * and may be read from many threads. */
#ifndef SPW_PIPELINE_SPEC_H
#define SPW_PIPELINE_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/tensor.h"   /* enum spw_dtype */
#include "ops/image.h"    /* enum spw_interp */
#include "ops/mel.h"      /* enum spw_mel_scale, spw_mel_norm */

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
    SPW_OP_COUNT
};

enum spw_layout { SPW_LAYOUT_HWC = 0, SPW_LAYOUT_CHW = 1 };
/* wav_folder and audio_folder are one source (class folders or labels.tsv); which files it lists follows the
 * first op. Both names stay so that a spec reads back as written. */
enum spw_source_format {
    SPW_SOURCE_IMAGE_FOLDER = 0,
    SPW_SOURCE_TAR_SHARDS = 1,
    SPW_SOURCE_WAV_FOLDER = 2,
    SPW_SOURCE_AUDIO_FOLDER = 3
};
/* What a source's samples are: set by the parser from the first op (decode_jpeg: JPEG files; decode_wav: WAV
 * files; decode_image: JPEG, PNG or WebP files; decode_audio: WAV, FLAC, MP3, Ogg Vorbis or Opus files). */
enum spw_media { SPW_MEDIA_IMAGE = 0, SPW_MEDIA_AUDIO = 1, SPW_MEDIA_ANY_IMAGE = 2, SPW_MEDIA_ANY_AUDIO = 3 };
static inline bool spw_media_is_audio(enum spw_media m) { return m == SPW_MEDIA_AUDIO || m == SPW_MEDIA_ANY_AUDIO; }
enum spw_db_stype { SPW_DB_POWER = 0, SPW_DB_MAGNITUDE = 1 };
enum spw_on_error { SPW_ON_ERROR_SKIP = 0, SPW_ON_ERROR_FAIL = 1 };
enum spw_aa_policy { SPW_AA_IMAGENET = 0 };

/* One op with its parameters. Only the fields of `kind` are meaningful; the parser fills the others with
 * torchvision's defaults for that op. Sizes are (height, width) as in torchvision. */
struct spw_op_spec {
    enum spw_op_kind kind;
    /* resize / crops: size_w == 0 means a single int (resize: match the smaller edge to size_h;
     * crops: square size_h x size_h) */
    int size_h, size_w;
    int max_size;                       /* resize: 0 = none */
    enum spw_interp interpolation;      /* resize/rrc: bilinear; rotate/affine/policies: nearest */
    bool antialias;                     /* resize/rrc: true (PIL always antialiases) */
    double scale[2], ratio[2];          /* random_resized_crop, random_erasing */
    double p;                           /* random flips 0.5, random_erasing 0.5 */
    int top, left, height, width;       /* crop */
    int padding;                        /* random_crop: 0 */
    bool pad_if_needed;                 /* random_crop */
    double angle;                       /* rotate, affine (degrees) */
    double translate[2];                /* affine: pixels (x, y) */
    double affine_scale;                /* affine: 1.0 */
    double shear[2];                    /* affine: degrees (x, y) */
    bool expand;                        /* rotate */
    double fill[3];                     /* rotate/affine/policies/random_crop: 0 */
    double factor;                      /* adjust_*: brightness/contrast/saturation/sharpness >= 0,
                                           hue in [-0.5, 0.5] */
    int bits;                           /* posterize: [0, 8] */
    double threshold;                   /* solarize: [0, 255] */
    double brightness[2], contrast[2], saturation[2], hue[2]; /* color_jitter ranges (min, max);
                                           0,0 = off */
    int num_ops, magnitude, num_magnitude_bins;   /* rand_augment: 2, 9, 31 */
    enum spw_aa_policy policy;          /* auto_augment */
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
    int num_freq_masks, num_time_masks;         /* spec_augment: 1 each */
};

struct spw_source_spec {
    enum spw_source_format format;
    char *path;                         /* image_folder: a directory; tar_shards: shard paths, with glob
                                           characters and brace groups ("shard-{000..099}.tar") */
    char *label_key;                    /* tar_shards: the integer field of KEY.json that is the label;
                                           NULL (absent) when .json members carry no label */
    char *ca_file;                      /* tar_shards at https:// URLs: PEM CAs to verify the server against
                                           (NULL: the system's) */
    char *header_file;                  /* tar_shards at URLs: a file with one "Name: value" header sent
                                           with every request (a bearer token); NULL: none */
    bool shuffle;                       /* default true */
    uint64_t seed;                      /* default 0 */
    int64_t epochs;                     /* default 1; 0 = forever */
    enum spw_media media;               /* derived from the first op, not a JSON key */
};

struct spw_batch_spec {
    int size;                           /* >= 1 */
    bool drop_remainder;                /* default false */
    enum spw_layout layout;             /* layout of uint8 image outputs: HWC (default) or CHW */
    bool pad;                           /* audio (default true): elements may differ in their last dimension;
                                           a batch pads them to the longest and adds a lengths tensor */
};

struct spw_pipeline_spec {
    struct spw_source_spec source;
    int n_ops;
    struct spw_op_spec *ops;
    struct spw_batch_spec batch;
    enum spw_on_error on_error;         /* default skip */
    int64_t max_pixels;                 /* decode cap: width*height; default 89478485 (PIL's) */
    int64_t max_file_bytes;             /* per-sample encoded size cap; default 64 MiB */
    int64_t max_samples;                /* audio cap: samples (all channels) a decode, resample or pad may
                                           produce; default 2^26 */
};

/* Parse and validate JSON text. On success *out owns a new spec (free with spw_spec_free) and 0 is
 * returned; on failure returns SPW_ESPEC and writes a message naming the field and the bad value into
 * err (e.g. "ops[3].magnitude: 40 is outside [0, 30]"). */
int spw_spec_parse_json(const char *text, struct spw_pipeline_spec **out, char *err, size_t errlen);
/* Read a JSON file and parse it as above; I/O errors are reported in err as well. */
int spw_spec_load_file(const char *path, struct spw_pipeline_spec **out, char *err, size_t errlen);
/* Serialize to canonical JSON (all fields, defaults filled). Caller frees with free(). NULL on ENOMEM. */
char *spw_spec_to_json(const struct spw_pipeline_spec *spec);
void spw_spec_free(struct spw_pipeline_spec *spec);
/* "decode_jpeg", ... ; NULL if out of range (pipeline/op_registry.c). */
const char *spw_op_name(enum spw_op_kind kind);

/* Caps on what a peer controls: spec text size and op count (checked by the parser). */
#define SPW_SPEC_MAX_JSON_BYTES (1 << 20)
#define SPW_SPEC_MAX_OPS 256

/* JSON names of enum values ("bilinear", "float32", "HWC", "tar_shards", "skip", "imagenet"); NULL if out
 * of range. Dtype names come from lib/tensor.h's spw_dtype_name. */
const char *spw_interp_name(enum spw_interp v);
const char *spw_layout_name(enum spw_layout v);
const char *spw_source_format_name(enum spw_source_format v);
const char *spw_on_error_name(enum spw_on_error v);
const char *spw_aa_policy_name(enum spw_aa_policy v);
const char *spw_mel_scale_name(enum spw_mel_scale v);
const char *spw_mel_norm_name(enum spw_mel_norm v);          /* "none" (JSON null) or "slaney" */
const char *spw_db_stype_name(enum spw_db_stype v);

/* Internal (shared with pipeline/spec_proto.c so the proto path runs the one validator): the spec as a
 * jansson value. from_json_value validates a borrowed root exactly as spw_spec_parse_json does after
 * syntax; to_json_value returns a new reference to the canonical form (json_decref it), NULL on ENOMEM. */
struct json_t;
int spw_spec__from_json_value(struct json_t *root, struct spw_pipeline_spec **out, char *err, size_t errlen);
struct json_t *spw_spec__to_json_value(const struct spw_pipeline_spec *spec);

#endif
