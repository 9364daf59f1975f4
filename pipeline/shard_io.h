/* pipeline/shard_io.h - a tar shard's bytes by offset, wherever it lives: a local file (pread), an http(s)://
 * object (presigned or public URLs included) or an s3:// one (object_store.h: its URL, SigV4-signed by libcurl)
 * read in byte ranges with libcurl: connections kept and reused, TLS verified (against a CA file when given), an
 * optional header from a file (a bearer token), retries with backoff on 5xx answers, resets and timeouts, none
 * on 4xx or a TLS refusal. Bytes, requests and retries are counted. Not a cache. Thread-safe. */
#ifndef SPW_PIPELINE_SHARD_IO_H
#define SPW_PIPELINE_SHARD_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPW_HTTP_MAX_HEADER 8192        /* bytes of the header file (one "Name: value" line) */
#define SPW_HTTP_TRIES 7                /* a failing range is tried this often: 0.1 s, 0.2 s ... 3.2 s apart */

struct spw_http_opts {
    const char *ca_file;                /* PEM CAs to verify https servers against; NULL: the system's */
    const char *header_file;            /* a file holding one "Name: value" header line; NULL: none */
};

/* What reads of remote shards cost, summed over every shard of a source (atomics). */
struct spw_shard_stats {
    int64_t bytes, requests, retries;
};

struct spw_shard;

/* Whether path is a URL (http://, https://, s3:// or gs://) rather than a local path. */
bool spw_shard_is_url(const char *path);
/* Open path (local) or a URL (its size from the first range's Content-Range: a missing object, a refused
 * TLS handshake or a 4xx is an error naming the URL, the status and S3's <Code> when the answer has one; a
 * gs:// path or bad AWS_* settings are refused before a request). stats (may be NULL) gathers the remote
 * reads' counts.
 * Returns 0, SPW_ESOURCE with the reason in err, or -ENOMEM. */
int spw_shard_open(const char *path, const struct spw_http_opts *o, struct spw_shard_stats *stats,
                   struct spw_shard **out, char *err, size_t errlen);
int64_t spw_shard_size(const struct spw_shard *s);
/* The path or URL the shard was opened by. */
const char *spw_shard_name(const struct spw_shard *s);
/* Read exactly len bytes at off into buf. Returns 0, -EIO (past the end, or the server kept failing: the
 * reason is logged once per shard) or -ENOMEM. */
int spw_shard_pread(struct spw_shard *s, void *buf, size_t len, int64_t off);
/* The preferred size of one read (64 KiB locally; 1 MiB remotely, where each read is a request). */
size_t spw_shard_read_size(const struct spw_shard *s);
void spw_shard_close(struct spw_shard *s);

#endif
