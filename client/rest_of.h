/* client/rest_of.h - resuming a data-parallel run onto another world size: from every old rank's checkpoint,
 * the samples of the epoch in progress no rank delivered, divided among the new ranks (opts.rest_of).
 * Pure but for allocation; called while a job is created, on its thread. */
#ifndef SPW_CLIENT_REST_OF_H
#define SPW_CLIENT_REST_OF_H

#include <stdbool.h>
#include <stdint.h>

#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "spillway/client.h"

struct rest_of_plan {
    int64_t epoch;          /* the old run's epoch in progress */
    int64_t rest;           /* its samples no old rank delivered (0: none; then the job is empty) */
    int split;              /* the split size this rank's share of them is cut with */
    int64_t first_batch;    /* where the rest job starts (epoch * its batches per epoch, or a resume's) */
    int64_t per_epoch;      /* the rest job's batches (0: empty) */
    int64_t next_batch;     /* where the run goes on at the new world size after it: the next epoch's start */
    int64_t per_epoch_after;    /* batches per epoch of the run at the new world size */
};

/* Check o->rest_of against spec and the whole listing src; on success src holds the rest of the epoch (all
 * of it, in order: the job's rank view takes this rank's share), spec is one epoch of it, unshuffled, and
 * *plan says where things stand. Returns 0, or -EINVAL / -ENOMEM with the reason in err. */
int rest_of_apply(struct spw_pipeline_spec *spec, struct spw_source *src, const struct spw_job_opts *o,
                  struct rest_of_plan *plan, char *err, size_t errlen);

#endif
