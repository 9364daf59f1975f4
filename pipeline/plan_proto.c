/* pipeline/plan_proto.c - a plan (pipeline/planner.h) as a spillway.v1.Plan message, for the dispatcher's
 * replies and spillctl's tables. Pure; thread-safe. */
#include "pipeline/plan_proto.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

Spillway__V1__Plan *spw_plan_to_proto(const struct spw_plan *p, int workers)
{
    Spillway__V1__Plan *m = calloc(1, sizeof *m);
    Spillway__V1__PlanCandidate *cs = calloc((size_t)p->n + 1, sizeof *cs);
    Spillway__V1__PlanCandidate **ptrs = calloc((size_t)p->n + 1, sizeof *ptrs);
    char *why = strdup(p->why);
    if (!m || !cs || !ptrs || !why) {
        free(m);
        free(cs);
        free(ptrs);
        free(why);
        return NULL;
    }
    spillway__v1__plan__init(m);
    m->offload = p->offload;
    m->cut = p->offload ? p->best : -1;
    m->local_share = p->local_share;
    m->throughput = p->throughput;
    m->local_only = p->local_only;
    m->workers = workers;
    m->workers_needed = p->workers_needed;
    m->why = why;
    m->compress_level = p->compress_level;
    for (int k = 0; k < p->n; k++) {
        const struct spw_plan_candidate *c = &p->c[k];
        spillway__v1__plan_candidate__init(&cs[k]);
        cs[k].cut = c->k;
        cs[k].bytes = c->bytes;
        cs[k].remote_capacity = isinf(c->remote_capacity) ? -1 : c->remote_capacity;
        cs[k].client_ns = c->remote_ns;
        cs[k].throughput = c->throughput;
        cs[k].remote = c->remote_rate;
        cs[k].local = c->local_rate;
        cs[k].workers_needed = c->workers_needed;
        cs[k].compressed = c->compressed;
        ptrs[k] = &cs[k];
    }
    ptrs[0] = &cs[0];                   /* the block to free, even with no candidates */
    m->n_candidates = (size_t)p->n;
    m->candidates = ptrs;
    return m;
}

void spw_plan_proto_free(Spillway__V1__Plan *m)
{
    if (!m)
        return;
    free(m->candidates ? m->candidates[0] : NULL);
    free(m->candidates);
    free(m->why);
    free(m);
}

int spw_plan_worker_from_proto(const Spillway__V1__ProfileResponse *p, int n_cuts, struct spw_plan_worker *w,
                               double *bytes)
{
    if (!p || (int)p->n_cuts != n_cuts || n_cuts > SPW_PLAN_MAX_CUTS || p->threads <= 0)
        return -EINVAL;
    for (int k = 0; k < n_cuts; k++) {
        const Spillway__V1__CutProfile *c = p->cuts[k];
        if (c->cut != k || !(isfinite(c->ns_per_element) && c->ns_per_element > 0) ||
            !(isfinite(c->bytes_per_element) && c->bytes_per_element >= 0))
            return -EINVAL;
    }
    if (!(isfinite(p->gpu_elements_per_s) && p->gpu_elements_per_s >= 0 && p->gpu_elements_per_s <= SPW_PLAN_GPU_MAX) ||
        !(isfinite(p->gpu_cpu_ns) && p->gpu_cpu_ns >= 0))
        return -EINVAL;
    memset(w, 0, sizeof *w);
    w->gpu = (struct spw_plan_gpu){.rate = p->gpu_elements_per_s, .cpu_ns = p->gpu_cpu_ns};
    w->cores = p->cores > 0 && isfinite(p->cores) ? p->cores : p->threads;
    w->efficiency = 1;          /* measured with every thread busy: contention is in the costs */
    for (int k = 0; k < n_cuts; k++) {
        w->cost_ns[k] = p->cuts[k]->ns_per_element;
        bytes[k] = p->cuts[k]->bytes_per_element;
    }
    return 0;
}
