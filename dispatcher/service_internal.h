/* dispatcher/service_internal.h - what the dispatcher's service files share: the service struct, gRPC
 * status numbers, small message helpers, and the planned-jobs functions (jobplans.c). Not a public API.
 * Thread model: fields below `mu` are guarded by it unless a comment says otherwise. */
#ifndef SPW_DISPATCHER_SERVICE_INTERNAL_H
#define SPW_DISPATCHER_SERVICE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatcher/planning.h"
#include "dispatcher/progress.h"
#include "dispatcher/service.h"
#include "dispatcher/codec.h"
#include "dispatcher/state.h"
#include "lib/journal.h"
#include "lib/rpc.h"
#include "proto/spillway.pb-c.h"

struct disp_service {
    struct disp_service_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct disp_state *st;
    struct spw_journal *journal;    /* --work-dir: durable updates go here before they apply (NULL: none) */
    int batch;                      /* > 0: disp_commit writes without fsync; disp_batch_end syncs them */
    int64_t compacted_bytes;        /* the journal's size after its last compaction (or at start) */
    struct disp_progress progress;  /* per (job, producer) deliveries, for DescribeJob */
    struct disp_progress received;  /* per (job, worker) bytes the rank-0 client received: links' rates */
    struct disp_planned {           /* planned jobs: the last plan (packed Plan), the client's facts (packed), */
        uint64_t job;               /* the alive workers it saw; re-planned when that count changes or when */
        uint8_t *plan, *facts;      /* the measured rate stays off the prediction (see disp_plan_observe) */
        size_t len, facts_len;
        int workers, changes;
        int64_t planned_ms, changed_ms;
        int64_t measured_wait_ms;   /* re-plan on measurements no sooner than this after the last plan */
        double predicted;           /* elements/s at the job's current cut */
        bool rate_known;            /* the facts carry the trainer's rate */
        double consumed_per_s;      /* the client's last report */
        double client_cpu;          /* its process's CPU seconds per second */
        int off_beats, bound_beats; /* consecutive heartbeats below the prediction / trainer-bound */
        bool costs_folded;          /* re-planned once with the costs measured on the running job */
        struct disp_profiles *profiles;     /* the workers' profiles (re-plans ask only new workers) */
    } plans[256];
    int n_plans;
    struct disp_named_local {       /* "run locally" decisions for named jobs: the job's other ranks get the */
        char name[DISP_JOB_NAME_MAX + 1];   /* same answer (a rank in-process while another has a job on the */
        uint8_t *plan;              /* service would leave that job's rank unserved); packed Plan */
        size_t len;
        int64_t at_ms;
    } named_local[16];              /* a ring; entries older than NAMED_LOCAL_MS are ignored */
    int named_local_next;
    bool replanning, replan_started;    /* a re-plan thread runs / was started (join it) */
    uint64_t replan_job;
    int replan_reason;
    pthread_t replan_tid;
    bool stopping;
    pthread_t timer;
};

/* Alive workers' addresses into a response field: those that serve `job` (disp_state_worker_serves), or
 * with job 0 all or the first max; malloc'd arrays, free with disp_free_addresses. Call with mu held. */
size_t disp_alive_workers(struct disp_service *s, uint64_t job, int max, Spillway__V1__WorkerAddress ***out);
void disp_free_addresses(Spillway__V1__WorkerAddress **v, size_t n);
/* The only way the service changes its state: a durable update (disp_update_durable) goes to the journal
 * first (there is none yet: issue 17 adds it here), then every update is applied; ids the state allocates
 * are written back into *u. Returns disp_state_apply's code. Call with mu held. */
int disp_commit(struct disp_service *s, struct disp_update *u, char *err, size_t errlen);
/* A fresh random secret (never 0) for a worker or a job. */
uint64_t disp_new_secret(void);
/* A call that did not show job's secret: NOT_FOUND for a job not in the table, else PERMISSION_DENIED
 * (logged with the peer). Call with mu held. */
int disp_wrong_job_secret(struct disp_service *s, uint64_t job, char *msg, size_t msglen);
/* SPW_RPC_OK when a peer (who: "this worker", "this client") speaks this dispatcher's protocol version,
 * else FAILED_PRECONDITION with a message naming both versions and builds. */
int disp_check_protocol(const char *who, uint32_t version, const char *build, char *msg, size_t msglen);
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
 * disp_maybe_replan). Call with mu held. */
void disp_forget_job(struct disp_service *s, uint64_t job);

/* Plan a new job (CreateJob with cut -2): *cut, *plan (a message; spw_plan_proto_free), the alive workers
 * seen and their profiles (*profiles, malloc'd: for disp_remember_plan, or free). Returns SPW_RPC_OK or a status
 * with msg. Call without mu (it calls the workers). */
int disp_plan_new_job(struct disp_service *s, const Spillway__V1__CreateJobRequest *r, int n_groups, int *cut,
                      Spillway__V1__Plan **plan, int *alive, struct disp_profiles **profiles, char *msg,
                      size_t msglen);
/* Keep a job's plan, the client's facts and the workers' profiles (for DescribeJob and re-planning; takes
 * profiles, may be NULL). Call without mu. */
void disp_remember_plan(struct disp_service *s, uint64_t job, const Spillway__V1__Plan *plan,
                        const Spillway__V1__ClientFacts *facts, int alive, struct disp_profiles *profiles);
/* A client heartbeat's measurements of a planned job (rank 0): the trainer's elements/s and the fraction of
 * time it waited for data. Counts heartbeats off the prediction. Call with mu held. */
void disp_plan_observe(struct disp_service *s, uint64_t job, double consumed_per_s, double wait_fraction,
                       double client_cpu);
/* Start a re-plan of a planned job whose costs on the real path are measured (once), whose workers changed,
 * whose rates stayed off the prediction, or whose trainer turned out to set the pace (at most one at a
 * time). Call with mu held. */
void disp_maybe_replan(struct disp_service *s, int64_t now);
/* The client's CPU per remote element of a job (its receiving threads over their last rate windows,
 * weighted by rate), 0 unknown. Call with mu held. */
double disp_client_remote_ns(const struct disp_service *s, uint64_t job);
/* A job's plan (unpacked; free_unpacked) or NULL. Call with mu held. */
Spillway__V1__Plan *disp_plan_of(struct disp_service *s, uint64_t job);
/* Remember that the named job was planned to run in the client(s): the other ranks naming it are told the
 * same (disp_named_local_plan: an unpacked Plan, free_unpacked; NULL when none or older than 10 minutes;
 * disp_named_local_locked with mu held). Returns false, remembering nothing, when another rank has created a
 * job of that name meanwhile (join it instead). Call without mu. */
bool disp_remember_named_local(struct disp_service *s, const char *name, const Spillway__V1__Plan *plan);
Spillway__V1__Plan *disp_named_local_plan(struct disp_service *s, const char *name);
const struct disp_named_local *disp_named_local_locked(const struct disp_service *s, const char *name);
/* Join the re-plan thread and free the plans (service teardown, after the timer stopped). */
void disp_plans_stop(struct disp_service *s);

#endif
