/* client/spillctl.c - the Spillway command-line tool: `run --local` (run a pipeline in-process, dump batches
 * as .npy, print throughput and per-op stats), `run --dispatcher` (the same through the service, as a
 * simulated trainer on libspillway), `validate`, and inspecting a dispatcher (inspect.c).
 * Single-threaded main; the executor and libspillway own their threads. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/inspect.h"
#include "client/watch.h"
#include "client/plan.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/heap.h"
#include "lib/log.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "pipeline/executor.h"
#include "pipeline/fusion.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "spillway/client.h"

static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: spillctl run --local --pipeline FILE.json [--threads N] [--max-batches M] [--max-seconds S]\n"
            "                    [--dump DIR | --keys FILE] [--json] [--quiet] [--warmup-batches W] [--consume-rate R]\n"
            "                    [--gpu N [--gpu-mem-budget B]]\n"
            "       spillctl run --dispatcher HOST:PORT --pipeline FILE.json [--cut K|auto] [--local-cores N]\n"
            "                    [--local-share auto|off] [--workers N]\n"
            "                    [--consume-rate R] [--ordered] [--prefetch-mb MB] [--credit-mb MB]\n"
            "                    [--max-batches M] [--max-seconds S]\n"
            "                    [--dump DIR | --keys FILE] [--json] [--quiet]\n"
            "       spillctl validate --pipeline FILE.json\n"
            "       spillctl --dispatcher HOST:PORT workers|jobs|job ID|explain ID [--json]\n"
            "       spillctl --dispatcher HOST:PORT watch [--job ID] [--interval-ms N] [--count N]\n"
            "       spillctl profile --worker HOST:PORT --pipeline FILE.json [--samples N] [--json]\n"
            "       spillctl plan --dispatcher HOST:PORT --pipeline FILE.json [--local-cores N] [--consume-rate R]\n"
            "                     [--cut K] [--local-share auto|off] [--workers N] [--samples N] [--json]\n"
            "       spillctl --help | --version\n"
            "\n"
            "run --local     run the pipeline in this process (no dispatcher)\n"
            "  --pipeline F  pipeline spec (JSON; see docs/pipeline.md)\n"
            "  --threads N   worker threads (default: number of online CPUs)\n"
            "  --max-batches M  stop after M batches (default: all epochs of the source)\n"
            "  --max-seconds S  stop taking batches after S seconds (with --dispatcher: of consuming, after the\n"
            "                job exists; the JSON's consumed_per_s is the rate over that time)\n"
            "  --dump DIR    write each batch's tensors as DIR/b000000_t0.npy, _t1.npy (labels), ... and\n"
            "                DIR/keys.txt (epoch, sample index, path per element, in delivery order)\n"
            "  --keys FILE   write only the keys (as keys.txt) to FILE, no tensors\n"
            "  --json        print one JSON object at the end: elements, batches, seconds, elements_per_s,\n"
            "                skipped, groups (the cut points), per-op stats and process (this process's CPU\n"
            "                seconds, minor page faults and involuntary context switches)\n"
            "  --quiet       no progress line on stderr\n"
            "  --warmup-batches W  first run W batches untimed and discard them (warms the page cache and\n"
            "                the allocator, as a benchmark's warm-up does), then the timed run\n"
            "run --dispatcher  run the pipeline through the service as a simulated trainer: workers run it up\n"
            "                to the cut, this process finishes, batches and consumes (same --dump and --json;\n"
            "                the JSON adds job, cut, and elements per producer class)\n"
            "  --cut K|auto  fusion groups [0, K) run on the workers (default: all of them); auto: measure this\n"
            "                client, let the dispatcher profile the workers and plan the cut - or run here\n"
            "                alone when offloading does not pay (the JSON's plan says which and why)\n"
            "  --local-cores N  client threads producing whole splits too (default 1; 0 = none)\n"
            "  --local-share auto|off  off: the client produces nothing itself (= --local-cores 0)\n"
            "  --workers N   use at most N workers (the first N alive; a dead one's place goes to the next);\n"
            "                default: all of them\n"
            "  --dispatcher-wait-ms N  retry a dispatcher that stops answering this long before failing\n"
            "                (default 300000: a restarted dispatcher with --work-dir is back well within it)\n"
            "  --gpu N       one more producer thread makes micro-batches on CUDA device N (--local: beside the\n"
            "                threads; with a dispatcher: beside --local-cores, on this client's own splits); no\n"
            "                plugin, driver or device: said once, the CPU makes everything\n"
            "  --gpu-mem-budget B  device memory reserved once: bytes (K/M/G/Ki/Mi/Gi) or a fraction of what is\n"
            "                free (default 0.25)\n"
            "  --consume-rate R  consume at most R elements/s, like a trainer (default: unlimited); with\n"
            "                --cut auto, the rate the plan aims for (also with --local)\n"
            "  --ordered     deliver batches in epoch order: byte-identical to run --local\n"
            "  --prefetch-mb MB  batches assembled ahead (default 256)\n"
            "  --credit-mb MB    bytes all workers together may have in flight to this client (default 64)\n"
            "validate        parse and validate a spec; print it with every default filled in\n"
            "workers         the dispatcher's workers: address, threads, alive, last heartbeat, splits held\n"
            "jobs            the dispatcher's jobs: samples, epochs, cut, splits acked/leased/pending, state\n"
            "                (running, paused, client: handed back to its clients by re-planning, finished)\n"
            "job ID          one job: which producer holds which split, and per producer the elements and\n"
            "                bytes it delivered, its recent rates and CPU per element (from heartbeats: up to\n"
            "                one interval old), and the client's CPU per element received\n"
            "profile         ask a worker to measure every cut of the pipeline with all its threads busy: cost\n"
            "                (read + prefix + packing) and bytes per element - the planner's input\n"
            "  --worker HOST:PORT  the worker;  --samples N  elements to measure (default 256, at most 4096)\n"
            "plan            measure this client's costs (on --local-cores threads) and profile every worker the\n"
            "                dispatcher lists, then print the planner's table per cut (bytes, remote capacity,\n"
            "                client cost, predicted throughput, mix, workers needed for --consume-rate) and its\n"
            "                choice; --cut, --local-share off and --workers N are the overrides. Creates no job.\n"
            "explain ID      how the dispatcher planned job ID (run with --cut auto): the same table\n"
            "watch           a live view of the unfinished jobs (--job ID: that one) and the workers, asked again\n"
            "                every --interval-ms (default 1000) until Ctrl-C or --count views: per job its rate\n"
            "                against the plan's and the trainer's, the trainer's wait, cut, epoch, splits, and\n"
            "                per producer its rate, share and CPU per element; per worker its leases, bytes\n"
            "                buffered and CPU per element. Redrawn in place on a terminal, appended otherwise\n"
            "  --dispatcher HOST:PORT  the dispatcher (env SPILLWAY_DISPATCHER)\n"
            "  --auth-token T  bearer token for the dispatcher (env SPILLWAY_AUTH_TOKEN)\n"
            "  --auth-token-file F  read it from a file (env SPILLWAY_AUTH_TOKEN_FILE)\n"
            "  --tls-ca F    TLS: the PEM CA the dispatcher's and workers' certificates are signed by (env\n"
            "                SPILLWAY_TLS_CA); --tls-cert F --tls-key F: this client's, for mutual TLS\n"
            "  --insecure    send the token without TLS (env SPILLWAY_INSECURE=1); refused otherwise\n"
            "  --timeout-ms N  RPC deadline (default 5000)\n"
            "  --log-level L   debug, info, warn or error: log lines below it are dropped (env SPILLWAY_LOG_LEVEL;\n"
            "                default info)\n"
            "  --log-format F  text, or json: one object per line (ts, level, component, msg) (env\n"
            "                SPILLWAY_LOG_FORMAT)\n"
            "\n"
            "Exit status: 0 success, 1 runtime error (e.g. a corrupt sample under on_error: fail), 2 usage or\n"
            "spec error.\n");
}

static double now_s(void)
{
    return (double)spw_now_ns() * 1e-9;
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
    while (!g_stop && (rc = c->next(c->ctx, &b)) == 0) {
        elements += b->n;
        epoch = b->epoch;
        if (c->dump && dump_batch(c->dump, seq, b, c->keys) != 0)
            *status = 1;
        else if (!c->dump && c->keys)
            write_keys(b, c->keys);
        c->release(c->ctx, b);
        seq++;
        double t = now_s();
        /* A trainer that takes 1/R s per element: wait until this batch's share of time has passed. */
        if (c->rate > 0 && elements / c->rate > t - c->t0)
            usleep((useconds_t)((elements / c->rate - (t - c->t0)) * 1e6));
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

