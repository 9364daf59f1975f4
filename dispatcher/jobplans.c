/* dispatcher/jobplans.c - planned jobs: planning one at creation (the alive workers' profiles and the
 * client's facts through planning.c), keeping each job's plan and facts, and re-planning once the job has
 * run long enough to measure its per-element costs on the real path, when the alive workers change, when
 * the measured rate stays off the prediction (each worker's measured bytes/s then caps its link), or when
 * the trainer turns out to set the pace (its measured rate becomes R). A new cut applies to new leases
 * only, with hysteresis.
 * Thread model: called with or without the service lock as each function says; one re-plan thread at a
 * time, started by the timer; calls to workers are made without the lock. */
#include "dispatcher/service_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/planning.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "pipeline/plan_proto.h"

/* Plan a new job from the client's facts and the alive workers' profiles: *cut and *plan (a message).
 * Returns SPW_RPC_OK or a status with msg. Called without the lock (it calls the workers). */
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
    for (size_t i = 0; i < n; i++)
        addrs[i] = ws[i]->address;
    int rc = disp_plan_job(r->pipeline, r->client, n_groups + 1, addrs, (int)n, s->o.auth_token, *profiles, p,
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
    disp_free_addresses(ws, n);
    return status;
}

/* Keep how a job was planned and from what (for DescribeJob and re-planning). Called without the lock. */
void disp_remember_plan(struct disp_service *s, uint64_t job, const Spillway__V1__Plan *plan,
                          const Spillway__V1__ClientFacts *facts, int alive, struct disp_profiles *profiles)
{
    size_t len, flen;
    uint8_t *buf = disp_pack_keep(&plan->base, &len), *fbuf = disp_pack_keep(&facts->base, &flen);
    if (!buf || !fbuf) {
        free(buf);
        free(fbuf);
        free(profiles);
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->n_plans == (int)(sizeof s->plans / sizeof s->plans[0]) && !s->replanning) {    /* forget the oldest */
        free(s->plans[0].plan);
        free(s->plans[0].facts);
        free(s->plans[0].profiles);
        memmove(s->plans, s->plans + 1, sizeof s->plans[0] * (size_t)--s->n_plans);
    }
    if (s->n_plans < (int)(sizeof s->plans / sizeof s->plans[0])) {
        s->plans[s->n_plans] = (struct disp_planned){
            .job = job, .plan = buf, .len = len, .facts = fbuf, .facts_len = flen, .workers = alive,
            .planned_ms = spw_now_ms(), .changed_ms = spw_now_ms(), .predicted = plan->throughput,
            .rate_known = facts->rate > 0, .measured_wait_ms = s->o.replan_after_ms, .profiles = profiles};
        s->n_plans++;
        buf = fbuf = NULL;
        profiles = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    free(buf);
    free(fbuf);
    free(profiles);
}

/* ---- re-planning ---- */

#define REPLAN_MIN_MS 2000          /* not more often than this per job */
#define REPLAN_HYSTERESIS 0.05      /* a new cut must predict 5% more than the current one */
#define MISS_FRACTION 0.2           /* measured below (1 - this) x predicted counts as off the prediction */
#define MISS_BEATS 5                /* for this many client heartbeats in a row */
#define STARVED_WAIT 0.2            /* the trainer waited for data at least this fraction: the pipeline is slow */
#define BOUND_WAIT 0.05             /* it waited less: the buffer is rarely empty, the trainer sets the pace */
#define LINK_SLACK 1.1              /* a worker's measured bytes/s times this caps its link in a re-plan */
#define MEASURED_WAIT_MAX_MS 600000 /* a re-plan on measurements that changed nothing doubles the wait to here */
#define COSTS_AFTER_MS 3000         /* costs measured at a cut count from this long after it was set */
#define OWN_MIN_PER_S 10            /* the client's own cost per element counts from this many elements/s */

enum { REPLAN_MEMBERSHIP, REPLAN_MEASURED, REPLAN_TRAINER, REPLAN_COSTS };

static struct disp_planned *planned(struct disp_service *s, uint64_t job)
{
    for (int i = 0; i < s->n_plans; i++)
        if (s->plans[i].job == job)
            return &s->plans[i];
    return NULL;
}

void disp_plan_observe(struct disp_service *s, uint64_t job, double consumed_per_s, double wait_fraction,
                       double client_cpu)
{
    struct disp_planned *p = planned(s, job);
    if (!p || !isfinite(consumed_per_s) || !(consumed_per_s > 0) || !isfinite(wait_fraction))
        return;
    p->consumed_per_s = consumed_per_s;
    p->client_cpu = isfinite(client_cpu) && client_cpu > 0 ? client_cpu : 0;
    const bool off = wait_fraction >= STARVED_WAIT && consumed_per_s < (1 - MISS_FRACTION) * p->predicted;
    p->off_beats = off ? p->off_beats + 1 : 0;
    p->bound_beats = wait_fraction < BOUND_WAIT ? p->bound_beats + 1 : 0;
}

double disp_client_remote_ns(const struct disp_service *s, uint64_t job)
{
    struct disp_progress_entry pe[64];
    const int np = disp_progress_of_job(&s->received, job, pe, 64);
    double cpu = 0, rate = 0;
    for (int i = 0; i < np; i++)
        if (pe[i].cpu_ns_per_element > 0 && pe[i].elements_per_s > 0) {
            cpu += pe[i].cpu_ns_per_element * pe[i].elements_per_s;
            rate += pe[i].elements_per_s;
        }
    return rate > 0 ? cpu / rate : 0;
}

/* Per-element CPU the running job measured at its cut (progress.c: over the producers' last rate windows):
 * the client's receiving threads (weighted by each stream's rate) and own threads (rank 0's), and each alive
 * worker's process, aligned with the addresses disp_alive_workers gives (worker_ns: n entries). Nothing
 * while the cut is younger than COSTS_AFTER_MS (leases of the old cut still arrive). Returns whether the
 * client's remote cost is known. Call with mu held. */
static bool measured_costs(struct disp_service *s, const struct disp_planned *p, int64_t now,
                           Spillway__V1__WorkerAddress *const *ws, size_t n, struct disp_measured *m, double *worker_ns)
{
    if (now - p->changed_ms < COSTS_AFTER_MS)
        return false;
    m->remote_ns = disp_client_remote_ns(s, p->job);
    struct disp_progress_entry pe[64];
    const int np = disp_progress_of_job(&s->progress, p->job, pe, 64);
    for (int i = 0; i < np; i++) {
        if (pe[i].producer == DISP_CLIENT_PRODUCER(p->job, 0) && pe[i].elements_per_s >= OWN_MIN_PER_S)
            m->local_ns = pe[i].cpu_ns_per_element;
        for (size_t w = 0; w < n; w++)
            if (ws[w]->worker_id == pe[i].producer)
                worker_ns[w] = pe[i].cpu_ns_per_element;
    }
    m->worker_ns = worker_ns;
    return m->remote_ns > 0;
}

/* Why a planned job should be re-planned now (-1: it should not). Call with mu held. */
static int replan_reason(struct disp_service *s, const struct disp_planned *p, int64_t now)
{
    struct disp_job_info ji;
    if (now - p->planned_ms < REPLAN_MIN_MS || disp_state_job(s->st, p->job, &ji) != 0 || ji.finished ||
        ji.paused || ji.client_only)
        return -1;
    int alive = 0;
    struct disp_worker_info wi;
    for (int i = 0; i < disp_state_worker_count(s->st); i++)
        alive += disp_state_worker_at(s->st, i, &wi) == 0 && wi.alive;
    if (ji.max_workers && alive > ji.max_workers)
        alive = ji.max_workers;
    if (p->workers != alive)
        return REPLAN_MEMBERSHIP;
    if (s->o.replan_after_ms <= 0)
        return -1;
    if (!p->costs_folded && now - p->changed_ms >= COSTS_AFTER_MS) {
        struct disp_measured m = {0};
        double none[1];
        if (measured_costs(s, p, now, NULL, 0, &m, none))
            return REPLAN_COSTS;
    }
    if (now - p->planned_ms < p->measured_wait_ms)
        return -1;
    if (p->off_beats >= MISS_BEATS)
        return REPLAN_MEASURED;
    if (p->bound_beats >= MISS_BEATS && !p->rate_known && p->consumed_per_s < (1 - MISS_FRACTION) * p->predicted)
        return REPLAN_TRAINER;
    return -1;
}

/* A worker's delivered bytes/s for a job: as the client received its stream (the receiving end sees a
 * capped link at once), else as the worker reported sending (it lags a cap by the flow-control windows);
 * 0 when neither has a rate yet. Call with mu held. */
static double delivered_bytes_per_s(const struct disp_service *s, uint64_t job, uint64_t worker)
{
    const struct disp_progress *tables[] = {&s->received, &s->progress};
    for (int t = 0; t < 2; t++) {
        struct disp_progress_entry pe[64];
        const int n = disp_progress_of_job(tables[t], job, pe, 64);
        for (int i = 0; i < n; i++)
            if (pe[i].producer == worker && pe[i].bytes_per_s > 0)
                return pe[i].bytes_per_s;
    }
    return 0;
}

/* The facts' link entry for the worker at addr, added when the probe left it out (facts were unpacked with
 * protobuf-c's default allocator, malloc, which frees what is added here too). NULL: out of memory. */
static Spillway__V1__WorkerLink *link_of(Spillway__V1__ClientFacts *facts, const char *addr)
{
    for (size_t l = 0; l < facts->n_links; l++)
        if (facts->links[l]->address && !strcmp(facts->links[l]->address, addr))
            return facts->links[l];
    Spillway__V1__WorkerLink **links = realloc(facts->links, sizeof *links * (facts->n_links + 1));
    Spillway__V1__WorkerLink *k = malloc(sizeof *k);
    char *a = strdup(addr);
    if (links)
        facts->links = links;
    if (!links || !k || !a) {
        free(k);
        free(a);
        return NULL;
    }
    spillway__v1__worker_link__init(k);
    k->address = a;
    facts->links[facts->n_links++] = k;
    return k;
}

/* Fold what the job measured into the client's facts before a re-plan: each worker's delivered bytes/s caps
 * its link (REPLAN_MEASURED), or the trainer's rate becomes R (REPLAN_TRAINER). Call with mu held. */
static void fold_measurements(struct disp_service *s, const struct disp_planned *p, int reason,
                              Spillway__V1__ClientFacts *facts)
{
    if (reason == REPLAN_TRAINER) {
        facts->rate = p->consumed_per_s;
        return;
    }
    if (reason != REPLAN_MEASURED)
        return;
    struct disp_worker_info wi;
    for (int w = 0; w < disp_state_worker_count(s->st); w++) {
        if (disp_state_worker_at(s->st, w, &wi) != 0)
            continue;
        const double cap = delivered_bytes_per_s(s, p->job, wi.id) * LINK_SLACK;
        if (!(cap > 0))
            continue;
        Spillway__V1__WorkerLink *k = link_of(facts, wi.address);
        spw_log(SPW_LOG_DEBUG, "dispatcher", "re-plan job=%llu worker=%s delivered_bytes_per_s=%.0f link=%.0f",
                (unsigned long long)p->job, wi.address, cap / LINK_SLACK, k ? k->bytes_per_s : 0.0);
        if (k && (!(k->bytes_per_s > 0) || cap < k->bytes_per_s))
            k->bytes_per_s = cap;
    }
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
    const int reason = s->replan_reason;
    struct disp_planned *at = planned(s, job);
    size_t plen = 0;
    const uint8_t *pb = disp_state_job_pipeline(s->st, job, &plen);
    struct disp_job_info ji = {0};
    disp_state_job(s->st, job, &ji);
    const double measured = at ? at->consumed_per_s : 0, client_cpu = at ? at->client_cpu : 0;
    struct disp_profiles *known = at ? at->profiles : NULL;  /* the entry stays while replanning is set */
    if (at && pb) {
        facts = spillway__v1__client_facts__unpack(NULL, at->facts_len, at->facts);
        pipe = spillway__v1__pipeline__unpack(NULL, plen, pb);
        if (facts)
            fold_measurements(s, at, reason, facts);
    }
    size_t n = disp_alive_workers(s, job, ji.max_workers, &ws);
    struct disp_measured seen = {.cut = ji.cut, .elements_per_s = measured, .client_cpu = client_cpu,
                                 .calibrate = reason == REPLAN_MEASURED};
    double *worker_ns = calloc(n + 1, sizeof *worker_ns);
    const bool costs = at && worker_ns && measured_costs(s, at, spw_now_ms(), ws, n, &seen, worker_ns);
    if (at && (costs || reason == REPLAN_COSTS))
        at->costs_folded = true;
    pthread_mutex_unlock(&s->mu);
    int profiled = 0, rc = -1;
    const bool seen_used = costs || reason == REPLAN_MEASURED;
    if (costs)
        spw_log(SPW_LOG_INFO, "dispatcher", "re-plan job=%llu measured at cut %d: client %.0f ns per remote element, "
                "%.0f per own; worker[0] %.0f", (unsigned long long)job, ji.cut, seen.remote_ns, seen.local_ns,
                n ? worker_ns[0] : 0.0);
    if (p && facts && pipe && (addrs = calloc(n + 1, sizeof *addrs))) {
        for (size_t i = 0; i < n; i++)
            addrs[i] = ws[i]->address;
        rc = disp_replan_job(pipe, facts, (int)facts->n_remote_ns, addrs, (int)n, s->o.auth_token, known,
                             seen_used ? &seen : NULL, p, &profiled, msg, sizeof msg);
    }
    /* What the job runs next: handed back to its clients (for good, so not on the costs re-plan's one window
     * of measurements), or a cut - another only for REPLAN_HYSTERESIS more; the kept plan says which. */
    /* The client alone: never with --local-share off (the user keeps the client's CPU for the suffix). */
    const double alone = rc != 0 || facts->local_off ? 0 : seen_used && seen.alone > 0 ? seen.alone : p->local_only;
    const bool hand_back = rc == 0 && reason != REPLAN_COSTS && disp_hand_back(p, alone, REPLAN_HYSTERESIS);
    const int cut = rc == 0 && !hand_back ? disp_replan_choice(p, ji.cut, REPLAN_HYSTERESIS) : ji.cut;
    const double was = rc == 0 ? p->c[ji.cut >= 0 && ji.cut < p->n ? ji.cut : 0].throughput : 0;
    if (rc == 0 && !hand_back)
        disp_plan_keep(p, cut, REPLAN_HYSTERESIS);
    Spillway__V1__Plan *m = rc == 0 ? spw_plan_to_proto(p, profiled) : NULL;
    size_t mlen = 0, flen = 0;
    uint8_t *mb = m ? disp_pack_keep(&m->base, &mlen) : NULL;
    uint8_t *fb = rc == 0 && facts ? disp_pack_keep(&facts->base, &flen) : NULL;
    static const char *const why[] = {"workers changed", "measured rate off the prediction", "trainer-bound",
                                      "costs measured"};
    pthread_mutex_lock(&s->mu);
    if ((at = planned(s, job))) {
        at->workers = (int)n;                   /* re-planned for this membership, whatever came of it */
        at->planned_ms = spw_now_ms();
        at->off_beats = at->bound_beats = 0;
    }
    struct disp_update back = {.kind = DISP_CLIENT_ONLY, .job = job};
    const bool live = rc == 0 && at && disp_state_job(s->st, job, &ji) == 0 && !ji.finished;
    if (live && hand_back && disp_commit(s, &back, NULL, 0) == 0) {
        at->changes++;
        at->changed_ms = spw_now_ms();
        at->predicted = alone;
        spw_log(SPW_LOG_INFO, "dispatcher", "re-planned job=%llu why=\"%s\" workers=%d/%zu cut=%d->client "
                "predicted=%.0f->%.0f measured=%.0f: handed back to the client (%s)", (unsigned long long)job,
                why[reason], profiled, n, ji.cut, was, alone, at->consumed_per_s, p->why);
        if (mb) {
            free(at->plan);
            at->plan = mb;
            at->len = mlen;
            mb = NULL;
        }
    } else if (live) {
        struct disp_update u = {.kind = DISP_SET_CUT, .job = job, .cut = cut};
        if (cut != ji.cut && disp_commit(s, &u, NULL, 0) == 0) {
            at->changes++;
            at->changed_ms = spw_now_ms();
            at->measured_wait_ms = s->o.replan_after_ms;
        } else if (reason == REPLAN_MEASURED && at->measured_wait_ms < MEASURED_WAIT_MAX_MS) {
            at->measured_wait_ms *= 2;          /* nothing better to do: look again later, not sooner */
        }
        at->predicted = p->c[cut < p->n ? cut : 0].throughput;
        at->rate_known = facts->rate > 0;
        spw_log(SPW_LOG_INFO, "dispatcher", "re-planned job=%llu why=\"%s\" workers=%d/%zu cut=%d->%d "
                "predicted=%.0f->%.0f measured=%.0f", (unsigned long long)job, why[reason], profiled, n, ji.cut, cut,
                was, at->predicted, at->consumed_per_s);
        if (mb) {
            free(at->plan);
            at->plan = mb;
            at->len = mlen;
            mb = NULL;
        }
        if (fb) {
            free(at->facts);
            at->facts = fb;
            at->facts_len = flen;
            fb = NULL;
        }
    } else if (rc != 0) {
        spw_log(SPW_LOG_WARN, "dispatcher", "re-plan failed job=%llu msg=\"%s\"", (unsigned long long)job, msg);
    }
    s->replanning = false;
    pthread_mutex_unlock(&s->mu);
    free(mb);
    free(fb);
    spw_plan_proto_free(m);
    free(addrs);
    free(worker_ns);
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
    /* Plans of jobs that left the table go first (only here: a re-plan thread may hold its entry). */
    int kept = 0;
    for (int i = 0; i < s->n_plans; i++) {
        struct disp_job_info ji;
        if (disp_state_job(s->st, s->plans[i].job, &ji) == 0) {
            s->plans[kept++] = s->plans[i];
            continue;
        }
        free(s->plans[i].plan);
        free(s->plans[i].facts);
        free(s->plans[i].profiles);
    }
    s->n_plans = kept;
    for (int i = 0; i < s->n_plans; i++) {
        const int reason = replan_reason(s, &s->plans[i], now);
        if (reason < 0)
            continue;
        if (s->replan_started) {
            pthread_join(s->replan_tid, NULL);   /* the last one is done (replanning is false) */
            s->replan_started = false;
        }
        s->replan_job = s->plans[i].job;
        s->replan_reason = reason;
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

#define NAMED_LOCAL_MS (10 * 60 * 1000)

bool disp_remember_named_local(struct disp_service *s, const char *name, const Spillway__V1__Plan *plan)
{
    size_t len;
    uint8_t *packed = disp_pack_keep(&plan->base, &len);
    pthread_mutex_lock(&s->mu);
    const bool job_exists = disp_state_named_job(s->st, name) != 0;
    if (packed && !job_exists) {
        struct disp_named_local *e = &s->named_local[s->named_local_next++ % 16];
        free(e->plan);
        snprintf(e->name, sizeof e->name, "%s", name);
        e->plan = packed;
        e->len = len;
        e->at_ms = spw_now_ms();
        packed = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    free(packed);
    return !job_exists;
}

const struct disp_named_local *disp_named_local_locked(const struct disp_service *s, const char *name)
{
    for (int i = 0; i < 16; i++) {
        const struct disp_named_local *e = &s->named_local[i];
        if (e->plan && !strcmp(e->name, name) && spw_now_ms() - e->at_ms < NAMED_LOCAL_MS)
            return e;
    }
    return NULL;
}

Spillway__V1__Plan *disp_named_local_plan(struct disp_service *s, const char *name)
{
    pthread_mutex_lock(&s->mu);
    const struct disp_named_local *e = disp_named_local_locked(s, name);
    Spillway__V1__Plan *p = e ? spillway__v1__plan__unpack(NULL, e->len, e->plan) : NULL;
    pthread_mutex_unlock(&s->mu);
    return p;
}

void disp_plans_stop(struct disp_service *s)
{
    for (int i = 0; i < 16; i++) {
        free(s->named_local[i].plan);
        s->named_local[i].plan = NULL;
    }
    if (s->replan_started)
        pthread_join(s->replan_tid, NULL);
    s->replan_started = false;
    for (int i = 0; i < s->n_plans; i++) {
        free(s->plans[i].plan);
        free(s->plans[i].facts);
        free(s->plans[i].profiles);
    }
    s->n_plans = 0;
}
