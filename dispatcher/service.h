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
    int64_t worker_timeout_ms;      /* a worker silent this long is dead (its leases are re-leased) */
    int64_t client_timeout_ms;      /* a client rank silent this long is expired */
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

/* One handler per Dispatcher method, in the lib/rpc unary shape: request bytes in, *resp (malloc'd) out,
 * a gRPC status returned, with its message in msg. */
int disp_register_worker(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                         size_t msglen);
int disp_worker_heartbeat(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                          size_t msglen);
int disp_create_job(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                    size_t msglen);
int disp_client_heartbeat(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                          size_t msglen);
int disp_lease_split(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                     size_t msglen);
int disp_list_workers(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                      size_t msglen);
int disp_list_jobs(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                   size_t msglen);
int disp_describe_job(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                      size_t msglen);
int disp_cancel_job(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                    size_t msglen);
int disp_get_manifest(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                      size_t msglen);

#endif
