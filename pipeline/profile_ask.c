/* pipeline/profile_ask.c - Worker.Profile asked of many workers at once (see profile_ask.h). Each call runs
 * on a lib/parallel.h thread and writes only its own slot. */
#include "pipeline/profile_ask.h"

#include <stdio.h>

#include "lib/methods.h"
#include "lib/parallel.h"
#include "lib/rpc.h"
#include "pipeline/plan_proto.h"

#define PROFILE_PARALLEL 32

struct round {
    struct spw_profile_ask *asks;
    const Spillway__V1__Pipeline *pipe;
    int n_cuts, samples, timeout_ms;
    const char *auth_token;
};

static void ask_one(void *ctx, int i)
{
    const struct round *r = ctx;
    struct spw_profile_ask *a = &r->asks[i];
    if (!a->ask)
        return;
    a->rc = -1;
    struct spw_rpc_channel_opts co = {.auth_token = r->auth_token};
    struct spw_rpc_channel *ch;
    if (spw_rpc_channel_create(a->addr, &co, &ch) != 0) {
        snprintf(a->msg, sizeof a->msg, "bad address");
        return;
    }
    Spillway__V1__ProfileRequest pr = SPILLWAY__V1__PROFILE_REQUEST__INIT;
    pr.pipeline = (Spillway__V1__Pipeline *)r->pipe;
    pr.samples = r->samples;
    ProtobufCMessage *reply = NULL;
    a->status = spw_rpc_call_reply(ch, SPW_PATH(PROFILE), &pr.base, r->timeout_ms,
                                   &spillway__v1__profile_response__descriptor, &reply, a->msg, sizeof a->msg);
    spw_rpc_channel_destroy(ch);
    if (reply && spw_plan_worker_from_proto((Spillway__V1__ProfileResponse *)reply, r->n_cuts, &a->w, a->bytes) == 0)
        a->rc = 0;
    else if (reply)
        snprintf(a->msg, sizeof a->msg, "other cuts or bad numbers");
    if (reply)
        protobuf_c_message_free_unpacked(reply, NULL);
}

void spw_profile_ask_all(struct spw_profile_ask *asks, int n, const Spillway__V1__Pipeline *pipe, int n_cuts,
                         int samples, const char *auth_token, int timeout_ms)
{
    struct round r = {.asks = asks, .pipe = pipe, .n_cuts = n_cuts, .samples = samples, .timeout_ms = timeout_ms,
                      .auth_token = auth_token};
    spw_parallel_for(n, PROFILE_PARALLEL, ask_one, &r);
}
