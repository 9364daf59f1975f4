/* dispatcher/planning.c - planning a job at creation (see planning.h). Every size in the client's facts is
 * checked against the pipeline's cuts before use; a worker that cannot profile (it cannot list the data,
 * it is gone) is left out of the plan, and the plan says how many answered. The workers are asked
 * concurrently (pipeline/profile_ask.h), each answer into a slot of its own; they are merged after, on the
 * caller's thread. */
#include "dispatcher/planning.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/rpc.h"
#include "pipeline/compress.h"
#include "pipeline/plan_proto.h"
#include "pipeline/profile_ask.h"

#define PROFILE_SAMPLES 256    /* as the client measures itself (client/job.c) */

static bool finite_nonneg(double v)
{
    return isfinite(v) && v >= 0;
}

/* Caps on what a client may claim of compression: past them the facts are refused, not believed. */
#define ZSTD_RATIO_MAX 1e4
#define ZSTD_NS_MAX 1e6

static int check_facts(const Spillway__V1__ClientFacts *cf, int n_cuts, char *msg, size_t msglen)
{
    if ((int)cf->n_remote_ns != n_cuts || (int)cf->n_bytes != n_cuts) {
        snprintf(msg, msglen, "client facts: %zu costs and %zu sizes for a pipeline with %d cuts", cf->n_remote_ns,
                 cf->n_bytes, n_cuts);
        return -EINVAL;
    }
    for (int k = 0; k < n_cuts; k++)
        if (!finite_nonneg(cf->remote_ns[k]) || !finite_nonneg(cf->bytes[k])) {
            snprintf(msg, msglen, "client facts: cut %d: cost %g or size %g is not a non-negative number", k,
                     cf->remote_ns[k], cf->bytes[k]);
            return -EINVAL;
        }
    if (!(isfinite(cf->local_ns) && cf->local_ns > 0) || !(isfinite(cf->cores) && cf->cores > 0 && cf->cores <= 4096) ||
        !finite_nonneg(cf->rate)) {
        snprintf(msg, msglen, "client facts: local cost %g, cores %g or rate %g out of range", cf->local_ns,
                 cf->cores, cf->rate);
        return -EINVAL;
    }
    const size_t nz = cf->n_zstd_ratio;
    if ((nz != 0 && nz != (size_t)n_cuts) || cf->n_zstd_compress_ns_per_byte != nz ||
        cf->n_zstd_decompress_ns_per_byte != nz) {
        snprintf(msg, msglen, "client facts: compression measured for %zu/%zu/%zu cuts of %d", nz,
                 cf->n_zstd_compress_ns_per_byte, cf->n_zstd_decompress_ns_per_byte, n_cuts);
        return -EINVAL;
    }
    for (size_t k = 0; k < nz; k++)
        if (!finite_nonneg(cf->zstd_ratio[k]) || cf->zstd_ratio[k] > ZSTD_RATIO_MAX ||
            !finite_nonneg(cf->zstd_compress_ns_per_byte[k]) || cf->zstd_compress_ns_per_byte[k] > ZSTD_NS_MAX ||
            !finite_nonneg(cf->zstd_decompress_ns_per_byte[k]) || cf->zstd_decompress_ns_per_byte[k] > ZSTD_NS_MAX) {
            snprintf(msg, msglen, "client facts: cut %zu: compression ratio %g or costs %g/%g ns per byte out of "
                     "range", k, cf->zstd_ratio[k], cf->zstd_compress_ns_per_byte[k],
                     cf->zstd_decompress_ns_per_byte[k]);
            return -EINVAL;
        }
    if (cf->compress < -1 || cf->compress > SPW_ZSTD_MAX_LEVEL || !finite_nonneg(cf->recv_ns_per_byte) ||
        cf->recv_ns_per_byte > ZSTD_NS_MAX) {
        snprintf(msg, msglen, "client facts: compress %d or receive cost %g ns per byte out of range", cf->compress,
                 cf->recv_ns_per_byte);
        return -EINVAL;
    }
    if (!finite_nonneg(cf->gpu_elements_per_s) || cf->gpu_elements_per_s > SPW_PLAN_GPU_MAX ||
        !finite_nonneg(cf->gpu_cpu_ns)) {
        snprintf(msg, msglen, "client facts: GPU rate %g or cost %g out of range", cf->gpu_elements_per_s,
                 cf->gpu_cpu_ns);
        return -EINVAL;
    }
    return 0;
}

