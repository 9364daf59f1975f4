/* tools/spillctl/watch.c - spillctl watch: the dispatcher's jobs and workers, asked again every interval (ListWorkers,
 * ListJobs, DescribeJob per unfinished job): per job its measured rate against the plan's and the trainer's,
 * the trainer's wait, the cut, splits, and each producer class's rate, share and CPU per element; per worker
 * its leases, buffered bytes and CPU per element. On a terminal the screen is redrawn in place; otherwise
 * each view is appended under a time line. Single-threaded. */
#include "tools/spillctl/watch.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/spillctl/inspect.h"
#include "lib/clock.h"
#include "lib/methods.h"
#include "proto/spillway.pb-c.h"

#define MAX_JOBS 32             /* described per view */

/* worker:N[:gpu] or client:rankR[:gpu] (dispatcher/state.h's producer ids). */
static void name_of(const Spillway__V1__ListWorkersResponse *w, uint64_t producer, char *buf, size_t n)
{
    if (producer >> 63) {
        snprintf(buf, n, "client:rank%llu%s", (unsigned long long)(producer & 0x7FFFF),
                 producer & (UINT64_C(1) << 19) ? ":gpu" : "");
        return;
    }
    bool gpu = false;
    for (size_t i = 0; w && i < w->n_workers; i++)
        gpu |= w->workers[i]->worker_id == producer && w->workers[i]->gpu && *w->workers[i]->gpu;
    snprintf(buf, n, "worker:%llu%s", (unsigned long long)producer, gpu ? ":gpu" : "");
}

static bool client_gpu_row(uint64_t producer)
{
    return producer >> 63 && producer & (UINT64_C(1) << 19);
}

static void print_job(FILE *f, const Spillway__V1__DescribeJobResponse *d, const Spillway__V1__ListWorkersResponse *w)
{
    const Spillway__V1__JobInfo *j = d->job;
    double rate = 0;
    for (size_t i = 0; i < d->n_producers; i++)
        if (!client_gpu_row(d->producers[i]->producer))
            rate += d->producers[i]->elements_per_s;
    char predicted[32] = "-", trainer[32] = "-", wait[32] = "-";
    if (d->plan)
        snprintf(predicted, sizeof predicted, "%.0f", d->plan->throughput);
    if (d->client_wait_fraction >= 0) {
        snprintf(trainer, sizeof trainer, "%.0f", d->client_elements_per_s);
        snprintf(wait, sizeof wait, "%.1f%%", 100 * d->client_wait_fraction);
    }
    const bool stalled = !j->finished && !j->paused && rate == 0 && (j->leased > 0 || j->pending > 0);
    fprintf(f, "%-5llu %-8s %-4d %9.0f %10s %9s %6s %5lld/%-5lld %lld/%lld/%lld%s\n", (unsigned long long)j->job,
            j->finished ? "finished" : j->client_only ? "client" : j->paused ? "paused" : "running", j->cut, rate,
            predicted, trainer, wait, (long long)j->epoch + 1, (long long)j->epochs, (long long)j->acked,
            (long long)j->leased, (long long)j->pending, stalled ? "  STALLED" : "");
    for (size_t i = 0; i < d->n_producers; i++) {
        const Spillway__V1__ProducerStats *p = d->producers[i];
        char name[48];
        name_of(w, p->producer, name, sizeof name);
        fprintf(f, "      %-20s %9.0f/s %5.1f%% %9.0f us/element %12lld elements\n", name, p->elements_per_s,
                rate > 0 ? 100 * p->elements_per_s / rate : 0.0, p->cpu_ns_per_element / 1e3, (long long)p->elements);
    }
}

/* The CPU per element the jobs report for worker id (the busiest job's), 0 unknown. */
static double worker_cpu(Spillway__V1__DescribeJobResponse *const *d, int n, uint64_t id)
{
    double best_rate = -1, cpu = 0;
    for (int k = 0; k < n; k++)
        for (size_t i = 0; d[k] && i < d[k]->n_producers; i++) {
            const Spillway__V1__ProducerStats *p = d[k]->producers[i];
            if (p->producer == id && p->elements_per_s > best_rate) {
                best_rate = p->elements_per_s;
                cpu = p->cpu_ns_per_element;
            }
        }
    return cpu;
}

