/* dispatcher/service_internal.h - what the dispatcher's service files share: the service struct, gRPC
 * status numbers, small message helpers, and the service side of planning (plan_view.c). Not a public API.
 * Thread model: fields below `mu` are guarded by it unless a comment says otherwise. */
#ifndef SPW_DISPATCHER_SERVICE_INTERNAL_H
#define SPW_DISPATCHER_SERVICE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatcher/liveness.h"
#include "dispatcher/manifests.h"
#include "dispatcher/planning.h"
#include "dispatcher/profile_ahead.h"
#include "dispatcher/progress.h"
#include "dispatcher/replanner.h"
#include "dispatcher/service.h"
#include "dispatcher/codec.h"
#include "dispatcher/state.h"
#include "lib/journal.h"
#include "lib/metrics.h"
#include "lib/rpc.h"
#include "pipeline/spec.h"
#include "proto/spillway.pb-c.h"

struct disp_service {
    struct disp_service_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct disp_state *st;
    struct spw_journal *journal;    /* --work-dir: durable updates go here before they apply (NULL: none) */
    int batch;                      /* > 0: disp_commit writes without fsync; disp_batch_end syncs them */
    /* Group commit (dispatcher/service.c journal_durable): records written to the journal since the start
     * (j_written) and known on disk (j_synced); while a call syncs with mu released (j_syncing) others wait on
     * j_cv for it and share its sync; a failed sync cuts every unsynced record: those ranges (lo, hi] are
     * j_lost, and j_cuts counts the failures (a sync that ran meanwhile covered nothing). */
    uint64_t j_written, j_synced, j_cuts;
    bool j_syncing;
    pthread_cond_t j_cv;
    struct {
        uint64_t lo, hi;
    } j_lost[8];
    int j_lost_next;
    int64_t compacted_bytes;        /* the journal's size after its last compaction (or at start) */
    struct disp_progress *progress; /* per (job, producer) deliveries: DescribeJob, /metrics, re-planning */
    struct disp_progress *received; /* per (job, worker) bytes the rank-0 client received: links' rates */
    struct disp_replanner *replanner;   /* planned jobs and re-planning, under its own lock */
    struct disp_manifests *manifests;   /* packed listings of the jobs' sources, under its own lock */
    struct disp_ahead *ahead;       /* workers' profiles asked ahead of CreateJob, under its own lock */
    struct disp_ask ask;            /* how workers are asked for profiles (set at creation) */
    bool stopping;
    pthread_t timer;
    uint64_t applied[DISP_RESTORE_ENDED + 1];   /* updates applied since the start, per kind (metrics) */
    uint64_t re_leases;             /* leases of a split leased before (its generation > 1) */
    uint64_t leases_released;       /* leased splits sent back to pending: holders dead, expired, refusing */
    uint64_t shed_calls;            /* calls whose deadline passed waiting for mu (atomic: counted unlocked) */
    struct spw_hist journal_sync;   /* each journal write that syncs (an append, a batch's end) */
    int64_t started_ms;             /* when the service started (after replay): the grace for replayed peers */
    int journal_error;              /* the last journal write failed with this (-errno); 0: writable */
    int64_t journal_probe_ms;       /* when the timer last tried the failed journal's disk */
    uint64_t journal_failures;      /* journal writes or syncs that failed (metrics) */
    int64_t trimmed_ms;             /* when the timer last gave freed heap back (spw_heap_release_idle) */
    /* The dispatcher's own lag (dispatcher/liveness.h), so that peers are not declared dead because it fell
     * behind: each timer tick's lag (how late it woke, or the longest a call waited from its arrival to mu
     * since the last tick), kept over each timeout's window. */
    int64_t call_wait_ms;           /* the longest wait since the timer's last tick (disp_lock_call) */
    int64_t late_ms;                /* how late the last tick woke: > timeout / 4 skips its deaths */
    int64_t tick_lag_ms;            /* the last tick's lag: that, or call_wait_ms before it was reset */
    struct disp_lag worker_lag;     /* window --worker-timeout-ms */
    struct disp_lag client_lag;     /* window --client-timeout-ms */
    struct disp_lag overload_lag;   /* window DISP_OVERLOAD_WINDOW_MS: when to refuse new work */
    int64_t overload_ms;            /* atomic: the timer's overload_lag when overloaded, else 0 (no mu) */
    uint64_t new_work_refused;      /* atomic: new jobs and profile asks refused while overloaded */
    uint64_t deaths_deferred[2];    /* timer checks that spared a worker [0] / client rank [1] silent past its
                                     * timeout because the dispatcher lagged (metrics) */
    bool deferring[2];              /* the last tick deferred some: log once per episode */
    /* Which workers are usable changes with a registration, a death or a replayed worker's first heartbeat:
     * members_gen counts those; the digest of every usable worker (what serves a job nobody refused and no
     * cap limits: most jobs) is kept for a generation, and at most DISP_USABLE_DIGEST_MS, so that a client
     * heartbeat need not walk every worker. */
    uint64_t members_gen;
    struct {
        uint64_t gen, digest;       /* gen 0: not computed */
        size_t count;
        int64_t at_ms;
    } usable;
};
#define DISP_USABLE_DIGEST_MS 1000

/* Alive workers' addresses into a response field: those that serve `job` (disp_state_worker_serves), or
 * with job 0 all or the first max; a malloc'd array (NULL after the last), free with disp_free_addresses.
 * Call with mu held. */