#define CALIBRATE_SLACK 1.1         /* calibrate the client when the prediction is above this x measured */
#define CALIBRATE_MIN 0.1           /* never below this fraction of the cores the client declared */
#define CALIBRATE_BUSY 0.8          /* only a client using at least this fraction of its cores is calibrated */

int disp_plan_job(const Spillway__V1__Pipeline *pipe, const Spillway__V1__ClientFacts *cf, int n_cuts,
                  char *const *addrs, int n_addrs, const struct disp_ask *how, struct disp_profiles *known,
                  struct spw_plan *plan, int *profiled, char *msg, size_t msglen)
{
    return disp_replan_job(pipe, cf, n_cuts, addrs, n_addrs, how, known, NULL, plan, profiled, msg, msglen);
}

/* asks[i] := the profile of the worker at addrs[i]: from known (may be NULL), else asked - all those not in
 * known at once (pipeline/profile_ask.h). */
static void profile_all(char *const *addrs, int n_addrs, const struct disp_ask *how, const Spillway__V1__Pipeline *pipe,
                        int n_cuts, const struct disp_profiles *known, struct spw_profile_ask *asks)
{
    for (int i = 0; i < n_addrs; i++) {
        asks[i] = (struct spw_profile_ask){.addr = addrs[i], .ask = true};
        for (int j = 0; known && j < known->n && asks[i].ask; j++)
            if (!strcmp(known->addr[j], addrs[i])) {
                asks[i].ask = false;
                asks[i].w = known->w[j];
                memcpy(asks[i].bytes, known->bytes, sizeof(double) * (size_t)n_cuts);
            }
    }
    disp_profile_ask(asks, n_addrs, pipe, n_cuts, how);
}

bool disp_profiles_has(const struct disp_profiles *known, const char *addr)
{
    for (int j = 0; known && j < known->n; j++)
        if (!strcmp(known->addr[j], addr))
            return true;
    return false;
}

void disp_profile_ask(struct spw_profile_ask *asks, int n, const Spillway__V1__Pipeline *pipe, int n_cuts,
                      const struct disp_ask *how)
{
    spw_profile_ask_all(asks, n, pipe, n_cuts, PROFILE_SAMPLES, how ? how->auth_token : NULL,
                        how && how->timeout_ms > 0 ? how->timeout_ms : DISP_PROFILE_TIMEOUT_MS);
    for (int i = 0; i < n; i++)
        if (asks[i].ask && asks[i].rc)
            spw_log(SPW_LOG_WARN, "dispatcher", "planning: worker=%s gave no usable profile status=%s msg=\"%s\"",
                    asks[i].addr, spw_rpc_status_name(asks[i].status), asks[i].msg);
}

