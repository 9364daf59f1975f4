/* dispatcher/plan_view.c - the service's side of planning: planning a new job against the alive workers
 * (CreateJob with cut -2), and what the re-planner (replanner.c) sees of the service and how its decisions
 * apply (struct disp_replan_env): a job's state, its alive workers and what it measured (the progress
 * tables), a new cut or a hand-back committed as updates. Thread model: each function takes the service's
 * lock itself, around state access only (never while workers are called). */
#include "dispatcher/service_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/planning.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "pipeline/plan_proto.h"

#define AHEAD_SLACK_MS 2000         /* an ask ahead ends within its profile deadline: wait a little longer */
#define OWN_MIN_PER_S 10            /* the client's own cost per element counts from this many elements/s */

int disp_plan_new_job(struct disp_service *s, const Spillway__V1__CreateJobRequest *r, int n_groups, int *cut,
                      Spillway__V1__Plan **plan, int *alive, struct disp_profiles **profiles, char *msg,
                      size_t msglen)
{
    Spillway__V1__WorkerAddress **ws = NULL;
    pthread_mutex_lock(&s->mu);
    size_t n = disp_alive_workers(s, 0, r->max_workers, &ws);
    pthread_mutex_unlock(&s->mu);
    *alive = (int)n;
    char **addrs = calloc(n + 1, sizeof *addrs);
    struct spw_plan *p = malloc(sizeof *p);
    int status = SPW_RPC_OK, profiled = 0;
    *profiles = calloc(1, sizeof **profiles);
    if (!addrs || !p || !*profiles) {
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    /* Profiles asked ahead (the client's GetManifest): taken; a worker asked then is not asked again. */
    bool *asked = calloc(n + 1, sizeof *asked);
    if (!asked) {
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        addrs[i] = ws[i]->address;
    const int ahead = disp_ahead_take(s->ahead, r->pipeline, n_groups + 1, addrs, (int)n, asked, *profiles,
                                      s->ask.timeout_ms + AHEAD_SLACK_MS, spw_now_ms());
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!asked[i] || disp_profiles_has(*profiles, addrs[i]))
            addrs[m++] = addrs[i];
    free(asked);
    if (ahead >= 0)
        spw_log(SPW_LOG_DEBUG, "dispatcher", "planning with %d profiles asked ahead, %zu workers left out",
                ahead, n - m);
    int rc = disp_plan_job(r->pipeline, r->client, n_groups + 1, addrs, (int)m, &s->ask, *profiles, p,
                           &profiled, msg, msglen);
    if (rc) {
        status = rc == -EINVAL ? SPW_RPC_INVALID_ARGUMENT : SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    if (!(*plan = spw_plan_to_proto(p, profiled))) {
        status = SPW_RPC_RESOURCE_EXHAUSTED;
        goto out;
    }
    *cut = p->offload ? p->best : n_groups;
    spw_log(SPW_LOG_INFO, "dispatcher", "planned offload=%d cut=%d predicted=%.0f local_only=%.0f workers=%d/%zu",
            p->offload, *cut, p->throughput, p->local_only, profiled, n);
out:
    if (status != SPW_RPC_OK) {
        free(*profiles);
        *profiles = NULL;
    }
    free(p);
    free(addrs);
    disp_free_addresses(ws);
    return status;
}

double disp_client_remote_ns(const struct disp_service *s, uint64_t job)
{
    double cpu = 0, rate = 0;
    for (const struct disp_progress_entry *e = disp_progress_first(s->received, job); e; e = disp_progress_next(e))
        if (e->cpu_ns_per_element > 0 && e->elements_per_s > 0) {
            cpu += e->cpu_ns_per_element * e->elements_per_s;
            rate += e->elements_per_s;
        }
    return rate > 0 ? cpu / rate : 0;
}

/* A worker's delivered bytes/s for a job: as the client received its stream (the receiving end sees a
 * capped link at once), else as the worker reported sending (it lags a cap by the flow-control windows);
 * 0 when neither has a rate yet. Call with mu held. */
static double delivered_bytes_per_s(const struct disp_service *s, uint64_t job, uint64_t worker)
{
    const struct disp_progress *tables[] = {s->received, s->progress};
    for (int t = 0; t < 2; t++) {
        const struct disp_progress_entry *e = disp_progress_find(tables[t], job, worker);
        if (e && e->bytes_per_s > 0)
            return e->bytes_per_s;
    }
    return 0;
}

/* struct disp_replan_env.gather. */
int disp_replan_gather(void *ctx, uint64_t job, bool full, struct disp_replan_input *in)
{
    struct disp_service *s = ctx;
    memset(in, 0, sizeof *in);
    pthread_mutex_lock(&s->mu);
    struct disp_job_info ji;
    if (disp_state_job(s->st, job, &ji) != 0) {
        pthread_mutex_unlock(&s->mu);
        return -ENOENT;
    }
    in->live = !ji.finished && !ji.paused && !ji.client_only;
    in->cut = ji.cut;
    in->max_workers = ji.max_workers;
    struct disp_worker_info wi;
    for (int i = 0; i < disp_state_worker_count(s->st); i++)
        in->alive += disp_state_worker_at(s->st, i, &wi) == 0 && disp_worker_usable(s, &wi);
    if (ji.max_workers && in->alive > ji.max_workers)
        in->alive = ji.max_workers;
    in->remote_ns = disp_client_remote_ns(s, job);
    const struct disp_progress_entry *own = disp_progress_find(s->progress, job, DISP_CLIENT_PRODUCER(job, 0));
    if (own && own->elements_per_s >= OWN_MIN_PER_S)
        in->local_ns = own->cpu_ns_per_element;
    if (full) {
        size_t plen = 0;
        const uint8_t *pb = disp_state_job_pipeline(s->st, job, &plen);
        in->pipeline = pb ? spillway__v1__pipeline__unpack(NULL, plen, pb) : NULL;
        in->n_workers = disp_alive_workers(s, job, ji.max_workers, &in->workers);
        in->worker_ns = calloc(in->n_workers + 1, sizeof *in->worker_ns);
        in->delivered_bytes_per_s = calloc(in->n_workers + 1, sizeof *in->delivered_bytes_per_s);
        for (size_t w = 0; in->worker_ns && in->delivered_bytes_per_s && w < in->n_workers; w++) {
            const struct disp_progress_entry *e = disp_progress_find(s->progress, job, in->workers[w]->worker_id);
            in->worker_ns[w] = e ? e->cpu_ns_per_element : 0;
            in->delivered_bytes_per_s[w] = delivered_bytes_per_s(s, job, in->workers[w]->worker_id);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (full && (!in->pipeline || !in->workers || !in->worker_ns || !in->delivered_bytes_per_s)) {
        disp_replan_input_free(in);
        return -ENOMEM;
    }
    return 0;
}

/* struct disp_replan_env.apply. */
int disp_replan_apply(void *ctx, uint64_t job, int cut, bool hand_back)
{
    struct disp_service *s = ctx;
    pthread_mutex_lock(&s->mu);
    struct disp_job_info ji;
    int rc = -ENOENT;
    if (disp_state_job(s->st, job, &ji) == 0 && !ji.finished) {
        struct disp_update u = {.kind = hand_back ? DISP_CLIENT_ONLY : DISP_SET_CUT, .job = job, .cut = cut};
        rc = disp_commit(s, &u, NULL, 0);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}
