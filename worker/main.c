/* worker/main.c - spillway-worker: parse config, listen, register with the dispatcher and heartbeat; serve
 * the jobs the heartbeats list (lease splits, run the pipeline prefix, stream elements against credit);
 * drain on SIGTERM. No logic here: registration.c and the jobs (jobs.c, producer.c, outbox.c, stream.c).
 * Signals are blocked in all threads and taken by main with sigwait. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/config.h"
#include "lib/cpulimit.h"
#include "lib/health.h"
#include "lib/heap.h"
#include "lib/log.h"
#include "lib/methods.h"
#include "lib/metrics.h"
#include "lib/metrics_http.h"
#include "lib/rpc.h"
#include "lib/security.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/plugin_ops.h"
#include "worker/jobs.h"
#include "worker/metrics.h"
#include "worker/profile.h"
#include "worker/registration.h"

static struct spw_config_entry g_cfg[] = {
    {"dispatcher", "SPILLWAY_DISPATCHER", SPW_CFG_STRING, NULL, 0, 0, "the dispatcher, HOST:PORT (required)", 0, 0,
     0, 0},
    {"port", "SPILLWAY_WORKER_PORT", SPW_CFG_INT, "5051", 0, 65535, "port to listen on (0: any free port)", 0, 0,
     0, 0},
    {"listen", "SPILLWAY_LISTEN", SPW_CFG_STRING, "0.0.0.0", 0, 0, "address to listen on", 0, 0, 0, 0},
    {"advertise", "SPILLWAY_ADVERTISE", SPW_CFG_STRING, "", 0, 0,
     "HOST:PORT clients dial (e.g. the pod IP); default: the listen address and bound port", 0, 0, 0, 0},
    {"data-port", "SPILLWAY_DATA_PORT", SPW_CFG_INT, "0", -1, 65535,
     "port of --listen for data connections: a client that asks gets its elements there, at raw TCP's rate, "
     "instead of on the gRPC stream (0: any free port; -1: none). With --tls-cert they carry TLS with the same "
     "certificate (and clients' CA) as the gRPC port, kTLS where the kernel has it", 0, 0, 0, 0},
    {"threads", "SPILLWAY_THREADS", SPW_CFG_INT, "0", 0, 1024,
     "preprocessing threads (0: the CPUs this process may use - its affinity and its container's CPU limit, "
     "rounded up)", 0, 0, 0, 0},
    {"io-threads", "SPILLWAY_IO_THREADS", SPW_CFG_INT, "2", 1, 64, "RPC I/O threads", 0, 0, 0, 0},
    SPW_CFG_SECURITY_ENTRIES,
    SPW_CFG_LOG_ENTRIES,
    {"drain-ms", "SPILLWAY_DRAIN_MS", SPW_CFG_INT, "5000", 0, 600000,
     "on SIGTERM, lease nothing new and finish the splits held (made and sent) for at most this long", 0, 0, 0, 0},
    {"health-port", "SPILLWAY_HEALTH_PORT", SPW_CFG_INT, "0", 0, 65535,
     "also answer grpc.health.v1.Health/Check on this port, with no token (Kubernetes probes of a worker "
     "that requires one); 0: only on --port", 0, 0, 0, 0},
    {"gpu", "SPILLWAY_GPU", SPW_CFG_INT, "-1", -1, 1023,
     "also make elements on this CUDA device (a GPU-side worker; -1: none). Without the plugin "
     "(libspillway-gpu.so), a driver or the device it says so and serves as a CPU worker", 0, 0, 0, 0},
    {"gpu-mem-budget", "SPILLWAY_GPU_MEM_BUDGET", SPW_CFG_STRING, SPW_GPU_DEFAULT_BUDGET, 0, 0,
     "device memory reserved once at start: bytes (K/M/G/Ki/Mi/Gi) or a fraction of what is free then; "
     "never more than is free", 0, 0, 0, 0},
    {"buffer-mb", "SPILLWAY_BUFFER_MB", SPW_CFG_INT, "256", 1, 65536,
     "the most encoded elements a job buffers per client rank (a queue holds about 1 s of what its "
     "stream sends, at least 4 MB) before producers wait", 0, 0, 0, 0},
    {"metrics-port", "SPILLWAY_METRICS_PORT", SPW_CFG_INT, "0", -1, 65535,
     "serve Prometheus metrics (GET /metrics) and GET /healthz over HTTP on this port of --listen, with no "
     "token: put it where only the scraper reaches; 0: off; -1: any free port", 0, 0, 0, 0},
    {"python", "SPILLWAY_PYTHON", SPW_CFG_STRING, "python3", 0, 0,
     "the interpreter jobs' Python ops run in (one helper process per thread; it needs numpy)", 0, 0, 0, 0},
    SPW_CFG_OP_PLUGINS_ENTRY,
    {"python-path", "SPILLWAY_PYTHONPATH", SPW_CFG_STRING, "", 0, 0,
     "folders (':'-separated) put before PYTHONPATH for Python ops: where the modules jobs name are", 0, 0, 0,
     0},
};
#define N_CFG ((int)(sizeof g_cfg / sizeof g_cfg[0]))

static const struct spw_config_entry *cfg(const char *name)
{
    return spw_config_get(g_cfg, N_CFG, name);
}

/* Ready (Health/Check SERVING) while registered with a dispatcher and not draining. */
static struct spw_health g_health;

