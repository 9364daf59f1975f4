/* pipeline/plan_proto.h - a plan (pipeline/planner.h) as a spillway.v1.Plan message: what the dispatcher
 * answers and keeps, and what spillctl prints. Pure; thread-safe. */
#ifndef SPW_PIPELINE_PLAN_PROTO_H
#define SPW_PIPELINE_PLAN_PROTO_H

#include "pipeline/planner.h"
#include "proto/spillway.pb-c.h"

/* The plan as a message (workers: how many were profiled); free with spw_plan_proto_free. NULL when out of
 * memory. Unlimited capacities become -1. */
Spillway__V1__Plan *spw_plan_to_proto(const struct spw_plan *p, int workers);
void spw_plan_proto_free(Spillway__V1__Plan *m);

/* A worker's Profile reply as planner input: its cores (its CPU limit; threads from older workers), its cost
 * per cut, and the bytes per cut into bytes (n_cuts of them). Returns 0, or -EINVAL when the reply has other
 * cuts, no threads, or a cost or size that is not a non-negative number (a positive cost). */
int spw_plan_worker_from_proto(const Spillway__V1__ProfileResponse *p, int n_cuts, struct spw_plan_worker *w,
                               double *bytes);

#endif
