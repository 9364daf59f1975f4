/* tools/spillctl/run.c - spillctl run and validate: run a pipeline in this process (the executor) or through
 * the service as a simulated trainer on libspillway, consuming at a trainer's pace, dumping batches as .npy
 * or keys, printing progress and a summary (or --json). Single-threaded; the executor and the job own their
 * threads. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "pipeline/executor.h"
#include "pipeline/fusion.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/python_op.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "spillway/client.h"
#include "tools/spillctl/inspect.h"
#include "tools/spillctl/run.h"

static double now_s(void)
{
    return (double)spw_now_ns() * 1e-9;
}

/* A run stopped by SIGTERM/SIGINT before its end: say so; the exit status is 128 + the signal's number. The
 * job (job_id; 0 none yet) ends when it is destroyed: its leases released, its workers freed. */
static int interrupted(uint64_t job_id)
{
    const int sig = (int)spw_ctl_stop;
    if (job_id)
        fprintf(stderr, "spillctl: interrupted by %s before the run's end: ending job %llu\n", strsignal(sig),
                (unsigned long long)job_id);
    else
        fprintf(stderr, "spillctl: interrupted by %s before the run's end\n", strsignal(sig));
    return 128 + sig;
}

static void write_keys(const struct spw_batch *b, FILE *keys)
{
    for (int i = 0; i < b->n; i++)
        fprintf(keys, "%lld %lld %s\n", (long long)b->keys[i].epoch, (long long)b->keys[i].sample, b->keys[i].path);
}

static int dump_batch(const char *dir, int64_t seq, const struct spw_batch *b, FILE *keys)
{
    char path[PATH_MAX];
    for (int t = 0; t < b->n_tensors; t++) {
        snprintf(path, sizeof path, "%s/b%06lld_t%d.npy", dir, (long long)seq, t);
        int rc = spw_tensor_write_npy(&b->tensors[t], path);
        if (rc) {
            fprintf(stderr, "spillctl: cannot write %s: %s\n", path, spw_strerror(rc));
            return rc;
        }
    }
    write_keys(b, keys);
    return 0;
}

/* Create the dump directory and open its keys.txt, or (no dump) open keys_path; NULL (after saying why) on
 * failure. */
static FILE *open_keys(const char *dir, const char *keys_path)
{
    char kp[PATH_MAX];
    if (!dir) {
        FILE *f = fopen(keys_path, "w");
        if (!f)
            fprintf(stderr, "spillctl: cannot write %s: %s\n", keys_path, strerror(errno));
        return f;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "spillctl: cannot create %s: %s\n", dir, strerror(errno));
        return NULL;
    }
    snprintf(kp, sizeof kp, "%s/keys.txt", dir);
    FILE *keys = fopen(kp, "w");
    if (!keys)
        fprintf(stderr, "spillctl: cannot write %s: %s\n", kp, strerror(errno));
    return keys;
}

/* The fusion groups (the cut points) as JSON objects, comma-separated. */
static void print_groups(const struct spw_pipeline_spec *spec)
{
    struct spw_group groups[256];
    int ng = spw_fusion_groups(spec, groups);
    for (int g = 0; g < ng; g++) {
        printf("%s{\"kind\": \"%s\", \"ops\": [", g ? ", " : "", spw_group_kind_name(groups[g].kind));
        for (int i = 0; i < groups[g].count; i++)
            printf("%s\"%s\"", i ? ", " : "", spw_op_name(spec->ops[groups[g].first + i].kind));
        printf("]}");
    }
}

/* This process's CPU time and minor page faults so far, as a JSON member (what the pipeline cost the trainer's
 * process; a run whose CPU per element jumps usually shows the faults or the throttling behind it). */
static void print_process_usage(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return;
    printf(", \"process\": {\"cpu_s\": %.3f, \"minor_faults\": %ld, \"involuntary_switches\": %ld}",
           ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
           ru.ru_minflt, ru.ru_nivcsw);
}

