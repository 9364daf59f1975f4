/* pipeline/source.h - data sources: an image folder (class sub-folders -> int64 label, as torchvision's
 * ImageFolder), a wav folder (class sub-folders, or a flat folder with labels.tsv: FILE<TAB>CLASS lines) or
 * WebDataset tar shards (KEY.jpg or KEY.wav with a KEY.cls, KEY.txt or KEY.json label, and the field members
 * of source.fields; pipeline/tar_index.h); without labels, folders of any nesting.
 * Opening a source enumerates it once, sorted, into a manifest with a hash; reading a sample is then
 * thread-safe (pread, or a streamed read of a compressed shard). */
#ifndef SPW_PIPELINE_SOURCE_H
#define SPW_PIPELINE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/shard_io.h"
#include "pipeline/spec.h"
#include "pipeline/coco.h"
#include "pipeline/tar_index.h"

struct spw_sample {
    char *path;             /* image_folder: file path; tar: "shard.tar:member" (the image/audio member) */
    int64_t label;          /* -1: none (source.labels false) */
    int file;               /* index into the source's open files (tar shards); -1 for image_folder */
    int64_t offset, size;   /* tar: member data (in the decompressed stream); image_folder: size from stat */
};

struct spw_source {
    enum spw_source_format format;
    struct spw_sample *samples;
    int64_t n;
    char **classes;         /* folders: class names in label order */
    int n_classes;
    struct spw_shard **shards;  /* tar shards: local files or http(s) objects (pipeline/shard_io.h) */
    bool *streamed;         /* per shard: compressed, so its samples are read by decompressing from its start */
    int n_shards;
    struct spw_shard_stats io;  /* what reading remote shards took: bytes, requests, retries (atomics) */
    int n_fields;           /* the spec's source.fields: where each sample's field members lie */
    struct spw_member_loc *field_locs;  /* [n * n_fields]: sample i's field f at i * n_fields + f (folders:
                                           offset -1, the file's size) */
    struct spw_coco_image *coco;        /* coco: [n] each sample's boxes (pipeline/coco.h; field 0's locs hold
                                           offset -2 and the count); NULL otherwise */
    const struct spw_source_spec *spec; /* folders with fields: the spec they were listed for (its path and
                                           fields' folders name each sample's field files), which outlives the
                                           source; NULL otherwise */
    int64_t *listed;        /* after spw_source_take: each sample's index in the listing (keys give it);
                               NULL: the listing itself */
    uint64_t manifest_hash; /* over (path, label, size) of every sample in order, and its fields' sizes */
    int64_t ignored;        /* files seen but not samples (other media, incomplete tar keys) */
};

/* Enumerate the source of spec. Returns 0, SPW_ESOURCE (message in err: missing path or shard, empty
 * dataset, malformed tar, more shards than SPW_BRACE_MAX_ITEMS) or -ENOMEM. */
int spw_source_open(const struct spw_source_spec *spec, struct spw_source **out, char *err, size_t errlen);
/* Read sample i's encoded bytes into a malloc'd buffer (*buf, *len; caller frees). Refuses samples
 * bigger than max_bytes with SPW_ETOOBIG before allocating. Returns 0 or -errno / SPW_ETOOBIG. */
int spw_source_read(const struct spw_source *src, int64_t i, int64_t max_bytes, uint8_t **buf, size_t *len);
void spw_source_close(struct spw_source *src);
/* Keep only samples idx[0..k) (distinct, each < src->n), in that order: sample i becomes old sample idx[i],
 * with its fields and boxes (the rest of an epoch, made as a source of its own). manifest_hash stays the
 * listing's. Returns 0, -EINVAL (an index out of range or repeated) or -ENOMEM (src unchanged). */
int spw_source_take(struct spw_source *src, const int64_t *idx, int64_t k);
/* Read field f of sample i (a member of its tar key, or its file in the field's folder) into a malloc'd
 * buffer, as spw_source_read; bigger than max_bytes is SPW_ETOOBIG, refused before allocating. */
int spw_source_read_field(const struct spw_source *src, int64_t i, int f, int64_t max_bytes, uint8_t **buf,
                          size_t *len);
/* The file of field f (a folder field) for a sample at sample_path, listed under spec: the field's folder, the
 * sample's path relative to spec->path, the field's extension in place of its own. Returns 0, or -ENAMETOOLONG
 * (the path would not fit in len bytes). */
int spw_source_field_path(const struct spw_source_spec *spec, int f, const char *sample_path, char *out, size_t len);
/* The manifest hash of a listing: FNV-1a over (path, label, size) of every sample in order, then (with
 * fields) each sample's field sizes. */
uint64_t spw_source_hash(const struct spw_source *src);

#endif
