/* pipeline/op_registry.h - the one table of ops. Each op is defined once, in op_registry.c: its JSON name,
 * its class (where it may stand), its fusion role, its fields with their ranges and torchvision's defaults,
 * its cross-field checks, what it does to an element's static size, and how it runs on the CPU and (where
 * it has kernels) the GPU. The spec parser, fusion, the element runner, the size estimate and the GPU
 * backend ask the table instead of keeping lists, so a new op is its enum value (spec.h), its row here and
 * its kernel. The table is constant: thread-safe. */
#ifndef SPW_PIPELINE_OP_REGISTRY_H
#define SPW_PIPELINE_OP_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/rng.h"
#include "pipeline/op_spec.h"

/* Where an op may stand. Images: decode first, image ops on uint8 HWC, then one of normalize/to_tensor (the
 * uint8 -> float tensor step), then tensor ops. Audio: decode_wav first, waveform ops, then stft (the
 * waveform -> spectrogram step), then spectrogram ops. */
enum spw_op_class {
    SPW_OPC_DECODE_IMAGE,
    SPW_OPC_IMAGE,
    SPW_OPC_TO_TENSOR,
    SPW_OPC_TENSOR,
    SPW_OPC_DECODE_AUDIO,       /* this and the classes after it are audio */
    SPW_OPC_WAVE,
    SPW_OPC_STFT,
    SPW_OPC_SPECTRAL,           /* the last audio class */
    SPW_OPC_USER,               /* user code: anywhere after the decode, on an image or a tensor */
};

/* The groups ops run in (fusion.h): a decode op heads a decode group; any other op outside a decode group
 * runs in an augment, a tensor or a user group (user code: a cut may fall right before or after it), and the
 * spec's views in a group of their own at the end. */
enum spw_group_kind {
    SPW_GROUP_DECODE = 0,
    SPW_GROUP_AUGMENT = 1,
    SPW_GROUP_TENSOR = 2,
    SPW_GROUP_USER = 3,
    SPW_GROUP_VIEWS = 4
};

/* How an op may join the decode group before it (flags). */
enum {
    SPW_FUSE_CROP = 1,          /* right after decode_jpeg: the decoder reads only the crop */
    SPW_FUSE_RESIZE = 2,        /* right after decode_jpeg: decoded at a DCT scale, resampled in one pass */
    SPW_FUSE_WINDOW = 4,        /* right after a fused resize: the resample writes only this window */
    SPW_FUSE_FLIP = 8,          /* after the geometry: the output rows are mirrored as they are written */
    SPW_FUSE_TENSOR_STEP = 16,  /* after the flips: rows go straight into the float tensor; ends the group */
    SPW_FUSE_WAVE = 32,         /* after decode_wav: any number of waveform ops */
};

/* What an op does to the element's size when the spec alone decides it (element_size.h). */
enum spw_size_effect {
    SPW_SIZE_KEEPS = 0,         /* flips, colour ops, policies, warps, erasing */
    SPW_SIZE_DECODED,           /* the image's own size: unknown */
    SPW_SIZE_SIZE_FIELD,        /* size_h x (size_w or size_h) */
    SPW_SIZE_RESIZE,            /* known only for a [h, w] size */
    SPW_SIZE_BOX,               /* height x width */
    SPW_SIZE_TO_TENSOR,         /* the size stays; the dtype becomes the op's */
    SPW_SIZE_VARIES,            /* audio: clip lengths vary */
    SPW_SIZE_DECLARED,          /* user code: its output_shape and output_dtype when both are declared */
    SPW_SIZE_PADDED,            /* pad: the image's size plus its padding */
};

/* What an image op does to a sample's masks (source.fields "as": "mask"). */
enum spw_target_effect {
    SPW_TARGET_KEEPS = 0,       /* photometric (and tensor) ops: masks as they are */
    SPW_TARGET_GEOMETRIC,       /* the same op, with its same draws, on each mask: nearest, fill = ignore_index */
    SPW_TARGET_REFUSED,         /* moves pixels in ways a mask cannot follow yet (policies, elastic, user code) */
};

