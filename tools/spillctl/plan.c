/* tools/spillctl/plan.c - spillctl plan (see plan.h). The client's side of DESIGN §7's costs comes from measuring
 * here: f = read + every group + the copy into the batch; s(k) = receiving b_k bytes + groups [k, n) + the
 * copy, receiving charged at 0.3 ns/byte (scripts/bench/stream.sh; the probe's own reading is shown, not
 * used yet). A short probe of the workers' links (client/probe.c) gives each worker's link and the client's
 * total (its NIC).
 * Single-threaded apart from the probe's and the measuring threads and the workers' Profile calls (all at
 * once, pipeline/profile_ask.h); one RPC per worker. */
#include "tools/spillctl/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spillway/client.h"
#include "tools/spillctl/inspect.h"
#include "client/probe.h"
#include "lib/cpulimit.h"
#include "lib/err.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "pipeline/fusion.h"
#include "pipeline/plan_proto.h"
#include "pipeline/profile_ask.h"
#include "pipeline/planner.h"
#include "pipeline/profile.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "proto/spillway.pb-c.h"

#define DEFAULT_SAMPLES 256
#define DEFAULT_RECV_NS_PER_BYTE 0.3

/* Profile every worker the probe found alive (links), all at once, into in->workers, with its measured link.
 * Returns 0 or 1 (and says why). */
