/* worker/jobs.h - the jobs a worker serves: for each, producer threads lease splits from the dispatcher,
 * run the pipeline's groups [0, cut) on every element with the engine, and queue ElementBatch messages per
 * client rank (bounded in bytes); StreamElements hands a rank's queue to its client against byte credits.
 * Jobs come and go with the task list of the dispatcher's heartbeat replies. Thread-safe. */
#ifndef SPW_WORKER_JOBS_H
#define SPW_WORKER_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/direct.h"
#include "lib/rpc.h"
#include "pipeline/backend.h"
#include "pipeline/produce.h"
#include "proto/spillway.pb-c.h"

struct wrk_jobs;

struct wrk_jobs_opts {
    const char *dispatcher;     /* host:port */
    const char *auth_token;     /* NULL = none */
    int threads;                /* producer threads per job */
    size_t queue_bytes;         /* per (job, rank) queue cap; 0 = 256 MiB */
    void (*want_tasks)(void *ctx);  /* a client streams a job not in the task list: fetch it now (or NULL) */
    void *want_tasks_ctx;
    struct spw_backend *gpu;    /* a GPU backend (--gpu) for one more producer per job; NULL: CPU only */
    struct spw_direct_listener *direct;     /* data connections offered to clients that ask (--data-port);
                                               NULL: elements go on the gRPC stream */
};

int wrk_jobs_create(const struct wrk_jobs_opts *o, struct wrk_jobs **out);
/* Stop every job's producers and free; accepts NULL. */
void wrk_jobs_destroy(struct wrk_jobs *j);
/* The worker's id and secret from registration (producers lease under them). */
void wrk_jobs_set_worker_id(struct wrk_jobs *j, uint64_t id, uint64_t secret);
/* Start jobs that appear in the task list and stop those that left it. */
void wrk_jobs_update(struct wrk_jobs *j, const Spillway__V1__WorkerHeartbeatResponse *tasks);
/* What this worker has delivered per job it serves (cumulative), for its heartbeat: the final counts of jobs
 * stopped since they were last taken, then the jobs whose counts changed since they were last taken or that
 * were not taken for 30 s (every job after wrk_jobs_set_worker_id, or with `again`: the last heartbeat was
 * lost), the longest untaken first. Fills out (at most cap; out[i].source points into io[i] when the job's
 * remote shard reads are to be reported) and returns the count; what did not fit comes in a later call. */
int wrk_jobs_progress(struct wrk_jobs *w, Spillway__V1__ProducerProgress *out, Spillway__V1__SourceIo *io, int cap,
                      bool again);
/* The listed jobs this worker cannot serve (unreadable data, a listing that differs), for its heartbeat:
 * fills out (at most cap) and returns the count. The reasons stay valid until the next wrk_jobs_update
 * (call both from the registration thread). */
int wrk_jobs_refusals(struct wrk_jobs *w, Spillway__V1__JobRefusal *out, int cap);
/* Stop leasing new splits and wait until every split this worker holds is made and sent to its client, or
 * timeout_ms. Returns how many splits and queues were still busy (0: drained). Streams keep sending. */
int wrk_jobs_drain(struct wrk_jobs *w, int64_t timeout_ms);
/* Connections to the data port refused so far (no valid ticket); -1 without a data port. */
int64_t wrk_jobs_direct_refused(struct wrk_jobs *w);
/* What a job holds now, for metrics. */
#define WRK_MAX_GROUPS 16
struct wrk_job_stat {
    uint64_t job;
    int64_t elements, bytes;    /* sent to its clients so far */
    int64_t queue_bytes;        /* made and waiting for a client stream */
    int held_splits;            /* leased and not yet queued whole */
    int streams;                /* client streams attached */
    int direct_streams;         /* of them, those sending on a data connection */
    bool skip;                  /* its on_error: skip (else fail) */
    int64_t credit_bytes;       /* credit its clients granted and it has not used: what it may send now */
    int n_groups;               /* fusion groups (at most WRK_MAX_GROUPS listed) */
    int64_t group_ns[WRK_MAX_GROUPS], group_elements[WRK_MAX_GROUPS];  /* time and elements per group, CPU
                                   producers (the GPU's elements are not in them) */
    char group_ops[WRK_MAX_GROUPS][96];     /* "decode_jpeg+random_resized_crop" */
    int64_t failures[SPW_FAIL_KINDS];   /* samples it could not make, by reason (pipeline/produce.h) */
};
/* Element bytes compressed for clients since start, all jobs, and the bytes they became. */
void wrk_jobs_compressed(struct wrk_jobs *w, int64_t *in, int64_t *out);
/* The jobs this worker serves (at most cap into out); returns the count. Any thread. */
int wrk_jobs_stats(struct wrk_jobs *w, struct wrk_job_stat *out, int cap);
/* The StreamElements handler (ctx = struct wrk_jobs *). */
int wrk_jobs_stream(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen);

#endif
