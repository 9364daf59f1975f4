/* tools/spillctl/plan.h - spillctl plan: measure the client's own costs here, ask every worker the dispatcher lists
 * for its profile, and print the planner's candidate table and decision, without creating a job; and
 * spillctl explain JOB: the same table as the dispatcher planned a job (--cut auto). Single-threaded apart
 * from the measuring threads. */
#ifndef SPW_SPILLCTL_PLAN_H
#define SPW_SPILLCTL_PLAN_H

#include <stdbool.h>

struct spw_plan_cli_opts {
    const char *dispatcher, *auth_token, *pipeline;
    int local_cores;            /* C: the client's cores for the pipeline (and the measuring threads) */
    double rate;                /* R: the trainer's elements/s; 0 = unlimited */
    int samples;                /* elements measured on each side; 0 = 64 */
    int force_cut;              /* K >= 0 or SPW_CUT_ALL: use it; otherwise choose */
    int max_workers;            /* plan with the first N alive workers; 0 = all */
    bool local_off;
    double recv_ns_per_byte;    /* client CPU per byte received, besides the copy into the batch; 0 = 0.3 */
    bool json;
    int timeout_ms;
};

/* Returns the process exit status (0, 1 on an error, 2 on usage). */
int spw_plan_cli(const struct spw_plan_cli_opts *o);
/* spillctl explain JOB: how the dispatcher planned the job (the same table). Returns the exit status. */
int spw_explain_cli(const char *dispatcher, const char *auth_token, const char *job_id, bool json, int timeout_ms);

#endif