static int profile_workers(const struct spw_plan_cli_opts *o, const Spillway__V1__Pipeline *pipe, int n_cuts,
                           const struct probe_result *links, struct spw_plan_input *in)
{
    const int n = links->n < SPW_PLAN_MAX_WORKERS ? links->n : SPW_PLAN_MAX_WORKERS;
    struct spw_profile_ask *asks = calloc((size_t)n + 1, sizeof *asks);
    if (!asks) {
        fprintf(stderr, "spillctl: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++)
        asks[i] = (struct spw_profile_ask){.addr = links->addr[i], .ask = true};
    spw_profile_ask_all(asks, n, pipe, n_cuts, o->samples > 0 ? o->samples : DEFAULT_SAMPLES, o->auth_token, 120000);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (asks[i].rc) {
            fprintf(stderr, "spillctl: worker %s: Profile: %s\n", links->addr[i], asks[i].msg);
            rc = 1;
            continue;
        }
        in->workers[in->n_workers] = asks[i].w;
        in->workers[in->n_workers++].link_bytes_per_s = links->bytes_per_s[i];
    }
    free(asks);
    return rc;
}

/* Print a plan (from the planner here, or as the dispatcher kept it): the candidate table and the choice.
 * spec (may be NULL) names the op each cut ends with. */
static void print_plan(const Spillway__V1__Plan *m, const struct spw_pipeline_spec *spec, bool json)
{
    if (json) {
        printf("{\"offload\": %s, \"cut\": %d, \"local_share\": %.3f, \"throughput\": %.1f, \"local_only\": %.1f, "
               "\"workers\": %d, \"workers_needed\": %d, \"why\": ",
               m->offload ? "true" : "false", m->cut, m->local_share, m->throughput, m->local_only, m->workers,
               m->workers_needed);
        spw_json_string(stdout, m->why ? m->why : "");
        printf(", \"candidates\": [");
        for (size_t k = 0; k < m->n_candidates; k++) {
            const Spillway__V1__PlanCandidate *c = m->candidates[k];
            printf("%s{\"cut\": %d, \"bytes\": %.0f, \"remote_capacity\": %.1f, \"client_ns\": %.0f, "
                   "\"throughput\": %.1f, \"remote\": %.1f, \"local\": %.1f, \"workers_needed\": %d}",
                   k ? ", " : "", c->cut, c->bytes, c->remote_capacity, c->client_ns, c->throughput, c->remote,
                   c->local, c->workers_needed);
        }
        printf("]}\n");
        return;
    }
    struct spw_group groups[256];
    const int ng = spec ? spw_fusion_groups(spec, groups) : 0;
    printf("local-only: %.0f elements/s; workers profiled: %d\n\n", m->local_only, m->workers);
    printf("%-4s %-24s %10s %14s %12s %12s %10s %10s %8s\n", "CUT", "WORKERS RUN UP TO", "KB/ELEM", "REMOTE CAP/S",
           "CLIENT US", "PREDICTED/S", "REMOTE/S", "LOCAL/S", "WORKERS");
    for (size_t k = 0; k < m->n_candidates; k++) {
        const Spillway__V1__PlanCandidate *c = m->candidates[k];
        char upto[40] = "nothing: ships the file";
        if (c->cut > 0 && c->cut <= ng)
            snprintf(upto, sizeof upto, "%s",
                     spw_op_name(spec->ops[groups[c->cut - 1].first + groups[c->cut - 1].count - 1].kind));
        else if (c->cut > 0)
            snprintf(upto, sizeof upto, "group %d", c->cut - 1);
        char need[16] = "-", cap[24] = "unlimited";
        if (c->workers_needed >= 0)
            snprintf(need, sizeof need, "%d", c->workers_needed);
        if (c->remote_capacity >= 0)
            snprintf(cap, sizeof cap, "%.0f", c->remote_capacity);
        printf("%-4d %-24s %10.1f %14s %12.1f %12.0f %10.0f %10.0f %8s%s\n", c->cut, upto, c->bytes / 1e3, cap,
               c->client_ns / 1e3, c->throughput, c->remote, c->local, need,
               m->offload && c->cut == m->cut ? "  <-" : "");
    }
    printf("\n%s\n", m->why ? m->why : "");
    if (m->workers_needed >= 0)
        printf("workers needed for the trainer's rate: %d\n", m->workers_needed);
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
    struct probe_result *links = NULL;
    int status = 1;
    if (!me || !in || !plan)
        goto out;
    if (spw_spec_load_file(o->pipeline, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "spillctl: %s\n", err);    /* err names the file */
        status = 2;
        goto out;
    }
    if (spw_source_open(&spec->source, &src, err, sizeof err) != 0 || spw_spec_to_proto(spec, &pipe) != 0) {
        fprintf(stderr, "spillctl: %s\n", err);
        goto out;
    }
    const int cores = o->local_cores > 0 ? o->local_cores : 1;
    int rc = spw_profile_run(spec, src, o->samples > 0 ? o->samples : DEFAULT_SAMPLES, cores, SPW_PROFILE_BUDGET_MS,
                             me, err, sizeof err);
    if (rc) {
        fprintf(stderr, "spillctl: measuring here: %s\n", rc == SPW_ESOURCE ? err : spw_strerror(rc));
        goto out;
    }
    const int n_cuts = me->groups + 1;
    if (!(links = calloc(1, sizeof *links)) ||
        probe_links(o->dispatcher, &(struct spw_rpc_channel_opts){.auth_token = o->auth_token}, o->max_workers, 600,
                    links, err, sizeof err) != 0) {
        fprintf(stderr, "spillctl: probing the links: %s\n", links ? err : "out of memory");
        goto out;
    }
    const double recv = o->recv_ns_per_byte > 0 ? o->recv_ns_per_byte : DEFAULT_RECV_NS_PER_BYTE;
    spw_plan_client_costs(me, recv, in);
    in->nic_bytes_per_s = links->nic_bytes_per_s;
    const double limit = spw_cpu_limit();
    in->client_cores = cores < limit ? cores : limit;      /* a CPU quota caps what the threads get */
    in->rate = o->rate;
    in->force_cut = o->force_cut == SPW_CUT_ALL ? n_cuts - 1 : o->force_cut >= 0 ? o->force_cut : -1;
    in->local_off = o->local_off;
    if (profile_workers(o, pipe, n_cuts, links, in) != 0)
        goto out;
    if (spw_plan_decide(in, plan) != 0) {
        fprintf(stderr, "spillctl: planner: %s\n", plan->why);
        goto out;
    }
    Spillway__V1__Plan *m = spw_plan_to_proto(plan, in->n_workers);
    if (!m)
        goto out;
    if (!o->json) {
        printf("client: %.2f core(s), %.0f us per element alone; receiving charged %.2f ns/byte (the probe read "
               "%.2f); links (MB/s):", in->client_cores, in->local_ns / 1e3, recv, links->recv_ns_per_byte);
        for (int l = 0; l < links->n; l++)
            printf(" %s %.0f", links->addr[l], links->bytes_per_s[l] / 1e6);
        printf("; all at once %.0f (probed for %.2f s)\n", links->nic_bytes_per_s / 1e6, links->seconds);
    }
    print_plan(m, spec, o->json);
    spw_plan_proto_free(m);
    status = 0;
out:
    free(links);
    free(me);
    free(in);
    free(plan);
    spw_spec_proto_free(pipe);
    spw_source_close(src);
    spw_spec_free(spec);
    return status;
}

int spw_explain_cli(const char *dispatcher, const char *auth_token, const char *job_id, bool json, int timeout_ms)
{
    unsigned long long id;
    if (spw_ctl_job_id(job_id, "explain", &id))
        return 2;
    struct spw_rpc_channel_opts co = {.auth_token = auth_token};
    struct spw_rpc_channel *ch;
    if (spw_rpc_channel_create(dispatcher, &co, &ch) != 0) {
        fprintf(stderr, "spillctl: bad dispatcher address \"%s\"\n", dispatcher);
        return 2;
    }
    Spillway__V1__DescribeJobRequest req = SPILLWAY__V1__DESCRIBE_JOB_REQUEST__INIT;
    req.job = id;
    ProtobufCMessage *reply;
    char msg[512] = "";
    int st = spw_rpc_call_reply(ch, SPW_PATH(DESCRIBE_JOB), &req.base, timeout_ms,
                                &spillway__v1__describe_job_response__descriptor, &reply, msg, sizeof msg);
    spw_rpc_channel_destroy(ch);
    Spillway__V1__DescribeJobResponse *r = (Spillway__V1__DescribeJobResponse *)reply;
    if (!r) {
        fprintf(stderr, "spillctl: DescribeJob at %s: %s: %s\n", dispatcher, spw_rpc_status_name(st), msg);
        return 1;
    }
    int status = 0;
    if (!r->plan) {
        fprintf(stderr, "spillctl: job %llu was not planned (it was created with a fixed cut: %d)\n", id,
                r->job ? r->job->cut : -1);
        status = 1;
    } else {
        print_plan(r->plan, NULL, json);
    }
    spillway__v1__describe_job_response__free_unpacked(r, NULL);
    return status;
}
