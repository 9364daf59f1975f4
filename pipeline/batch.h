/* pipeline/batch.h - a batch as the trainer gets it: named parts (data, labels, lengths, view instances)
 * with each element's key; how one is filled element by element (fixed shapes into one buffer, padded audio
 * rows) and built from its slot (skipped samples closed up, padding, views split, mixing). A batch and a fill
 * are used by one thread at a time; the buffer cache is thread-safe. */
#ifndef SPW_PIPELINE_BATCH_H
#define SPW_PIPELINE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/tensor.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"

#define SPW_BATCH_MAX_TENSORS (SPW_VIEWS_MAX_INSTANCES + 3 + 3 * SPW_SAMPLE_FIELDS_MAX)
#define SPW_BATCH_NAME_MAX 48

struct spw_fields;

struct spw_sample_key {
    int64_t epoch, sample;      /* sample = index in the source's manifest */
    const char *path;           /* owned by the source */
};

struct spw_batch {
    int64_t epoch, index;       /* index of the batch within its epoch */
    int n;                      /* elements in it (positions minus skipped samples) */
    int skipped;
    int n_tensors;
    /* Its parts, each [n, ...], in this order: "data" (with views, one tensor per view instance in its place,
     * "view0" .. "view<k-1>"), "labels" (int64, or float32 [n, classes] when mixed; none with source.labels
     * false), "lengths" (padded audio: int64 [n] valid lengths of the rows) or "shapes" (padded images: int64
     * [n, ndim], each element's own shape), then per source.fields entry NAME: "NAME" uint8 [n, longest]
     * zero-padded bytes and "NAME_lengths" int64 [n] (text, raw), "NAME" uint8 [n, H, W] (a mask), or "NAME"
     * float32 [n, most, 4] x0 y0 x1 y1, "NAME_labels" int64 [n, most] (-1 padded), "NAME_counts" (boxes) */
    struct spw_tensor tensors[SPW_BATCH_MAX_TENSORS];
    char names[SPW_BATCH_MAX_TENSORS][SPW_BATCH_NAME_MAX];
    int n_views;
    struct spw_sample_key *keys;    /* n, in delivery order */
    size_t data_capacity;           /* bytes allocated for tensors[0] (for recycling) */
    int device_type, device_id;     /* where tensors[0].data is, as a DLPack DLDevice: 1 (kDLCPU), host memory,
                                       or a device batch's (spw_executor_opts.device_batches) */
    uint64_t device_block;          /* a device batch's block (0: host memory); freed by the release */
};

/* The index of b's part called name, or -1 when it has none. */
int spw_batch_find(const struct spw_batch *b, const char *name);

/* How a fill takes its elements: one shape, or padded (the spec's batch.pad): audio rows differing in their
 * last dimension, or images differing in any (height and width). */
enum spw_fill_pad { SPW_FILL_FIXED = 0, SPW_FILL_PAD_LAST, SPW_FILL_PAD_ALL };
static inline enum spw_fill_pad spw_fill_pad_of(const struct spw_pipeline_spec *spec)
{
    return !spec->batch.pad ? SPW_FILL_FIXED : spw_media_is_audio(spec->source.media) ? SPW_FILL_PAD_LAST
                                                                                     : SPW_FILL_PAD_ALL;
}

/* A batch being filled. Fixed shapes: one [n, ...] buffer from the first element on (data, elem_bytes).
 * Padded: each element in its own buffer (rows, shapes) until spw_batch_build pads them to the largest;
 * data holds the first element's shape meanwhile. */
struct spw_batch_fill {
    struct spw_tensor data;
    size_t elem_bytes;              /* fixed: bytes per element; padded: the first element's */
    enum spw_fill_pad pad;
    int n_rows;
    uint8_t **rows;                 /* padded: [n_rows] element buffers */
    int64_t (*shapes)[SPW_TENSOR_MAX_DIMS];     /* padded: [n_rows] element shapes */
    int n_fields;                   /* slots of fields (n once the first is filled) */
    struct spw_fields **fields;     /* [n_fields]: each element's source.fields (pipeline/fields.h), owned */
};

