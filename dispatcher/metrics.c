/* dispatcher/metrics.c - the dispatcher's Prometheus exposition (--metrics-port): workers and jobs by state,
 * what the state applied (leases, acks, deaths, cut changes), the journal, and per job its deliveries by
 * producer class, the client's rate and wait, and the plan (predicted rate, cut, local share, workers
 * needed: the autoscaling signal); profiles asked ahead of CreateJob; the progress tables' size. Thread model:
 * the metrics thread; it copies what it needs under the service's lock (each job's progress rows, walked per
 * job), writes after releasing it, and asks the re-planner for plans without the service's lock. */
#include "dispatcher/service_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/demand.h"
#include "lib/clock.h"
#include "lib/metrics.h"

#define MAX_ROWS 1024

/* The per-job series: a job has a value of each it knows (the client's only once it reported; the plan's
 * only for planned jobs). */
enum { J_ELEMENTS, J_CUT, J_CLIENT_RATE, J_WAIT, J_STARVED, J_PREDICTED, J_SHARE, J_NEEDED, J_PLANNED_CUT, J_SERIES };
static const struct {
    const char *name, *type, *help;
} job_series[J_SERIES] = {
    {"spillway_job_elements_total", "counter", "elements the job's producers delivered"},
    {"spillway_job_cut", "gauge", "groups [0, cut) run on the workers"},
    {"spillway_job_client_elements_per_second", "gauge",
     "the trainer's rate as its rank-0 client reports it (times the ranks)"},
    {"spillway_job_client_wait_ratio", "gauge", "the fraction of time the trainer waited on an empty prefetch buffer"},
    {"spillway_job_client_cpu_starved_ratio", "gauge",
     "the fraction of time the trainer's thread was ready between batches but had no CPU (a spent CPU quota's "
     "throttling, busy cores); the part its own producing threads cause counts as waiting in the demand"},
    {"spillway_job_predicted_elements_per_second", "gauge", "the plan's predicted elements/s"},
    {"spillway_job_local_share", "gauge", "the plan's share of elements made by the client itself"},
    {"spillway_job_workers_needed", "gauge",
     "workers the job needs (the autoscaling signal): the plan's for the trainer's stated rate, else what "
     "the trainer's measured demand needs (its rate were it never waiting, beyond its own threads'); "
     "before its first measurement, the workers it has; never -1 for a running job"},
    {"spillway_job_planned_cut", "gauge", "the cut the plan chose"},
};

struct job_row {
    uint64_t id;
    double v[J_SERIES];
    bool has[J_SERIES];
    bool running;               /* not finished, not paused: the demand applies */
    int demand;                 /* workers its trainer's measured demand needs (-1: nothing measured) */
};

/* A worker's cores by id (sorted), for the demand of the jobs it serves. */
struct worker_cores {
    uint64_t id;
    int32_t threads;
};

/* A producer's row of a job, copied under the lock. */
struct producer_row {
    uint64_t job;
    double elements, cpu_ns_per_element;
    char name[48];
};

