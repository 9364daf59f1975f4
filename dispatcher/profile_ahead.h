/* dispatcher/profile_ahead.h - workers' profiles of a pipeline asked ahead of its CreateJob. A client about
 * to have its job planned (GetManifest with plan_ahead) measures itself and probes its links for about a
 * second first; the workers profile the pipeline meanwhile, on their own CPUs, and its CreateJob takes their
 * answers instead of asking then (~0.3-0.5 s less before the first element). Each ask is taken once (the
 * next job of the same pipeline is profiled afresh); one not taken within a minute is dropped; at most 4 at a
 * time and 2 per client host (a host's third replaces its oldest ended one, so one host flooding GetManifest
 * neither keeps every worker profiling nor takes the others' room); past that CreateJob asks itself as before.
 * Thread model: one lock; each ask runs on a thread of its own; a taker waits on a condition variable. */
#ifndef SPW_DISPATCHER_PROFILE_AHEAD_H
#define SPW_DISPATCHER_PROFILE_AHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "dispatcher/planning.h"
#include "proto/spillway.pb-c.h"

#define DISP_AHEAD_MAX 4
#define DISP_AHEAD_PER_HOST 2
#define DISP_AHEAD_KEEP_MS 60000
#define DISP_AHEAD_MAX_PIPELINE_BYTES (1u << 20)    /* a bigger packed pipeline is not kept: CreateJob asks */

struct disp_ahead;

/* Asks as `how` says (its token copied). */
int disp_ahead_create(const struct disp_ask *how, struct disp_ahead **out);
/* Waits for asks still running (each at most the profile deadline). */
void disp_ahead_destroy(struct disp_ahead *a);

/* For client host `host` (its IP, as lib/rpc names a peer's), ask the workers at addrs[0..n) (copied) for
 * their profiles of pipe (n_cuts cuts), unless an ask of the same pipeline is running or kept. When host holds
 * DISP_AHEAD_PER_HOST asks, its oldest ended and untaken one is dropped for this. Returns 0 (asking, or
 * already), -EAGAIN (host's asks all still running), -EBUSY (DISP_AHEAD_MAX asks kept), -E2BIG (a pipeline
 * over DISP_AHEAD_MAX_PIPELINE_BYTES packed) or -ENOMEM. */
int disp_ahead_start(struct disp_ahead *a, const char *host, const Spillway__V1__Pipeline *pipe, int n_cuts,
                     char *const *addrs, int n, int64_t now_ms);

/* Take pipe's ask: wait for it to end (at most timeout_ms), then, for each addrs[i] it asked, set asked[i]
 * (answered or not: a worker that gave no profile ahead is not asked again) and add its profile to known
 * when it gave one. Returns how many it added, or -ENOENT when there is no ask of pipe (or it was cut off by
 * the timeout, or n_cuts differs). */
int disp_ahead_take(struct disp_ahead *a, const Spillway__V1__Pipeline *pipe, int n_cuts, char *const *addrs, int n,
                    bool *asked, struct disp_profiles *known, int timeout_ms, int64_t now_ms);

/* How many asks are still running. */
int disp_ahead_running(struct disp_ahead *a);

/* Since creation (metrics): asks started, taken by their CreateJob, dropped untaken (a minute after they
 * ended, or for their host's newer one), and not started (the host's or all room taken, a pipeline too big). */
struct disp_ahead_counts {
    uint64_t started, taken, expired, refused;
    int running;
};
void disp_ahead_counts(struct disp_ahead *a, struct disp_ahead_counts *out);

#endif