size_t disp_alive_workers(struct disp_service *s, uint64_t job, int max, Spillway__V1__WorkerAddress ***out);
/* The workers serving the job as disp_alive_workers lists them, and *digest of that list (never 0); none
 * (*out NULL) when the caller's `known` digest is that one already. O(1) for a job no worker refused and no
 * cap limits while the usable workers stay the same (members_gen); else O(workers). Call with mu held. */
size_t disp_serving_workers(struct disp_service *s, const struct disp_job_info *ji, uint64_t known, uint64_t *digest,
                            Spillway__V1__WorkerAddress ***out);
/* Free such an array (a Spillway__V1__WorkerAddress **; a void * to be a disp_reply_later function). */
void disp_free_addresses(void *v);
/* The only way the service changes its state: a durable update (disp_update_durable) goes to the journal
 * first (there is none yet: issue 17 adds it here), then every update is applied; ids the state allocates
 * are written back into *u. Returns disp_state_apply's code. Call with mu held. */
int disp_commit(struct disp_service *s, struct disp_update *u, char *err, size_t errlen);
/* Can a worker be given to a job: alive, and heard from since this process started (a replayed worker is
 * not declared dead for one timeout after a restart, but one that never speaks again must not be handed to
 * trainers meanwhile). */
bool disp_worker_usable(const struct disp_service *s, const struct disp_worker_info *wi);
/* Has the journal (if any) been failing to write since its last success? Call with mu held. */
bool disp_journal_failing(const struct disp_service *s);
/* The source of spec listed (dispatcher/listing.c): the listing *hash when one is kept from the last minute
 * (its client's GetManifest), else listed now (*hash 0, or that listing gone) and kept for GetManifest.
 * Returns SPW_RPC_OK with its hash and sample count, or FAILED_PRECONDITION with the reason. Call without mu. */
int disp_list_source(struct disp_service *s, const struct spw_source_spec *spec, uint64_t *hash, int64_t *samples,
                     char *msg, size_t msglen);
/* Take mu for the unary call running on this thread: 0 with mu held, or SPW_RPC_DEADLINE_EXCEEDED (mu not
 * held, msg says why) when its deadline passed while it waited: the caller gave up, so the work is shed (a
 * lease nobody receives would sit held until it times out; under overload, answering calls nobody waits for
 * is how a server collapses instead of slowing down). */
int disp_lock_call(struct disp_service *s, char *msg, size_t msglen);
/* New work (what: "a new job") under overload (disp_liveness_overloaded, as the timer last saw it): RESOURCE_
 * EXHAUSTED with msg ("... retry later", which clients retry with backoff) and counted, so that heartbeats and
 * leases of the work already running keep the dispatcher's time; else SPW_RPC_OK. Call with or without mu. */
int disp_refuse_new_work(struct disp_service *s, const char *what, char *msg, size_t msglen);
/* A fresh random secret (never 0) for a worker or a job. */
uint64_t disp_new_secret(void);
/* A call that did not show job's secret: NOT_FOUND for a job not in the table, else PERMISSION_DENIED
 * (logged with the peer). Call with mu held. */
int disp_wrong_job_secret(struct disp_service *s, uint64_t job, char *msg, size_t msglen);
/* SPW_RPC_OK when a peer (who: "this worker", "this client") speaks this dispatcher's protocol version,
 * else FAILED_PRECONDITION with a message naming both versions and builds. */
int disp_check_protocol(const char *who, uint32_t version, const char *build, char *msg, size_t msglen);
#define DISP_IDLE_JOB_MS 3000         /* a job none of whose ranks heartbeat (every 200 ms) this long is unused */
#define DISP_MAX_REFUSALS_PER_BEAT 64     /* cannot-serve and unreachable reports read from one heartbeat */
/* A worker says it cannot serve a job, or a client of the job that it cannot reach the worker: stop giving
 * the worker the job (once; both repeat it while it applies). Call with mu held. */
void disp_note_refusal(struct disp_service *s, uint64_t worker, const Spillway__V1__JobRefusal *r);
/* Group commit: between these, durable updates are written but fsynced once, at the end, before the reply
 * that depends on them (a heartbeat's acks). disp_batch_end returns 0, or -EIO with err when the fsync
 * failed (those records are cut off the journal; the caller fails its reply and its peer retries). Call with
 * mu held. */
void disp_batch_begin(struct disp_service *s);
int disp_batch_end(struct disp_service *s, char *err, size_t errlen);
/* Forget what the service keeps beside the state about a job that left the table (its plan goes at the next
 * re-planner's next tick). Call with mu held. */
void disp_forget_job(struct disp_service *s, uint64_t job);

/* Plan a new job (CreateJob with cut -2) against the alive workers: *cut, *plan (a message;
 * spw_plan_proto_free), the alive workers seen and their profiles (*profiles, malloc'd: for
 * disp_replanner_remember, or free). Returns SPW_RPC_OK or a status with msg. Call without mu (it calls the
 * workers). */
int disp_plan_new_job(struct disp_service *s, const Spillway__V1__CreateJobRequest *r, int n_groups, int *cut,
                      Spillway__V1__Plan **plan, int *alive, struct disp_profiles **profiles, char *msg,
                      size_t msglen);
/* The client's CPU per remote element of a job (its receiving threads over their last rate windows,
 * weighted by rate), 0 unknown. Call with mu held. */
double disp_client_remote_ns(const struct disp_service *s, uint64_t job);
/* struct disp_replan_env's gather and apply, over this service (plan_view.c); each takes mu itself. */
int disp_replan_gather(void *ctx, uint64_t job, bool full, struct disp_replan_input *in);
int disp_replan_apply(void *ctx, uint64_t job, int cut, bool hand_back);

#endif
