/* pipeline/tar_index.h - the listing of one WebDataset tar shard through libarchive (ustar, pax, GNU long
 * names; plain or gzip-compressed) into samples: members grouped by key, the image or audio member and a
 * label per key, reading the shard (a file or a URL) through pipeline/shard_io.h. Not a tar writer, and not a
 * sequential reader for training: a plain tar's samples are read at the offsets listed here. Listing runs on
 * one thread; spw_tar_read_streamed is safe from many threads. */
#ifndef SPW_PIPELINE_TAR_INDEX_H
#define SPW_PIPELINE_TAR_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/shard_io.h"
#include "pipeline/spec.h"

/* Caps on what a shard's headers control, checked before anything is allocated for them. */
#define SPW_TAR_MAX_MEMBERS (1 << 24)      /* members (headers) in one shard */
#define SPW_TAR_MAX_NAME 4096              /* bytes of a member path (PATH_MAX) */
#define SPW_TAR_MAX_JSON_BYTES (1 << 20)   /* a .json member read for its label */
#define SPW_TAR_MAX_LABEL_BYTES 31         /* a .cls / .txt member: a class index as text */

struct spw_tar_rules {
    enum spw_media media;      /* which member is the sample: jpg/jpeg (image) or wav (audio) */
    const char *label_key;     /* NULL: .json members carry no label; else the integer field to read */
    bool no_labels;            /* samples need no label (and get -1) */
    int n_fields;              /* extra members each sample must have, by extension (source.fields) */
    const struct spw_sample_field_spec *fields;
};

/* Where a member's data lies in the (uncompressed) tar stream. */
struct spw_member_loc {
    int64_t offset, size;
};

/* One sample of a shard: its image/audio member, label and field members. name lives until the callback
 * returns. */
struct spw_tar_sample {
    const char *name;          /* the member's path in the archive */
    int64_t offset, size;      /* its data in the (uncompressed) tar stream */
    int64_t label;             /* -1 with no_labels */
    const struct spw_member_loc *fields;    /* rules.n_fields, in the rules' order */
};

typedef int (*spw_tar_sample_fn)(void *ctx, const struct spw_tar_sample *s);

/* List the shard open on sh (named shard in messages), calling add for each sample in member order; keys
 * without a sample member, a label (unless no_labels) or one of the field members add 1 to *ignored. *streamed is set when the shard is compressed: its
 * samples are then read with spw_tar_read_streamed, not pread. Returns 0, what add returned, SPW_ESOURCE
 * (message in err names the shard and the member or offset: corrupt, truncated, over a cap, a bad label)
 * or -ENOMEM. */
int spw_tar_index_scan(struct spw_shard *sh, const char *shard, const struct spw_tar_rules *rules, spw_tar_sample_fn add,
                       void *ctx, bool *streamed, int64_t *ignored, char *err, size_t errlen);

/* Read size bytes of the member whose data starts at offset of the decompressed stream of a compressed
 * shard open on sh, by decompressing the shard from its start (the cost grows with offset). Returns 0,
 * -EIO (the shard no longer holds that member: changed since it was listed, or corrupt) or -ENOMEM. */
int spw_tar_read_streamed(struct spw_shard *sh, int64_t offset, int64_t size, uint8_t *dst);

/* True when a member extension (after the basename's first dot, e.g. "jpg" or "seg.JPEG") names media for
 * the decode op: its last dot-separated part is jpg/jpeg (image), jpg/jpeg/png/webp (any image), wav
 * (audio) or wav/flac/mp3/ogg/opus (any audio), in any case. */
bool spw_tar_media_ext(const char *ext, enum spw_media media);

#endif
