/* pipeline/profile_ask.h - asking workers for their profiles of a pipeline (Worker.Profile), all at once (up
 * to 32 calls in flight, lib/parallel.h): one takes a worker ~0.3 s (256 elements, every cut), and a job over
 * many workers would otherwise wait for them one after another. The dispatcher's planning and spillctl plan
 * both ask this way. Each answer goes into its own slot, checked (spw_plan_worker_from_proto) before use;
 * blocking; thread-safe on distinct slot arrays. */
#ifndef SPW_PIPELINE_PROFILE_ASK_H
#define SPW_PIPELINE_PROFILE_ASK_H

#include <stdbool.h>

#include "pipeline/planner.h"
#include "proto/spillway.pb-c.h"

struct spw_profile_ask {
    const char *addr;                   /* in: the worker */
    bool ask;                           /* in: false = leave this slot alone (its profile is known) */
    int rc;                             /* out: 0 = w and bytes hold its profile; -1 = none, msg says why */
    int status;                         /* out: the call's SPW_RPC_* status */
    struct spw_plan_worker w;
    double bytes[SPW_PLAN_MAX_CUTS];
    char msg[256];
};

/* Ask every slot with `ask` set for its worker's profile of pipe (n_cuts cuts, `samples` elements, 0 = the
 * worker's default), with auth_token (may be NULL) and a deadline of timeout_ms each. */
void spw_profile_ask_all(struct spw_profile_ask *asks, int n, const Spillway__V1__Pipeline *pipe, int n_cuts,
                         int samples, const char *auth_token, int timeout_ms);

#endif
