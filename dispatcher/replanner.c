/* dispatcher/replanner.c - planned jobs and re-planning (see replanner.h): each job is re-planned once it
 * has run long enough to measure its per-element costs on the real path, when the alive workers change,
 * when the measured rate stays off the prediction (each worker's delivered bytes/s then caps its link), or
 * when the trainer turns out to set the pace (its measured rate becomes R). A new cut applies to new leases
 * only, with hysteresis. Thread model: rp->mu guards the plans and the named answers; one re-plan thread at
 * a time, started by disp_replanner_tick; calls to the service (env) and to workers are made without mu. */
#include "dispatcher/replanner.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/codec.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "pipeline/plan_proto.h"

#define MAX_PLANS 256
#define NAMED_LOCAL 16
#define NAMED_LOCAL_MS (10 * 60 * 1000)
#define REPLAN_MIN_MS 2000          /* not more often than this per job */
#define REPLAN_HYSTERESIS 0.05      /* a new cut must predict 5% more than the current one */
#define MISS_FRACTION 0.2           /* measured below (1 - this) x predicted counts as off the prediction */
#define MISS_BEATS 5                /* for this many client heartbeats in a row */
#define STARVED_WAIT 0.2            /* the trainer waited for data at least this fraction: the pipeline is slow */
#define BOUND_WAIT 0.05             /* it waited less: the buffer is rarely empty, the trainer sets the pace */
#define LINK_SLACK 1.1              /* a worker's measured bytes/s times this caps its link in a re-plan */
#define MEASURED_WAIT_MAX_MS 600000 /* a re-plan on measurements that changed nothing doubles the wait to here */
#define COSTS_AFTER_MS 3000         /* costs measured at a cut count from this long after it was set */

enum { REPLAN_MEMBERSHIP, REPLAN_MEASURED, REPLAN_TRAINER, REPLAN_COSTS };

struct planned {                    /* a planned job: its last plan (packed Plan), the client's facts (packed), */
    uint64_t job;                   /* the alive workers it saw; re-planned when that count changes or when */
    uint8_t *plan, *facts;          /* the measured rate stays off the prediction (see observe) */
    size_t len, facts_len;
    int workers, changes;
    int64_t planned_ms, changed_ms;
    int64_t measured_wait_ms;       /* re-plan on measurements no sooner than this after the last plan */
    double predicted;               /* elements/s at the job's current cut */
    bool rate_known;                /* the facts carry the trainer's rate */
    double consumed_per_s;          /* the client's last report */
    double client_cpu;              /* its process's CPU seconds per second */
    int off_beats, bound_beats;     /* consecutive heartbeats below the prediction / trainer-bound */
    bool costs_folded;              /* re-planned once with the costs measured on the running job */
    struct disp_profiles *profiles; /* the workers' profiles (re-plans ask only new workers) */
};

struct named_local {                /* "run in the clients" for a named job; packed Plan */
    char name[129];
    uint8_t *plan;
    size_t len;
    int64_t at_ms;
};

struct disp_replanner {
    struct disp_replan_env env;
    pthread_mutex_t mu;             /* guards what follows */
    struct planned plans[MAX_PLANS];
    int n_plans;
    struct named_local named[NAMED_LOCAL];     /* a ring */
    int named_next;
    bool replanning, started;       /* a re-plan thread runs / was started (join it) */
    uint64_t replan_job;            /* its job (its entry is kept while it runs) */
    int replan_reason;
    pthread_t tid;
    uint64_t replans;               /* re-plans completed since the start (metrics) */
};

static void planned_free(struct planned *p)
{
    free(p->plan);
    free(p->facts);
    free(p->profiles);
}

void disp_replan_input_free(struct disp_replan_input *in)
{
    if (in->pipeline)
        spillway__v1__pipeline__free_unpacked(in->pipeline, NULL);
    for (size_t i = 0; in->workers && i < in->n_workers; i++) {
        free(in->workers[i]->address);
        free(in->workers[i]);
    }
    free(in->workers);
    free(in->worker_ns);
    free(in->delivered_bytes_per_s);
    memset(in, 0, sizeof *in);
}

int disp_replanner_create(const struct disp_replan_env *env, struct disp_replanner **out)
{
    struct disp_replanner *rp = calloc(1, sizeof *rp);
    if (!rp)
        return -ENOMEM;
    rp->env = *env;
    pthread_mutex_init(&rp->mu, NULL);
    *out = rp;
    return 0;
}