static void print_json(const struct spw_pipeline_spec *spec, const struct spw_source *src,
                       const struct spw_exec_stats *st, double secs, int64_t consumed, int threads)
{
    printf("{\"elements\": %lld, \"batches\": %lld, \"skipped\": %lld, \"seconds\": %.6f, "
           "\"elements_per_s\": %.3f, \"threads\": %d, \"samples_in_source\": %lld, "
           "\"manifest_hash\": \"%016llx\", \"groups\": [",
           (long long)st->elements, (long long)st->batches, (long long)st->skipped, secs,
           secs > 0 ? st->elements / secs : 0.0, threads, (long long)src->n, (unsigned long long)src->manifest_hash);
    print_groups(spec);
    printf("], \"ops\": [");
    for (int i = 0; i < st->n_steps; i++) {
        const struct spw_op_stat *o = &st->steps[i];
        printf("%s{\"name\": ", i ? ", " : "");
        spw_json_string(stdout, o->name);
        printf(", \"first_op\": %d, \"n_ops\": %d, \"elements\": %lld, \"ns_per_element\": %.1f, "
               "\"out_bytes_per_element\": %.1f}",
               o->first_op, o->n_ops, (long long)o->elements, o->elements ? (double)o->ns_total / o->elements : 0.0,
               o->elements ? (double)o->out_bytes_total / o->elements : 0.0);
    }
    printf("], \"consumed\": %lld, \"consumed_per_s\": %.3f", (long long)consumed, secs > 0 ? consumed / secs : 0.0);
    print_process_usage();
    printf("}\n");
}

/* The simulated trainer: takes batches from a source (the executor or a job), dumps them, gives them back,
 * paces itself to at most `rate` elements/s, and reports progress every 2 s. */
struct consumer {
    int (*next)(void *ctx, struct spw_batch **b);
    void (*release)(void *ctx, struct spw_batch *b);
    void *ctx;
    const char *dump;
    FILE *keys;
    int quiet;
    double t0, rate;
    double step_s;              /* compute per batch: sleep this long after each (0: none) */
    double until;               /* stop taking batches after this time (now_s); 0 = never */
    int64_t epochs;             /* the spec's (0: unbounded) */
    int64_t total_batches;      /* of the run (0: unbounded) */
    int64_t total_elements;     /* ... and its elements, skips aside (0: unbounded) */
    int64_t consumed;           /* out: elements taken */
};

/* The batches a run delivers: epochs of per_epoch, or max_batches if fewer (0: unbounded); and its elements:
 * epochs of per_epoch_elements, or max_batches full batches. */
static int64_t run_batches(int64_t epochs, int64_t per_epoch, int64_t max_batches)
{
    const int64_t all = epochs > 0 ? epochs * per_epoch : 0;
    return max_batches > 0 && (all == 0 || max_batches < all) ? max_batches : all;
}

static int64_t run_elements(int64_t epochs, int64_t per_epoch, int64_t per_epoch_elements, int64_t batch,
                            int64_t max_batches)
{
    const int64_t all = epochs > 0 ? epochs * per_epoch_elements : 0;
    return max_batches > 0 && (all == 0 || max_batches < epochs * per_epoch) ? max_batches * batch : all;
}

/* The progress line: epoch k/N, batches done of the total and %, elements, rate, ETA. On a terminal it is
 * redrawn in place twice a second; otherwise a line every 2 s. */