static int cmd_run(const char *pipeline, int threads, int64_t max_batches, double max_seconds, int64_t warmup,
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
    if (rc != 0 && rc != SPW_ECLOSED && !g_stop) {
        fprintf(stderr, "spillctl: run failed: %s: %s\n", spw_strerror(rc), spw_executor_errmsg(ex));
        status = 1;
    }
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

struct service_args {
    const char *dispatcher, *token;
    int cut, local_cores, max_workers, dispatcher_wait_ms;
    double consume_rate;
    bool ordered;
    int64_t prefetch_mb, credit_mb;
    int gpu_device;             /* -1: none */
    const char *gpu_budget;
};

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
                               double create_secs, int64_t consumed, const struct service_args *sa)
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
           "\"bytes_received\": %lld, \"workers\": %d, \"create_seconds\": %.3f, \"consumed\": %lld, "
           "\"consumed_per_s\": %.3f",
           (unsigned long long)st->job, st->cut, sa->local_cores, sa->ordered ? "true" : "false",
           (long long)st->remote_elements, (long long)st->local_elements, (long long)st->gpu_elements,
           (long long)st->rescued_elements,
           (long long)st->duplicates_dropped, (long long)st->bytes_received, st->workers, create_secs,
           (long long)consumed, secs - create_secs > 0 ? consumed / (secs - create_secs) : 0.0);
    print_process_usage();
    printf("}\n");
}