void disp_replanner_destroy(struct disp_replanner *rp)
{
    if (!rp)
        return;
    if (rp->started)
        pthread_join(rp->tid, NULL);
    for (int i = 0; i < rp->n_plans; i++)
        planned_free(&rp->plans[i]);
    for (int i = 0; i < NAMED_LOCAL; i++)
        free(rp->named[i].plan);
    pthread_mutex_destroy(&rp->mu);
    free(rp);
}

static struct planned *planned_of(struct disp_replanner *rp, uint64_t job)
{
    for (int i = 0; i < rp->n_plans; i++)
        if (rp->plans[i].job == job)
            return &rp->plans[i];
    return NULL;
}

void disp_replanner_remember(struct disp_replanner *rp, uint64_t job, const Spillway__V1__Plan *plan,
                             const Spillway__V1__ClientFacts *facts, int alive, struct disp_profiles *profiles)
{
    size_t len, flen;
    Spillway__V1__ClientFacts kept = *facts;    /* re-plans keep the creation's choice of compression: the */
    kept.compress = plan->compress_level > 0 ? plan->compress_level : -1;      /* streams keep theirs */
    uint8_t *buf = disp_pack_keep(&plan->base, &len), *fbuf = disp_pack_keep(&kept.base, &flen);
    pthread_mutex_lock(&rp->mu);
    if (buf && fbuf && rp->n_plans == MAX_PLANS && !rp->replanning) {     /* forget the oldest */
        planned_free(&rp->plans[0]);
        memmove(rp->plans, rp->plans + 1, sizeof rp->plans[0] * (size_t)--rp->n_plans);
    }
    if (buf && fbuf && rp->n_plans < MAX_PLANS) {
        const int64_t now = spw_now_ms();
        rp->plans[rp->n_plans++] = (struct planned){
            .job = job, .plan = buf, .len = len, .facts = fbuf, .facts_len = flen, .workers = alive,
            .planned_ms = now, .changed_ms = now, .predicted = plan->throughput, .rate_known = facts->rate > 0,
            .measured_wait_ms = rp->env.replan_after_ms, .profiles = profiles};
        buf = fbuf = NULL;
        profiles = NULL;
    }
    pthread_mutex_unlock(&rp->mu);
    free(buf);
    free(fbuf);
    free(profiles);
}

void disp_replanner_observe(struct disp_replanner *rp, uint64_t job, double consumed_per_s, double wait_fraction,
                            double client_cpu)
{
    if (!isfinite(consumed_per_s) || !(consumed_per_s > 0) || !isfinite(wait_fraction))
        return;
    pthread_mutex_lock(&rp->mu);
    struct planned *p = planned_of(rp, job);
    if (p) {
        p->consumed_per_s = consumed_per_s;
        p->client_cpu = isfinite(client_cpu) && client_cpu > 0 ? client_cpu : 0;
        const bool off = wait_fraction >= STARVED_WAIT && consumed_per_s < (1 - MISS_FRACTION) * p->predicted;
        p->off_beats = off ? p->off_beats + 1 : 0;
        p->bound_beats = wait_fraction < BOUND_WAIT ? p->bound_beats + 1 : 0;
    }
    pthread_mutex_unlock(&rp->mu);
}

Spillway__V1__Plan *disp_replanner_plan_of(struct disp_replanner *rp, uint64_t job)
{
    pthread_mutex_lock(&rp->mu);
    const struct planned *p = planned_of(rp, job);
    Spillway__V1__Plan *m = p ? spillway__v1__plan__unpack(NULL, p->len, p->plan) : NULL;
    pthread_mutex_unlock(&rp->mu);
    return m;
}

