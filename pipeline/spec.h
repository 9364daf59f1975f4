/* pipeline/spec.h - the pipeline spec: a source, element-wise ops, then batch. Parsed from JSON
 * (field names follow torchvision.transforms) and mirrored in proto/spillway.proto. Validation happens
 * here, before anything runs; errors name the op index, field and bad value. A parsed spec is immutable
 * and may be read from many threads. */
#ifndef SPW_PIPELINE_SPEC_H
#define SPW_PIPELINE_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/op_spec.h"   /* the ops: enum spw_op_kind, struct spw_op_spec */

enum spw_layout { SPW_LAYOUT_HWC = 0, SPW_LAYOUT_CHW = 1 };
/* wav_folder and audio_folder are one source (class folders or labels.tsv); which files it lists follows the
 * first op. Both names stay so that a spec reads back as written. */
enum spw_source_format {
    SPW_SOURCE_IMAGE_FOLDER = 0,
    SPW_SOURCE_TAR_SHARDS = 1,
    SPW_SOURCE_WAV_FOLDER = 2,
    SPW_SOURCE_AUDIO_FOLDER = 3,
    SPW_SOURCE_COCO = 4                 /* images of a folder listed by a COCO instances_*.json, with their boxes */
};
/* What a source's samples are: set by the parser from the first op (decode_jpeg: JPEG files; decode_wav: WAV
 * files; decode_image: JPEG, PNG or WebP files; decode_audio: WAV, FLAC, MP3, Ogg Vorbis or Opus files). */
enum spw_media { SPW_MEDIA_IMAGE = 0, SPW_MEDIA_AUDIO = 1, SPW_MEDIA_ANY_IMAGE = 2, SPW_MEDIA_ANY_AUDIO = 3 };
static inline bool spw_media_is_audio(enum spw_media m) { return m == SPW_MEDIA_AUDIO || m == SPW_MEDIA_ANY_AUDIO; }
enum spw_on_error { SPW_ON_ERROR_SKIP = 0, SPW_ON_ERROR_FAIL = 1 };

/* A sample's extra member (source.fields), delivered beside its data in the batch part of that name. */
enum spw_sample_field_kind {
    SPW_SAMPLE_FIELD_TEXT = 0,                 /* UTF-8 text: a member's bytes, or a string field of a .json member */
    SPW_SAMPLE_FIELD_RAW = 1,                  /* a member's bytes as they are */
    SPW_SAMPLE_FIELD_MASK = 2,                 /* a PNG label map the size of the image, moved with it by every
                                                  geometric op (pipeline/op_registry.h spw_target_effect) */
    SPW_SAMPLE_FIELD_BOXES = 3                 /* boxes and their class ids from a .json member, moved (corners
                                                  mapped, clipped, the empty dropped) by every geometric op */
};
enum spw_box_format { SPW_BOX_XYXY = 0, SPW_BOX_XYWH = 1 };     /* [x0, y0, x1, y1] or COCO's [x, y, w, h] */
#define SPW_BOXES_MAX 4096              /* boxes in one sample */
#define SPW_SAMPLE_FIELDS_MAX 8                /* fields per source */
#define SPW_SAMPLE_FIELD_NAME_MAX 32           /* bytes of a field's name */
#define SPW_SAMPLE_FIELD_MAX_BYTES (1 << 20)   /* a text or raw field's bytes, checked before reading */

struct spw_sample_field_spec {
    char name[SPW_SAMPLE_FIELD_NAME_MAX + 1];  /* [A-Za-z_][A-Za-z0-9_]*, not a batch part's own name */
    enum spw_sample_field_kind kind;           /* JSON "as"; default text */
    char *from;                         /* tar_shards: the member's extension after the key ("txt", "json",
                                           "meta.json"), matched ignoring case; folders: the extension of the
                                           file in `path` */
    char *path;                         /* folders: the folder holding each sample's file under the same
                                           relative name, its extension `from` (VOC's SegmentationClass beside
                                           JPEGImages); NULL for tar_shards */
    char *key;                          /* from a .json member: the string field that is the text; NULL: the
                                           whole member */
    int ignore_index;                   /* masks: where geometric ops fill (padding, rotated-in corners); 255 */
    enum spw_box_format box_format;     /* boxes: how the member writes them (JSON "format"); xyxy */
    char *labels_key;                   /* boxes: the .json key of their class ids ("labels") */
    double min_size;                    /* boxes: after an op, narrower or lower than this is dropped; 0: only
                                           empty ones */
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
    char *annotations;                  /* coco: the instances_*.json listing the images of path and their
                                           boxes */
    bool no_labels;                     /* JSON "labels": false: samples have no class (any folder nesting;
                                           tar keys need only their media member); batches have no labels */
    int n_fields;
    struct spw_sample_field_spec fields[SPW_SAMPLE_FIELDS_MAX];   /* JSON "fields", in the object's order */
    bool shuffle;                       /* default true */
    uint64_t seed;                      /* default 0 */
    int64_t epochs;                     /* default 1; 0 = forever */
    enum spw_media media;               /* derived from the first op, not a JSON key */
};

