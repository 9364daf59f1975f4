/* client/plan.c - spillctl plan (see plan.h). The client's side of DESIGN §7's costs comes from measuring
 * here: f = read + every group + the copy into the batch; s(k) = receiving b_k bytes + groups [k, n) + the
 * copy. Receiving is charged per byte (recv_ns_per_byte: kernel and gRPC work besides the copy, from
 * scripts/bench-stream.sh on this kind of machine) until the link probe measures it. Links are taken as
 * unlimited (no probe yet). Single-threaded; one RPC per worker. */
#include "client/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/rpc.h"
#include "pipeline/fusion.h"
#include "pipeline/planner.h"
#include "pipeline/profile.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "proto/spillway.pb-c.h"

#define DEFAULT_SAMPLES 64
#define DEFAULT_RECV_NS_PER_BYTE 0.3

/* Profile every alive worker into in->workers (costs per cut). Returns 0 or 1 (and says why). */
static int profile_workers(const struct spw_plan_cli_opts *o, const Spillway__V1__Pipeline *pipe, int n_cuts,
                           struct spw_plan_input *in)
{
    struct spw_rpc_channel_opts co = {.auth_token = o->auth_token};
    struct spw_rpc_channel *disp;
    if (spw_rpc_channel_create(o->dispatcher, &co, &disp) != 0) {
        fprintf(stderr, "spillctl: bad dispatcher address \"%s\"\n", o->dispatcher);
        return 1;
    }
    Spillway__V1__ListWorkersRequest lw = SPILLWAY__V1__LIST_WORKERS_REQUEST__INIT;
    uint8_t *resp = NULL;
    size_t len = 0;
    char msg[512] = "";
    int st = spw_rpc_call_msg(disp, "/spillway.v1.Dispatcher/ListWorkers", &lw.base, o->timeout_ms, &resp, &len,
                              msg, sizeof msg);
    spw_rpc_channel_destroy(disp);
    Spillway__V1__ListWorkersResponse *ws = st == SPW_RPC_OK ? spillway__v1__list_workers_response__unpack(NULL, len, resp)
                                                             : NULL;
    free(resp);
    if (!ws) {
        fprintf(stderr, "spillctl: ListWorkers at %s: %s: %s\n", o->dispatcher, spw_rpc_status_name(st), msg);
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; i < ws->n_workers && in->n_workers < SPW_PLAN_MAX_WORKERS && !rc; i++) {
        if (!ws->workers[i]->alive)
            continue;
        struct spw_rpc_channel *ch;
        if (spw_rpc_channel_create(ws->workers[i]->address, &co, &ch) != 0)
            continue;
        Spillway__V1__ProfileRequest pr = SPILLWAY__V1__PROFILE_REQUEST__INIT;
        pr.pipeline = (Spillway__V1__Pipeline *)pipe;
        pr.samples = o->samples > 0 ? o->samples : DEFAULT_SAMPLES;
        resp = NULL;
        st = spw_rpc_call_msg(ch, "/spillway.v1.Worker/Profile", &pr.base, 120000, &resp, &len, msg, sizeof msg);
        spw_rpc_channel_destroy(ch);
        Spillway__V1__ProfileResponse *p = st == SPW_RPC_OK ? spillway__v1__profile_response__unpack(NULL, len, resp)
                                                            : NULL;
        free(resp);
        if (!p || (int)p->n_cuts != n_cuts) {
            fprintf(stderr, "spillctl: worker %s: Profile: %s\n", ws->workers[i]->address,
                    p ? "a different number of cuts" : msg);
            rc = 1;
        } else {
            struct spw_plan_worker *w = &in->workers[in->n_workers++];
            w->cores = p->threads;
            w->efficiency = 1;          /* measured with every thread busy: contention is in the costs */
            for (int k = 0; k < n_cuts; k++)
                w->cost_ns[k] = p->cuts[k]->ns_per_element;
        }
        if (p)
            spillway__v1__profile_response__free_unpacked(p, NULL);
    }
    spillway__v1__list_workers_response__free_unpacked(ws, NULL);
    return rc;
}

