/* dispatcher/service.h - the dispatcher's RPC handlers over its state: unpack a request, decide (which split
 * to lease, who timed out), apply updates to the pure state, pack the reply. One mutex serialises state
 * access; a timer thread retires silent workers and expired clients. Handlers are safe from any thread. */
#ifndef SPW_DISPATCHER_SERVICE_H
#define SPW_DISPATCHER_SERVICE_H

#include <stddef.h>
#include <stdint.h>

struct disp_service;
struct spw_health;

struct disp_service_opts {
    int64_t worker_timeout_ms;      /* a worker silent this long (plus the dispatcher's own recent lag:
                                     * liveness.h) is dead (its leases are re-leased) */
    int64_t client_timeout_ms;      /* a client rank silent this long (plus that lag) is expired */
    int64_t heartbeat_interval_ms;  /* what workers are told to use */
    int64_t speculate_after_ms;     /* re-lease a straggling tail split after this long; 0 = never */
    int64_t replan_after_ms;        /* re-plan a planned job on measurements at most this often; 0 = never */
    int32_t default_split_size;
    int64_t finished_job_ms;        /* a finished job leaves the table this long after it finished */
    int64_t paused_job_ms;          /* a job with no client left leaves the table after this long (unfinished) */
    int max_jobs;                   /* unfinished jobs at once; 0 = 256 */
    int job_history;                /* removed jobs kept listable (summaries); 0 = 256 */
    int max_jobs_per_client;        /* unfinished jobs one client host may create; 0 = 64 */
    int max_workers;                /* registered workers at once (dead ones evicted first); 0 = 4096 */
    const char *auth_token;         /* sent to workers when the dispatcher calls them (profiles); NULL = none */
    int64_t profile_timeout_ms;     /* a worker's profile answered within this, else planned without it; 0 = 15 s */
    const char *work_dir;           /* the journal's directory (replayed at start); NULL = state in memory only */
    int journal_recover;            /* a corrupt journal: keep a copy and the records before the bad one (else the
                                       service refuses to start) */
    struct spw_health *health;      /* readiness: NOT_SERVING while the journal cannot be written (NULL: none) */
    int64_t worker_millicores;      /* the CPU a new worker brings, for the demand-driven workers needed of
                                       jobs whose trainer stated no rate; 0 = 1000 */
    int64_t journal_compact_bytes;  /* compact the journal (a snapshot of the state) once it is this big and twice
                                       its size after the last compaction; 0 = never */
};

/* Create the service; with a work_dir, replay its journal first (err says why it cannot: another dispatcher
 * holds the directory, an I/O error). Returns 0 or a negative code. */
int disp_service_create(const struct disp_service_opts *o, struct disp_service **out, char *err, size_t errlen);
/* Stop the timer thread and free. */
void disp_service_destroy(struct disp_service *s);
struct spw_prom;
/* The service's Prometheus samples (dispatcher/metrics.c), for --metrics-port. Any thread. */
void disp_service_metrics(struct disp_service *s, struct spw_prom *p);

/* The Dispatcher's methods, X(ID, handler, slow, callers): ID is lib/methods.h's (the path); slow: it may
 * block (CreateJob and GetManifest list the job's source) and runs off the I/O threads; callers: whose token
 * it takes with --worker-token-file (SPW_RPC_CALLER_*, lib/rpc.h). main.c registers them from this list;
 * check_service holds it to lib/methods.h's Dispatcher ids. */
#define DISP_METHODS(X)                                                                                        \
    X(REGISTER_WORKER, disp_register_worker, 0, SPW_RPC_CALLER_WORKER)                                        \
    X(WORKER_HEARTBEAT, disp_worker_heartbeat, 0, SPW_RPC_CALLER_WORKER)                                      \
    X(CREATE_JOB, disp_create_job, 1, SPW_RPC_CALLER_CLIENT)                                                  \
    X(CLIENT_HEARTBEAT, disp_client_heartbeat, 0, SPW_RPC_CALLER_CLIENT)                                      \
    X(LEASE_SPLIT, disp_lease_split, 0, SPW_RPC_CALLER_CLIENT | SPW_RPC_CALLER_WORKER)                        \
    X(LIST_WORKERS, disp_list_workers, 0, SPW_RPC_CALLER_CLIENT)                                              \
    X(LIST_JOBS, disp_list_jobs, 0, SPW_RPC_CALLER_CLIENT)                                                    \
    X(DESCRIBE_JOB, disp_describe_job, 0, SPW_RPC_CALLER_CLIENT)                                              \
    X(GET_MANIFEST, disp_get_manifest, 1, SPW_RPC_CALLER_CLIENT | SPW_RPC_CALLER_WORKER)                      \
    X(CANCEL_JOB, disp_cancel_job, 0, SPW_RPC_CALLER_CLIENT)

/* One handler per method, in the lib/rpc unary shape: request bytes in, *resp (malloc'd) out, a gRPC status
 * returned, with its message in msg. */
#define DISP_HANDLER_PROTO(ID, fn, slow, callers)                                                              \
    int fn(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg, size_t msglen);
DISP_METHODS(DISP_HANDLER_PROTO)
#undef DISP_HANDLER_PROTO

#endif