/* The samples one epoch of the job delivers (its source's; one trainer). */
static int64_t job_samples(struct spw_job *job)
{
    struct spw_job_stats st;
    spw_job_stats(job, &st);
    return st.samples;
}

static int cmd_run_service(const char *pipeline, const struct service_args *sa, int64_t max_batches,
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
    double t0 = now_s();
    int rc = spw_job_create_json(text, &o, &job, err, sizeof err);
    free(text);
    if (rc) {
        fprintf(stderr, "spillctl: %s\n", err);
        status = rc == SPW_ESPEC ? 2 : 1;
        goto out;
    }
    /* The trainer starts once the job exists (creation includes planning with --cut auto). */
    const double created = now_s();
    struct consumer cs = {.next = job_next, .release = job_release, .ctx = job, .dump = dump, .keys = keys,
                          .quiet = quiet, .t0 = created, .rate = sa->consume_rate,
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
    if (rc != 0 && rc != SPW_ECLOSED && !g_stop) {
        fprintf(stderr, "spillctl: run failed: %s: %s\n", spw_strerror(rc), spw_job_errmsg(job));
        status = 1;
    }
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

static int cmd_validate(const char *pipeline)
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
    free(json);
    spw_spec_free(spec);
    return json ? 0 : 1;
}

int main(int argc, char **argv)
{
    static const struct option long_opts[] = {
        {"local", no_argument, NULL, 'l'},     {"pipeline", required_argument, NULL, 'p'},
        {"threads", required_argument, NULL, 't'}, {"max-batches", required_argument, NULL, 'm'},
        {"dump", required_argument, NULL, 'd'}, {"json", no_argument, NULL, 'j'},
        {"quiet", no_argument, NULL, 'q'},     {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"warmup-batches", required_argument, NULL, 'w'},
        {"dispatcher", required_argument, NULL, 'D'}, {"auth-token", required_argument, NULL, 'A'},
        {"auth-token-file", required_argument, NULL, 'F'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {"cut", required_argument, NULL, 'C'}, {"local-cores", required_argument, NULL, 'L'},
        {"consume-rate", required_argument, NULL, 'R'}, {"ordered", no_argument, NULL, 'O'},
        {"prefetch-mb", required_argument, NULL, 'P'}, {"credit-mb", required_argument, NULL, 'c'},
        {"worker", required_argument, NULL, 'W'}, {"samples", required_argument, NULL, 'S'},
        {"local-share", required_argument, NULL, 'H'}, {"workers", required_argument, NULL, 'N'},
        {"max-seconds", required_argument, NULL, 'M'}, {"keys", required_argument, NULL, 'K'},
        {"dispatcher-wait-ms", required_argument, NULL, 'X'},
        {"tls-ca", required_argument, NULL, 'a'}, {"tls-cert", required_argument, NULL, 'e'},
        {"tls-key", required_argument, NULL, 'k'}, {"insecure", no_argument, NULL, 'I'},
        {"gpu", required_argument, NULL, 'G'}, {"gpu-mem-budget", required_argument, NULL, 'B'},
        {"log-level", required_argument, NULL, 'g'}, {"log-format", required_argument, NULL, 'f'},
        {"job", required_argument, NULL, 'J'}, {"interval-ms", required_argument, NULL, 'i'},
        {"count", required_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    const char *pipeline = NULL, *dump = NULL, *keys_path = NULL;
    const char *dispatcher = getenv("SPILLWAY_DISPATCHER"), *token = getenv("SPILLWAY_AUTH_TOKEN");
    const char *token_file = getenv("SPILLWAY_AUTH_TOKEN_FILE");
    const char *tls_ca = getenv("SPILLWAY_TLS_CA"), *tls_cert = getenv("SPILLWAY_TLS_CERT");
    const char *tls_key = getenv("SPILLWAY_TLS_KEY"), *insecure_env = getenv("SPILLWAY_INSECURE");
    bool insecure = insecure_env && (!strcmp(insecure_env, "1") || !strcmp(insecure_env, "true") ||
                                     !strcmp(insecure_env, "yes"));
    int timeout_ms = 5000;
    int local = 0, json = 0, quiet = 0, threads = (int)sysconf(_SC_NPROCESSORS_ONLN), gpu_device = -1;
    const char *gpu_budget = NULL, *watch_job = NULL;
    int interval_ms = 1000, count = 0;
    int64_t max_batches = 0, warmup = 0;
    double max_seconds = 0;
    struct service_args sa = {.cut = -1, .local_cores = 1, .prefetch_mb = 256, .credit_mb = 64};
    const char *worker = NULL;
    int samples = 0;
    bool local_off = false;
    int c;
    spw_heap_keep_freed();     /* per-element buffers are 100 KB-1 MB (lib/heap.h); before any thread starts */
    while ((c = getopt_long(argc, argv, "hp:t:m:d:jqw:D:A:T:C:L:R:OP:c:W:S:H:N:M:K:F:X:a:e:k:", long_opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'C':
            sa.cut = !strcmp(optarg, "auto") ? SPW_CUT_AUTO : (int)strtol(optarg, &end, 10);
            if (sa.cut != SPW_CUT_AUTO && (*end || sa.cut < 0 || sa.cut > 256)) {
                fprintf(stderr, "spillctl: --cut: \"%s\" is not auto or a group boundary in [0, 256]\n", optarg);
                return 2;
            }
            break;
        case 'L':
            sa.local_cores = (int)strtol(optarg, &end, 10);
            if (*end || sa.local_cores < 0 || sa.local_cores > 256) {
                fprintf(stderr, "spillctl: --local-cores: \"%s\" is not in [0, 256]\n", optarg);
                return 2;
            }
            break;
        case 'R':
            sa.consume_rate = strtod(optarg, &end);
            if (*end || !(sa.consume_rate > 0)) {
                fprintf(stderr, "spillctl: --consume-rate: \"%s\" is not a positive rate\n", optarg);
                return 2;
            }
            break;
        case 'N':
            sa.max_workers = (int)strtol(optarg, &end, 10);
            if (*end || sa.max_workers < 1 || sa.max_workers > 4096) {
                fprintf(stderr, "spillctl: --workers: \"%s\" is not in [1, 4096]\n", optarg);
                return 2;
            }
            break;
        case 'X':
            sa.dispatcher_wait_ms = (int)strtol(optarg, &end, 10);
            if (*end || sa.dispatcher_wait_ms < 1) {
                fprintf(stderr, "spillctl: --dispatcher-wait-ms: \"%s\" is not a positive integer\n", optarg);
                return 2;
            }
            break;
        case 'O': sa.ordered = true; break;
        case 'W': worker = optarg; break;
        case 'H':
            if (strcmp(optarg, "auto") && strcmp(optarg, "off")) {
                fprintf(stderr, "spillctl: --local-share: \"%s\" is not auto or off\n", optarg);
                return 2;
            }
            local_off = !strcmp(optarg, "off");
            break;
        case 'S':
            samples = (int)strtol(optarg, &end, 10);
            if (*end || samples < 1 || samples > 4096) {
                fprintf(stderr, "spillctl: --samples: \"%s\" is not in [1, 4096]\n", optarg);
                return 2;
            }
            break;
        case 'c':
            sa.credit_mb = strtoll(optarg, &end, 10);
            if (*end || sa.credit_mb < 4 || sa.credit_mb > (1 << 20)) {
                fprintf(stderr, "spillctl: --credit-mb: \"%s\" is not in [4, 1048576]\n", optarg);
                return 2;
            }
            break;
        case 'P':
            sa.prefetch_mb = strtoll(optarg, &end, 10);
            if (*end || sa.prefetch_mb < 1 || sa.prefetch_mb > (1 << 20)) {
                fprintf(stderr, "spillctl: --prefetch-mb: \"%s\" is not in [1, 1048576]\n", optarg);
                return 2;
            }
            break;
        case 'l': local = 1; break;
        case 'p': pipeline = optarg; break;
        case 't':
            threads = (int)strtol(optarg, &end, 10);
            if (*end || threads < 1 || threads > 1024) {
                fprintf(stderr, "spillctl: --threads: \"%s\" is not in [1, 1024]\n", optarg);
                return 2;
            }
            break;
        case 'm':
            max_batches = strtoll(optarg, &end, 10);
            if (*end || max_batches < 1) {
                fprintf(stderr, "spillctl: --max-batches: \"%s\" is not a positive integer\n", optarg);
                return 2;
            }
            break;
        case 'M':
            max_seconds = strtod(optarg, &end);
            if (*end || !(max_seconds > 0)) {
                fprintf(stderr, "spillctl: --max-seconds: \"%s\" is not a positive number of seconds\n", optarg);
                return 2;
            }
            break;
        case 'w':
            warmup = strtoll(optarg, &end, 10);
            if (*end || warmup < 0) {
                fprintf(stderr, "spillctl: --warmup-batches: \"%s\" is not a count\n", optarg);
                return 2;
            }
            break;
        case 'd': dump = optarg; break;
        case 'K': keys_path = optarg; break;
        case 'D': dispatcher = optarg; break;
        case 'A': token = optarg; token_file = NULL; break;
        case 'F': token_file = optarg; token = NULL; break;
        case 'a': tls_ca = optarg; break;
        case 'e': tls_cert = optarg; break;
        case 'k': tls_key = optarg; break;
        case 'I': insecure = true; break;
        case 'G':
            gpu_device = (int)strtol(optarg, &end, 10);
            if (*end || gpu_device < 0 || gpu_device > 1023) {
                fprintf(stderr, "spillctl: --gpu: \"%s\" is not a device index in [0, 1023]\n", optarg);
                return 2;
            }
            break;
        case 'B': gpu_budget = optarg; break;
        case 'J': watch_job = optarg; break;
        case 'i':
        case 'n': {
            const long v = strtol(optarg, &end, 10);
            if (*end || v < (c == 'i' ? 100 : 1) || v > 86400000) {
                fprintf(stderr, "spillctl: --%s: \"%s\" is not an integer >= %d\n",
                        c == 'i' ? "interval-ms" : "count", optarg, c == 'i' ? 100 : 1);
                return 2;
            }
            *(c == 'i' ? &interval_ms : &count) = (int)v;
            break;
        }
        case 'g':
        case 'f': {
            char lerr[160];
            if (spw_log_configure(c == 'g' ? optarg : NULL, c == 'f' ? optarg : NULL, lerr, sizeof lerr) != 0) {
                fprintf(stderr, "spillctl: --%s: %s\n", c == 'g' ? "log-level" : "log-format", lerr);
                return 2;
            }
            break;
        }
        case 'T':
            timeout_ms = (int)strtol(optarg, &end, 10);
            if (*end || timeout_ms < 1) {
                fprintf(stderr, "spillctl: --timeout-ms: \"%s\" is not a positive integer\n", optarg);
                return 2;
            }
            break;
        case 'j': json = 1; break;
        case 'q': quiet = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("%s\n", spw_version()); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    static char token_buf[4096];
    char token_err[512];
    if (spw_config_token(token, token_file, token_buf, sizeof token_buf, &token, token_err, sizeof token_err)) {
        fprintf(stderr, "spillctl: %s\n", token_err);
        return 2;
    }
    /* Every channel this process makes (the dispatcher, workers, the job's streams) speaks TLS with these. */
    struct spw_rpc_tls *tls = NULL;
    if ((tls_cert && *tls_cert && !(tls_ca && *tls_ca)) ||
        spw_rpc_tls_load(tls_cert, tls_key, tls_ca, false, &tls, token_err, sizeof token_err) != 0) {
        fprintf(stderr, "spillctl: %s\n", tls_cert && *tls_cert && !(tls_ca && *tls_ca) ?
                "--tls-cert is for mutual TLS: give --tls-ca too" : token_err);
        return 2;
    }
    if (token && !tls && !insecure && !local) {
        fprintf(stderr, "spillctl: a token would travel in the clear: give --tls-ca (SPILLWAY_TLS_CA), or "
                "--insecure (SPILLWAY_INSECURE=1) on a network you trust\n");
        spw_rpc_tls_free(tls);
        return 2;
    }
    spw_rpc_set_channel_tls(tls);
    const char *cmd = argv[optind];
    if (!strcmp(cmd, "explain")) {
        if (!dispatcher) {
            fprintf(stderr, "spillctl: explain needs --dispatcher HOST:PORT (or SPILLWAY_DISPATCHER)\n");
            return 2;
        }
        spw_rpc_init();
        int st = spw_explain_cli(dispatcher, token, optind + 1 < argc ? argv[optind + 1] : NULL, json, timeout_ms);
        spw_rpc_shutdown();
        return st;
    }
    if (!strcmp(cmd, "watch")) {
        if (!dispatcher) {
            fprintf(stderr, "spillctl: watch needs --dispatcher HOST:PORT (or SPILLWAY_DISPATCHER)\n");
            return 2;
        }
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        spw_rpc_init();
        int st = spw_watch_run(dispatcher, token, watch_job, interval_ms, count, timeout_ms, &g_stop);
        spw_rpc_shutdown();
        return st;
    }
    if (!strcmp(cmd, "workers") || !strcmp(cmd, "jobs") || !strcmp(cmd, "job")) {
        if (!dispatcher) {
            fprintf(stderr, "spillctl: %s needs --dispatcher HOST:PORT (or SPILLWAY_DISPATCHER)\n", cmd);
            return 2;
        }
        spw_rpc_init();
        int st = spw_inspect_run(dispatcher, token, cmd, optind + 1 < argc ? argv[optind + 1] : NULL, json,
                                 timeout_ms);
        spw_rpc_shutdown();
        return st;
    }
    if (!pipeline) {
        fprintf(stderr, "spillctl: %s needs --pipeline FILE.json\n", cmd);
        return 2;
    }
    if (local_off)
        sa.local_cores = 0;         /* --local-share off: the client finishes remote elements, produces none */
    if (!strcmp(cmd, "plan")) {
        if (!dispatcher) {
            fprintf(stderr, "spillctl: plan needs --dispatcher HOST:PORT (or SPILLWAY_DISPATCHER)\n");
            return 2;
        }
        struct spw_plan_cli_opts po = {.dispatcher = dispatcher, .auth_token = token, .pipeline = pipeline,
                                       .local_cores = sa.local_cores, .rate = sa.consume_rate, .samples = samples,
                                       .force_cut = sa.cut, .max_workers = sa.max_workers, .local_off = local_off, .json = json,
                                       .timeout_ms = timeout_ms};
        spw_rpc_init();
        int st = spw_plan_cli(&po);
        spw_rpc_shutdown();
        return st;
    }
    if (!strcmp(cmd, "profile")) {
        if (!worker) {
            fprintf(stderr, "spillctl: profile needs --worker HOST:PORT\n");
            return 2;
        }
        spw_rpc_init();
        int st = spw_inspect_profile(worker, token, pipeline, samples, json, timeout_ms > 5000 ? timeout_ms : 120000);
        spw_rpc_shutdown();
        return st;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (strcmp(cmd, "run") == 0) {
        if (local) {
            struct spw_backend *gpu = NULL;
            char why[512];
            struct spw_gpu_opts go = {.device = gpu_device, .mem_budget = gpu_budget};
            if (gpu_device >= 0 && spw_gpu_backend_open(&go, &gpu, why, sizeof why) != 0)
                fprintf(stderr, "spillctl: gpu: device %d not used, the CPU makes every element: %s\n", gpu_device,
                        why);
            int st = cmd_run(pipeline, threads, max_batches, max_seconds, warmup, sa.consume_rate, dump, keys_path,
                             json, quiet, gpu);
            if (gpu && !quiet) {
                char summary[320];
                spw_gpu_backend_summary(gpu, summary, sizeof summary);
                fprintf(stderr, "spillctl: gpu: %s\n", summary);
            }
            spw_gpu_backend_close(gpu);
            return st;
        }
        if (!dispatcher) {
            fprintf(stderr, "spillctl: run needs --local or --dispatcher HOST:PORT (or SPILLWAY_DISPATCHER)\n");
            return 2;
        }
        sa.dispatcher = dispatcher;
        sa.token = token;
        sa.gpu_device = gpu_device;
        sa.gpu_budget = gpu_budget;
        spw_rpc_init();
        int st = cmd_run_service(pipeline, &sa, max_batches, max_seconds, dump, keys_path, json, quiet);
        spw_rpc_shutdown();
        return st;
    }
    if (strcmp(cmd, "validate") == 0)
        return cmd_validate(pipeline);
    fprintf(stderr, "spillctl: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return 2;
}