static void progress(const struct consumer *c, int64_t epoch, int64_t seq, int64_t elements, double t, bool done)
{
    char where[64] = "", of[96] = "", eta[48] = "";
    const double secs = t - c->t0, per_s = secs > 0 ? seq / secs : 0;
    if (c->epochs > 0)
        snprintf(where, sizeof where, "epoch %lld/%lld, ", (long long)epoch + 1, (long long)c->epochs);
    else
        snprintf(where, sizeof where, "epoch %lld, ", (long long)epoch + 1);
    if (c->total_batches > 0) {
        snprintf(of, sizeof of, "%lld of %lld elements (%.1f%%), batch %lld of %lld", (long long)elements,
                 (long long)c->total_elements, 100.0 * (double)seq / (double)c->total_batches, (long long)seq,
                 (long long)c->total_batches);
        if (!done && per_s > 0) {
            const int64_t left = (int64_t)((double)(c->total_batches - seq) / per_s + 0.5);
            snprintf(eta, sizeof eta, ", ETA %lld:%02lld:%02lld", (long long)(left / 3600),
                     (long long)(left / 60 % 60), (long long)(left % 60));
        }
    } else {
        snprintf(of, sizeof of, "%lld elements, batch %lld", (long long)elements, (long long)seq);
    }
    const bool tty = isatty(STDERR_FILENO);
    fprintf(stderr, "%sspillctl: %s%s, %.0f elements/s%s%s", tty ? "\r\033[K" : "", where, of,
            secs > 0 ? elements / secs : 0.0, eta, tty && !done ? "" : "\n");
    fflush(stderr);
}

/* Consume until the end, an error, a signal or a failed dump (*status = 1). Returns the last next() code. */
static int consume(struct consumer *c, int *status)
{
    int64_t seq = 0, elements = 0, epoch = 0;
    double last = c->t0;
    const double every = isatty(STDERR_FILENO) ? 0.5 : 2.0;
    struct spw_batch *b;
    int rc = 0;
    while (!spw_ctl_stop && (rc = c->next(c->ctx, &b)) == 0) {
        if (b->n == 0) {        /* every sample skipped: passed over, as libspillway does (no empty batch) */
            c->release(c->ctx, b);
            continue;
        }
        elements += b->n;
        epoch = b->epoch;
        if (c->dump && dump_batch(c->dump, seq, b, c->keys) != 0)
            *status = 1;
        else if (!c->dump && c->keys)
            write_keys(b, c->keys);
        c->release(c->ctx, b);
        seq++;
        if (c->step_s > 0)      /* a trainer's step: its compute time between next() calls */
            spw_sleep_unless((int)(c->step_s * 1e3 + 0.5), &spw_ctl_stop);
        double t = now_s();
        /* A trainer that takes 1/R s per element: wait until this batch's share of time has passed. */
        if (c->rate > 0 && elements / c->rate > t - c->t0)
            spw_sleep_unless((int)((elements / c->rate - (t - c->t0)) * 1e3), &spw_ctl_stop);
        if (!c->quiet && t - last >= every) {
            progress(c, epoch, seq, elements, t, false);
            last = t;
        }
        if (*status || (c->until > 0 && t >= c->until))
            break;
    }
    if (!c->quiet && seq > 0)
        progress(c, epoch, seq, elements, now_s(), true);
    c->consumed = elements;
    return rc;
}

static int executor_next(void *ctx, struct spw_batch **b)
{
    return spw_executor_next(ctx, b);
}

static void executor_release(void *ctx, struct spw_batch *b)
{
    spw_executor_release(ctx, b);
}

static int job_next(void *ctx, struct spw_batch **b)
{
    return spw_job_next(ctx, b);
}

static void job_release(void *ctx, struct spw_batch *b)
{
    spw_job_release(ctx, b);
}

/* Run `batches` batches of the pipeline and throw them away. */
static int warm_up(const struct spw_pipeline_spec *spec, const struct spw_source *src, int threads, int64_t batches)
{
    struct spw_executor *ex;
    struct spw_executor_opts opts = {.threads = threads, .max_batches = batches};
    char err[512];
    if (spw_executor_create(spec, src, &opts, &ex, err, sizeof err) != 0) {
        fprintf(stderr, "spillctl: warm-up: %s\n", err);
        return 1;
    }
    struct spw_batch *b;
    while (spw_executor_next(ex, &b) == 0)
        spw_executor_release(ex, b);
    spw_executor_destroy(ex);
    return 0;
}

