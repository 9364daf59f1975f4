/* worker/jobs_internal.h - a worker's jobs as its files share them: jobs.c (the job list: start, stop, the
 * task list, progress and stats), producer.c (a job's producer threads), outbox.h (its messages, per rank,
 * against credit) and stream.c (StreamElements: a client's rank drains its queue over a channel). Only those
 * include it. Threads: w->mu guards the job list and refusals; jb->mu a job's stop flag and shared
 * micro-batch counts; the outbox its own queues. */
#ifndef SPW_WORKER_JOBS_INTERNAL_H
#define SPW_WORKER_JOBS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "pipeline/element.h"
#include "pipeline/mb_queue.h"
#include "pipeline/order.h"
#include "pipeline/produce.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "worker/jobs.h"
#include "worker/outbox.h"

#define MAX_THREADS 64
#define MBQ_CAP 16384                       /* micro-batches a job shared with a GPU queues at most */
#define SHOW_SECRET_MS 1000                 /* a stream shows a known job's secret by then, or is closed */

struct job {
    struct job *next;
    uint64_t id, manifest_hash;
    uint64_t secret;            /* a client's StreamRequest must carry it (JobTask.job_secret) */
    int cut, world;
    struct wrk_jobs *owner;
    struct spw_pipeline_spec *spec;
    struct spw_source *src;
    struct spw_element_ctx ctx;
    struct spw_producer prod;   /* reads, runs and logs failures the way every producer does */
    struct spw_order order;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct wrk_outbox *out;     /* its messages for its clients' ranks */
    bool stopping, finished;
    int refs;                   /* producers + streams using it */
    pthread_t tids[MAX_THREADS];
    int n_tids;
    int64_t sent_elements, sent_bytes;  /* delivered to clients (atomic) */
    int64_t reported_elements, reported_bytes, reported_ms;     /* in the last heartbeat that had them (owner's
                                                                   mu; reported_ms 0: never) */
    uint64_t reported_round;    /* the owner's report_round when it was last reported */
    int held_splits;            /* leased by its producers and not yet queued whole (atomic) */
    int64_t failures[SPW_FAIL_KINDS];   /* samples skipped or failed, by reason (atomic; prod.failures) */
    int64_t *group_ns, *group_elements; /* ctx.n_groups: time and elements per fusion group (prod's, atomic) */
    struct spw_mb_queue *mbq;   /* with a GPU producer: the micro-batches of leased splits, by encoded size */
};

struct refusal {                /* a listed job this worker cannot serve, and why */
    uint64_t job;
    char reason[256];
};

struct wrk_jobs {
    struct wrk_jobs_opts o;
    char *dispatcher, *token;
    struct spw_rpc_channel *ch;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job *jobs;           /* linked and unlinked only on the registration thread, under mu */
    uint64_t worker_id, worker_secret;
    struct {                    /* final counts of stopped jobs, reported in the next heartbeat once */
        uint64_t job;
        int64_t elements, bytes;
        struct spw_shard_stats io;
    } retired[16];
    int n_retired;
    uint64_t report_round;      /* bumped when every job is due again (a registration, a lost heartbeat) */
    struct refusal *refused;    /* changed only on the registration thread (wrk_jobs_update), under mu */
    int n_refused;
    int draining;               /* atomic: producers lease nothing new (wrk_jobs_drain) */
    struct spw_backend *gpu;    /* --gpu: one more producer per job makes micro-batches on it (NULL: none) */
    int64_t zstd_in, zstd_out;  /* element bytes compressed for clients, all jobs, and what they became
                                   (atomic; metrics; each job's outbox adds to them) */
};

/* A producer thread of jb (pthread_create's start): CPU micro-batches; the GPU's takes the largest queued
 * micro-batches of a job shared with a GPU, and makes on the CPU what the device declines or cannot fit. */
void *wrk_producer_main(void *jb);
void *wrk_gpu_producer_main(void *jb);
/* The micro-batches a stopped job's producers left in its queue (and the queue). */
void wrk_producer_drop_queued(struct job *jb);
/* The job (id, secret), or NULL with *same_id a job of that id and another secret (or NULL). Call with
 * w->mu held. */
struct job *wrk_find_job(struct wrk_jobs *w, uint64_t id, uint64_t secret, struct job **same_id);

#endif
