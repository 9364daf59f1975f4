/* dispatcher/metrics.c - the dispatcher's Prometheus exposition (--metrics-port): workers and jobs by state,
 * what the state applied (leases, acks, deaths, cut changes), the journal, and per job its deliveries by
 * producer class, the client's rate and wait, and the plan (predicted rate, cut, local share, workers
 * needed: the autoscaling signal). Thread model: the metrics thread; it copies what it needs under the
 * service's lock, writes after releasing it, and asks the re-planner for plans without the service's lock. */
#include "dispatcher/service_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/metrics.h"

#define MAX_ROWS 1024

struct job_row {
    struct disp_job_info ji;
    int64_t elements;               /* its producers' deliveries, summed */
    double consumed_per_s, wait_fraction;
};

/* A producer's class, as spillctl job names it: worker:N, worker:N:gpu, client:rankR, client:rankR:gpu. */
static void producer_name(const struct disp_state *st, uint64_t producer, char *buf, size_t n)
{
    if (DISP_IS_CLIENT_PRODUCER(producer)) {
        snprintf(buf, n, "client:rank%llu%s", (unsigned long long)(producer & 0x7FFFF),
                 producer & (UINT64_C(1) << 19) ? ":gpu" : "");
        return;
    }
    bool gpu = false;
    struct disp_worker_info w;
    for (int i = 0; i < disp_state_worker_count(st) && !gpu; i++)
        gpu = disp_state_worker_at(st, i, &w) == 0 && w.id == producer && w.gpu[0];
    snprintf(buf, n, "worker:%llu%s", (unsigned long long)producer, gpu ? ":gpu" : "");
}

static void counter_of(struct spw_prom *p, const char *name, const char *help, const uint64_t *applied, int kind)
{
    spw_prom_counter(p, name, help, (double)applied[kind]);
}