int spw_ctl_run_local(const char *pipeline, int threads, int64_t max_batches, double max_seconds, int64_t warmup,
                      double rate, const char *dump, const char *keys_path, int json, int quiet,
                      const struct spw_backend *gpu)
{
    char err[1024] = "";
    struct spw_pipeline_spec *spec = NULL;
    struct spw_source *src = NULL;
    struct spw_executor *ex = NULL;
    FILE *keys = NULL;
    int status = 0;
    int rc = spw_spec_load_file(pipeline, &spec, err, sizeof err);
    if (rc) {
        fprintf(stderr, "spillctl: %s\n", err);    /* err names the file */
        return 2;
    }
    rc = spw_source_open(&spec->source, &src, err, sizeof err);
    if (rc) {
        fprintf(stderr, "spillctl: %s\n", err);
        status = 1;
        goto out;
    }
    if ((dump || keys_path) && !(keys = open_keys(dump, keys_path))) {
        status = 1;
        goto out;
    }
    if (warmup > 0 && warm_up(spec, src, threads, warmup) != 0) {
        status = 1;
        goto out;
    }
    struct spw_executor_opts opts = {.threads = threads, .max_batches = max_batches, .gpu = gpu};
    double t0 = now_s();
    rc = spw_executor_create(spec, src, &opts, &ex, err, sizeof err);
    if (rc) {
        fprintf(stderr, "spillctl: %s\n", err);
        status = rc == SPW_ESPEC ? 2 : 1;
        goto out;
    }
    const int64_t per_epoch = spec->batch.drop_remainder ? src->n / spec->batch.size
                                                         : (src->n + spec->batch.size - 1) / spec->batch.size;
    struct consumer cs = {.next = executor_next, .release = executor_release, .ctx = ex, .dump = dump, .keys = keys,
                          .quiet = quiet, .t0 = t0, .rate = rate, .until = max_seconds > 0 ? t0 + max_seconds : 0,
                          .epochs = spec->source.epochs,
                          .total_batches = run_batches(spec->source.epochs, per_epoch, max_batches),
                          .total_elements = run_elements(spec->source.epochs, per_epoch,
                                                         spec->batch.drop_remainder ? per_epoch * spec->batch.size
                                                                                    : src->n,
                                                         spec->batch.size, max_batches)};
    rc = consume(&cs, &status);
    double secs = now_s() - t0;
    if (rc != 0 && rc != SPW_ECLOSED && !spw_ctl_stop) {
        fprintf(stderr, "spillctl: run failed: %s: %s\n", spw_strerror(rc), spw_executor_errmsg(ex));
        status = 1;
    }
    if (spw_ctl_stop && rc != SPW_ECLOSED)
        status = interrupted(0);
    struct spw_exec_stats st;
    spw_executor_stats(ex, &st);
    if (json)
        print_json(spec, src, &st, secs, cs.consumed, threads);
    else if (!quiet)
        fprintf(stderr, "spillctl: done: %lld elements in %lld batches, %lld skipped, %.2f s, %.1f elements/s\n",
                (long long)st.elements, (long long)st.batches, (long long)st.skipped, secs,
                secs > 0 ? st.elements / secs : 0.0);
out:
    if (keys)
        fclose(keys);
    spw_executor_destroy(ex);
    spw_source_close(src);
    spw_spec_free(spec);
    return status;
}

static char *read_text(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long n;
    if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || n > (16 << 20) || fseek(f, 0, SEEK_SET) != 0 ||
        !(text = calloc(1, (size_t)n + 1)) || fread(text, 1, (size_t)n, f) != (size_t)n) {
        snprintf(err, errlen, "cannot read %s: %s", path, errno ? strerror(errno) : "too big");
        free(text);
        text = NULL;
    }
    if (f)
        fclose(f);
    return text;
}

/* The local run's summary (without per-op stats, which stay on the workers) plus the service's: the job, the
 * cut, and what each producer class delivered. */