/* Why a planned job should be re-planned now (-1: it should not). Call with mu held. */
static int replan_reason(const struct disp_replanner *rp, const struct planned *p, const struct disp_replan_input *in,
                         int64_t now)
{
    if (now - p->planned_ms < REPLAN_MIN_MS || !in->live)
        return -1;
    if (p->workers != in->alive)
        return REPLAN_MEMBERSHIP;
    if (in->alive == 0)
        return -1;      /* planned with no worker, none yet: its clients make it all; nothing to hand back */
    if (rp->env.replan_after_ms <= 0)
        return -1;
    if (!p->costs_folded && now - p->changed_ms >= COSTS_AFTER_MS && in->remote_ns > 0)
        return REPLAN_COSTS;
    if (now - p->planned_ms < p->measured_wait_ms)
        return -1;
    if (p->off_beats >= MISS_BEATS)
        return REPLAN_MEASURED;
    if (p->bound_beats >= MISS_BEATS && !p->rate_known && p->consumed_per_s < (1 - MISS_FRACTION) * p->predicted)
        return REPLAN_TRAINER;
    return -1;
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
 * its link (REPLAN_MEASURED), or the trainer's rate becomes R (REPLAN_TRAINER). */
static void fold_measurements(uint64_t job, int reason, double consumed_per_s, const struct disp_replan_input *in,
                              Spillway__V1__ClientFacts *facts)
{
    if (reason == REPLAN_TRAINER) {
        facts->rate = consumed_per_s;
        return;
    }
    for (size_t w = 0; reason == REPLAN_MEASURED && w < in->n_workers; w++) {
        const double cap = in->delivered_bytes_per_s[w] * LINK_SLACK;
        if (!(cap > 0))
            continue;
        Spillway__V1__WorkerLink *k = link_of(facts, in->workers[w]->address);
        spw_log(SPW_LOG_DEBUG, "dispatcher", "re-plan job=%llu worker=%s delivered_bytes_per_s=%.0f link=%.0f",
                (unsigned long long)job, in->workers[w]->address, cap / LINK_SLACK, k ? k->bytes_per_s : 0.0);
        if (k && (!(k->bytes_per_s > 0) || cap < k->bytes_per_s))
            k->bytes_per_s = cap;
    }
}

static const char *const REASONS[] = {"workers changed", "measured rate off the prediction", "trainer-bound",
                                      "costs measured"};

/* After a re-plan: the entry learns what came of it (mu held). */
static void record_outcome(struct disp_replanner *rp, struct planned *at, int reason, bool applied, bool hand_back,
                           int cut_was, int cut, double predicted, bool rate_known, uint8_t **plan, size_t plan_len,
                           uint8_t **facts, size_t facts_len)
{
    if (applied && (hand_back || cut != cut_was)) {
        at->changes++;
        at->changed_ms = spw_now_ms();
        at->measured_wait_ms = rp->env.replan_after_ms;
    } else if (!hand_back && reason == REPLAN_MEASURED && at->measured_wait_ms < MEASURED_WAIT_MAX_MS) {
        at->measured_wait_ms *= 2;          /* nothing better to do: look again later, not sooner */
    }
    at->predicted = predicted;
    if (!hand_back)
        at->rate_known = rate_known;
    if (*plan) {
        free(at->plan);
        at->plan = *plan;
        at->len = plan_len;
        *plan = NULL;
    }
    if (!hand_back && *facts) {
        free(at->facts);
        at->facts = *facts;
        at->facts_len = facts_len;
        *facts = NULL;
    }
}

/* Re-plan rp->replan_job with the workers alive now; hand a better cut (or the job back) to the service. */
static void *replan_main(void *arg)
{
    struct disp_replanner *rp = arg;
    Spillway__V1__ClientFacts *facts = NULL;
    struct disp_replan_input in = {0};
    struct spw_plan *p = malloc(sizeof *p);
    char **addrs = NULL, msg[256] = "";
    pthread_mutex_lock(&rp->mu);
    const uint64_t job = rp->replan_job;
    const int reason = rp->replan_reason;
    struct planned *at = planned_of(rp, job);   /* the entry stays while replanning is set */
    const double measured = at ? at->consumed_per_s : 0, client_cpu = at ? at->client_cpu : 0;
    const int64_t changed_ms = at ? at->changed_ms : 0;
    struct disp_profiles *known = at ? at->profiles : NULL;
    if (at)
        facts = spillway__v1__client_facts__unpack(NULL, at->facts_len, at->facts);
    pthread_mutex_unlock(&rp->mu);
    const int gathered = rp->env.gather(rp->env.ctx, job, true, &in);
    if (gathered == 0 && facts)
        fold_measurements(job, reason, measured, &in, facts);
    struct disp_measured seen = {.cut = in.cut, .elements_per_s = measured, .client_cpu = client_cpu,
                                 .calibrate = reason == REPLAN_MEASURED, .remote_ns = in.remote_ns,
                                 .local_ns = in.local_ns, .worker_ns = in.worker_ns};
    const bool costs = gathered == 0 && spw_now_ms() - changed_ms >= COSTS_AFTER_MS && in.remote_ns > 0;
    if (costs || reason == REPLAN_COSTS) {
        pthread_mutex_lock(&rp->mu);
        if ((at = planned_of(rp, job)))
            at->costs_folded = true;
        pthread_mutex_unlock(&rp->mu);
    }
    int profiled = 0, rc = -1;
    const bool seen_used = costs || reason == REPLAN_MEASURED;
    if (costs)
        spw_log(SPW_LOG_INFO, "dispatcher", "re-plan job=%llu measured at cut %d: client %.0f ns per remote element, "
                "%.0f per own; worker[0] %.0f", (unsigned long long)job, in.cut, seen.remote_ns, seen.local_ns,
                in.n_workers ? in.worker_ns[0] : 0.0);
    if (gathered == 0 && p && facts && in.pipeline && (addrs = calloc(in.n_workers + 1, sizeof *addrs))) {
        for (size_t i = 0; i < in.n_workers; i++)
            addrs[i] = in.workers[i]->address;
        rc = disp_replan_job(in.pipeline, facts, (int)facts->n_remote_ns, addrs, (int)in.n_workers,
                             &rp->env.ask, known, seen_used ? &seen : NULL, p, &profiled, msg, sizeof msg);
    }
    /* What the job runs next: handed back to its clients (for good, so not on the costs re-plan's one window
     * of measurements), or a cut - another only for REPLAN_HYSTERESIS more; the kept plan says which. The
     * client alone: never with --local-share off (the user keeps the client's CPU for the suffix). */
    const double alone = rc != 0 || facts->local_off ? 0 : seen_used && seen.alone > 0 ? seen.alone : p->local_only;
    const bool hand_back = rc == 0 && reason != REPLAN_COSTS && disp_hand_back(p, alone, REPLAN_HYSTERESIS);
    const int cut = rc == 0 && !hand_back ? disp_replan_choice(p, in.cut, REPLAN_HYSTERESIS) : in.cut;
    const double was = rc == 0 ? p->c[in.cut >= 0 && in.cut < p->n ? in.cut : 0].throughput : 0;
    if (rc == 0 && !hand_back)
        disp_plan_keep(p, cut, REPLAN_HYSTERESIS);
    Spillway__V1__Plan *m = rc == 0 ? spw_plan_to_proto(p, profiled) : NULL;
    size_t mlen = 0, flen = 0;
    uint8_t *mb = m ? disp_pack_keep(&m->base, &mlen) : NULL;
    uint8_t *fb = rc == 0 && facts ? disp_pack_keep(&facts->base, &flen) : NULL;
    const bool applied = rc == 0 && (hand_back || cut != in.cut) && rp->env.apply(rp->env.ctx, job, cut, hand_back) == 0;
    const double predicted = rc != 0 ? 0 : hand_back ? alone : p->c[cut < p->n ? cut : 0].throughput;
    pthread_mutex_lock(&rp->mu);
    if ((at = planned_of(rp, job))) {
        at->workers = in.alive;                 /* re-planned for this membership, whatever came of it */
        at->planned_ms = spw_now_ms();
        at->off_beats = at->bound_beats = 0;
        if (rc == 0 && (!hand_back || applied))
            record_outcome(rp, at, reason, applied, hand_back, in.cut, cut, predicted, facts->rate > 0, &mb, mlen,
                           &fb, flen);
    }
    const double consumed = at ? at->consumed_per_s : 0;
    rp->replans += rc == 0;
    rp->replanning = false;
    pthread_mutex_unlock(&rp->mu);
    if (rc == 0 && hand_back && applied)
        spw_log(SPW_LOG_INFO, "dispatcher", "re-planned job=%llu why=\"%s\" workers=%d/%zu cut=%d->client "
                "predicted=%.0f->%.0f measured=%.0f: handed back to the client (%s)", (unsigned long long)job,
                REASONS[reason], profiled, in.n_workers, in.cut, was, alone, consumed, p->why);
    else if (rc == 0 && !hand_back)
        spw_log(SPW_LOG_INFO, "dispatcher", "re-planned job=%llu why=\"%s\" workers=%d/%zu cut=%d->%d "
                "predicted=%.0f->%.0f measured=%.0f", (unsigned long long)job, REASONS[reason], profiled,
                in.n_workers, in.cut, cut, was, predicted, consumed);
    else if (gathered == 0 && rc != 0)
        spw_log(SPW_LOG_WARN, "dispatcher", "re-plan failed job=%llu msg=\"%s\"", (unsigned long long)job, msg);
    free(mb);
    free(fb);
    spw_plan_proto_free(m);
    free(addrs);
    free(p);
    disp_replan_input_free(&in);
    if (facts)
        spillway__v1__client_facts__free_unpacked(facts, NULL);
    return NULL;
}

void disp_replanner_tick(struct disp_replanner *rp, int64_t now)
{
    uint64_t jobs[MAX_PLANS];
    pthread_mutex_lock(&rp->mu);
    const int n = rp->replanning ? 0 : rp->n_plans;
    for (int i = 0; i < n; i++)
        jobs[i] = rp->plans[i].job;
    pthread_mutex_unlock(&rp->mu);
    if (!n)
        return;
    struct disp_replan_input *in = calloc((size_t)n, sizeof *in);
    int *gone = calloc((size_t)n, sizeof *gone);
    for (int i = 0; in && gone && i < n; i++)
        gone[i] = rp->env.gather(rp->env.ctx, jobs[i], false, &in[i]) == -ENOENT;
    pthread_mutex_lock(&rp->mu);
    /* Plans of jobs that left the table go first (only here, and never while a re-plan thread holds one). */
    int kept = 0;
    for (int i = 0; in && gone && !rp->replanning && i < rp->n_plans; i++) {
        int k = 0;
        while (k < n && jobs[k] != rp->plans[i].job)
            k++;
        if (k < n && gone[k])
            planned_free(&rp->plans[i]);
        else
            rp->plans[kept++] = rp->plans[i];
    }
    if (in && gone && !rp->replanning)
        rp->n_plans = kept;
    for (int i = 0; in && gone && !rp->replanning && i < rp->n_plans; i++) {
        int k = 0;
        while (k < n && jobs[k] != rp->plans[i].job)
            k++;
        const int reason = k < n ? replan_reason(rp, &rp->plans[i], &in[k], now) : -1;
        if (reason < 0)
            continue;
        if (rp->started) {
            pthread_join(rp->tid, NULL);        /* the last one is done (replanning is false) */
            rp->started = false;
        }
        rp->replan_job = rp->plans[i].job;
        rp->replan_reason = reason;
        rp->replanning = true;
        if (pthread_create(&rp->tid, NULL, replan_main, rp) == 0)
            rp->started = true;
        else
            rp->replanning = false;
        break;
    }
    pthread_mutex_unlock(&rp->mu);
    free(in);
    free(gone);
}

/* ---- named jobs that run in their clients ---- */

static const struct named_local *named_of(const struct disp_replanner *rp, const char *name)
{
    for (int i = 0; i < NAMED_LOCAL; i++) {
        const struct named_local *e = &rp->named[i];
        if (e->plan && !strcmp(e->name, name) && spw_now_ms() - e->at_ms < NAMED_LOCAL_MS)
            return e;
    }
    return NULL;
}

void disp_replanner_remember_named_local(struct disp_replanner *rp, const char *name, const Spillway__V1__Plan *plan)
{
    size_t len;
    uint8_t *packed = disp_pack_keep(&plan->base, &len);
    if (!packed)
        return;
    pthread_mutex_lock(&rp->mu);
    struct named_local *e = &rp->named[rp->named_next++ % NAMED_LOCAL];
    free(e->plan);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->plan = packed;
    e->len = len;
    e->at_ms = spw_now_ms();
    pthread_mutex_unlock(&rp->mu);
}

bool disp_replanner_named_local_exists(struct disp_replanner *rp, const char *name)
{
    pthread_mutex_lock(&rp->mu);
    const bool there = named_of(rp, name) != NULL;
    pthread_mutex_unlock(&rp->mu);
    return there;
}

Spillway__V1__Plan *disp_replanner_named_local(struct disp_replanner *rp, const char *name)
{
    pthread_mutex_lock(&rp->mu);
    const struct named_local *e = named_of(rp, name);
    Spillway__V1__Plan *p = e ? spillway__v1__plan__unpack(NULL, e->len, e->plan) : NULL;
    pthread_mutex_unlock(&rp->mu);
    return p;
}

uint64_t disp_replanner_replans(struct disp_replanner *rp)
{
    pthread_mutex_lock(&rp->mu);
    const uint64_t n = rp->replans;
    pthread_mutex_unlock(&rp->mu);
    return n;
}
