/* dispatcher/demand.h - workers a job needs from what its trainer measures, when no trainer rate was stated:
 * the autoscaling signal (spillway_job_workers_needed) of a job the planner cannot size. Pure: numbers in,
 * a count out; no clock, no state. Thread model: none (any thread). */
#ifndef SPW_DISPATCHER_DEMAND_H
#define SPW_DISPATCHER_DEMAND_H

/* One producer of the job as the heartbeats measure it. */
struct disp_demand_producer {
    double elements_per_s;          /* delivered, over the last rate window (0: none) */
    double cpu_ns_per_element;      /* its CPU per element over that window (0: not measured) */
    double cores;                   /* the cores it runs on (a worker's threads; ignored for the client) */
};

struct disp_demand_input {
    double consumed_per_s;          /* the trainer's rate (all ranks) */
    double wait_fraction;           /* the fraction of time it waited for data, 0..1 */
    double starved_fraction;        /* the fraction of time its thread was ready between next() calls but had
                                       no CPU, 0..1 (NAN or 0: not measured / none) */
    double trainer_cpu_cores;       /* the trainer process's CPU (cores) over that window (0: unknown) */
    double trainer_own_cores;       /* of it, its own producing threads' (0: none or unknown) */
    struct disp_demand_producer client;     /* the trainer's own threads (its local share) */
    const struct disp_demand_producer *workers;     /* the workers serving the job */
    int n_workers;
    double worker_cores;            /* the cores a new worker brings (--worker-millicores / 1000) */
};

/* The trainer's demand: the rate it would consume if it never waited (consumed / (1 - wait), the wait capped
 * at DISP_DEMAND_MAX_WAIT so that a trainer that only waits counts as wanting 1 / (1 - cap) times its rate). */
double disp_demand_rate(double consumed_per_s, double wait_fraction);
#define DISP_DEMAND_MAX_WAIT 0.95
/* The fraction of the trainer's time lost to its input: the wait for data plus the part of its CPU starvation
 * that its own producing threads cause (starved x their share of the process's CPU). Under a CPU quota the
 * producers' work throttles the whole process, the training step included, and the step, not next(), takes
 * that time: without it a throttled trainer looks satisfied at a rate well below its demand. */
double disp_demand_idle(const struct disp_demand_input *in);

/* Workers to meet the demand with the trainer's own share kept: (demand - client's rate) over one worker's
 * capacity (its cores / its CPU per element, the mean of the serving workers'; with none measured, a new
 * worker's cores at the client's CPU per element), planned at 90% of it as the planner does; the demand is
 * disp_demand_rate(consumed, disp_demand_idle(in)). 0 when the client alone keeps up; at least 1 for a
 * trainer that waits and gets nothing; with nothing measured yet (no rate, no wait: a job's first second) the
 * workers it has (n_workers), never -1. */
int disp_demand_workers(const struct disp_demand_input *in);

#endif