/* MixUp / CutMix on whole batches, as torchvision's classification references (RandomMixup, RandomCutmix
 * under a RandomChoice): off while num_classes is 0. */
#define SPW_MIX_MAX_CLASSES 1000000

struct spw_mix_spec {
    int num_classes;                    /* labels become float32 [n, num_classes] (one-hot, then mixed) */
    double mixup_alpha, cutmix_alpha;   /* Beta(alpha, alpha) of each; 0: that one off (one must be on) */
    double p;                           /* the chance a batch is mixed (1.0) */
    double switch_prob;                 /* with both on: the chance of cutmix (0.5, RandomChoice's) */
};

struct spw_batch_spec {
    int size;                           /* >= 1 */
    bool drop_remainder;                /* default false */
    enum spw_layout layout;             /* layout of uint8 image outputs: HWC (default) or CHW */
    bool pad;                           /* audio (default true): elements may differ in their last dimension;
                                           a batch pads them to the longest and adds a lengths tensor */
    struct spw_mix_spec mix;
};

/* Multi-crop views (DINO, SimCLR): after the ops (the shared prefix, run once per sample), each view's ops run
 * `repeat` times on copies of the prefix's output, each time with its own draws; a batch carries one tensor
 * per view instance, in order, then the labels. */
#define SPW_VIEWS_MAX 16                /* views in a spec */
#define SPW_VIEWS_MAX_INSTANCES 32      /* view instances (repeats summed) per sample */

struct spw_view_spec {
    int repeat;                         /* 1 (default) to SPW_VIEWS_MAX_INSTANCES */
    struct spw_pipeline_spec *ops;      /* its ops as a pipeline of their own (no decode; the spec's seed and
                                           caps; no views, no source path): owned */
};

struct spw_pipeline_spec {
    struct spw_source_spec source;
    int n_ops;
    struct spw_op_spec *ops;            /* with views, the last is SPW_OP_VIEWS (not written in JSON "ops") */
    int n_views;                        /* 0: none */
    struct spw_view_spec *views;
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

/* Caps on what a peer controls: spec text size and op count (checked by the parser). */
#define SPW_SPEC_MAX_JSON_BYTES (1 << 20)
#define SPW_SPEC_MAX_OPS 256

/* JSON names of the spec's own enum values ("HWC", "tar_shards", "skip"); NULL if out of range. The ops'
 * enums are named in pipeline/op_spec.h. */
const char *spw_layout_name(enum spw_layout v);
const char *spw_sample_field_kind_name(enum spw_sample_field_kind v);
const char *spw_box_format_name(enum spw_box_format v);
const char *spw_source_format_name(enum spw_source_format v);
const char *spw_on_error_name(enum spw_on_error v);

/* Internal (shared with pipeline/spec_proto.c so the proto path runs the one validator): the spec as a
 * jansson value. from_json_value validates a borrowed root exactly as spw_spec_parse_json does after
 * syntax; to_json_value returns a new reference to the canonical form (json_decref it), NULL on ENOMEM. */
struct json_t;
int spw_spec__from_json_value(struct json_t *root, struct spw_pipeline_spec **out, char *err, size_t errlen);
struct json_t *spw_spec__to_json_value(const struct spw_pipeline_spec *spec);
/* One field of op as the canonical JSON writes it (a new reference; NULL on ENOMEM): the op schema's
 * defaults (pipeline/op_schema.c) are these of the registry's default op. */
struct spw_op_field;
struct json_t *spw_spec__op_field_json(const struct spw_op_field *f, const struct spw_op_spec *op);

#endif