static void print_service_json(const struct spw_pipeline_spec *spec, const struct spw_job_stats *st, double secs,
                               double create_secs, int64_t consumed, const struct spw_ctl_service_args *sa)
{
    printf("{\"elements\": %lld, \"batches\": %lld, \"skipped\": %lld, \"seconds\": %.6f, "
           "\"elements_per_s\": %.3f, \"threads\": %d, \"samples_in_source\": %lld, \"manifest_hash\": \"%016llx\", "
           "\"groups\": [",
           (long long)st->elements, (long long)st->batches, (long long)st->skipped, secs,
           secs > 0 ? st->elements / secs : 0.0, sa->local_cores, (long long)st->samples,
           (unsigned long long)st->manifest_hash);
    print_groups(spec);
    const double share = st->elements > 0 ? (double)(st->local_elements + st->rescued_elements) / st->elements : 0;
    printf("], \"plan\": {\"cut\": %d, \"local_share\": %.3f, \"workers\": %d, \"planned\": %s, "
           "\"offload\": %s, \"predicted_elements_per_s\": %.1f, \"why\": ",
           st->cut, share, st->workers, st->planned ? "true" : "false",
           (st->planned ? st->offloaded : st->workers > 0) ? "true" : "false", st->predicted);
    spw_json_string(stdout, st->plan_why);
    printf("}, ");
    printf("\"job\": %llu, \"cut\": %d, \"local_cores\": %d, \"ordered\": %s, "
           "\"producers\": {\"remote\": %lld, \"local\": %lld, \"local_gpu\": %lld, \"rescue\": %lld}, "
           "\"duplicates_dropped\": %lld, "
           "\"bytes_received\": %lld, \"compress_level\": %d, \"workers\": %d, \"create_seconds\": %.3f, "
           "\"consumed\": %lld, "
           "\"consumed_per_s\": %.3f",
           (unsigned long long)st->job, st->cut, sa->local_cores, sa->ordered ? "true" : "false",
           (long long)st->remote_elements, (long long)st->local_elements, (long long)st->gpu_elements,
           (long long)st->rescued_elements,
           (long long)st->duplicates_dropped, (long long)st->bytes_received, st->compress_level, st->workers,
           create_secs,
           (long long)consumed, secs - create_secs > 0 ? consumed / (secs - create_secs) : 0.0);
    print_process_usage();
    printf("}\n");
}

static uint64_t st_id(struct spw_job *job)
{
    struct spw_job_stats st;
    spw_job_stats(job, &st);
    return st.job;
}

/* The samples one epoch of the job delivers (its source's; one trainer). */
static int64_t job_samples(struct spw_job *job)
{
    struct spw_job_stats st;
    spw_job_stats(job, &st);
    return st.samples;
}

