/* dispatcher/manifests.h - the packed listings (pipeline/manifest.h) the dispatcher made, kept so that a
 * source is listed once: by the listing's key (a client's GetManifest, then its CreateJob a moment later) and
 * by its hash (the job's workers, all through the job); callers that want the same source listed while it is
 * being listed wait for that listing. Least recently used listings go beyond a byte cap (a job's is made again
 * when asked for). Thread-safe: its own lock, held only to copy. */
#ifndef SPW_DISPATCHER_MANIFESTS_H
#define SPW_DISPATCHER_MANIFESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct disp_manifests;

int disp_manifests_create(size_t cap_bytes, struct disp_manifests **out);
void disp_manifests_destroy(struct disp_manifests *m);
/* The newest listing of key (with *hash, unless *hash is 0) made at or after since_ms: true with its hash and
 * sample count. */
bool disp_manifests_fresh(struct disp_manifests *m, const char *key, int64_t since_ms, uint64_t *hash,
                          int64_t *samples);
/* Listing key, one caller at a time: true when the caller is to list it (then disp_manifests_release); false
 * after waiting for the one that was listing it (its listing is then fresh, unless it failed). */
bool disp_manifests_claim(struct disp_manifests *m, const char *key);
void disp_manifests_release(struct disp_manifests *m, const char *key);
/* Keep a listing (bytes: malloc'd, taken even on failure) made at now_ms. Returns 0 or -ENOMEM. */
int disp_manifests_add(struct disp_manifests *m, const char *key, uint64_t hash, int64_t samples, uint8_t *bytes,
                       size_t len, int64_t now_ms);
/* A malloc'd copy of up to max bytes of listing `hash` (of key; NULL: of any) from offset, its total size and
 * sample count. Returns 0, -ENOENT (not kept), -ERANGE (offset at or past its end) or -ENOMEM. */
int disp_manifests_read(struct disp_manifests *m, const char *key, uint64_t hash, uint64_t offset, size_t max,
                        int64_t now_ms, uint8_t **chunk, size_t *len, uint64_t *total, int64_t *samples);
/* Counters for /metrics: listings made, bytes served, and the bytes kept now. */
void disp_manifests_counts(struct disp_manifests *m, uint64_t *listings, uint64_t *served_bytes,
                           size_t *kept_bytes);

#endif
