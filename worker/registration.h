/* worker/registration.h - a worker's membership: register with the dispatcher (retrying with backoff until it
 * answers), heartbeat at the interval it asks for, register again under the same id when the dispatcher
 * does not know the worker (it restarted, or retired the worker after missed heartbeats), and keep the task
 * list the heartbeats carry. One background thread; the accessors are thread-safe. */
#ifndef SPW_WORKER_REGISTRATION_H
#define SPW_WORKER_REGISTRATION_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/spillway.pb-c.h"

struct wrk_registration;

struct wrk_registration_opts {
    const char *dispatcher;     /* host:port */
    const char *advertise;      /* host:port clients dial */
    int threads;
    const char *gpu;            /* the GPU it also makes elements on (NULL or empty: none) */
    const char *auth_token;     /* NULL = none */
    /* Called on the registration thread: after each (re)registration, and with each heartbeat reply. */
    void (*on_registered)(void *ctx, uint64_t worker_id, uint64_t secret);
    /* Called on the registration thread when the dispatcher no longer knows the worker (it registers again;
     * on_registered follows when that succeeds). NULL: none. */
    void (*on_unregistered)(void *ctx);
    void (*on_tasks)(void *ctx, const Spillway__V1__WorkerHeartbeatResponse *reply);
    /* Called on the registration thread before each heartbeat: per-job progress into out (at most cap; io
     * holds as many entries for their remote shard reads; `again`: the last heartbeat failed, so what it
     * carried did not arrive); returns the count. NULL: none. */
    int (*progress)(void *ctx, Spillway__V1__ProducerProgress *out, Spillway__V1__SourceIo *io, int cap,
                    bool again);
    /* Likewise: the listed jobs the worker cannot serve (reasons valid until the next on_tasks). NULL: none. */
    int (*refusals)(void *ctx, Spillway__V1__JobRefusal *out, int cap);
    /* ... and the bytes made and waiting for client streams, all jobs (NULL: not reported). */
    int64_t (*buffered)(void *ctx);
    void *ctx;
};

/* Start the background thread (strings are copied). Returns 0 or a negative error. */
int wrk_registration_start(const struct wrk_registration_opts *o, struct wrk_registration **out);
/* Stop the thread and free; accepts NULL. */
void wrk_registration_stop(struct wrk_registration *r);
/* Heartbeat now instead of at the next interval (a client asked for a job not in the task list yet).
 * Accepts NULL. */
void wrk_registration_poke(struct wrk_registration *r);
/* The id the dispatcher gave (0 before the first registration). */
uint64_t wrk_registration_id(struct wrk_registration *r);

#endif
