/* dispatcher/planning.h - plans a job (created with cut = -2, or re-planned): asks every alive worker for
 * its profile of the pipeline (Worker.Profile), combines the profiles with the client's measured facts and
 * runs the planner (pipeline/planner.c); on a re-plan, calibrates the client's cores to what the job
 * delivers. Runs on CreateJob's own thread or the re-plan thread: blocking calls to workers (up to 32 at once,
 * on short-lived threads of its own: lib/parallel.h), never under the service lock. */
#ifndef SPW_DISPATCHER_PLANNING_H
#define SPW_DISPATCHER_PLANNING_H

#include <stdbool.h>
#include <stddef.h>

#include "pipeline/planner.h"
#include "pipeline/profile_ask.h"
#include "proto/spillway.pb-c.h"

/* The workers' profiles of one job's pipeline by address, kept with the job so that re-plans do not profile
 * again (a profile takes a busy worker seconds of CPU, under full load, while it serves the job): only
 * workers not in it yet are asked, and added. */
#define DISP_PROFILES_MAX 64
struct disp_profiles {
    int n;
    char addr[DISP_PROFILES_MAX][256];
    struct spw_plan_worker w[DISP_PROFILES_MAX];
    double bytes[SPW_PLAN_MAX_CUTS];    /* b_k as the first profiled worker measured them */
};

/* How the dispatcher asks workers for profiles: the token it shows them, and how long one may take. */
struct disp_ask {
    const char *auth_token;         /* NULL: none */
    int timeout_ms;
};
#define DISP_PROFILE_TIMEOUT_MS 15000   /* the default: well within a client's CreateJob deadline (30 s) */

/* Whether known holds addr's profile. */
bool disp_profiles_has(const struct disp_profiles *known, const char *addr);

/* Ask the workers of asks[0..n) with `ask` set for their profiles of pipe (n_cuts cuts; 256 elements or what
 * a worker measures in 5 s, all at once: pipeline/profile_ask.h), each within how->timeout_ms, logging each
 * that gave none (a worker that hangs is left out when its time is up). how NULL: no token, 15 s. */
void disp_profile_ask(struct spw_profile_ask *asks, int n, const Spillway__V1__Pipeline *pipe, int n_cuts,
                      const struct disp_ask *how);

/* Plan with n_cuts candidates from the client's facts and the workers at addrs (those that answer, or whose
 * profile is in known; known may be NULL: profile all, keep nothing). Returns 0 with *plan and *profiled
 * (workers in the plan), or -EINVAL with the reason in msg (facts that do not fit the pipeline). */
int disp_plan_job(const Spillway__V1__Pipeline *pipe, const Spillway__V1__ClientFacts *cf, int n_cuts,
                  char *const *addrs, int n_addrs, const struct disp_ask *how, struct disp_profiles *known,
                  struct spw_plan *plan, int *profiled, char *msg, size_t msglen);

/* What a running job measured at its cut. Costs: per-element CPU measured on the real path (the client's
 * receiving threads and own production; each worker's process, per address in addrs; 0 = not measured)
 * are folded into the profiled ones first (spw_plan_use_measured). Then, with calibrate, when the plan
 * predicts more than elements_per_s at the same cut (after the workers' measured links are in the facts)
 * and the client's CPU is busy (client_cpu at least 80% of the cores it declared), the shortfall is the
 * client's: its cores are scaled down until the prediction meets the measurement, and cores says what the
 * plan used. An idle client is not calibrated: what holds it back is elsewhere. */
struct disp_measured {
    int cut;
    double elements_per_s;
    double client_cpu;              /* the client process's CPU seconds per second */
    bool calibrate;
    double remote_ns, local_ns;     /* the client's per remote / own element */
    const double *worker_ns;        /* per address (NULL: none measured) */
    double cores;                   /* out */
    double alone;                   /* out: the client alone, min(C / f, R), at the cores it declared */
};
/* disp_plan_job for a running job (seen != NULL: calibrated as above). */
int disp_replan_job(const Spillway__V1__Pipeline *pipe, const Spillway__V1__ClientFacts *cf, int n_cuts,
                    char *const *addrs, int n_addrs, const struct disp_ask *how, struct disp_profiles *known,
                    struct disp_measured *seen, struct spw_plan *plan, int *profiled, char *msg, size_t msglen);

/* Re-planning with hysteresis: the cut to use now, given a fresh plan and the job's current cut - the plan's
 * choice only if it predicts at least (1 + hysteresis) times the current cut's throughput. */
int disp_replan_choice(const struct spw_plan *p, int current_cut, double hysteresis);

/* Make a fresh plan describe the cut a running job keeps (p->best != cut: the plan's choice was not enough
 * better, or it would offload nothing): that cut, on the service, its prediction, and why in p->why. */
void disp_plan_keep(struct spw_plan *p, int cut, double hysteresis);

/* Whether a running job should be handed back to its clients: no cut (its best local/remote mix) predicts
 * (1 + hysteresis) times `alone`, what the client does by itself - the same margin a cut change needs.
 * alone is the local-only rate at the cores the client declared (disp_measured.alone): a calibration that
 * scales the cores down to explain a slow remote path does not slow the client's own production; 0 = never
 * (--local-share off: the client keeps its CPU for the suffix). */
bool disp_hand_back(const struct spw_plan *p, double alone, double hysteresis);

#endif