void disp_service_metrics(struct disp_service *s, struct spw_prom *p)
{
    struct job_row *jobs = calloc(MAX_ROWS, sizeof *jobs);
    struct disp_progress_entry *prog = calloc(DISP_PROGRESS_MAX, sizeof *prog);
    char (*names)[48] = calloc(DISP_PROGRESS_MAX, sizeof *names);
    if (!jobs || !prog || !names) {
        p->oom = true;
        free(jobs);
        free(prog);
        free(names);
        return;
    }
    uint64_t applied[DISP_RESTORE_ENDED + 1], re_leases, released;
    int alive = 0, dead = 0, n_jobs = 0, n_prog = 0;
    int64_t journal_bytes = -1;
    pthread_mutex_lock(&s->mu);
    memcpy(applied, s->applied, sizeof applied);
    re_leases = s->re_leases;
    released = s->leases_released;
    for (int i = 0; i < disp_state_worker_count(s->st); i++) {
        struct disp_worker_info w;
        if (disp_state_worker_at(s->st, i, &w) == 0)
            w.alive ? alive++ : dead++;
    }
    for (int i = 0; i < disp_state_job_count(s->st) && n_jobs < MAX_ROWS; i++) {
        struct job_row *r = &jobs[n_jobs];
        if (disp_state_job_at(s->st, i, &r->ji) != 0)
            continue;
        r->wait_fraction = -1;
        n_jobs++;
    }
    for (int i = 0; i < s->progress.n; i++) {
        const struct disp_progress_entry *e = &s->progress.e[i];
        for (int k = 0; k < n_jobs; k++) {
            if (jobs[k].ji.id != e->job)
                continue;
            if (!(e->producer & (UINT64_C(1) << 19)) || !DISP_IS_CLIENT_PRODUCER(e->producer))
                jobs[k].elements += e->elements;    /* a client's GPU row is part of its own */
            if (e->wait_fraction >= 0) {
                jobs[k].consumed_per_s = e->consumed_per_s;
                jobs[k].wait_fraction = e->wait_fraction;
            }
            prog[n_prog] = *e;
            producer_name(s->st, e->producer, names[n_prog], sizeof names[n_prog]);
            n_prog++;
        }
    }
    if (s->journal)
        journal_bytes = spw_journal_size(s->journal);
    pthread_mutex_unlock(&s->mu);

    spw_prom_family(p, "spillway_dispatcher_workers", "gauge", "registered workers by state");
    spw_prom_sample(p, "spillway_dispatcher_workers", (struct spw_label[]){{"state", "alive"}}, 1, alive);
    spw_prom_sample(p, "spillway_dispatcher_workers", (struct spw_label[]){{"state", "unreachable"}}, 1, dead);
    int by_state[4] = {0};
    static const char *const states[4] = {"running", "paused", "client", "finished"};
    for (int k = 0; k < n_jobs; k++) {
        const struct disp_job_info *ji = &jobs[k].ji;
        by_state[ji->finished ? 3 : ji->client_only ? 2 : ji->paused ? 1 : 0]++;
    }
    spw_prom_family(p, "spillway_dispatcher_jobs", "gauge",
                    "jobs in the table by state (client: handed back to its clients by re-planning)");
    for (int i = 0; i < 4; i++)
        spw_prom_sample(p, "spillway_dispatcher_jobs", (struct spw_label[]){{"state", states[i]}}, 1, by_state[i]);
    counter_of(p, "spillway_dispatcher_leases_granted_total", "splits leased to producers (re-leases included)",
               applied, DISP_LEASE);
    spw_prom_counter(p, "spillway_dispatcher_leases_regranted_total",
                     "of the leases, splits leased again: their holder died, expired or refused the job, or a "
                     "speculative second copy of a straggler", (double)re_leases);
    spw_prom_counter(p, "spillway_dispatcher_leases_expired_total",
                     "leased splits sent back to pending: their worker died or refused the job, their client rank "
                     "expired, or the job was handed back", (double)released);
    spw_prom_counter(p, "spillway_dispatcher_replans_total", "re-plans of running planned jobs, whatever came of them",
                     (double)disp_replanner_replans(s->replanner));
    counter_of(p, "spillway_dispatcher_acks_total", "splits acknowledged by their clients", applied, DISP_ACK);
    counter_of(p, "spillway_dispatcher_workers_declared_dead_total",
               "workers silent past --worker-timeout-ms: their leases went back to pending", applied,
               DISP_WORKER_DEAD);
    counter_of(p, "spillway_dispatcher_clients_expired_total",
               "client ranks silent past --client-timeout-ms: their leases went back to pending", applied,
               DISP_CLIENT_EXPIRED);
    counter_of(p, "spillway_dispatcher_cut_changes_total", "re-plans that moved a job's cut", applied, DISP_SET_CUT);
    counter_of(p, "spillway_dispatcher_hand_backs_total", "jobs handed back to their clients by re-planning",
               applied, DISP_CLIENT_ONLY);
    counter_of(p, "spillway_dispatcher_jobs_created_total", "jobs created since this process started", applied,
               DISP_CREATE_JOB);
    if (journal_bytes >= 0) {
        spw_prom_gauge(p, "spillway_dispatcher_journal_bytes", "the journal's size (--work-dir)",
                       (double)journal_bytes);
        spw_prom_family(p, "spillway_dispatcher_journal_sync_seconds", "histogram",
                        "journal writes that reach the disk (fsync), each");
        spw_prom_hist(p, "spillway_dispatcher_journal_sync_seconds", NULL, 0, &s->journal_sync);
    }

    /* Per job; its plan from the re-planner (planned jobs only). */
    spw_prom_family(p, "spillway_job_elements_total", "counter", "elements the job's producers delivered");
    for (int k = 0; k < n_jobs; k++) {
        char id[24];
        snprintf(id, sizeof id, "%llu", (unsigned long long)jobs[k].ji.id);
        spw_prom_sample(p, "spillway_job_elements_total", (struct spw_label[]){{"job_id", id}}, 1,
                        (double)jobs[k].elements);
    }
    spw_prom_family(p, "spillway_job_producer_elements_total", "counter",
                    "elements delivered per producer (worker:N[:gpu], client:rankR[:gpu]: of that rank's, made on "
                    "its GPU)");
    for (int i = 0; i < n_prog; i++) {
        char id[24];
        snprintf(id, sizeof id, "%llu", (unsigned long long)prog[i].job);
        spw_prom_sample(p, "spillway_job_producer_elements_total",
                        (struct spw_label[]){{"job_id", id}, {"producer", names[i]}}, 2, (double)prog[i].elements);
    }
    spw_prom_family(p, "spillway_job_producer_cpu_seconds_per_element", "gauge",
                    "a producer's CPU per element over its last rate window (0: not measured)");
    for (int i = 0; i < n_prog; i++) {
        char id[24];
        snprintf(id, sizeof id, "%llu", (unsigned long long)prog[i].job);
        spw_prom_sample(p, "spillway_job_producer_cpu_seconds_per_element",
                        (struct spw_label[]){{"job_id", id}, {"producer", names[i]}}, 2,
                        prog[i].cpu_ns_per_element / 1e9);
    }
    spw_prom_family(p, "spillway_job_cut", "gauge", "groups [0, cut) run on the workers");
    for (int k = 0; k < n_jobs; k++) {
        char id[24];
        snprintf(id, sizeof id, "%llu", (unsigned long long)jobs[k].ji.id);
        spw_prom_sample(p, "spillway_job_cut", (struct spw_label[]){{"job_id", id}}, 1, jobs[k].ji.cut);
    }
    spw_prom_family(p, "spillway_job_client_elements_per_second", "gauge",
                    "the trainer's rate as its rank-0 client reports it (times the ranks)");
    for (int k = 0; k < n_jobs; k++) {
        char id[24];
        snprintf(id, sizeof id, "%llu", (unsigned long long)jobs[k].ji.id);
        if (jobs[k].wait_fraction >= 0)
            spw_prom_sample(p, "spillway_job_client_elements_per_second", (struct spw_label[]){{"job_id", id}}, 1,
                            jobs[k].consumed_per_s);
    }
    spw_prom_family(p, "spillway_job_client_wait_ratio", "gauge",
                    "the fraction of time the trainer waited on an empty prefetch buffer");
    for (int k = 0; k < n_jobs; k++) {
        char id[24];
        snprintf(id, sizeof id, "%llu", (unsigned long long)jobs[k].ji.id);
        if (jobs[k].wait_fraction >= 0)
            spw_prom_sample(p, "spillway_job_client_wait_ratio", (struct spw_label[]){{"job_id", id}}, 1,
                            jobs[k].wait_fraction);
    }
    static const char *const plan_names[4] = {"spillway_job_predicted_elements_per_second",
                                              "spillway_job_local_share", "spillway_job_workers_needed",
                                              "spillway_job_planned_cut"};
    static const char *const plan_help[4] = {
        "the plan's predicted elements/s", "the plan's share of elements made by the client itself",
        "workers the plan needs for the trainer's rate (the autoscaling signal; -1: unknown)",
        "the cut the plan chose"};
    double (*plan_v)[4] = calloc((size_t)(n_jobs ? n_jobs : 1), sizeof *plan_v);
    bool *planned = calloc((size_t)(n_jobs ? n_jobs : 1), sizeof *planned);
    for (int k = 0; plan_v && planned && k < n_jobs; k++) {
        Spillway__V1__Plan *pl = disp_replanner_plan_of(s->replanner, jobs[k].ji.id);
        if (!pl)
            continue;
        planned[k] = true;
        plan_v[k][0] = pl->throughput;
        plan_v[k][1] = pl->local_share;
        plan_v[k][2] = pl->workers_needed;
        plan_v[k][3] = pl->cut;
        spillway__v1__plan__free_unpacked(pl, NULL);
    }
    for (int m = 0; plan_v && planned && m < 4; m++) {
        spw_prom_family(p, plan_names[m], "gauge", plan_help[m]);
        for (int k = 0; k < n_jobs; k++) {
            char id[24];
            snprintf(id, sizeof id, "%llu", (unsigned long long)jobs[k].ji.id);
            if (planned[k])
                spw_prom_sample(p, plan_names[m], (struct spw_label[]){{"job_id", id}}, 1, plan_v[k][m]);
        }
    }
    if (!plan_v || !planned)
        p->oom = true;
    free(plan_v);
    free(planned);
    free(jobs);
    free(prog);
    free(names);
}