static void print_table(const struct spw_plan_cli_opts *o, const struct spw_pipeline_spec *spec,
                        const struct spw_plan *p, const struct spw_plan_input *in)
{
    struct spw_group groups[256];
    spw_fusion_groups(spec, groups);
    if (o->json) {
        printf("{\"local_only\": %.1f, \"offload\": %s, \"cut\": %d, \"local_share\": %.3f, \"throughput\": %.1f, "
               "\"workers\": %d, \"workers_needed\": %d, \"why\": \"%s\", \"candidates\": [",
               p->local_only, p->offload ? "true" : "false", p->best, p->local_share, p->throughput, in->n_workers,
               p->workers_needed, p->why);
        for (int k = 0; k < p->n; k++) {
            const struct spw_plan_candidate *c = &p->c[k];
            printf("%s{\"cut\": %d, \"bytes\": %.0f, \"remote_capacity\": %.1f, \"client_ns\": %.0f, "
                   "\"throughput\": %.1f, \"remote\": %.1f, \"local\": %.1f, \"workers_needed\": %d}",
                   k ? ", " : "", c->k, c->bytes, isinf(c->remote_capacity) ? -1.0 : c->remote_capacity,
                   c->remote_ns, c->throughput, c->remote_rate, c->local_rate, c->workers_needed);
        }
        printf("]}\n");
        return;
    }
    printf("client: %d core(s), %.0f us per element alone: %.0f elements/s local-only%s\n", (int)in->client_cores,
           in->local_ns / 1e3, p->local_only, in->rate > 0 && p->local_only >= in->rate ? " (the trainer's rate)" : "");
    printf("workers: %d profiled\n\n", in->n_workers);
    printf("%-4s %-24s %10s %14s %12s %12s %10s %10s %8s\n", "CUT", "WORKERS RUN UP TO", "KB/ELEM", "REMOTE CAP/S",
           "CLIENT US", "PREDICTED/S", "REMOTE/S", "LOCAL/S", "WORKERS");
    for (int k = 0; k < p->n; k++) {
        const struct spw_plan_candidate *c = &p->c[k];
        const char *upto = k == 0 ? "nothing: ships the file"
                                  : spw_op_name(spec->ops[groups[k - 1].first + groups[k - 1].count - 1].kind);
        char need[16] = "-";
        if (c->workers_needed >= 0)
            snprintf(need, sizeof need, "%d", c->workers_needed);
        printf("%-4d %-24s %10.1f %14.0f %12.1f %12.0f %10.0f %10.0f %8s%s\n", k, upto, c->bytes / 1e3,
               c->remote_capacity, c->remote_ns / 1e3, c->throughput, c->remote_rate, c->local_rate, need,
               k == p->best ? "  <-" : "");
    }
    printf("\n%s\n", p->why);
    if (p->workers_needed >= 0)
        printf("workers needed for the trainer's rate: %d\n", p->workers_needed);
}

int spw_plan_cli(const struct spw_plan_cli_opts *o)
{
    char err[1024];
    struct spw_pipeline_spec *spec = NULL;
    struct spw_source *src = NULL;
    Spillway__V1__Pipeline *pipe = NULL;
    struct spw_profile *me = malloc(sizeof *me);
    struct spw_plan_input *in = calloc(1, sizeof *in);
    struct spw_plan *plan = malloc(sizeof *plan);
    int status = 1;
    if (!me || !in || !plan)
        goto out;
    if (spw_spec_load_file(o->pipeline, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "spillctl: %s: %s\n", o->pipeline, err);
        status = 2;
        goto out;
    }
    if (spw_source_open(&spec->source, &src, err, sizeof err) != 0 || spw_spec_to_proto(spec, &pipe) != 0) {
        fprintf(stderr, "spillctl: %s\n", err);
        goto out;
    }
    const int cores = o->local_cores > 0 ? o->local_cores : 1;
    int rc = spw_profile_run(spec, src, o->samples > 0 ? o->samples : DEFAULT_SAMPLES, cores, me, err, sizeof err);
    if (rc) {
        fprintf(stderr, "spillctl: measuring here: %s\n", rc == SPW_ESOURCE ? err : spw_strerror(rc));
        goto out;
    }
    const int n_cuts = me->groups + 1;
    const double recv = o->recv_ns_per_byte > 0 ? o->recv_ns_per_byte : DEFAULT_RECV_NS_PER_BYTE;
    const double batch_copy = me->copy_ns[me->groups];
    in->n_cuts = n_cuts;
    in->local_ns = spw_profile_prefix_ns(me, me->groups);      /* read + all groups + the copy into the batch */
    for (int k = 0; k < n_cuts; k++) {
        double suffix = 0;
        for (int g = k; g < me->groups; g++)
            suffix += me->group_ns[g];
        in->bytes[k] = me->bytes[k];
        in->remote_ns[k] = recv * me->bytes[k] + suffix + batch_copy;
    }
    in->client_cores = cores;
    in->rate = o->rate;
    in->force_cut = o->force_cut;
    in->local_off = o->local_off;
    if (profile_workers(o, pipe, n_cuts, in) != 0)
        goto out;
    if (spw_plan_decide(in, plan) != 0) {
        fprintf(stderr, "spillctl: planner: %s\n", plan->why);
        goto out;
    }
    print_table(o, spec, plan, in);
    status = 0;
out:
    free(me);
    free(in);
    free(plan);
    spw_spec_proto_free(pipe);
    spw_source_close(src);
    spw_spec_free(spec);
    return status;
}
