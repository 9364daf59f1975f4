/* client/remote_internal.h - the client's side of the service as its files share it: attach.c (CreateJob:
 * create, join, re-attach), session.c (heartbeats, leases, the end), streams.c (one receive thread per
 * worker: a channel in, intake_message on every message) and intake.c (a message into the batches). Only
 * those include it. Threads: as remote.h; r->mu guards the stream table and the stats. */
#ifndef SPW_CLIENT_REMOTE_INTERNAL_H
#define SPW_CLIENT_REMOTE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/intake.h"
#include "client/remote.h"
#include "lib/direct.h"
#include "lib/rpc.h"
#include "proto/spillway.pb-c.h"

#define MAX_STREAMS 64
#define MIN_STREAM_CREDIT ((int64_t)4 << 20)    /* a worker sends a message only when it fits its credit */
#define HEARTBEAT_MS 200
#define CAP_WAIT_MS 10000           /* CreateJob refused at a cap of unfinished jobs: retried this long */
#define DISPATCHER_WAIT_MS 300000      /* remote_opts.dispatcher_wait_ms 0, for a job that exists (a resume) */
#define CREATE_WAIT_MS 30000           /* ... and before it does: a wrong address fails fast */
#define MAX_ACKS_PER_HEARTBEAT 4096
#define RATE_BEATS 10               /* the trainer's rate is reported over the last 10 heartbeats (2 s): a
                                     * beat's 200 ms sees whole batches only, 0 or 1 or 2 of them */

struct stream {
    struct remote *r;
    uint64_t worker_id;
    uint64_t job, secret;       /* the job the stream was opened for (a re-attached job has another id) */
    char addr[256];
    pthread_t tid;
    bool running;               /* the thread is live */
    bool joined;                /* no thread to join */
    bool listed;                /* in the dispatcher's latest worker list */
    int64_t started_ms;
    struct spw_rpc_stream *st;  /* while open; guarded by r->mu for cancel */
    int64_t rx_elements, rx_bytes;  /* received from this worker so far (r->mu), for the heartbeats */
    int64_t rx_cpu_ns;          /* this stream's thread's CPU so far: receiving, the suffix, the copy (r->mu) */
    int64_t transport_ns;       /* its share of the transport threads' CPU so far (heartbeat thread only) */
    int64_t transport_elements; /* rx_elements when that share was last given (heartbeat thread only) */
    int failed_opens;           /* streams in a row that ended unreachable with nothing received (r->mu) */
    int busy_refusals;          /* "already streaming" refusals in a row (r->mu): a rejoined rank's old
                                   stream is still attached on the worker until it sees the cancel */
    bool no_direct;             /* a data connection to this worker could not be opened: streams stay on gRPC
                                   (stream thread only) */
    char unreachable[256];      /* non-empty: this worker cannot be reached from here, and why (r->mu) */
};

/* A stream the worker refused as "already streaming" (this rank's previous stream, closed by a restart of
 * the job's handle, not yet detached there) is tried again at the next heartbeat rather than a second later,
 * this many times in a row. */
#define BUSY_RETRIES 5

/* A listed worker whose streams fail this many times in a row (one try a second) with nothing received is
 * unreachable from this client: logged once and reported to the dispatcher. */
#define UNREACHABLE_AFTER 2

struct remote {
    struct remote_opts o;
    struct remote_job job;
    uint64_t incarnation;
    struct spw_rpc_channel *disp;
    struct spw_direct_tls *direct_tls;  /* TLS of data connections, with their sessions per worker (NULL:
                                           plaintext, or none could be made: streams then stay on gRPC) */
    struct assembler *a;
    struct intake in;                   /* what the streams do with a message (remote_start fills it) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping, started;
    bool client_only;                   /* the dispatcher handed the job back: no worker serves it */
    bool finished_seen;                 /* a heartbeat said the job is finished at the dispatcher */
    bool hb_over;                       /* the dispatcher removed the finished job: no more heartbeats */
    uint8_t *pipeline;                  /* the job's Pipeline, packed: re-attaching creates it again */
    size_t pipeline_len;
    char no_worker[256];                /* non-empty: every alive worker refused the job; the dispatcher's why */
    uint64_t workers_digest;            /* of the worker list last received by heartbeat (0: none) */
    pthread_t hb_tid;
    struct stream streams[MAX_STREAMS];
    int n_streams;
    struct remote_stats stats;
    struct asm_split *acks;             /* heartbeat scratch (MAX_ACKS_PER_HEARTBEAT each) */
    Spillway__V1__SplitRef *refs;
    Spillway__V1__SplitRef **ptrs;
    struct trainer_sample {             /* the trainer's counters at the last RATE_BEATS heartbeats */
        int64_t ns, consumed, wait_ns, cpu_ns, starved_ns;
    } hb_seen[RATE_BEATS];
    int hb_n;
    int64_t transport_seen;             /* the transport threads' CPU when last shared out (heartbeat thread) */
};

/* The dispatcher no longer knows the job (it restarted without a journal, or gave its id to another job):
 * create it again from what the trainer has been given and take its new id and secret (attach.c). Returns
 * 0; -EAGAIN when the dispatcher could not be asked (try again later); another negative code with why when
 * it refused. Heartbeat thread only. */
int session_reattach(struct remote *r, char *why, size_t whylen);
/* Start a stream thread for every listed worker that has none. Called with r->mu held. */
void streams_start(struct remote *r);
/* Merge the dispatcher's worker list into the stream table. Called with r->mu held. */
void streams_update(struct remote *r, Spillway__V1__WorkerAddress **w, size_t n);

#endif
