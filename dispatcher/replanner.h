/* dispatcher/replanner.h - planned jobs and their re-planning, behind a lock of their own: each planned job's
 * plan, the client's facts and the workers' profiles; the "run in the clients" answers of named jobs; one
 * re-plan thread at a time. What it needs of the service (a job's state, its alive workers, what the job
 * measured) it asks through struct disp_replan_env, and it hands its decisions back the same way.
 * Thread model: every function is safe from any thread. Lock order: the service's lock, then this one;
 * the re-planner never calls the service while it holds its own. */
#ifndef SPW_DISPATCHER_REPLANNER_H
#define SPW_DISPATCHER_REPLANNER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dispatcher/planning.h"
#include "proto/spillway.pb-c.h"

/* A planned job as the service sees it now. */
struct disp_replan_input {
    bool live;                      /* in the table, not finished, paused or handed back */
    int cut, max_workers;
    int alive;                      /* alive workers, at most max_workers when that is set */
    double remote_ns, local_ns;     /* measured CPU per element: the client's receiving threads, its own
                                       threads (rank 0); 0 = not measured */
    /* full only (disp_replan_input_free): */
    Spillway__V1__Pipeline *pipeline;
    size_t n_workers;               /* the alive workers that serve the job */
    Spillway__V1__WorkerAddress **workers;
    double *worker_ns;              /* measured CPU per element of each (0 = not measured) */
    double *delivered_bytes_per_s;  /* what each delivered of the job (0 = no rate yet) */
};
void disp_replan_input_free(struct disp_replan_input *in);

struct disp_replan_env {
    void *ctx;
    /* Fill *in for job (full: the pipeline and the workers too). Returns 0, or -ENOENT when the job left the
     * table. Takes the service's lock. */
    int (*gather)(void *ctx, uint64_t job, bool full, struct disp_replan_input *in);
    /* Apply a re-plan's outcome to a job still live: a new cut for new leases, or hand_back (the clients
     * produce it all). Returns 0 when applied. Takes the service's lock. */
    int (*apply)(void *ctx, uint64_t job, int cut, bool hand_back);
    struct disp_ask ask;            /* how workers are asked for profiles */
    int64_t replan_after_ms;        /* re-plan on measurements at most this often; 0 = never */
};

struct disp_replanner;

int disp_replanner_create(const struct disp_replan_env *env, struct disp_replanner **out);
/* Join the re-plan thread and free. Accepts NULL. */
void disp_replanner_destroy(struct disp_replanner *rp);

/* Keep how a job was planned and from what (takes profiles, may be NULL). */
void disp_replanner_remember(struct disp_replanner *rp, uint64_t job, const Spillway__V1__Plan *plan,
                             const Spillway__V1__ClientFacts *facts, int alive, struct disp_profiles *profiles);
/* A client heartbeat's measurements of a planned job (rank 0): the trainer's elements/s, the fraction of time
 * it waited for data, its process's CPU seconds per second. */
void disp_replanner_observe(struct disp_replanner *rp, uint64_t job, double consumed_per_s, double wait_fraction,
                            double client_cpu);
/* Re-plans completed since the start, whatever came of them (metrics). */
uint64_t disp_replanner_replans(struct disp_replanner *rp);
/* A job's plan (unpacked; free_unpacked) or NULL. */
Spillway__V1__Plan *disp_replanner_plan_of(struct disp_replanner *rp, uint64_t job);
/* Start a re-plan of a planned job whose costs on the real path are measured (once), whose workers changed,
 * whose rate stayed off the prediction, or whose trainer turned out to set the pace (one at a time); forget
 * the plans of jobs that left the table. Called by the service's timer, without the service's lock. */
void disp_replanner_tick(struct disp_replanner *rp, int64_t now_ms);

/* "Run in the clients" answers for named jobs, so that every rank naming the job gets the same one (one
 * rank in-process while another has a job on the service would leave that job's rank unserved). Remember
 * one (the caller, under the service's lock, has checked that no job of that name exists); whether one is
 * there (not older than 10 minutes); a copy (unpacked; free_unpacked) or NULL. */
void disp_replanner_remember_named_local(struct disp_replanner *rp, const char *name, const Spillway__V1__Plan *plan);
bool disp_replanner_named_local_exists(struct disp_replanner *rp, const char *name);
Spillway__V1__Plan *disp_replanner_named_local(struct disp_replanner *rp, const char *name);

#endif