static int cmp_id(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The workers its trainer's measured demand needs (dispatcher/demand.h), from job's progress rows: the
 * rank-0 client's rate and wait, the clients' own rates, the serving workers' rates and CPU per element.
 * Under the service's lock; demand_w is scratch for the workers' rows. */
static int job_demand(const struct disp_service *s, uint64_t job, const struct worker_cores *cores, size_t n_cores,
                      struct disp_demand_producer *demand_w, size_t cap)
{
    struct disp_demand_input in = {.consumed_per_s = NAN, .wait_fraction = NAN, .workers = demand_w,
                                   .worker_cores = s->o.worker_millicores / 1000.0};
    for (const struct disp_progress_entry *e = disp_progress_first(s->progress, job); e; e = disp_progress_next(e)) {
        if (DISP_IS_CLIENT_PRODUCER(e->producer)) {
            if (e->producer & (UINT64_C(1) << 19))
                continue;       /* a client's GPU row is part of its own */
            in.client.elements_per_s += e->elements_per_s;
            if (e->wait_fraction >= 0) {        /* rank 0's: the trainer's rate (times the ranks) and wait */
                in.consumed_per_s = e->consumed_per_s;
                in.wait_fraction = e->wait_fraction;
                in.client.cpu_ns_per_element = e->cpu_ns_per_element;
                in.starved_fraction = e->starved_fraction;
                in.trainer_cpu_cores = e->cpu_cores;
                in.trainer_own_cores = e->elements_per_s * e->cpu_ns_per_element / 1e9;
            }
        } else if ((size_t)in.n_workers < cap) {
            const struct worker_cores key = {.id = e->producer};
            const struct worker_cores *w = n_cores ? bsearch(&key, cores, n_cores, sizeof *cores, cmp_id) : NULL;
            demand_w[in.n_workers++] = (struct disp_demand_producer){
                .elements_per_s = e->elements_per_s, .cpu_ns_per_element = e->cpu_ns_per_element,
                .cores = w ? w->threads : 0};
        }
    }
    return disp_demand_workers(&in);
}

/* A producer's class, as spillctl job names it: worker:N, worker:N:gpu, client:rankR, client:rankR:gpu;
 * gpu_ids: the sorted ids of the workers with a GPU. */
static void producer_name(const uint64_t *gpu_ids, size_t n_gpu, uint64_t producer, char *buf, size_t n)
{
    if (DISP_IS_CLIENT_PRODUCER(producer)) {
        snprintf(buf, n, "client:rank%llu%s", (unsigned long long)(producer & 0x7FFFF),
                 producer & (UINT64_C(1) << 19) ? ":gpu" : "");
        return;
    }
    const bool gpu = n_gpu && bsearch(&producer, gpu_ids, n_gpu, sizeof *gpu_ids, cmp_id);
    snprintf(buf, n, "worker:%llu%s", (unsigned long long)producer, gpu ? ":gpu" : "");
}

static void counter_of(struct spw_prom *p, const char *name, const char *help, const uint64_t *applied, int kind)
{
    spw_prom_counter(p, name, help, (double)applied[kind]);
}

void disp_service_metrics(struct disp_service *s, struct spw_prom *p)
{
    struct job_row *jobs = calloc(MAX_ROWS, sizeof *jobs);
    struct producer_row *prog = NULL;
    uint64_t *gpu_ids = NULL;
    struct worker_cores *cores = NULL;
    struct disp_demand_producer *demand_w = NULL;
    size_t n_cores = 0;
    if (!jobs) {
        p->oom = true;
        return;
    }
    uint64_t applied[DISP_RESTORE_ENDED + 1], re_leases, released;
    int alive = 0, dead = 0, n_jobs = 0;
    size_t n_prog = 0, n_gpu = 0;
    struct disp_progress_stats tables[2];
    int64_t journal_bytes = -1;
    pthread_mutex_lock(&s->mu);
    memcpy(applied, s->applied, sizeof applied);
    re_leases = s->re_leases;
    released = s->leases_released;
    const size_t n_workers = (size_t)disp_state_worker_count(s->st);
    gpu_ids = malloc((n_workers + 1) * sizeof *gpu_ids);
    cores = malloc((n_workers + 1) * sizeof *cores);
    demand_w = malloc((n_workers + 1) * sizeof *demand_w);
    for (size_t i = 0; gpu_ids && cores && i < n_workers; i++) {
        struct disp_worker_info w;
        if (disp_state_worker_at(s->st, (int)i, &w) == 0) {
            w.alive ? alive++ : dead++;
            if (w.gpu[0])
                gpu_ids[n_gpu++] = w.id;
            cores[n_cores++] = (struct worker_cores){.id = w.id, .threads = w.threads};
        }
    }
    if (gpu_ids)
        qsort(gpu_ids, n_gpu, sizeof *gpu_ids, cmp_id);
    if (cores)
        qsort(cores, n_cores, sizeof *cores, cmp_id);
    int by_state[4] = {0};
    for (int i = 0; i < disp_state_job_count(s->st) && n_jobs < MAX_ROWS; i++) {
        struct job_row *r = &jobs[n_jobs];
        struct disp_job_info ji;
        if (disp_state_job_at(s->st, i, &ji) != 0)
            continue;
        by_state[ji.finished ? 3 : ji.client_only ? 2 : ji.paused ? 1 : 0]++;
        r->id = ji.id;
        r->v[J_CUT] = ji.cut;
        r->has[J_ELEMENTS] = r->has[J_CUT] = true;
        r->running = !ji.finished && !ji.paused;
        r->demand = r->running && cores && demand_w ? job_demand(s, ji.id, cores, n_cores, demand_w, n_workers) : -1;
        n_jobs++;
    }
    size_t rows = 0;            /* each job's entries, walked per job: O(entries), not jobs x entries */
    for (int k = 0; k < n_jobs; k++)
        rows += disp_progress_count(s->progress, jobs[k].id);
    prog = malloc((rows + 1) * sizeof *prog);
    for (int k = 0; prog && gpu_ids && k < n_jobs; k++)
        for (const struct disp_progress_entry *e = disp_progress_first(s->progress, jobs[k].id); e;
             e = disp_progress_next(e)) {
            if (!(e->producer & (UINT64_C(1) << 19)) || !DISP_IS_CLIENT_PRODUCER(e->producer))
                jobs[k].v[J_ELEMENTS] += (double)e->elements;  /* a client's GPU row is part of its own */
            if (e->wait_fraction >= 0) {
                jobs[k].v[J_CLIENT_RATE] = e->consumed_per_s;
                jobs[k].v[J_WAIT] = e->wait_fraction;
                jobs[k].v[J_STARVED] = e->starved_fraction;
                jobs[k].has[J_CLIENT_RATE] = jobs[k].has[J_WAIT] = jobs[k].has[J_STARVED] = true;
            }
            struct producer_row *r = &prog[n_prog++];
            r->job = e->job;
            r->elements = (double)e->elements;
            r->cpu_ns_per_element = e->cpu_ns_per_element;
            producer_name(gpu_ids, n_gpu, e->producer, r->name, sizeof r->name);
        }
    disp_progress_stats(s->progress, &tables[0]);
    disp_progress_stats(s->received, &tables[1]);
    if (s->journal)
        journal_bytes = spw_journal_size(s->journal);
    const bool journal_failing = disp_journal_failing(s);
    const uint64_t journal_failures = s->journal_failures;
    const int64_t lag_ms = s->tick_lag_ms;
    const int64_t recent_lag_ms = disp_lag_recent(&s->worker_lag, spw_now_ms());
    const uint64_t deferred[2] = {s->deaths_deferred[0], s->deaths_deferred[1]};
    pthread_mutex_unlock(&s->mu);
    if (!prog || !gpu_ids || !cores || !demand_w) {
        p->oom = true;
        goto out;
    }

    spw_prom_family(p, "spillway_dispatcher_workers", "gauge", "registered workers by state");
    spw_prom_sample(p, "spillway_dispatcher_workers", (struct spw_label[]){{"state", "alive"}}, 1, alive);
    spw_prom_sample(p, "spillway_dispatcher_workers", (struct spw_label[]){{"state", "unreachable"}}, 1, dead);
    static const char *const states[4] = {"running", "paused", "client", "finished"};
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
    spw_prom_counter(p, "spillway_dispatcher_calls_shed_total",
                     "heartbeats and lease calls not served: their deadline passed while they waited (overload)",
                     (double)__atomic_load_n(&s->shed_calls, __ATOMIC_RELAXED));
    spw_prom_counter(p, "spillway_dispatcher_new_work_refused_total",
                     "new jobs (RESOURCE_EXHAUSTED, retried by their clients) and profile asks ahead refused "
                     "while the dispatcher was overloaded: its lag past a quarter of --worker-timeout-ms",
                     (double)__atomic_load_n(&s->new_work_refused, __ATOMIC_RELAXED));
    spw_prom_family(p, "spillway_dispatcher_lag_seconds", "gauge",
                    "the dispatcher's own lag: how late its timer woke, or the longest a heartbeat or lease call "
                    "waited for its handler and the lock; at the last tick (window=tick) and the most over the "
                    "last --worker-timeout-ms or two (window=recent), which extends the liveness timeouts");
    spw_prom_sample(p, "spillway_dispatcher_lag_seconds", (struct spw_label[]){{"window", "tick"}}, 1,
                    (double)lag_ms / 1e3);
    spw_prom_sample(p, "spillway_dispatcher_lag_seconds", (struct spw_label[]){{"window", "recent"}}, 1,
                    (double)recent_lag_ms / 1e3);
    spw_prom_family(p, "spillway_dispatcher_deaths_deferred_total", "counter",
                    "timer checks (5 a second) that spared a worker or client rank silent past its timeout because "
                    "the dispatcher itself lagged: not declared dead before timeout + the recent lag");
    spw_prom_sample(p, "spillway_dispatcher_deaths_deferred_total", (struct spw_label[]){{"peer", "worker"}}, 1,
                    (double)deferred[0]);
    spw_prom_sample(p, "spillway_dispatcher_deaths_deferred_total", (struct spw_label[]){{"peer", "client"}}, 1,
                    (double)deferred[1]);
    spw_prom_counter(p, "spillway_dispatcher_replans_total", "re-plans of running planned jobs, whatever came of them",
                     (double)disp_replanner_replans(s->replanner));
    uint64_t listings, served;
    size_t kept_bytes;
    disp_manifests_counts(s->manifests, &listings, &served, &kept_bytes);
    spw_prom_counter(p, "spillway_dispatcher_listings_total", "dataset sources listed (each client's GetManifest, "
                     "or a CreateJob without one)", (double)listings);
    spw_prom_counter(p, "spillway_dispatcher_manifest_bytes_served_total",
                     "packed listings sent to workers and clients (GetManifest)", (double)served);
    spw_prom_gauge(p, "spillway_dispatcher_manifests_kept_bytes", "packed listings kept for GetManifest (512 MiB cap)",
                   (double)kept_bytes);
    struct disp_ahead_counts ah;
    disp_ahead_counts(s->ahead, &ah);
    spw_prom_family(p, "spillway_dispatcher_profile_asks_ahead_total", "counter",
                    "workers' profiles asked ahead of a planned CreateJob (the client's GetManifest): started, "
                    "taken by their CreateJob, dropped untaken a minute after they ended, refused (4 kept, or a "
                    "pipeline over 1 MiB)");
    static const char *const outcomes[4] = {"started", "taken", "expired", "refused"};
    const uint64_t by_outcome[4] = {ah.started, ah.taken, ah.expired, ah.refused};
    for (int i = 0; i < 4; i++)
        spw_prom_sample(p, "spillway_dispatcher_profile_asks_ahead_total",
                        (struct spw_label[]){{"outcome", outcomes[i]}}, 1, (double)by_outcome[i]);
    spw_prom_gauge(p, "spillway_dispatcher_profile_asks_ahead_running", "profiles asked ahead, still being asked",
                   (double)ah.running);
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
    static const char *const table_names[2] = {"delivered", "received"};
    static const struct {
        const char *name, *type, *help;
    } table_series[3] = {
        {"spillway_dispatcher_progress_entries", "gauge",
         "(job, producer) rows of the progress tables: delivered (producers' heartbeats), received (per link, "
         "as rank-0 clients report it)"},
        {"spillway_dispatcher_progress_bytes", "gauge", "the progress tables' memory: rows, job lists, buckets"},
        {"spillway_dispatcher_progress_reports_dropped_total", "counter",
         "progress reports dropped: no memory for a new row"},
    };
    for (int m = 0; m < 3; m++) {
        spw_prom_family(p, table_series[m].name, table_series[m].type, table_series[m].help);
        for (int t = 0; t < 2; t++) {
            const double v[3] = {(double)tables[t].entries, (double)tables[t].bytes, (double)tables[t].dropped};
            spw_prom_sample(p, table_series[m].name, (struct spw_label[]){{"table", table_names[t]}}, 1, v[m]);
        }
    }
    if (journal_bytes >= 0) {
        spw_prom_gauge(p, "spillway_dispatcher_journal_bytes", "the journal's size (--work-dir)",
                       (double)journal_bytes);
        spw_prom_family(p, "spillway_dispatcher_journal_sync_seconds", "histogram",
                        "journal writes that reach the disk (fsync), each");
        spw_prom_hist(p, "spillway_dispatcher_journal_sync_seconds", NULL, 0, &s->journal_sync);
        spw_prom_gauge(p, "spillway_dispatcher_journal_writable",
                       "1 while the journal takes writes; 0 since a write failed (a full disk): not ready, "
                       "no changes taken, until a write succeeds", journal_failing ? 0 : 1);
        spw_prom_counter(p, "spillway_dispatcher_journal_write_failures_total",
                         "journal writes or fsyncs that failed (each refused its change)", (double)journal_failures);
    }

    /* Per job, with its plan from the re-planner (without the service's lock). The workers needed: the
     * plan's for the trainer's stated rate; without one (the plan's -1, or no plan: a fixed cut), what the
     * trainer's measured demand needs. */
    for (int k = 0; k < n_jobs; k++) {
        Spillway__V1__Plan *pl = disp_replanner_plan_of(s->replanner, jobs[k].id);
        if (pl) {
            const double v[] = {pl->throughput, pl->local_share, pl->workers_needed, pl->cut};
            for (int m = 0; m < 4; m++) {
                jobs[k].v[J_PREDICTED + m] = v[m];
                jobs[k].has[J_PREDICTED + m] = true;
            }
            spillway__v1__plan__free_unpacked(pl, NULL);
        }
        if (jobs[k].running && (!jobs[k].has[J_NEEDED] || jobs[k].v[J_NEEDED] < 0)) {
            jobs[k].v[J_NEEDED] = jobs[k].demand;
            jobs[k].has[J_NEEDED] = true;
        }
    }
    for (int m = 0; m < J_SERIES; m++) {
        spw_prom_family(p, job_series[m].name, job_series[m].type, job_series[m].help);
        for (int k = 0; k < n_jobs; k++) {
            char id[24];
            snprintf(id, sizeof id, "%llu", (unsigned long long)jobs[k].id);
            if (jobs[k].has[m])
                spw_prom_sample(p, job_series[m].name, (struct spw_label[]){{"job_id", id}}, 1, jobs[k].v[m]);
        }
    }
    /* Per producer of each job. */
    for (int m = 0; m < 2; m++) {
        const char *name = m ? "spillway_job_producer_cpu_seconds_per_element" : "spillway_job_producer_elements_total";
        spw_prom_family(p, name, m ? "gauge" : "counter",
                        m ? "a producer's CPU per element over its last rate window (0: not measured)"
                          : "elements delivered per producer (worker:N[:gpu], client:rankR[:gpu]: of that rank's, "
                            "made on its GPU)");
        for (size_t i = 0; i < n_prog; i++) {
            char id[24];
            snprintf(id, sizeof id, "%llu", (unsigned long long)prog[i].job);
            spw_prom_sample(p, name, (struct spw_label[]){{"job_id", id}, {"producer", prog[i].name}}, 2,
                            m ? prog[i].cpu_ns_per_element / 1e9 : prog[i].elements);
        }
    }
out:
    free(jobs);
    free(prog);
    free(gpu_ids);
    free(cores);
    free(demand_w);
}