static void on_registered(void *ctx, uint64_t id, uint64_t secret)
{
    wrk_jobs_set_worker_id(ctx, id, secret);
    spw_health_set(&g_health, true);
}

static void on_unregistered(void *ctx)
{
    (void)ctx;
    spw_health_set(&g_health, false);
}

static void on_tasks(void *ctx, const Spillway__V1__WorkerHeartbeatResponse *reply)
{
    wrk_jobs_update(ctx, reply);
}

static int progress(void *ctx, Spillway__V1__ProducerProgress *out, Spillway__V1__SourceIo *io, int cap,
                    bool again)
{
    return wrk_jobs_progress(ctx, out, io, cap, again);
}

static int refusals(void *ctx, Spillway__V1__JobRefusal *out, int cap)
{
    return wrk_jobs_refusals(ctx, out, cap);
}

static int64_t buffered(void *ctx)
{
    struct wrk_job_stat *st = calloc(64, sizeof *st);
    int64_t bytes = 0;
    const int n = st ? wrk_jobs_stats(ctx, st, 64) : 0;
    for (int i = 0; i < n; i++)
        bytes += st[i].queue_bytes;
    free(st);
    return bytes;
}

/* Registration as stream handlers see it: set once it runs, cleared (under the lock) before it stops. */
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct wrk_registration *g_reg;

static void set_reg(struct wrk_registration *r)
{
    pthread_mutex_lock(&g_reg_mu);
    g_reg = r;
    pthread_mutex_unlock(&g_reg_mu);
}

static void want_tasks(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&g_reg_mu);
    wrk_registration_poke(g_reg);
    pthread_mutex_unlock(&g_reg_mu);
}

struct scrape {
    struct wrk_jobs *jobs;
    const struct spw_backend *gpu;
    struct spw_rpc_server *srv;
};

static void collect(void *ctx, struct spw_prom *p)
{
    const struct scrape *sc = ctx;
    spw_prom_process(p, "worker");
    wrk_metrics(sc->jobs, sc->gpu, p);
    spw_rpc_server_metrics(sc->srv, p);
}

