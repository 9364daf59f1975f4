/* client/remote.h - the client's side of the service: creates the job on the dispatcher, heartbeats (acks,
 * client incarnation, the worker list), leases splits for the client's own threads, and keeps one
 * StreamElements stream per worker whose elements it finishes (suffix groups [cut, n)) into the assembler.
 * Not the batching (assembler.c) nor the local pipeline threads (job.c).
 * Thread model: one heartbeat thread and one thread per worker stream, all owned here; remote_lease from
 * any thread. */
#ifndef SPW_CLIENT_REMOTE_H
#define SPW_CLIENT_REMOTE_H

#include <stdint.h>

#include "client/assembler.h"
#include "pipeline/backend.h"
#include "pipeline/element.h"
#include "pipeline/order.h"
#include "pipeline/source.h"
#include "lib/rpc.h"
#include "proto/spillway.pb-c.h"

#define REMOTE_COMPRESS_PLANNED (-1)

struct remote_opts {
    const char *dispatcher, *auth_token;
    int cut, local_cores, split_size, max_workers;
    int64_t credit_bytes;       /* all streams together */
    int compress_level;         /* zstd level workers compress this client's elements at; 0 = raw;
                                   REMOTE_COMPRESS_PLANNED: the plan's (raw when the job is not planned) */
    int64_t park_cap_bytes;     /* stop granting credit while more than this is parked */
    uint64_t manifest_hash;     /* the client's own listing, checked against the job's */
    const int64_t *own_counts[2];   /* elements the client's own threads delivered (read atomically, summed) */
    const int64_t *own_cpu_ns;      /* the CPU they spent producing (atomic) */
    const struct spw_backend *own_gpu;  /* their GPU backend (NULL: none): its elements are reported apart */
    const int64_t *consumed, *wait_ns;  /* the trainer: elements it took, ns it waited in next() (atomics) */
    const int64_t *starved_ns;  /* ns its thread had no CPU between next() calls (atomic; NULL: not measured) */
    const Spillway__V1__ClientFacts *facts;     /* with cut SPW_CUT_AUTO: this client's measured costs */
    int rank, world_size;       /* this client's rank of a data-parallel job (world 0 = 1) */
    const char *job_name;       /* ranks share the job of this name (NULL: a job of its own) */
    const struct remote_resume *resume;         /* going on from a checkpoint (NULL: from the start) */
    /* What the trainer has been given so far, as a resume point (done: allocated, the caller frees): used to
     * re-attach when the dispatcher no longer knows the job (restarted without a journal). Returns 0 or a
     * negative code. NULL: such a loss fails the job. */
    int (*delivered)(void *ctx, struct remote_resume *rr, uint64_t **done);
    void *delivered_ctx;
    int dispatcher_wait_ms;     /* retry a dispatcher that stopped answering this long before failing */
    const struct spw_rpc_tls *tls;  /* for the dispatcher and the workers; NULL = the process's default */
    bool no_direct;             /* never ask workers for data connections (lib/direct.h): elements come on
                                   the gRPC streams */
    const volatile int *cancel; /* non-zero: stop retrying CreateJob (-ECANCELED) */
    bool keep_job;              /* remote_destroy leaves an unfinished job paused, not ended */
};

struct remote_resume {          /* a checkpoint as the dispatcher needs it (see Resume in the proto) */
    uint64_t job, epoch;
    uint64_t job_secret;        /* the job's (CreateJobResponse.job_secret): without it, not rejoined */
    const uint64_t *done;       /* this rank's splits of epoch wholly delivered */
    size_t n_done;
};

struct remote_job {             /* what CreateJob answered */
    uint64_t job;
    uint64_t secret;            /* the job's secret: on every heartbeat, lease and stream of the job */
    int64_t samples, splits_per_epoch;
    int split_size, cut, groups;
    int64_t open_epoch;         /* the lowest epoch the job still produces (earlier ones: this client) */
    bool planned, offload;      /* a plan came back, and whether it uses the workers */
    double predicted, local_share;     /* the plan's prediction and local share */
    double remote_cores;               /* the client CPU the plan's remote elements need (their suffix) */
    int compress_level;                /* what the streams ask the workers for (0: raw) */
    char why[512];
};

struct remote_lease {
    uint64_t epoch, split;
    int64_t first_position;
    int count;
};

struct remote_stats {
    int64_t elements, duplicates, bytes, bad_messages;
    int streams;                /* workers streamed from */
};

struct remote;

/* Create the job on the dispatcher. Returns 0; REMOTE_RUN_LOCALLY when the dispatcher planned the job and
 * offloading does not pay (*job says why; no remote object, *out NULL); or -ECONNREFUSED (refused: bad spec,
 * wrong manifest...) / -EIO (unreachable) / -ENOMEM with a message in err. */
#define REMOTE_RUN_LOCALLY 1
int remote_create(const struct remote_opts *o, const Spillway__V1__Pipeline *pipe, struct remote **out,
                  struct remote_job *job, char *err, size_t errlen);
/* Start the heartbeat and worker streams, finishing elements into a. ctx, src and order must outlive r. */
int remote_start(struct remote *r, struct assembler *a, const struct spw_element_ctx *ctx,
                 const struct spw_source *src, const struct spw_order *order);
/* Lease one split for the client's own threads. Returns 1 with *l, 0 when none is available now, 2 when the
 * job has nothing left, negative on an RPC failure. */
int remote_lease(struct remote *r, struct remote_lease *l);
void remote_stats(struct remote *r, struct remote_stats *out);
/* Whether this client's own threads should produce every split: the dispatcher handed the job back to it,
 * or every alive worker refused the job (remote_no_worker). */
bool remote_client_only(struct remote *r);
/* Whether every alive worker refused the job (for now: a worker that joins may serve it), with the first
 * one's reason in why. */
bool remote_no_worker(struct remote *r, char *why, size_t whylen);
/* Stop every thread and stream and free r; accepts NULL. */
void remote_destroy(struct remote *r);
/* From now on, remote_destroy leaves an unfinished job paused for a resume (a checkpoint was taken). */
void remote_keep(struct remote *r);

#endif