/* A JSON field of an op: how to read it and where it goes in struct spw_op_spec. */
enum spw_field_kind {
    SPW_FK_SIZE,        /* int | [s] | [h, w] -> size_h, size_w (size_w 0 for the single-int form) */
    SPW_FK_MAX_SIZE,    /* null | int -> max_size (0 = none) */
    SPW_FK_INT,         /* int at off, [lo, hi] */
    SPW_FK_MAGNITUDE,   /* int, [0, num_magnitude_bins - 1]; listed after num_magnitude_bins */
    SPW_FK_NUM,         /* double at off, range lo/hi (SPW_F_LO_OPEN: lo excluded) */
    SPW_FK_BOOL,        /* bool at off */
    SPW_FK_INTERP,      /* "nearest" | "bilinear" | "bicubic" -> interpolation */
    SPW_FK_DTYPE,       /* "float32" | "float16" -> dtype */
    SPW_FK_POLICY,      /* "imagenet" -> policy */
    SPW_FK_RANGE,       /* [min, max], each in lo/hi, min <= max -> double[2] at off */
    SPW_FK_PAIR,        /* [x, y] -> double[2] at off */
    SPW_FK_SHEAR,       /* number s -> (s, 0); [s] -> (s, s); [x, y] (torchvision F.affine) */
    SPW_FK_FILL,        /* number | [v] | [r, g, b], each in [0, 255] -> fill */
    SPW_FK_OPT_FILL,    /* null | what SPW_FK_FILL takes -> fill, has_fill (null: false, fill 0) */
    SPW_FK_XY,          /* v | [v] | [x, y], each in lo/hi -> double[2] at off ([v, v]) */
    SPW_FK_JITTER,      /* ColorJitter._check_input; SPW_F_HUE selects hue's center and bound */
    SPW_FK_ERASE_VALUE, /* number | [v] | [r, g, b] | "random" */
    SPW_FK_TRIPLE,      /* number | [v] | 3 numbers, each in lo/hi -> double[3] at off (one: every channel) */
    SPW_FK_OPT_NUM,     /* null | double in lo/hi at off (0 = null: lo must exclude 0) */
    SPW_FK_WINDOW,      /* "hann" (the one window there is) */
    SPW_FK_MEL_SCALE,   /* "htk" | "slaney" -> mel_scale */
    SPW_FK_MEL_NORM,    /* null | "slaney" -> mel_norm */
    SPW_FK_STYPE,       /* "power" | "magnitude" -> stype */
    SPW_FK_FUNCTION,    /* "package.module:qualname" -> function (an importable module-level function) */
    SPW_FK_KWARGS,      /* a JSON object -> kwargs (its canonical text) */
    SPW_FK_SHAPE,       /* null | [d, ...]: 1 to 5 ints, each in [1, 2^31) -> out_shape, out_ndim (0: null) */
    SPW_FK_ARRAY_DTYPE, /* null | "uint8" | "float32" | "float16" | "int64" -> out_dtype, has_out_dtype */
    SPW_FK_OPS,         /* [op, ...]: 1 to SPW_OP_MAX_NESTED image ops that keep the size -> ops, n_ops */
    SPW_FK_WEIGHTS,     /* null | [w, ...], each >= 0 -> weights (checked against n_ops by the row) */
    SPW_FK_KSIZE,       /* k | [kx, ky]: odd, 1 to hi -> kernel_size ([k, k]) */
    SPW_FK_SIGMA,       /* s | [min, max]: each > 0 (lo open), min <= max -> sigma ([s, s]) */
    SPW_FK_PADDING,     /* p | [lr, tb] | [l, t, r, b], each in lo/hi -> padding (left, top, right, bottom) */
    SPW_FK_PAD_MODE,    /* "constant" | "edge" | "reflect" | "symmetric" -> padding_mode */
    SPW_FK_KALDI_WINDOW,/* "hamming" | "hanning" | "povey" | "rectangular" | "blackman" -> window_type */
    SPW_FK_SIZES,       /* s | [s, ...]: 1 to 16 ints, each in lo/hi -> min_size, n_min_size */
};

enum { SPW_F_REQ = 1, SPW_F_LO_OPEN = 2, SPW_F_HUE = 4 };

struct spw_op_field {
    const char *name;           /* NULL ends a list */
    enum spw_field_kind kind;
    size_t off;                 /* offsetof(struct spw_op_spec, ...) for the kinds that store at off */
    double lo, hi;
    unsigned flags;
    const char *derived;        /* a default made from other fields, as docs say it ("n_fft / 4"); NULL: none */
};

struct spw_element_ctx;
struct spw_element_dest;
struct spw_gpu_call;
struct spw_group;
struct spw_value;