int spw_ctl_run_service(const char *pipeline, const struct spw_ctl_service_args *sa, int64_t max_batches,
                        double max_seconds, const char *dump, const char *keys_path, int json, int quiet)
{
    char err[1024] = "";
    char *text = read_text(pipeline, err, sizeof err);
    FILE *keys = NULL;
    struct spw_job *job = NULL;
    int status = 0;
    struct spw_pipeline_spec *spec = NULL;
    if (!text || spw_spec_parse_json(text, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "spillctl: %s%s%s\n", text ? pipeline : "", text ? ": " : "", err);
        free(text);
        return 2;
    }
    if ((dump || keys_path) && !(keys = open_keys(dump, keys_path))) {
        free(text);
        spw_spec_free(spec);
        return 1;
    }
    struct spw_job_opts o;
    spw_job_opts_init(&o);
    o.dispatcher = sa->dispatcher;
    o.auth_token = sa->token;
    o.insecure = true;          /* main refused a token in the clear unless --insecure */
    o.cut = sa->cut;
    o.compress = sa->compress;
    o.trainer_rate = sa->consume_rate;
    o.local_cores = sa->local_cores;
    o.ordered = sa->ordered;
    o.prefetch_bytes = sa->prefetch_mb << 20;
    o.credit_bytes = sa->credit_mb << 20;
    o.max_batches = max_batches;
    o.max_workers = sa->max_workers;
    o.dispatcher_wait_ms = sa->dispatcher_wait_ms;
    o.gpu = sa->gpu_device >= 0;
    o.gpu_device = o.gpu ? sa->gpu_device : 0;
    o.gpu_mem_budget = sa->gpu_budget;
    o.keep_job = sa->keep_job;
    o.cancel = &spw_ctl_stop;   /* SIGTERM/SIGINT: creation stops waiting, next() returns */
    double t0 = now_s();
    int rc = spw_job_create_json(text, &o, &job, err, sizeof err);
    free(text);
    if (rc == -ECANCELED) {
        status = interrupted(0);
        goto out;
    }
    if (rc) {
        fprintf(stderr, "spillctl: %s\n", err);
        status = rc == SPW_ESPEC ? 2 : 1;
        goto out;
    }
    /* The trainer starts once the job exists (creation includes planning with --cut auto). */
    const double created = now_s();
    struct consumer cs = {.next = job_next, .release = job_release, .ctx = job, .dump = dump, .keys = keys,
                          .quiet = quiet, .t0 = created, .rate = sa->consume_rate, .step_s = sa->step_ms / 1e3,
                          .until = max_seconds > 0 ? created + max_seconds : 0, .epochs = spec->source.epochs,
                          .total_batches = run_batches(spec->source.epochs, spw_job_batches_per_epoch(job),
                                                       max_batches),
                          .total_elements = run_elements(spec->source.epochs, spw_job_batches_per_epoch(job),
                                                         spec->batch.drop_remainder
                                                             ? spw_job_batches_per_epoch(job) * spec->batch.size
                                                             : job_samples(job),
                                                         spec->batch.size, max_batches)};
    rc = consume(&cs, &status);
    double secs = now_s() - t0;
    if (rc != 0 && rc != SPW_ECLOSED && !spw_ctl_stop) {
        fprintf(stderr, "spillctl: run failed: %s: %s\n", spw_strerror(rc), spw_job_errmsg(job));
        status = 1;
    }
    if (spw_ctl_stop && rc != SPW_ECLOSED)
        status = interrupted(st_id(job));
    struct spw_job_stats st;
    spw_job_stats(job, &st);
    if (json)
        print_service_json(spec, &st, secs, created - t0, cs.consumed, sa);
    else if (!quiet)
        fprintf(stderr, "spillctl: done: job %llu, %lld elements in %lld batches (%lld from workers, %lld local, "
                        "%lld rescued), %lld skipped, %.2f s, %.1f elements/s\n",
                (unsigned long long)st.job, (long long)st.elements, (long long)st.batches,
                (long long)st.remote_elements, (long long)st.local_elements, (long long)st.rescued_elements,
                (long long)st.skipped, secs, secs > 0 ? st.elements / secs : 0.0);
out:
    if (keys)
        fclose(keys);
    spw_job_destroy(job);
    spw_spec_free(spec);
    return status;
}

int spw_ctl_validate(const char *pipeline)
{
    char err[1024] = "";
    struct spw_pipeline_spec *spec = NULL;
    if (spw_spec_load_file(pipeline, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "spillctl: %s\n", err);    /* err names the file */
        return 2;
    }
    char *json = spw_spec_to_json(spec);
    if (json)
        printf("%s\n", json);
    int st = json ? 0 : 1;
    /* Python ops: does each function import here, as this machine's helpers would import it? */
    for (int i = 0; i < spec->n_ops; i++) {
        if (spec->ops[i].kind != SPW_OP_PYTHON || spw_python_op_check(spec->ops[i].function, err, sizeof err) == 0)
            continue;
        const char *py = getenv("SPILLWAY_PYTHON"), *path = getenv("SPILLWAY_PYTHONPATH");
        fprintf(stderr, "spillctl: ops[%d].function: %s (here: SPILLWAY_PYTHON=%s, SPILLWAY_PYTHONPATH=%s; workers "
                "need it on their --python-path)\n", i, err, py && *py ? py : "python3", path ? path : "");
        st = 1;
    }
    free(json);
    spw_spec_free(spec);
    return st;
}