int main(int argc, char **argv)
{
    /* Messages and per-element buffers are 100 KB-1 MB: one heap that keeps freed memory (a stopped job's
     * memory goes back by malloc_trim, jobs.c). */
    spw_heap_keep_freed();
    char err[512];
    int rc = spw_config_parse(g_cfg, N_CFG, argc, argv,
                              "usage: spillway-worker --dispatcher HOST:PORT [--port P] [options]\n"
                              "A Spillway CPU worker: leases splits from the dispatcher, runs the pipeline's\n"
                              "prefix and streams elements to the job's clients.",
                              stdout, err, sizeof err);
    if (rc == 1)
        return 0;
    if (rc) {
        fprintf(stderr, "spillway-worker: %s\n", err);
        return 2;
    }
    if (!cfg("dispatcher")->s || !*cfg("dispatcher")->s) {
        fprintf(stderr, "spillway-worker: --dispatcher HOST:PORT is required (or SPILLWAY_DISPATCHER)\n");
        return 2;
    }
    if (spw_log_configure(cfg("log-level")->s, cfg("log-format")->s, err, sizeof err) != 0) {
        fprintf(stderr, "spillway-worker: %s\n", err);
        return 2;
    }
    spw_config_log(g_cfg, N_CFG, "worker");
    /* Read by pipeline/python_op.c when a thread starts its helper: set once here, before any thread. */
    setenv("SPILLWAY_PYTHON", cfg("python")->s, 1);
    setenv("SPILLWAY_PYTHONPATH", cfg("python-path")->s, 1);
    spw_plugins_load(cfg("op-plugins")->s);    /* a job naming a plugin op it lacks is refused */
    static struct spw_security sec;
    if (spw_security_from_config(g_cfg, N_CFG, "worker", &sec, err, sizeof err) != 0) {
        fprintf(stderr, "spillway-worker: %s\n", err);
        return 2;
    }
    const char *token = spw_security_worker_token(&sec);      /* what it shows the dispatcher */

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    spw_rpc_init();
    spw_rpc_set_channel_tls(sec.tls_channel);   /* its calls to the dispatcher */
    struct spw_rpc_server *srv = NULL, *health_srv = NULL;
    struct spw_metrics_http *metrics = NULL;
    static struct scrape scrape;
    struct wrk_registration *reg = NULL;
    spw_health_init(&g_health, "spillway.v1.Worker");
    struct wrk_jobs *jobs = NULL;
    struct spw_direct_listener *direct = NULL;
    struct spw_direct_tls *direct_tls = NULL;
    struct spw_backend *gpu = NULL;
    int status = 1;
    const char *host = cfg("listen")->s;
    char addr[300], advertise[300];
    snprintf(addr, sizeof addr, strchr(host, ':') && host[0] != '[' ? "[%s]:%lld" : "%s:%lld", host,
             (long long)cfg("port")->i);
    struct spw_rpc_server_opts ro = {.listen_addr = addr, .io_threads = (int)cfg("io-threads")->i,
                                     .auth_token = sec.token, .worker_token = sec.worker_token,
                                     .tls = sec.tls_server};
    if (spw_rpc_server_create(&ro, &srv, err, sizeof err) != 0) {
        spw_log(SPW_LOG_ERROR, "worker", "cannot create the server: %s", err);
        goto out;
    }
    int threads = (int)cfg("threads")->i;
    if (threads <= 0)
        threads = (int)ceil(spw_cpu_limit() - 0.01);      /* a limit of 2.0 CPUs: 2 threads, 1.5: 2 */
    if (threads <= 0)
        threads = 1;
    if (cfg("gpu")->i >= 0) {
        struct spw_gpu_opts go = {.device = (int)cfg("gpu")->i, .mem_budget = cfg("gpu-mem-budget")->s};
        if (spw_gpu_backend_open(&go, &gpu, err, sizeof err) == 0)
            spw_log(SPW_LOG_INFO, "worker", "gpu: making elements on %s", spw_gpu_backend_describe(gpu));
        else
            spw_log(SPW_LOG_WARN, "worker", "gpu: device %lld not used, serving as a CPU worker: %s",
                    (long long)cfg("gpu")->i, err);
    }
    /* With TLS the data port serves it too: the same certificate, key and clients' CA as the gRPC port. */
    if (cfg("data-port")->i >= 0 &&
        ((sec.tls_server && spw_direct_tls_create(sec.tls_server, true, &direct_tls, err, sizeof err) != 0) ||
         spw_direct_listen(host, (int)cfg("data-port")->i, direct_tls, &direct, err, sizeof err) != 0)) {
        spw_log(SPW_LOG_ERROR, "worker", "%s (--data-port -1: none)", err);
        goto out;
    }
    struct wrk_jobs_opts jo = {.dispatcher = cfg("dispatcher")->s, .auth_token = token, .threads = threads,
                               .queue_bytes = (size_t)cfg("buffer-mb")->i << 20, .want_tasks = want_tasks,
                               .gpu = gpu, .direct = direct};
    if (wrk_jobs_create(&jo, &jobs) != 0) {
        spw_log(SPW_LOG_ERROR, "worker", "cannot set up job serving");
        goto out;
    }
    spw_rpc_server_add_stream(srv, SPW_PATH(STREAM_ELEMENTS), wrk_jobs_stream, jobs);
    static struct wrk_profile_opts profile_opts;
    profile_opts.threads = threads;
    profile_opts.gpu = gpu;
    spw_rpc_server_add_unary_slow(srv, SPW_PATH(PROFILE), wrk_profile, &profile_opts);
    /* Clients profile workers while they plan, and so does the dispatcher when it re-plans. */
    spw_rpc_server_set_callers(srv, SPW_PATH(PROFILE), SPW_RPC_CALLER_CLIENT | SPW_RPC_CALLER_WORKER);
    spw_rpc_server_add_stream(srv, SPW_PATH(PROBE), wrk_probe, NULL);
    spw_health_add(srv, &g_health);
    int port = 0;
    if (spw_rpc_server_start(srv, &port) != 0) {
        spw_log(SPW_LOG_ERROR, "worker", "cannot listen on %s", addr);
        goto out;
    }
    if (cfg("advertise")->s && *cfg("advertise")->s)
        snprintf(advertise, sizeof advertise, "%s", cfg("advertise")->s);
    else
        snprintf(advertise, sizeof advertise, strchr(host, ':') && host[0] != '[' ? "[%s]:%d" : "%s:%d", host,
                 port);     /* a wildcard host: the dispatcher registers the address it sees us call from */
    printf("listening on %s:%d\n", host, port);
    if (direct)
        printf("data listening on %s:%d\n", host, spw_direct_port(direct));
    if (cfg("health-port")->i) {
        int hport = 0;
        if (spw_health_server_start(&g_health, host, (int)cfg("health-port")->i, &health_srv, &hport, err,
                                    sizeof err) != 0) {
            spw_log(SPW_LOG_ERROR, "worker", "%s", err);
            goto out;
        }
        printf("health listening on %s:%d\n", host, hport);
    }
    if (cfg("metrics-port")->i) {
        scrape = (struct scrape){jobs, gpu, srv};
        const int mport = (int)cfg("metrics-port")->i;
        if (spw_metrics_http_start(host, mport < 0 ? 0 : mport, collect, &scrape, &metrics, err, sizeof err) != 0) {
            spw_log(SPW_LOG_ERROR, "worker", "%s", err);
            goto out;
        }
        printf("metrics listening on %s:%d\n", host, spw_metrics_http_port(metrics));
    }
    fflush(stdout);
    spw_log(SPW_LOG_INFO, "worker", "listening address=%s port=%d data_port=%d data_tls=%s advertise=%s", host,
            port, direct ? spw_direct_port(direct) : -1,
            !direct ? "-" : !direct_tls ? "off" : sec.tls_server->require_client_cert ? "mutual" : "on", advertise);

    struct wrk_registration_opts wo = {.dispatcher = cfg("dispatcher")->s, .advertise = advertise,
                                       .threads = threads, .auth_token = token,
                                       .gpu = gpu ? spw_gpu_backend_brief(gpu) : NULL,
                                       .on_registered = on_registered, .on_unregistered = on_unregistered,
                                       .on_tasks = on_tasks,
                                       .progress = progress, .refusals = refusals, .buffered = buffered,
                                       .ctx = jobs};
    if ((rc = wrk_registration_start(&wo, &reg)) != 0) {
        spw_log(SPW_LOG_ERROR, "worker", "cannot start registration: rc=%d", rc);
        goto out;
    }
    set_reg(reg);
    int sig = 0;
    sigwait(&sigs, &sig);
    /* Drain: not ready (probes see NOT_SERVING), lease nothing new, make and send the splits held; heartbeats
     * go on meanwhile so that the dispatcher does not re-lease them. */
    spw_health_set(&g_health, false);
    const int64_t drain_ms = cfg("drain-ms")->i, t0 = spw_now_ms();
    spw_log(SPW_LOG_INFO, "worker", "draining signal=%d deadline_ms=%lld", sig, (long long)drain_ms);
    const int busy = wrk_jobs_drain(jobs, drain_ms);
    spw_log(busy ? SPW_LOG_WARN : SPW_LOG_INFO, "worker", "%s ms=%lld", busy ? "drain deadline passed, splits and "
            "queues still busy (the dispatcher re-leases them)" : "drained: every split held was sent",
            (long long)(spw_now_ms() - t0));
    set_reg(NULL);
    wrk_registration_stop(reg);
    reg = NULL;
    const int64_t left = drain_ms - (spw_now_ms() - t0);
    spw_rpc_server_shutdown(srv, left > 0 ? (int)left : 0);
    status = 0;
out:
    set_reg(NULL);
    wrk_registration_stop(reg);
    spw_metrics_http_stop(metrics);     /* before the jobs, GPU and server its scrapes read */
    spw_rpc_server_shutdown(srv, 0);
    wrk_jobs_destroy(jobs);
    spw_direct_listener_destroy(direct);    /* after the streams that take its connections */
    spw_direct_tls_destroy(direct_tls);
    if (gpu) {
        char summary[320];
        spw_gpu_backend_summary(gpu, summary, sizeof summary);
        spw_log(SPW_LOG_INFO, "worker", "gpu: %s", summary);
        spw_gpu_backend_close(gpu);
    }
    spw_rpc_server_destroy(srv);
    spw_rpc_server_shutdown(health_srv, 0);
    spw_rpc_server_destroy(health_srv);
    spw_rpc_shutdown();
    spw_rpc_tls_free(sec.tls_server);
    spw_rpc_tls_free(sec.tls_channel);
    spw_log(SPW_LOG_INFO, "worker", "stopped status=%d", status);
    return status;
}
