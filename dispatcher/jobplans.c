/* dispatcher/jobplans.c - planned jobs: planning one at creation (the alive workers' profiles and the
 * client's facts through planning.c), keeping each job's plan and facts, and re-planning when the alive
 * workers change (a new cut applies to new leases only, with hysteresis).
 * Thread model: called with or without the service lock as each function says; one re-plan thread at a
 * time, started by the timer; calls to workers are made without the lock. */
#include "dispatcher/service_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/planning.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "pipeline/plan_proto.h"

uint8_t *disp_pack_msg(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(*len ? *len : 1);
    if (buf)
        protobuf_c_message_pack(m, buf);
    return buf;
}

/* Plan a new job from the client's facts and the alive workers' profiles: *cut and *plan (a message).
 * Returns ST_OK or a status with msg. Called without the lock (it calls the workers). */
int disp_plan_new_job(struct disp_service *s, const Spillway__V1__CreateJobRequest *r, int n_groups, int *cut,
                      Spillway__V1__Plan **plan, int *alive, char *msg, size_t msglen)
{
    Spillway__V1__WorkerAddress **ws = NULL;
    pthread_mutex_lock(&s->mu);
    size_t n = disp_alive_workers(s, r->max_workers, &ws);
    pthread_mutex_unlock(&s->mu);
    *alive = (int)n;
    char **addrs = calloc(n + 1, sizeof *addrs);
    struct spw_plan *p = malloc(sizeof *p);
    int status = ST_OK, profiled = 0;
    if (!addrs || !p) {
        status = ST_RESOURCE_EXHAUSTED;
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        addrs[i] = ws[i]->address;
    int rc = disp_plan_job(r->pipeline, r->client, n_groups + 1, addrs, (int)n, s->o.auth_token, p, &profiled, msg,
                           msglen);
    if (rc) {
        status = rc == -EINVAL ? ST_INVALID_ARGUMENT : ST_RESOURCE_EXHAUSTED;
        goto out;
    }
    if (!(*plan = spw_plan_to_proto(p, profiled))) {
        status = ST_RESOURCE_EXHAUSTED;
        goto out;
    }
    *cut = p->offload ? p->best : n_groups;
    spw_log(SPW_LOG_INFO, "dispatcher", "planned offload=%d cut=%d predicted=%.0f local_only=%.0f workers=%d/%zu",
            p->offload, *cut, p->throughput, p->local_only, profiled, n);
out:
    free(p);
    free(addrs);
    disp_free_addresses(ws, n);
    return status;
}

/* Keep how a job was planned and from what (for DescribeJob and re-planning). Called without the lock. */
void disp_remember_plan(struct disp_service *s, uint64_t job, const Spillway__V1__Plan *plan,
                          const Spillway__V1__ClientFacts *facts, int alive)
{
    size_t len, flen;
    uint8_t *buf = disp_pack_msg(&plan->base, &len), *fbuf = disp_pack_msg(&facts->base, &flen);
    if (!buf || !fbuf) {
        free(buf);
        free(fbuf);
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->n_plans == (int)(sizeof s->plans / sizeof s->plans[0]) && !s->replanning) {    /* forget the oldest */
        free(s->plans[0].plan);
        free(s->plans[0].facts);
        memmove(s->plans, s->plans + 1, sizeof s->plans[0] * (size_t)--s->n_plans);
    }
    if (s->n_plans < (int)(sizeof s->plans / sizeof s->plans[0])) {
        s->plans[s->n_plans].job = job;
        s->plans[s->n_plans].plan = buf;
        s->plans[s->n_plans].len = len;
        s->plans[s->n_plans].facts = fbuf;
        s->plans[s->n_plans].facts_len = flen;
        s->plans[s->n_plans].workers = alive;
        s->plans[s->n_plans].changes = 0;
        s->plans[s->n_plans++].planned_ms = spw_now_ms();
        buf = fbuf = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    free(buf);
    free(fbuf);
}

/* ---- re-planning ---- */

#define REPLAN_MIN_MS 2000          /* not more often than this per job */
#define REPLAN_HYSTERESIS 0.05      /* a new cut must predict 5% more than the current one */

/* The alive workers a job may use (all, or at most its max_workers). */
static int alive_count(const struct disp_service *s, int max_workers)
{
    int n = 0;
    struct disp_worker_info wi;
    for (int i = 0; i < disp_state_worker_count(s->st); i++)
        n += disp_state_worker_at(s->st, i, &wi) == 0 && wi.alive;
    return max_workers && n > max_workers ? max_workers : n;
}

/* Re-plan s->replan_job with the workers alive now; apply a better cut to new leases. */
static void *replan_main(void *arg)
{
    struct disp_service *s = arg;
    Spillway__V1__WorkerAddress **ws = NULL;
    Spillway__V1__ClientFacts *facts = NULL;
    Spillway__V1__Pipeline *pipe = NULL;
    struct spw_plan *p = malloc(sizeof *p);
    char **addrs = NULL, msg[256] = "";
    pthread_mutex_lock(&s->mu);
    const uint64_t job = s->replan_job;
    int at = -1;
    for (int i = 0; i < s->n_plans; i++)
        if (s->plans[i].job == job)
            at = i;
    size_t plen = 0;
    const uint8_t *pb = disp_state_job_pipeline(s->st, job, &plen);
    struct disp_job_info ji = {0};
    disp_state_job(s->st, job, &ji);
    if (at >= 0 && pb) {
        facts = spillway__v1__client_facts__unpack(NULL, s->plans[at].facts_len, s->plans[at].facts);
        pipe = spillway__v1__pipeline__unpack(NULL, plen, pb);
    }
    size_t n = disp_alive_workers(s, ji.max_workers, &ws);
    pthread_mutex_unlock(&s->mu);
    int profiled = 0, rc = -1;
    if (p && facts && pipe && (addrs = calloc(n + 1, sizeof *addrs))) {
        for (size_t i = 0; i < n; i++)
            addrs[i] = ws[i]->address;
        rc = disp_plan_job(pipe, facts, (int)facts->n_remote_ns, addrs, (int)n, s->o.auth_token, p, &profiled, msg,
                           sizeof msg);
    }
    Spillway__V1__Plan *m = rc == 0 ? spw_plan_to_proto(p, profiled) : NULL;
    size_t mlen = 0;
    uint8_t *mb = m ? disp_pack_msg(&m->base, &mlen) : NULL;
    pthread_mutex_lock(&s->mu);
    at = -1;
    for (int i = 0; i < s->n_plans; i++)
        if (s->plans[i].job == job)
            at = i;
    if (at >= 0) {
        s->plans[at].workers = (int)n;          /* re-planned for this membership, whatever came of it */
        s->plans[at].planned_ms = spw_now_ms();
    }
    if (rc == 0 && at >= 0 && disp_state_job(s->st, job, &ji) == 0 && !ji.finished) {
        const int cut = disp_replan_choice(p, ji.cut, REPLAN_HYSTERESIS);
        struct disp_update u = {.kind = DISP_SET_CUT, .job = job, .cut = cut};
        if (cut != ji.cut && disp_state_apply(s->st, &u, NULL, 0) == 0)
            s->plans[at].changes++;
        spw_log(SPW_LOG_INFO, "dispatcher", "re-planned job=%llu workers=%d/%zu cut=%d->%d predicted=%.0f->%.0f",
                (unsigned long long)job, profiled, n, ji.cut, cut, p->c[ji.cut < p->n ? ji.cut : 0].throughput,
                p->c[cut < p->n ? cut : 0].throughput);
        if (mb) {
            free(s->plans[at].plan);
            s->plans[at].plan = mb;
            s->plans[at].len = mlen;
            mb = NULL;
        }
    } else if (rc != 0) {
        spw_log(SPW_LOG_WARN, "dispatcher", "re-plan failed job=%llu msg=\"%s\"", (unsigned long long)job, msg);
    }
    s->replanning = false;
    pthread_mutex_unlock(&s->mu);
    free(mb);
    spw_plan_proto_free(m);
    free(addrs);
    free(p);
    disp_free_addresses(ws, n);
    if (facts)
        spillway__v1__client_facts__free_unpacked(facts, NULL);
    if (pipe)
        spillway__v1__pipeline__free_unpacked(pipe, NULL);
    return NULL;
}

/* Start a re-plan of the first planned job whose workers changed since its last plan. Called with the lock
 * held, by the timer. */
void disp_maybe_replan(struct disp_service *s, int64_t now)
{
    if (s->replanning || !s->n_plans)
        return;
    for (int i = 0; i < s->n_plans; i++) {
        struct disp_job_info ji;
        if (now - s->plans[i].planned_ms < REPLAN_MIN_MS || disp_state_job(s->st, s->plans[i].job, &ji) != 0 ||
            ji.finished || ji.paused || s->plans[i].workers == alive_count(s, ji.max_workers))
            continue;
        if (s->replan_started) {
            pthread_join(s->replan_tid, NULL);   /* the last one is done (replanning is false) */
            s->replan_started = false;
        }
        s->replan_job = s->plans[i].job;
        s->replanning = true;
        if (pthread_create(&s->replan_tid, NULL, replan_main, s) == 0)
            s->replan_started = true;
        else
            s->replanning = false;
        return;
    }
}


Spillway__V1__Plan *disp_plan_of(struct disp_service *s, uint64_t job)
{
    for (int i = 0; i < s->n_plans; i++)
        if (s->plans[i].job == job)
            return spillway__v1__plan__unpack(NULL, s->plans[i].len, s->plans[i].plan);
    return NULL;
}

void disp_plans_stop(struct disp_service *s)
{
    if (s->replan_started)
        pthread_join(s->replan_tid, NULL);
    s->replan_started = false;
    for (int i = 0; i < s->n_plans; i++) {
        free(s->plans[i].plan);
        free(s->plans[i].facts);
    }
    s->n_plans = 0;
}
