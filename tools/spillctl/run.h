/* tools/spillctl/run.h - spillctl run (--local: the executor in this process; --dispatcher: a job through the
 * service, as a simulated trainer) and validate. Single-threaded callers; each returns the exit status
 * (0, 1 runtime error, 2 usage or spec error) and stops taking batches once spw_ctl_stop is set. */
#ifndef SPW_SPILLCTL_RUN_H
#define SPW_SPILLCTL_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct spw_backend;

/* Set by the signal handler (SIGINT, SIGTERM): the run stops taking batches and reports what it did. */
extern volatile sig_atomic_t spw_ctl_stop;

struct spw_ctl_service_args {
    const char *dispatcher, *token;
    int cut, local_cores, max_workers, dispatcher_wait_ms;
    int compress;               /* spw_job_opts.compress */
    double consume_rate;
    double step_ms;             /* the simulated trainer's compute per batch: it sleeps this long after each */
    bool ordered;
    bool keep_job;              /* at the end, leave an unfinished job paused for a resume (else it ends) */
    int64_t prefetch_mb, credit_mb;
    int gpu_device;             /* -1: none */
    const char *gpu_budget;
};

/* run --local: threads executor threads (and the GPU backend gpu, or NULL), max_batches / max_seconds (0: no
 * limit), warmup batches untimed first, consuming at most rate elements/s (0: unlimited); dump (a folder of
 * .npy files and keys.txt) or keys_path (keys only) may be NULL. */
int spw_ctl_run_local(const char *pipeline, int threads, int64_t max_batches, double max_seconds, int64_t warmup,
                      double rate, const char *dump, const char *keys_path, int json, int quiet,
                      const struct spw_backend *gpu);
/* run --dispatcher: the same through the service with the job options in sa. */
int spw_ctl_run_service(const char *pipeline, const struct spw_ctl_service_args *sa, int64_t max_batches,
                        double max_seconds, const char *dump, const char *keys_path, int json, int quiet);
/* validate: parse the spec and print it with every default filled in. */
int spw_ctl_validate(const char *pipeline);

#endif