/* One view into f. Returns 0, or 1 when the dispatcher did not answer (said on stderr). */
static int view(FILE *f, const char *target, const char *token, uint64_t only, int timeout_ms)
{
    uint8_t *resp = NULL;
    size_t len = 0;
    Spillway__V1__ListWorkersRequest wreq = SPILLWAY__V1__LIST_WORKERS_REQUEST__INIT;
    Spillway__V1__ListJobsRequest jreq = SPILLWAY__V1__LIST_JOBS_REQUEST__INIT;
    if (spw_inspect_call(target, token, SPW_PATH(LIST_WORKERS), &wreq.base, timeout_ms, &resp, &len))
        return 1;
    Spillway__V1__ListWorkersResponse *w = spillway__v1__list_workers_response__unpack(NULL, len, resp);
    free(resp);
    if (!w || spw_inspect_call(target, token, SPW_PATH(LIST_JOBS), &jreq.base, timeout_ms, &resp,
                               &len)) {
        if (w)
            spillway__v1__list_workers_response__free_unpacked(w, NULL);
        return 1;
    }
    Spillway__V1__ListJobsResponse *jl = spillway__v1__list_jobs_response__unpack(NULL, len, resp);
    free(resp);
    Spillway__V1__DescribeJobResponse *d[MAX_JOBS] = {0};
    int n = 0;
    for (size_t i = 0; jl && i < jl->n_jobs && n < MAX_JOBS; i++) {
        const Spillway__V1__JobInfo *j = jl->jobs[i];
        if (only ? j->job != only : (j->ended || j->finished))
            continue;
        Spillway__V1__DescribeJobRequest req = SPILLWAY__V1__DESCRIBE_JOB_REQUEST__INIT;
        req.job = j->job;
        if (spw_inspect_call(target, token, SPW_PATH(DESCRIBE_JOB), &req.base, timeout_ms, &resp, &len))
            continue;
        d[n] = spillway__v1__describe_job_response__unpack(NULL, len, resp);
        free(resp);
        if (d[n] && d[n]->job)
            n++;
    }
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    fprintf(f, "spillway watch: dispatcher %s, %04d-%02d-%02d %02d:%02d:%02d\n\n", target, tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    fprintf(f, "%-5s %-8s %-4s %9s %10s %9s %6s %11s %s\n", "JOB", "STATE", "CUT", "RATE/S", "PREDICTED", "TRAINER",
            "WAIT", "EPOCH", "SPLITS A/L/P");
    if (n == 0)
        fprintf(f, "(no %s)\n", only ? "such job" : "unfinished job");
    for (int k = 0; k < n; k++)
        print_job(f, d[k], w);
    fprintf(f, "\n%-7s %-28s %-5s %7s %6s %10s %12s %s\n", "WORKER", "ADDRESS", "ALIVE", "THREADS", "LEASES",
            "BUFFERED", "US/ELEMENT", "GPU");
    for (size_t i = 0; i < w->n_workers; i++) {
        const Spillway__V1__WorkerInfo *x = w->workers[i];
        fprintf(f, "%-7llu %-28s %-5s %7d %6lld %8.1f MB %12.0f %s\n", (unsigned long long)x->worker_id, x->address,
                x->alive ? "yes" : "no", x->threads, (long long)x->leases, (double)x->buffered_bytes / 1e6,
                worker_cpu(d, n, x->worker_id) / 1e3, x->gpu && *x->gpu ? x->gpu : "-");
    }
    for (int k = 0; k < n; k++)
        spillway__v1__describe_job_response__free_unpacked(d[k], NULL);
    if (jl)
        spillway__v1__list_jobs_response__free_unpacked(jl, NULL);
    spillway__v1__list_workers_response__free_unpacked(w, NULL);
    return 0;
}

int spw_watch_run(const char *target, const char *token, const char *job_id, int interval_ms, int count,
                  int timeout_ms, const volatile sig_atomic_t *stop)
{
    char *end;
    const unsigned long long only = job_id ? strtoull(job_id, &end, 10) : 0;
    if (job_id && (*end || !only)) {
        fprintf(stderr, "spillctl: watch --job needs a job id (a positive integer)\n");
        return 2;
    }
    const bool tty = isatty(STDOUT_FILENO);
    int status = 0;
    for (int i = 0; (count <= 0 || i < count) && !*stop; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
            return 1;
        status = view(f, target, token, only, timeout_ms);
        fclose(f);
        if (status == 0) {          /* the whole view at once: no half-drawn screen */
            if (tty)
                fputs("\033[H\033[2J", stdout);
            else if (i > 0)
                fputs("\n", stdout);
            fwrite(buf, 1, len, stdout);
            fflush(stdout);
        }
        free(buf);
        const int64_t until = spw_now_ms() + interval_ms;
        while (!*stop && (count <= 0 || i + 1 < count) && spw_now_ms() < until)
            usleep(50 * 1000);
    }
    return status;
}
