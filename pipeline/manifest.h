/* pipeline/manifest.h - a source's listing as bytes: the dispatcher lists a dataset once and ships this to
 * the workers and the trainer, which rebuild the source from it instead of listing (a folder of a million
 * files, or shards behind HTTP, listed once per job, not once per process). The bytes are one zstd frame;
 * opening checks every size against what is left before allocating and the listing's hash against the one
 * expected. Pure functions; spw_manifest_fetch is a blocking client of the dispatcher's GetManifest. */
#ifndef SPW_PIPELINE_MANIFEST_H
#define SPW_PIPELINE_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/source.h"

#define SPW_MANIFEST_MAX_BYTES (256u << 20)     /* packed (compressed) */
#define SPW_MANIFEST_MAX_RAW (1u << 30)         /* unpacked */
#define SPW_MANIFEST_CHUNK (4u << 20)           /* GetManifest's reply carries at most this much */

/* src's listing (samples, classes, shards and whether each is streamed) into a malloc'd buffer. Returns 0,
 * -ENOMEM or SPW_ETOOBIG (over the caps). */
int spw_manifest_pack(const struct spw_source *src, uint8_t **out, size_t *len);
/* A source for spec (its format; its http options for shards) from packed bytes: the shards are opened, the
 * samples taken as listed, and checked to be here (each listed file with its size, each plain shard long
 * enough: one stat per file, no directory read). expect_hash 0 takes any listing. Returns 0, -ENOMEM, or
 * SPW_ESOURCE with the reason in err (corrupt, over a cap, another format, a hash that is not expected, a
 * shard that cannot be opened, a listed file missing or of another size here). */
int spw_manifest_open(const struct spw_source_spec *spec, const uint8_t *buf, size_t len, uint64_t expect_hash,
                      struct spw_source **out, char *err, size_t errlen);

struct spw_rpc_channel;
struct ProtobufCMessage;
/* The packed manifest from the dispatcher on ch: GetManifest for `job` (a worker) or for `pipeline` (a
 * client about to create its job), chunk after chunk. plan_ahead_workers >= 0: the client will have the
 * pipeline planned with that many workers at most (0: all), so the dispatcher asks them for their profiles
 * meanwhile; -1: it will not. first_timeout_ms bounds the first call (the dispatcher may list then). Returns
 * 0 with *out malloc'd, or a negative errno / SPW_ESOURCE with the reason in err. */
int spw_manifest_fetch(struct spw_rpc_channel *ch, uint64_t job, const struct ProtobufCMessage *pipeline,
                       int plan_ahead_workers, int first_timeout_ms, uint8_t **out, size_t *len, uint64_t *hash,
                       char *err, size_t errlen);

#endif