/* One op on one element: what its CPU run gets. */
struct spw_op_call {
    const struct spw_element_ctx *ctx;
    const struct spw_op_spec *op;       /* &ctx->spec->ops[index] */
    int index;                          /* in the spec's ops (a combinator's ops: their combinator's) */
    uint32_t key;                       /* the rng's op key when not index (a combinator's ops; never 0) */
    uint64_t epoch;
    int64_t sample;
    struct spw_rng rng;                 /* keyed by (seed, epoch, sample, key or index): its draws */
    const struct spw_element_dest *dest; /* the pipeline's last write may go there; NULL otherwise */
    char *err;
    size_t errlen;
};

/* A run returns 0, SPW_OP_RAN_NEXT (it ran op index + 1 as well, e.g. stft with the mel after it), or an
 * error (SPW_EDECODE, SPW_ETOOBIG, SPW_EUNSUPPORTED, -ENOMEM) with a message in call->err. It replaces *v;
 * a decode starts from an empty *v and reports in *consumed how many ops of the group g it ran (the rest
 * run one by one). */
#define SPW_OP_RAN_NEXT 1
typedef int (*spw_op_run_fn)(struct spw_op_call *call, struct spw_value *v);
typedef int (*spw_op_decode_fn)(struct spw_op_call *call, const struct spw_group *g, const uint8_t *buf,
                                size_t len, struct spw_value *v, int *consumed);
/* Many elements at once (ops whose fixed cost per call is worth sharing: a Python helper's round trip):
 * calls[k] and *vs[k] as cpu's, each result in rcs[k] (its message in calls[k].err); the same results as
 * cpu on each element in turn. */
typedef void (*spw_op_many_fn)(struct spw_op_call *calls, struct spw_value *const *vs, int *rcs, int n);
/* The GPU run (pipeline/gpu_ops.h): queues on the device what the CPU run does to the element's image. */
typedef int (*spw_op_gpu_fn)(struct spw_gpu_call *call);

struct spw_op_def {
    const char *name;                   /* the JSON name */
    bool generic;                       /* a row for many ops named elsewhere (plugins): never found by name,
                                           not in the schema's list of built-in ops */
    const char *doc;                    /* what it does, one sentence (Python docstrings, spillctl ops) */
    const char *args;                   /* its positional arguments in Python, space-separated, in torchvision's
                                           (torchaudio's) order; "" for none */
    enum spw_op_class cls;
    unsigned fuse;                      /* SPW_FUSE_* */
    enum spw_group_kind group;          /* decode ops: SPW_GROUP_DECODE */
    enum spw_size_effect size;
    const struct spw_op_field *fields;  /* ends with a NULL name */
    struct spw_op_spec defaults;        /* torchvision's defaults of its fields; all else zero */
    /* Checks that need more than one field, and defaults derived from others; NULL if none. On failure
     * returns nonzero with the field's name in *field and the reason in msg. */
    int (*check)(struct spw_op_spec *op, const char **field, char *msg, size_t msglen);
    spw_op_decode_fn decode;            /* decode ops */
    spw_op_run_fn cpu;                  /* every other op */
    spw_op_many_fn cpu_many;            /* NULL, or cpu on many elements in one call (user groups only) */
    /* NULL, or where the op before it may write its input, in the calling thread's memory of the op's own
     * (the Python op's shared memory), so that cpu_many finds it there and need not copy it: asked by the
     * CPU backend when it makes elements for cpu_many. Valid until cpu_many on them returns. */
    const struct spw_element_dest *(*stage)(const struct spw_op_spec *op);
    spw_op_gpu_fn gpu;                  /* image ops with a GPU kernel; NULL: CPU only */
    enum spw_op_kind gated;             /* the random_<op> rows: the op they run with probability p (its
                                           fields in the same members); 0 (decode_jpeg) for the others */
    enum spw_target_effect targets;     /* what it does to masks */
};

/* The op's row; NULL when kind is out of range. */
const struct spw_op_def *spw_op_def(enum spw_op_kind kind);
/* The kind with that JSON name, or -1. */
int spw_op_find(const char *name);
/* True for the classes of audio pipelines. */
static inline bool spw_op_class_audio(enum spw_op_class cls)
{
    return cls >= SPW_OPC_DECODE_AUDIO && cls <= SPW_OPC_SPECTRAL;
}

#endif
