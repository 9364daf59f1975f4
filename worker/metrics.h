/* worker/metrics.h - the worker's Prometheus samples for --metrics-port: per job the elements and bytes sent,
 * what waits in its queues, the splits it holds and the client streams attached; its GPU's work and arena.
 * Thread model: any thread (the metrics thread); it reads through locked snapshots. */
#ifndef SPW_WORKER_METRICS_H
#define SPW_WORKER_METRICS_H

#include "lib/metrics.h"
#include "pipeline/backend.h"
#include "worker/jobs.h"

void wrk_metrics(struct wrk_jobs *w, const struct spw_backend *gpu, struct spw_prom *p);

#endif
