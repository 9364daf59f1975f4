/* dispatcher/state_internal.h - the layout of the dispatcher's pure state, shared by state.c (apply and
 * queries) and state_snapshot.c (the state as updates, for journal compaction). Not an API for other files.
 * Not thread-safe: as state.h. */
#ifndef SPW_DISPATCHER_STATE_INTERNAL_H
#define SPW_DISPATCHER_STATE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "dispatcher/id_index.h"

#include "dispatcher/state.h"

struct epoch_splits {
    int64_t epoch;              /* -1 = unused */
    int64_t n;                  /* splits */
    uint8_t *state;             /* enum disp_split_state */
    uint32_t *generation;       /* leases handed out so far */
    uint64_t *holder;           /* latest lessee, 0 when pending or acked */
    int64_t *leased_at;
    int64_t pending, leased, acked;
    int64_t cursor;             /* no pending split below this index */
};

struct client_rank {
    uint64_t incarnation;
    int64_t last_heartbeat_ms;
    bool alive;
};

struct refusal {
    uint64_t worker;
    char reason[DISP_REASON_MAX + 1];
};

struct job {
    uint64_t id, manifest_hash;
    uint64_t secret;            /* its clients' heartbeats, leases and streams must carry it */
    uint8_t *pipeline;
    size_t pipeline_len;
    int64_t n_samples, epochs, splits_per_epoch;
    int32_t split_size, cut, world_size, max_workers;
    char name[DISP_JOB_NAME_MAX + 1];
    char client[DISP_CLIENT_MAX + 1];
    struct epoch_splits ep[2];  /* ep[0]: lowest unfinished epoch; ep[1]: the next, if any */
    struct client_rank *clients;
    bool paused, finished;
    bool client_only;           /* no worker serves it (DISP_CLIENT_ONLY) */
    struct refusal *refusals;   /* workers that cannot serve it (at most one entry each) */
    int n_refusals;
    int64_t ended_ms;           /* when it finished or was paused (meaningful while finished or paused) */
    int64_t created_ms;
};

struct worker {
    uint64_t id, secret;
    char address[256];
    char gpu[128];                  /* the GPU it also makes elements on; empty: none */
    int32_t threads;
    bool alive;
    int64_t last_heartbeat_ms;
    int64_t buffered_bytes;         /* soft: its last heartbeat's */
    int64_t leases;                 /* splits it holds now, over every job: kept as holders change (counting
                                       them scanned every job's splits, per worker, per heartbeat) */
};

struct disp_state {
    struct disp_limits lim;
    struct worker *workers;
    int n_workers;
    struct job *jobs;           /* live jobs, in creation order (capacity lim.max_jobs) */
    int n_jobs;
    struct disp_job_info *ended;    /* a ring of the last lim.history removed jobs' summaries */
    int n_ended, ended_next;
    uint64_t next_worker, next_job; /* the next ids to give (never reused) */
    struct id_index worker_at, job_at;  /* id -> position in workers / jobs (rebuilt as they change) */
};

#endif