int disp_replan_job(const Spillway__V1__Pipeline *pipe, const Spillway__V1__ClientFacts *cf, int n_cuts,
                    char *const *addrs, int n_addrs, const struct disp_ask *how, struct disp_profiles *known,
                    struct disp_measured *seen, struct spw_plan *plan, int *profiled, char *msg, size_t msglen)
{
    if (n_cuts < 1 || n_cuts > SPW_PLAN_MAX_CUTS) {
        snprintf(msg, msglen, "a pipeline with %d cuts cannot be planned", n_cuts);
        return -EINVAL;
    }
    int rc = check_facts(cf, n_cuts, msg, msglen);
    if (rc)
        return rc;
    struct spw_plan_input *in = calloc(1, sizeof *in);
    if (!in)
        return -ENOMEM;
    in->n_cuts = n_cuts;
    for (int k = 0; k < n_cuts; k++) {
        in->bytes[k] = cf->bytes[k];
        in->remote_ns[k] = cf->remote_ns[k];
    }
    for (size_t k = 0; k < cf->n_zstd_ratio; k++) {
        in->zstd_ratio[k] = cf->zstd_ratio[k];
        in->zstd_compress_ns[k] = cf->zstd_compress_ns_per_byte[k];
        in->zstd_decompress_ns[k] = cf->zstd_decompress_ns_per_byte[k];
    }
    in->compress = cf->compress;
    in->recv_ns_per_byte = cf->recv_ns_per_byte;
    in->local_ns = cf->local_ns;
    in->client_cores = cf->cores;
    in->rate = cf->rate;
    in->local_off = cf->local_off;
    in->gpu = (struct spw_plan_gpu){.rate = cf->gpu_elements_per_s, .cpu_ns = cf->gpu_cpu_ns};
    in->force_cut = -1;
    in->nic_bytes_per_s = finite_nonneg(cf->nic_bytes_per_s) ? cf->nic_bytes_per_s : 0;
    struct spw_plan_measured *m = calloc(1, sizeof *m);
    if (!m) {
        free(in);
        return -ENOMEM;
    }
    m->cut = seen ? seen->cut : -1;
    if (n_addrs > SPW_PLAN_MAX_WORKERS)
        n_addrs = SPW_PLAN_MAX_WORKERS;
    struct spw_profile_ask *asks = calloc((size_t)n_addrs + 1, sizeof *asks);
    if (!asks) {
        free(m);
        free(in);
        return -ENOMEM;
    }
    profile_all(addrs, n_addrs, how, pipe, n_cuts, known, asks);
    for (int i = 0; i < n_addrs; i++)
        if (asks[i].rc == 0) {
            if (asks[i].ask && known && known->n < DISP_PROFILES_MAX && strlen(addrs[i]) < sizeof known->addr[0]) {
                if (known->n == 0)
                    memcpy(known->bytes, asks[i].bytes, sizeof(double) * (size_t)n_cuts);
                snprintf(known->addr[known->n], sizeof known->addr[0], "%s", addrs[i]);
                known->w[known->n++] = asks[i].w;
            }
            in->workers[in->n_workers] = asks[i].w;
            m->worker_ns[in->n_workers] = seen && seen->worker_ns ? seen->worker_ns[i] : 0;
            if (in->n_workers == 0)       /* the workers' own sizes: what travels is what they produce */
                memcpy(in->bytes, asks[i].bytes, sizeof(double) * (size_t)n_cuts);
            for (size_t l = 0; l < cf->n_links; l++)     /* the client's probe of this worker's link */
                if (cf->links[l]->address && !strcmp(cf->links[l]->address, addrs[i]) &&
                    finite_nonneg(cf->links[l]->bytes_per_s))
                    in->workers[in->n_workers].link_bytes_per_s = cf->links[l]->bytes_per_s;
            in->n_workers++;
        }
    free(asks);
    *profiled = in->n_workers;
    if (seen) {
        m->remote_ns = seen->remote_ns;
        m->local_ns = seen->local_ns;
        spw_plan_use_measured(in, m);
    }
    if (seen)
        seen->alone = fmin(in->client_cores * 1e9 / in->local_ns, in->rate > 0 ? in->rate : INFINITY);
    const bool calibrate = seen && seen->calibrate && seen->client_cpu >= CALIBRATE_BUSY * in->client_cores;
    rc = calibrate ? spw_plan_calibrate(in, seen->cut, seen->elements_per_s, CALIBRATE_SLACK, CALIBRATE_MIN, plan)
                   : spw_plan_decide(in, plan);
    if (seen)
        seen->cores = in->client_cores;
    if (rc)
        snprintf(msg, msglen, "planner: %s", plan->why);
    free(m);
    free(in);
    return rc;
}

int disp_replan_choice(const struct spw_plan *p, int current_cut, double hysteresis)
{
    if (current_cut < 0 || current_cut >= p->n)
        return current_cut;
    int best = p->best;
    for (int k = 0; best < 0 && k < p->n; k++)          /* no offload: still the best the service can do */
        if (p->c[k].throughput > p->c[current_cut].throughput)
            best = k;
    if (best < 0 || best == current_cut)
        return current_cut;
    return p->c[best].throughput >= (1 + hysteresis) * p->c[current_cut].throughput ? best : current_cut;
}

bool disp_hand_back(const struct spw_plan *p, double alone, double hysteresis)
{
    double service = 0;     /* the best mix at any cut (at the plan's cores) */
    for (int k = 0; k < p->n; k++)
        service = fmax(service, p->c[k].throughput);
    return alone > 0 && service < (1 + hysteresis) * alone;
}

void disp_plan_keep(struct spw_plan *p, int cut, double hysteresis)
{
    if (cut < 0 || cut >= p->n || p->best == cut)
        return;
    const struct spw_plan_candidate *c = &p->c[cut];
    char why[sizeof p->why];
    const int len = snprintf(why, sizeof why, "the running job keeps cut %d (%.0f elements/s predicted; a change "
                             "needs %.0f%% more, handing it back %.0f%% over the client alone); a new job would get: %s",
                             cut, c->throughput, hysteresis * 100, hysteresis * 100, p->why);
    if (len > 0)                /* cut short if need be: the head says it */
        memcpy(p->why, why, sizeof why);
    p->best = cut;
    p->offload = true;
    p->compressed = c->compressed;
    p->throughput = c->throughput;
    p->local_share = c->throughput > 0 ? c->local_rate / c->throughput : 0;
}