/* The cap on padding (batch.pad): a padded batch may hold at most SPW_BATCH_PAD_FACTOR times the bytes of its
 * elements plus SPW_BATCH_PAD_SLACK, checked before it is allocated. Padding is bounded by nothing else: each
 * element is legal on its own, yet [3, 30000, 1] and [3, 1, 30000] float32 (90 KB each) pad to [2, 3, 30000,
 * 30000], 7.2 GB. Detection's batches (shortest side 480-800, longest at most 1333, both orientations) pad
 * to under 3x their elements, and mixes of small and large images to about n x the small ones' share, so 16x
 * leaves room for any sensible mix while refusing the pathological; the slack lets batches of small elements
 * (thumbnails, thin masks) pad freely, as 64 MiB is a fraction of what a training batch's buffers take. */
#define SPW_BATCH_PAD_FACTOR 16
#define SPW_BATCH_PAD_SLACK ((size_t)64 << 20)

/* Whether elements holding elem_bytes in all may be padded into a batch of dtype dt and shape (ndim
 * dimensions, [n, ...largest]): its bytes (overflow counts as past it) at most SPW_BATCH_PAD_FACTOR *
 * elem_bytes + SPW_BATCH_PAD_SLACK. Pure. Returns 0, or SPW_ETOOBIG with a message in err naming the padded
 * shape, both byte counts and the cap, and what to do instead. */
int spw_batch_pad_check(enum spw_dtype dt, int ndim, const int64_t *shape, size_t elem_bytes, char *err,
                        size_t errlen);

/* Build a batch from an assembled slot: n_pos positions with their manifest samples, ok[p] false for a
 * skipped one; takes the fill's data (reset on return) and closes the gaps of skipped positions. A padded
 * fill becomes [n, ...largest] data zero-padded at the end of each dimension, plus an int64 part: audio's
 * "lengths" [n], images' "shapes" [n, ndim] (their masks padded with ignore_index to the largest). Labels
 * and keys come from src; with the spec's batch.mix, the batch is mixed and its labels are float32 [n,
 * num_classes] (pipeline/mix.h); with views, the packed elements become one part per view instance
 * (pipeline/views.h). Padding past the cap (spw_batch_pad_check: images, audio rows and masks) is refused
 * before anything is allocated. Returns 0, or with a message in err naming the batch: SPW_ETOOBIG (padding
 * past the cap), -EINVAL (a batch mix cannot take, elements views cannot split, masks differing in size
 * without pad), -ENOSPC (too many parts) or -ENOMEM. */
int spw_batch_build(const struct spw_pipeline_spec *spec, const struct spw_source *src, int64_t epoch, int64_t index,
                    int n_pos, const int64_t *samples, const bool *ok, struct spw_batch_fill *f,
                    struct spw_batch **out, char *err, size_t errlen);
/* Where element idx of an n-element batch goes, given its dtype and shape: the first call allocates the
 * fill's data (spw_batch_buffer_size(n * element bytes) from take(ctx, bytes)), or for a padded fill the
 * row arrays; later calls check the element has the same dtype and shape (padded: the same dtype and rank,
 * audio all but the last dimension). Returns the address, or NULL with a message in err (out of memory, or
 * elements of one batch differing in shape). Not thread-safe on one fill. */
uint8_t *spw_batch_element_place(struct spw_batch_fill *f, int n, int idx, enum spw_dtype dt, int ndim,
                                 const int64_t *shape, void *(*take)(void *ctx, size_t bytes), void *ctx, char *err,
                                 size_t errlen);
/* Element idx's fields (source.fields) into the fill, which owns them from here (also on failure). Returns 0
 * or -ENOMEM. Not thread-safe on one fill. */
int spw_batch_fill_fields(struct spw_batch_fill *f, int n, int idx, struct spw_fields *fields);
/* Whether the fill has its first element, and about how many bytes the whole batch takes. */
bool spw_batch_fill_started(const struct spw_batch_fill *f);
size_t spw_batch_fill_bytes(const struct spw_batch_fill *f, int n);
/* Free what a fill holds (its buffer back to the cache) and reset it, keeping pad. */
void spw_batch_fill_clear(struct spw_batch_fill *f);
/* Batch buffers: huge-page backed, reused through a small process-wide cache (first touches of fresh memory
 * are slow). take returns spw_batch_buffer_size(bytes) bytes or NULL; put hands one back (or frees it). */
void *spw_batch_buffer_take(size_t bytes);
void spw_batch_buffer_put(void *p, size_t cap);
size_t spw_batch_buffer_size(size_t bytes);
/* Free a batch (a device batch's block only through its executor's release). */
void spw_batch_free(struct spw_batch *b);

#endif
