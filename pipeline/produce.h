/* pipeline/produce.h - one element from its sample number, made the same way wherever it is made (the
 * in-process executor, a worker, the client's own threads): read the file (I/O errors retried, the size
 * capped before allocating), run groups [0, cut), and after a failure the one decision on_error makes,
 * with the one log line naming the file. Thread-safe: a producer is read-only once set up. */
#ifndef SPW_PIPELINE_PRODUCE_H
#define SPW_PIPELINE_PRODUCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/element.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"

/* Why a sample could not be made, for counting (spw_produce_failed). */
enum spw_failure {
    SPW_FAIL_DECODE, SPW_FAIL_TOO_BIG, SPW_FAIL_READ, SPW_FAIL_MEMORY, SPW_FAIL_OTHER, SPW_FAIL_USER, SPW_FAIL_KINDS
};
extern const char *const spw_failure_names[SPW_FAIL_KINDS];     /* "decode", "too_big", "read", ... */

struct spw_producer {
    const struct spw_pipeline_spec *spec;
    const struct spw_source *src;
    const struct spw_element_ctx *ctx;
    const char *component;      /* the log lines' component: "executor", "worker", "client" */
    uint64_t job;               /* logged as job=N; 0: none */
    int64_t *failures;          /* NULL, or SPW_FAIL_KINDS counters (atomic) of the samples it skipped or
                                   failed, by reason */
    int64_t *group_ns, *group_elements;     /* NULL, or per fusion group (ctx->n_groups) counters (atomic):
                                   the thread CPU spw_produce spent in the group, and the elements it ran */
};

/* Reads of a sample before an I/O error (negative errno) counts as the sample's failure. */
#define SPW_PRODUCE_READ_TRIES 3

/* Read sample's encoded bytes into *buf (the caller frees it), retrying I/O errors. Returns 0, or the error
 * with "read failed: ..." in err. */
int spw_produce_read(const struct spw_producer *p, int64_t sample, uint8_t **buf, size_t *len, char *err,
                     size_t errlen);
/* Read sample (and its source.fields, into v->fields) and run groups [0, cut) into *v (empty). With cut 0,
 * *v is the encoded bytes as a uint8 [len] tensor, and an empty file is refused (nothing to decode). stats
 * and dest as spw_element_run.
 * Returns 0, or an error with the reason in err ("read failed: ..." for I/O); *v is then empty. */
int spw_produce(const struct spw_producer *p, uint64_t epoch, int64_t sample, int cut, struct spw_value *v,
                struct spw_element_stats *stats, const struct spw_element_dest *dest, char *err, size_t errlen);

/* The first group of [from, cut) that runs many elements per call (a Python op), or cut when none does;
 * from >= 1 (the decode group never batches). */
int spw_produce_batching(const struct spw_producer *p, int from, int cut);

/* Where the output of the groups before group g (a batching one) may go so that g's first op need not copy
 * it into its own memory (spw_op_def.stage), or NULL. */
const struct spw_element_dest *spw_produce_stage(const struct spw_producer *p, int g);

/* Groups [g_from, g_to) on an element made up to g_from (*v), as spw_produce would run them (the groups' CPU
 * into the producer's counters). Returns 0, or the error with *v empty. */
int spw_produce_more(const struct spw_producer *p, int g_from, int g_to, uint64_t epoch, int64_t sample,
                     struct spw_value *v, struct spw_element_stats *stats, const struct spw_element_dest *dest,
                     char *err, size_t errlen);

/* Group g (spw_produce_batching's) on n elements together (spw_element_run_many: vs, rcs, stats, errs as
 * there), the group's CPU into the producer's counters. */
void spw_produce_many(const struct spw_producer *p, int g, uint64_t epoch, const int64_t *samples, int n,
                      struct spw_value *const *vs, int *rcs, struct spw_element_stats *const *stats, char *errs,
                      size_t errlen);

/* The reason class of an error code (SPW_EDECODE and malformed or unsupported input: decode; a size cap:
 * too_big; I/O and the source: read; no memory; anything else). */
enum spw_failure spw_failure_of(int rc);
/* Sample could not be made (here, or on worker `from`, NULL for here): log "skipped" or "failed" with its
 * path and err, and return true when on_error says the job fails; then msg (when not NULL) gets the job's
 * error, "PATH: ERR[ (on worker FROM)]". */
bool spw_produce_failed(const struct spw_producer *p, int64_t sample, int rc, const char *err, const char *from,
                        char *msg, size_t msglen);

#endif
