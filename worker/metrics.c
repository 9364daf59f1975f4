/* worker/metrics.c - the worker's Prometheus samples (see metrics.h). Thread model: the metrics thread. */
#include "worker/metrics.h"

#include <stdio.h>
#include <stdlib.h>

#include "pipeline/gpu_backend.h"

#define MAX_JOBS 256

static void per_job(struct spw_prom *p, const struct wrk_job_stat *st, int n, const char *name, const char *type,
                    const char *help, double (*get)(const struct wrk_job_stat *))
{
    spw_prom_family(p, name, type, help);
    for (int i = 0; i < n; i++) {
        char id[24];
        snprintf(id, sizeof id, "%llu", (unsigned long long)st[i].job);
        spw_prom_sample(p, name, (struct spw_label[]){{"job_id", id}}, 1, get(&st[i]));
    }
}

static double elements(const struct wrk_job_stat *s) { return (double)s->elements; }
static double bytes(const struct wrk_job_stat *s) { return (double)s->bytes; }
static double queue_bytes(const struct wrk_job_stat *s) { return (double)s->queue_bytes; }
static double held(const struct wrk_job_stat *s) { return s->held_splits; }
static double streams(const struct wrk_job_stat *s) { return s->streams; }
static double direct_streams(const struct wrk_job_stat *s) { return s->direct_streams; }
static double credit(const struct wrk_job_stat *s) { return (double)s->credit_bytes; }

void wrk_metrics(struct wrk_jobs *w, const struct spw_backend *gpu, struct spw_prom *p)
{
    struct wrk_job_stat *st = calloc(MAX_JOBS, sizeof *st);
    if (!st) {
        p->oom = true;
        return;
    }
    const int n = wrk_jobs_stats(w, st, MAX_JOBS);
    spw_prom_gauge(p, "spillway_worker_jobs", "jobs this worker serves", n);
    int64_t zin, zout;
    wrk_jobs_compressed(w, &zin, &zout);
    spw_prom_counter(p, "spillway_worker_compressed_input_bytes_total",
                     "element bytes compressed (zstd) for clients that asked, all jobs", (double)zin);
    spw_prom_counter(p, "spillway_worker_compressed_output_bytes_total", "what those bytes became on the wire",
                     (double)zout);
    const int64_t refused = wrk_jobs_direct_refused(w);
    if (refused >= 0)
        spw_prom_counter(p, "spillway_worker_data_connections_refused_total",
                         "connections to the data port (--data-port) refused: no valid ticket within 2 s",
                         (double)refused);
    per_job(p, st, n, "spillway_worker_elements_sent_total", "counter", "elements sent to the job's clients",
            elements);
    per_job(p, st, n, "spillway_worker_sent_bytes_total", "counter", "bytes sent to the job's clients", bytes);
    per_job(p, st, n, "spillway_worker_queue_bytes", "gauge", "elements made and waiting for a client stream",
            queue_bytes);
    per_job(p, st, n, "spillway_worker_leases_held", "gauge", "splits leased and not yet queued whole", held);
    per_job(p, st, n, "spillway_worker_streams", "gauge", "client streams attached", streams);
    per_job(p, st, n, "spillway_worker_data_connections", "gauge",
            "of the client streams attached, those whose elements go on a data connection (the rest: on the "
            "gRPC stream)", direct_streams);
    per_job(p, st, n, "spillway_worker_credit_bytes", "gauge",
            "credit its clients granted and it has not used: the bytes it may send now", credit);
    for (int m = 0; m < 2; m++) {
        const char *name = m ? "spillway_worker_group_elements_total" : "spillway_worker_group_cpu_seconds_total";
        spw_prom_family(p, name, "counter", m ? "elements the CPU producers ran through each fusion group"
                                              : "CPU time the CPU producers spent in each fusion group (divided "
                                                "by spillway_worker_group_elements_total: CPU per element)");
        for (int i = 0; i < n; i++)
            for (int g = 0; g < st[i].n_groups; g++) {
                char id[24], gi[16];
                snprintf(id, sizeof id, "%llu", (unsigned long long)st[i].job);
                snprintf(gi, sizeof gi, "%d", g);
                const struct spw_label l[] = {{"job_id", id}, {"group", gi}, {"ops", st[i].group_ops[g]}};
                spw_prom_sample(p, name, l, 3,
                                m ? (double)st[i].group_elements[g] : (double)st[i].group_ns[g] / 1e9);
            }
    }
    spw_prom_family(p, "spillway_worker_element_errors_total", "counter",
                    "samples the worker could not make, by reason (decode, too_big, read, memory, other) and what the "
                    "job's on_error did with them (skipped, failed)");
    for (int i = 0; i < n; i++) {
        char id[24];
        snprintf(id, sizeof id, "%llu", (unsigned long long)st[i].job);
        for (int k = 0; k < SPW_FAIL_KINDS; k++) {
            const struct spw_label l[] = {{"job_id", id}, {"reason", spw_failure_names[k]},
                                          {"action", st[i].skip ? "skipped" : "failed"}};
            spw_prom_sample(p, "spillway_worker_element_errors_total", l, 3, (double)st[i].failures[k]);
        }
    }
    free(st);
    if (gpu) {
        struct spw_gpu_stats gs;
        spw_gpu_backend_stats(gpu, &gs);
        spw_prom_counter(p, "spillway_worker_gpu_elements_total", "elements made on the GPU", (double)gs.elements);
        spw_prom_counter(p, "spillway_worker_gpu_cpu_elements_total",
                         "elements the GPU handed to the CPU (no room, a padding crop, a device error)",
                         (double)gs.cpu_elements);
        spw_prom_counter(p, "spillway_worker_gpu_device_errors_total", "device errors (the GPU is off after one)",
                         (double)gs.device_errors);
        spw_prom_gauge(p, "spillway_worker_gpu_arena_bytes", "the GPU memory reserved (--gpu-mem-budget)",
                       (double)gs.arena_bytes);
        spw_prom_gauge(p, "spillway_worker_gpu_arena_used_bytes", "of the arena, in use now", (double)gs.arena_used);
        spw_prom_gauge(p, "spillway_worker_gpu_arena_peak_bytes", "of the arena, the most ever in use",
                       (double)gs.arena_peak);
    }
}
