/* dispatcher/state.h - the dispatcher's state as a pure state machine: every change is an update applied by
 * disp_state_apply() (no I/O, no clock: times arrive inside updates), so replaying a journal of updates
 * rebuilds the state exactly. Handlers query, decide (which split to lease, who timed out) and apply.
 * Not thread-safe: the dispatcher serialises apply and queries under one lock. */
#ifndef SPW_DISPATCHER_STATE_H
#define SPW_DISPATCHER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Producers are workers (ids from RegisterWorker) or a client's local executor; client producer ids have
 * the top bit set: DISP_CLIENT_PRODUCER(job, rank). A client's GPU thread has bit 19 set as well (ranks are
 * below DISP_MAX_WORLD): it only names a row of progress (the part of its client's made on the GPU). */
#define DISP_CLIENT_PRODUCER(job, rank) ((UINT64_C(1) << 63) | ((uint64_t)(job) << 20) | (uint64_t)(rank))
#define DISP_CLIENT_GPU_PRODUCER(job, rank) (DISP_CLIENT_PRODUCER(job, rank) | (UINT64_C(1) << 19))
#define DISP_IS_CLIENT_PRODUCER(p) (((p) >> 63) != 0)
#define DISP_MAX_WORLD (1 << 19)

enum disp_split_state { DISP_SPLIT_PENDING = 0, DISP_SPLIT_LEASED = 1, DISP_SPLIT_ACKED = 2 };

/* Durable updates change what a trainer sees or an id a peer holds and go to the journal before they are
 * applied; soft ones are rebuilt after a restart by the peers themselves (heartbeats, timeouts, re-leasing:
 * generations and the client's dedupe make a split leased twice safe). disp_update_durable says which. */
enum disp_update_kind {
    DISP_REGISTER_WORKER = 1,   /* worker (0: a new id, written back), address, threads, name (its GPU, empty:
                                   none), now. Durable */
    DISP_WORKER_HEARTBEAT,      /* worker, now. Soft */
    DISP_WORKER_DEAD,           /* worker: its leases go back to pending with a new generation. Soft */
    DISP_CREATE_JOB,            /* job (0: a new id, written back), pipeline, manifest_hash, n_samples, split_size,
                                   epochs, cut, world_size, max_workers, name, client, secret, first_epoch, now.
                                   first_epoch = epochs creates it finished (a snapshot's). Durable */
    DISP_CLIENT_HEARTBEAT,      /* job, rank, incarnation, now: a new incarnation fences the old one */
    DISP_CLIENT_EXPIRED,        /* job, rank, now: its leases (as a producer) are released; the job pauses
                                   when no rank is left */
    DISP_LEASE,                 /* job, producer, epoch, split, generation, now (from disp_state_pick_lease) */
    DISP_ACK,                   /* job, epoch, split, now: the client holds the whole split */
    DISP_FINISH_JOB,            /* job, now */
    DISP_SET_CUT,               /* job, cut: new leases carry it; leased splits keep theirs (re-planning) */
    DISP_CLIENT_RESUME,         /* job, rank, epoch, splits: a rank going on from a checkpoint. Its splits of
                                   open epochs before `epoch` and the listed ones of `epoch` count as acked;
                                   the rest of its splits (acked, or leased to anyone) are pending again */
    DISP_CLIENT_ONLY,           /* job: handed back to its clients (re-planning found local-only better): no
                                   worker serves it or leases its splits any more; theirs are pending again */
    DISP_REMOVE_JOB,            /* job, flags (DISP_ENDED_CANCELLED, _CLOSED): out of the table (a finished job
                                   after its grace period, a paused one whose clients never came back, one
                                   cancelled or closed); its summary joins the ring of ended jobs */
    DISP_WORKER_REFUSES,        /* job, worker, reason: the worker cannot serve the job (unreadable data, another
                                   listing): it is no longer given the job, and the splits it holds go back to
                                   pending. For the worker's lifetime (a restarted worker registers anew) */
    DISP_ID_FLOOR,              /* worker, job: the next ids given are at least these (a snapshot's counters) */
    DISP_RESTORE_ENDED,         /* a removed job's summary back into the ring of ended jobs (a snapshot's): job,
                                   manifest_hash, n_samples, epochs, split_size, cut, world_size, max_workers,
                                   name, client, epoch, acked, pending, refusals, flags, now (when it ended) */
};
#define DISP_ENDED_FINISHED 1u          /* disp_update.flags of DISP_RESTORE_ENDED */
#define DISP_ENDED_EXPIRED 2u
#define DISP_ENDED_CLIENT_ONLY 4u
#define DISP_ENDED_CANCELLED 8u         /* ... and of DISP_REMOVE_JOB: ended by an operator (spillctl job cancel) */
#define DISP_ENDED_CLOSED 16u           /* ... its last client closed without keeping it for a resume */

struct disp_update {
    enum disp_update_kind kind;
    uint64_t worker, job, producer, manifest_hash, incarnation;
    int64_t now_ms;
    uint64_t epoch, split, generation;
    int64_t n_samples, epochs;              /* epochs 0 = forever */
    int64_t first_epoch;                    /* create: epochs before it are done (a resumed job) */
    int32_t split_size, cut, world_size, rank, threads;
    int32_t max_workers;                    /* 0 = every alive worker serves the job */
    const char *address;                    /* copied */
    const uint8_t *pipeline;                /* copied (serialized proto) */
    size_t pipeline_len;
    const char *name;                       /* create: the job's name ("" or NULL = none; copied) */
    const char *client;                     /* create: the creating client's host ("" = unknown; copied) */
    const uint64_t *splits;                 /* resume: split ids */
    size_t n_splits;
    const char *reason;                     /* refuses: why (copied, at most DISP_REASON_MAX bytes kept) */
    uint64_t secret;                        /* register: the worker's secret (its later calls must carry it);
                                               create: the job's (its clients' calls must carry it) */
    int64_t acked, pending;                 /* restore-ended: the summary's counts */
    int32_t refusals;
    uint32_t flags;                         /* restore-ended: DISP_ENDED_* */
    int64_t buffered_bytes;                 /* worker heartbeat: made and waiting for client streams */
    uint64_t evicted;                       /* register (written back): the dead worker forgotten to make
                                               room for it, 0 none */
};

#define DISP_JOB_NAME_MAX 128
#define DISP_REASON_MAX 255
#define DISP_CLIENT_MAX 63                  /* bytes of a client host kept */

struct disp_limits {
    int max_workers;                /* registered workers at once; default 4096 */
    int max_jobs;                   /* unfinished jobs; default 256 (finished ones in their grace period give
                                       up their place to a new job, oldest first) */
    int history;                    /* removed jobs' summaries kept listable; default 256 */
    int max_jobs_per_client;        /* unfinished jobs one client host may create; default 64 */
    int64_t max_splits_per_epoch;   /* default 4M */
    int max_world_size;             /* default 1024, at most DISP_MAX_WORLD */
    size_t max_pipeline_bytes;      /* default 1 MiB */
};

struct disp_lease {
    uint64_t job, epoch, split, generation;
    int32_t cut;
    int32_t split_size;
    int64_t first_position;         /* positions [first_position, first_position + count) of epoch's order */
    int32_t count;
    bool speculative;               /* a second copy of a split still leased elsewhere */
};

struct disp_worker_info {
    uint64_t id;
    char address[256];
    char gpu[128];                  /* the GPU it also makes elements on; empty: none */
    int32_t threads;
    bool alive;
    int64_t last_heartbeat_ms;
    int64_t leases;                 /* splits it holds now */
    int64_t buffered_bytes;         /* its last heartbeat's: made and waiting for client streams */
};

struct disp_job_info {
    uint64_t id, manifest_hash;
    int64_t n_samples, epochs, splits_per_epoch;
    int32_t split_size, cut, world_size, max_workers;
    int64_t epoch;                  /* lowest epoch not fully acked (epochs when finished) */
    char name[DISP_JOB_NAME_MAX + 1];
    int64_t acked, leased, pending; /* splits of that epoch */
    bool paused, finished;
    bool client_only;               /* handed back to the clients (DISP_CLIENT_ONLY) */
    int refusals;                   /* workers that refused it (disp_state_refusal_at) */
    char client[DISP_CLIENT_MAX + 1];   /* the host that created it ("" unknown) */
    bool expired;                   /* removed unfinished (its clients never came back): ended jobs only */
    bool cancelled, closed;         /* ... ended by an operator, or by its last client's close (ended jobs) */
    int64_t ended_ms;               /* when it finished, was paused or (ended jobs) was removed unfinished */
};

struct disp_state;

int disp_state_create(const struct disp_limits *limits, struct disp_state **out);
void disp_state_destroy(struct disp_state *s);

/* Apply one update. Returns 0, or a negative code with the reason in err (unknown worker or job, a lease that
 * does not match the split's state, a cap exceeded); a refused update changes nothing. Ids are allocated
 * here, in order, so that replaying the same updates rebuilds them: a worker or job id of 0 gets the next
 * one, written back into *u; an explicit id moves the next ones past it. */
int disp_state_apply(struct disp_state *s, struct disp_update *u, char *err, size_t errlen);
/* The state as durable updates, in an order that rebuilds it (DISP_ID_FLOOR, workers, ended jobs, jobs with
 * their acks, incarnations, refusals, cut, hand-back and end): what a compacted journal holds. Leases are
 * left out (soft: after a restart splits are leased again), so are lease generations. emit is called once per
 * update (pointers in it are valid during the call only); a non-zero return stops and is returned. Returns 0
 * when all were emitted. */
int disp_state_snapshot(const struct disp_state *s, int (*emit)(void *ctx, struct disp_update *u), void *ctx);
/* Whether u must reach the journal before it is applied (see enum disp_update_kind): every kind marked
 * durable, and a client heartbeat that brings a new incarnation (it fences the old one). */
bool disp_update_durable(const struct disp_state *s, const struct disp_update *u);

/* Which split `producer` should lease next in `job` (the update to apply is built from *out). Returns 1 with
 * a lease, 0 when nothing is available now (all leased or acked, or the job paused), -ENOENT for an unknown
 * job. A client producer only gets its own rank's splits; workers get any rank's. Pending splits first, in
 * order; when the epoch has none, a split leased for longer than spec_after_ms may be leased again
 * (speculatively) to a producer that does not hold it. Producers never get epoch e+1 while an e split is
 * still pending. */
int disp_state_pick_lease(const struct disp_state *s, uint64_t job, uint64_t producer, int64_t now_ms,
                          int64_t spec_after_ms, struct disp_lease *out);

/* Workers whose last heartbeat is older than now - timeout_ms (and still alive): up to cap ids in out (NULL:
 * only counted, up to cap). Returns the count. timeout_ms is the caller's effective one (dispatcher/liveness.h:
 * the timeout plus the dispatcher's own lag): the state keeps no clock. */
int disp_state_dead_workers(const struct disp_state *s, int64_t now_ms, int64_t timeout_ms, uint64_t *out,
                            int cap);
/* Client ranks of unfinished jobs whose heartbeat is older than now - timeout_ms: (job, rank) pairs, up to cap
 * (jobs and ranks NULL: only counted). */
int disp_state_expired_clients(const struct disp_state *s, int64_t now_ms, int64_t timeout_ms, uint64_t *jobs,
                               int32_t *ranks, int cap);

int disp_state_worker_count(const struct disp_state *s);
/* Whether a worker serves a job now: every alive worker that has not refused it, or with max_workers N the
 * first N such in registration order (a dead or refusing one's place goes to the next); none once the job is
 * handed back to its clients. */
bool disp_state_worker_serves(const struct disp_state *s, uint64_t job, uint64_t worker);
/* The same for many at once, in one pass (a heartbeat asks for a whole row: asking one by one costs O(workers)
 * each). disp_state_job_servers: serves[i] for the worker at index i (disp_state_worker_at), up to cap;
 * disp_state_worker_jobs: serves[k] for the job at index k (disp_state_job_at), up to cap. Return how many
 * entries they filled, or -ENOENT for an unknown job or worker. */
int disp_state_job_servers(const struct disp_state *s, uint64_t job, bool *serves, int cap);
int disp_state_worker_jobs(const struct disp_state *s, uint64_t worker, bool *serves, int cap);
/* A task of a worker's heartbeat reply: a job it serves as the worker needs it. */
struct disp_task {
    uint64_t job, manifest_hash, secret;
    const uint8_t *pipeline;    /* the state's packed Pipeline: valid until the state next changes */
    size_t pipeline_len;
    int32_t cut, world_size;
};
/* The unfinished, unpaused jobs a worker serves (disp_state_worker_jobs), in table order, into out (at most
 * cap). Returns how many, or -ENOENT for an unknown worker. O(jobs), plus O(workers) once when a job caps its
 * workers: a heartbeat's whole cost here. */
int disp_state_worker_tasks(const struct disp_state *s, uint64_t worker, struct disp_task *out, int cap);
int disp_state_worker_at(const struct disp_state *s, int i, struct disp_worker_info *out);
/* Check what the state keeps incrementally against a full recount (every worker's lease count against every
 * job's split holders): 0, or -EINVAL with the first difference in err. For tests; O(workers x splits). */
int disp_state_audit(const struct disp_state *s, char *err, size_t errlen);
int disp_state_job_count(const struct disp_state *s);
/* Splits leased now, over every job's open epochs. */
int64_t disp_state_leased_total(const struct disp_state *s);
int disp_state_job_at(const struct disp_state *s, int i, struct disp_job_info *out);
int disp_state_job(const struct disp_state *s, uint64_t job, struct disp_job_info *out);
/* The job's serialized pipeline (owned by the state), or NULL. */
const uint8_t *disp_state_job_pipeline(const struct disp_state *s, uint64_t job, size_t *len);
/* A split's state, generation and holder (0 when pending). */
int disp_state_split(const struct disp_state *s, uint64_t job, uint64_t epoch, uint64_t split,
                     enum disp_split_state *state, uint64_t *generation, uint64_t *holder);
/* A new job from host `client` would pass a cap (its unfinished jobs, or all unfinished jobs) that an idle
 * job holds: the id of the one to end first (apply DISP_REMOVE_JOB), else 0 (no cap reached, or none idle).
 * Idle: paused (no client left), or every rank silent for idle_ms; paused ones first, the oldest first, the
 * host's own before another's. A job nobody is using never locks a host out. */
uint64_t disp_state_job_to_make_room(const struct disp_state *s, const char *client, int64_t now_ms,
                                     int64_t idle_ms);
/* Jobs that have been finished for finished_ms, or paused (no client) for paused_ms: up to cap ids in out
 * (apply DISP_REMOVE_JOB to each). Returns the count. */
int disp_state_jobs_to_remove(const struct disp_state *s, int64_t now_ms, int64_t finished_ms, int64_t paused_ms,
                              uint64_t *out, int cap);
/* Removed jobs' summaries (at most disp_limits.history, oldest first), and one of them by id (-ENOENT). */
int disp_state_ended_count(const struct disp_state *s);
int disp_state_ended_at(const struct disp_state *s, int i, struct disp_job_info *out);
int disp_state_ended_job(const struct disp_state *s, uint64_t job, struct disp_job_info *out);
/* Refusal i of a job (0 <= i < disp_job_info.refusals): the worker and its reason (owned by the state).
 * Returns 0 or -ENOENT. */
int disp_state_refusal_at(const struct disp_state *s, uint64_t job, int i, uint64_t *worker,
                          const char **reason);
/* Why no worker serves the job: the reason of its first alive refusing worker (*worker) when alive workers
 * refused it and none serves it; NULL when some worker serves it, or none refused (maybe none is alive). */
const char *disp_state_no_worker(const struct disp_state *s, uint64_t job, uint64_t *worker);
/* Whether a worker of that id is registered (alive or not). */
bool disp_state_worker_known(const struct disp_state *s, uint64_t worker);
/* Whether a job of that id is in the table (O(1), no copy: disp_state_job copies its info). */
bool disp_state_job_known(const struct disp_state *s, uint64_t job);
/* Whether a worker of that id is registered and alive (O(1); no lease count, unlike worker_at). */
bool disp_state_worker_alive(const struct disp_state *s, uint64_t worker);
/* A registered worker's last heartbeat (ms), -1 for an unknown worker. O(1). */
int64_t disp_state_worker_heartbeat_ms(const struct disp_state *s, uint64_t worker);
/* Whether secret is the registered worker's (false for an unknown worker). */
bool disp_state_worker_secret_ok(const struct disp_state *s, uint64_t worker, uint64_t secret);
/* Whether secret is the job's (false for an unknown job), and the job's secret (0 for an unknown job). */
bool disp_state_job_secret_ok(const struct disp_state *s, uint64_t job, uint64_t secret);
uint64_t disp_state_job_secret(const struct disp_state *s, uint64_t job);
/* The unfinished job of that name, or 0. */
uint64_t disp_state_named_job(const struct disp_state *s, const char *name);
/* The current client incarnation of (job, rank); 0 if none. */
uint64_t disp_state_client_incarnation(const struct disp_state *s, uint64_t job, int32_t rank);

#endif
