/* dispatcher/main.c - spillway-dispatcher: parse config, start the RPC server over the service, wait for
 * SIGTERM/SIGINT, drain, exit. No logic here: the handlers live in service.c, the state in state.c.
 * Signals are blocked in every thread and taken synchronously by main with sigwait. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/service.h"
#include "lib/config.h"
#include "lib/cpulimit.h"
#include "lib/health.h"
#include "lib/log.h"
#include "lib/methods.h"
#include "lib/metrics.h"
#include "lib/metrics_http.h"
#include "lib/rpc.h"
#include "lib/security.h"
#include "pipeline/plugin_ops.h"

static struct spw_config_entry g_cfg[] = {
    {"port", "SPILLWAY_PORT", SPW_CFG_INT, "5050", 0, 65535, "port to listen on (0: any free port)", 0, 0, 0, 0},
    {"listen", "SPILLWAY_LISTEN", SPW_CFG_STRING, "0.0.0.0", 0, 0, "address to listen on", 0, 0, 0, 0},
    {"io-threads", "SPILLWAY_IO_THREADS", SPW_CFG_INT, "0", 0, 64,
     "RPC I/O threads (0: one per CPU it may use, its affinity and cgroup quota rounded up; 3 more with a "
     "--work-dir, whose calls wait for the disk)", 0, 0, 0, 0},
    {"worker-timeout-ms", "SPILLWAY_WORKER_TIMEOUT_MS", SPW_CFG_INT, "10000", 100, 3600000,
     "a worker silent this long is dead and its splits are re-leased", 0, 0, 0, 0},
    {"client-timeout-ms", "SPILLWAY_CLIENT_TIMEOUT_MS", SPW_CFG_INT, "30000", 100, 86400000,
     "a client silent this long is expired: its job pauses and workers drop its work", 0, 0, 0, 0},
    {"heartbeat-ms", "SPILLWAY_HEARTBEAT_MS", SPW_CFG_INT, "1000", 10, 60000,
     "heartbeat interval workers are told to use", 0, 0, 0, 0},
    {"speculate-after-ms", "SPILLWAY_SPECULATE_AFTER_MS", SPW_CFG_INT, "30000", 0, 86400000,
     "re-lease an epoch's straggling tail split to an idle producer after this long (0: never)", 0, 0, 0, 0},
    {"replan-after-ms", "SPILLWAY_REPLAN_AFTER_MS", SPW_CFG_INT, "20000", 0, 86400000,
     "re-plan a planned job whose measured rate stays 20% under the prediction at most this often (0: never)",
     0, 0, 0, 0},
    {"finished-job-ms", "SPILLWAY_FINISHED_JOB_MS", SPW_CFG_INT, "60000", 0, 86400000,
     "a finished job leaves the table this long after it finished (late acks, spillctl job); then only its "
     "summary stays, among the last --job-history", 0, 0, 0, 0},
    {"paused-job-ms", "SPILLWAY_PAUSED_JOB_MS", SPW_CFG_INT, "600000", 0, 604800000,
     "an unfinished job whose clients all expired stays resumable this long, then leaves the table", 0, 0, 0, 0},
    {"max-workers", "SPILLWAY_MAX_WORKERS", SPW_CFG_INT, "4096", 1, 65536,
     "registered workers at once (a dead worker's place goes to a new one); a worker beyond it is refused with "
     "the cap named", 0, 0, 0, 0},
    {"max-jobs", "SPILLWAY_MAX_JOBS", SPW_CFG_INT, "256", 1, 65536, "unfinished jobs at once", 0, 0, 0, 0},
    {"max-jobs-per-client", "SPILLWAY_MAX_JOBS_PER_CLIENT", SPW_CFG_INT, "64", 1, 65536,
     "unfinished jobs one client host may create", 0, 0, 0, 0},
    {"job-history", "SPILLWAY_JOB_HISTORY", SPW_CFG_INT, "256", 1, 65536,
     "ended jobs whose summaries stay listable (spillctl jobs, job ID)", 0, 0, 0, 0},
    {"work-dir", "SPILLWAY_WORK_DIR", SPW_CFG_STRING, "", 0, 0,
     "a directory for the journal of jobs, acks and ids: a restart replays it and running jobs go on (one "
     "dispatcher per directory); empty: state in memory only, a restart ends the jobs", 0, 0, 0, 0},
    {"journal-recover", "SPILLWAY_JOURNAL_RECOVER", SPW_CFG_BOOL, "false", 0, 0,
     "with --work-dir: a corrupt journal (a bad record with more after it) is refused at start; with this, a copy "
     "of the whole file is kept beside it and the dispatcher starts from the records before the bad one (see "
     "what would be lost first: spillctl journal dump DIR)", 0, 0, 0, 0},
    {"journal-compact-kb", "SPILLWAY_JOURNAL_COMPACT_KB", SPW_CFG_INT, "65536", 0, INT64_C(1) << 30,
     "with --work-dir: rewrite the journal as a snapshot of the state once it is this big and twice its size "
     "after the last rewrite (0: never)", 0, 0, 0, 0},
    {"profile-timeout-ms", "SPILLWAY_PROFILE_TIMEOUT_MS", SPW_CFG_INT, "15000", 100, 25000,
     "planning waits this long for a worker's profile of a pipeline, then plans without it (under a client's "
     "30 s CreateJob deadline)", 0, 0, 0, 0},
    {"worker-millicores", "SPILLWAY_WORKER_MILLICORES", SPW_CFG_INT, "1000", 1, 1024000,
     "the CPU one worker brings (its pod's CPU request, in thousandths of a core): with no worker serving a job "
     "whose trainer stated no rate, its workers needed are the trainer's measured demand at this many cores",
     0, 0, 0, 0},
    {"split-size", "SPILLWAY_SPLIT_SIZE", SPW_CFG_INT, "64", 1, 65536, "samples per split", 0, 0, 0, 0},
    {"max-message-mb", "SPILLWAY_MAX_MESSAGE_MB", SPW_CFG_INT, "64", 1, 2047, "largest RPC message", 0, 0, 0, 0},
    SPW_CFG_SECURITY_ENTRIES,
    SPW_CFG_LOG_ENTRIES,
    {"drain-ms", "SPILLWAY_DRAIN_MS", SPW_CFG_INT, "5000", 0, 600000, "on SIGTERM, finish calls for this long",
     0, 0, 0, 0},
    {"health-port", "SPILLWAY_HEALTH_PORT", SPW_CFG_INT, "0", 0, 65535,
     "also answer grpc.health.v1.Health/Check on this port, with no token (Kubernetes probes of a dispatcher "
     "that requires one); 0: only on --port", 0, 0, 0, 0},
    {"metrics-port", "SPILLWAY_METRICS_PORT", SPW_CFG_INT, "0", -1, 65535,
     "serve Prometheus metrics (GET /metrics) and GET /healthz over HTTP on this port of --listen, with no "
     "token: put it where only the scraper reaches; 0: off; -1: any free port", 0, 0, 0, 0},
    SPW_CFG_OP_PLUGINS_ENTRY,
};
#define N_CFG ((int)(sizeof g_cfg / sizeof g_cfg[0]))

static int64_t cfg_int(const char *name)
{
    return spw_config_get(g_cfg, N_CFG, name)->i;
}

static const char *cfg_str(const char *name)
{
    return spw_config_get(g_cfg, N_CFG, name)->s;
}

struct scrape {
    struct disp_service *svc;
    struct spw_rpc_server *srv;
};

static void collect(void *ctx, struct spw_prom *p)
{
    const struct scrape *sc = ctx;
    spw_prom_process(p, "dispatcher");
    disp_service_metrics(sc->svc, p);
    spw_rpc_server_metrics(sc->srv, p);
}

int main(int argc, char **argv)
{
    char err[512];
    int rc = spw_config_parse(g_cfg, N_CFG, argc, argv,
                              "usage: spillway-dispatcher [--port P] [--listen ADDR] [options]\n"
                              "The Spillway dispatcher: worker registry, jobs, split leases.",
                              stdout, err, sizeof err);
    if (rc == 1)
        return 0;
    if (rc) {
        fprintf(stderr, "spillway-dispatcher: %s\n", err);
        return 2;
    }
    if (spw_log_configure(cfg_str("log-level"), cfg_str("log-format"), err, sizeof err) != 0) {
        fprintf(stderr, "spillway-dispatcher: %s\n", err);
        return 2;
    }
    spw_config_log(g_cfg, N_CFG, "dispatcher");
    /* Specs naming plugin ops are validated here too: load them now (pipeline/plugin_ops.h logs each). */
    spw_plugins_load(cfg_str("op-plugins"));
    static struct spw_security sec;
    if (spw_security_from_config(g_cfg, N_CFG, "dispatcher", &sec, err, sizeof err) != 0) {
        fprintf(stderr, "spillway-dispatcher: %s\n", err);
        return 2;
    }

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);          /* inherited by every thread started below */

    spw_rpc_init();
    spw_rpc_set_channel_tls(sec.tls_channel);   /* its calls to workers (profiles) */
    struct disp_service *svc = NULL;
    struct spw_rpc_server *srv = NULL, *health_srv = NULL;
    struct spw_metrics_http *metrics = NULL;
    static struct scrape scrape;
    static struct spw_health health;    /* ready once the state is loaded (SERVING), not while draining */
    spw_health_init(&health, "spillway.v1.Dispatcher");
    struct disp_service_opts so = {.worker_timeout_ms = cfg_int("worker-timeout-ms"),
                                   .client_timeout_ms = cfg_int("client-timeout-ms"),
                                   .heartbeat_interval_ms = cfg_int("heartbeat-ms"),
                                   .speculate_after_ms = cfg_int("speculate-after-ms"),
                                   .replan_after_ms = cfg_int("replan-after-ms"),
                                   .default_split_size = (int32_t)cfg_int("split-size"),
                                   .finished_job_ms = cfg_int("finished-job-ms"),
                                   .paused_job_ms = cfg_int("paused-job-ms"),
                                   .max_workers = (int)cfg_int("max-workers"),
                                   .max_jobs = (int)cfg_int("max-jobs"),
                                   .job_history = (int)cfg_int("job-history"),
                                   .max_jobs_per_client = (int)cfg_int("max-jobs-per-client"),
                                   .auth_token = spw_security_worker_token(&sec),
                                   .profile_timeout_ms = cfg_int("profile-timeout-ms"),
                                   .work_dir = cfg_str("work-dir"),
                                   .journal_recover = (int)cfg_int("journal-recover"),
                                   .worker_millicores = cfg_int("worker-millicores"),
                                   .health = &health,
                                   .journal_compact_bytes = cfg_int("journal-compact-kb") << 10};
    int status = 1;
    if ((rc = disp_service_create(&so, &svc, err, sizeof err)) != 0) {
        spw_log(SPW_LOG_ERROR, "dispatcher", "cannot start: %s", err);
        fprintf(stderr, "spillway-dispatcher: %s\n", err);
        goto out;
    }
    char addr[300];
    const char *host = cfg_str("listen");
    snprintf(addr, sizeof addr, strchr(host, ':') && host[0] != '[' ? "[%s]:%lld" : "%s:%lld", host,
             (long long)cfg_int("port"));
    /* More I/O threads than CPUs only add hand-offs: on one core, 2 threads took 0.80-0.86 of it where 1 took
     * 0.60-0.64 for the same calls (scripts/bench/dispatcher.sh, 1000 workers x 100 jobs). But with a journal
     * a call's thread waits for the disk's sync (group commit, unlocked): 3 more threads keep serving the
     * others meanwhile (with a 1 ms sync, 1000 x 100: 13578 leases/s of 14999 due, against 7551-7737 with
     * one thread). */
    int io_threads = (int)cfg_int("io-threads");
    if (io_threads == 0) {
        const double cpus = ceil(spw_cpu_limit() - 0.01);
        io_threads = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
        if (cfg_str("work-dir")[0])
            io_threads += 3;
    }
    struct spw_rpc_server_opts ro = {.listen_addr = addr, .io_threads = io_threads,
                                     .max_message_bytes = (size_t)cfg_int("max-message-mb") << 20,
                                     .auth_token = sec.token, .worker_token = sec.worker_token,
                                     .tls = sec.tls_server};
    if ((rc = spw_rpc_server_create(&ro, &srv, err, sizeof err)) != 0) {
        spw_log(SPW_LOG_ERROR, "dispatcher", "cannot create the server: %s", err);
        goto out;
    }
    static const struct {
        enum spw_method id;
        spw_rpc_unary_fn fn;
        int slow;
        unsigned callers;
    } methods[] = {
#define DISP_METHOD_ROW(ID, fn, slow, callers) {SPW_M_##ID, fn, slow, callers},
        DISP_METHODS(DISP_METHOD_ROW)
#undef DISP_METHOD_ROW
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        const char *path = spw_method_path(methods[i].id);
        (methods[i].slow ? spw_rpc_server_add_unary_slow : spw_rpc_server_add_unary)(srv, path, methods[i].fn, svc);
        spw_rpc_server_set_callers(srv, path, methods[i].callers);
    }
    spw_health_add(srv, &health);
    int port = 0;
    if ((rc = spw_rpc_server_start(srv, &port)) != 0) {
        spw_log(SPW_LOG_ERROR, "dispatcher", "cannot listen on %s", addr);
        goto out;
    }
    printf("listening on %s:%d\n", host, port);
    if (cfg_int("health-port")) {
        int hport = 0;
        if (spw_health_server_start(&health, host, (int)cfg_int("health-port"), &health_srv, &hport, err,
                                    sizeof err) != 0) {
            spw_log(SPW_LOG_ERROR, "dispatcher", "%s", err);
            goto out;
        }
        printf("health listening on %s:%d\n", host, hport);
    }
    if (cfg_int("metrics-port")) {
        scrape = (struct scrape){svc, srv};
        const int mport = (int)cfg_int("metrics-port");
        if (spw_metrics_http_start(host, mport < 0 ? 0 : mport, collect, &scrape, &metrics, err, sizeof err) != 0) {
            spw_log(SPW_LOG_ERROR, "dispatcher", "%s", err);
            goto out;
        }
        printf("metrics listening on %s:%d\n", host, spw_metrics_http_port(metrics));
    }
    fflush(stdout);
    spw_health_set(&health, true);      /* the state is in memory (no journal yet): ready */
    spw_log(SPW_LOG_INFO, "dispatcher", "listening address=%s port=%d io-threads=%d", host, port, io_threads);

    int sig = 0;
    sigwait(&sigs, &sig);
    spw_health_set(&health, false);
    spw_log(SPW_LOG_INFO, "dispatcher", "draining signal=%d deadline_ms=%lld", sig, (long long)cfg_int("drain-ms"));
    spw_rpc_server_shutdown(srv, (int)cfg_int("drain-ms"));
    status = 0;
out:
    spw_metrics_http_stop(metrics);     /* before the server and service its scrapes read */
    spw_rpc_server_destroy(srv);
    spw_rpc_server_destroy(health_srv);
    disp_service_destroy(svc);
    spw_rpc_shutdown();
    spw_rpc_tls_free(sec.tls_server);
    spw_rpc_tls_free(sec.tls_channel);
    spw_log(SPW_LOG_INFO, "dispatcher", "stopped status=%d", status);
    return status;
}
