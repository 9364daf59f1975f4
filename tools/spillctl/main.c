/* tools/spillctl/main.c - the Spillway command-line tool: parse the options, check the command (help.c holds
 * each command's help), and hand over to run.c (run, validate), inspect.c (workers, jobs, job, profile),
 * plan.c (plan, explain), watch.c or journal.c (journal dump). Single-threaded main; the executor and libspillway own their threads. */
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/config.h"
#include "lib/heap.h"
#include "lib/log.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "pipeline/gpu_backend.h"
#include "spillway/client.h"
#include "tools/spillctl/help.h"
#include "tools/spillctl/inspect.h"
#include "tools/spillctl/journal.h"
#include "tools/spillctl/ops.h"
#include "tools/spillctl/plan.h"
#include "tools/spillctl/run.h"
#include "tools/spillctl/watch.h"

volatile sig_atomic_t spw_ctl_stop;

static void on_signal(int sig)
{
    if (!spw_ctl_stop)
        spw_ctl_stop = sig;     /* the first one: run.c exits 128 + it */
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
        {"count", required_argument, NULL, 'n'}, {"compress", required_argument, NULL, 'Z'},
        {"keep-job", no_argument, NULL, 'Y'}, {"step-ms", required_argument, NULL, 's'},
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
    struct spw_ctl_service_args sa = {.cut = SPW_CUT_DEFAULT, .local_cores = 1, .prefetch_mb = 256, .credit_mb = 64};
    const char *worker = NULL;
    int samples = 0;
    bool local_off = false;
    bool help = false;
    int c;
    spw_heap_keep_freed();     /* per-element buffers are 100 KB-1 MB (lib/heap.h); before any thread starts */
    while ((c = getopt_long(argc, argv, "hp:t:m:d:jqw:D:A:T:C:L:R:OP:c:W:S:H:N:M:K:F:X:a:e:k:", long_opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'C':
            if (spw_job_cut_parse(optarg, &sa.cut) != 0) {
                fprintf(stderr, "spillctl: --cut: \"%s\" is not auto, all or a group boundary in [0, 255]\n",
                        optarg);
                return 2;
            }
            break;
        case 'Z':
            if (spw_job_compress_parse(optarg, &sa.compress) != 0) {
                fprintf(stderr, "spillctl: --compress: \"%s\" is not auto, off, zstd or zstd:N (N in 1..19)\n",
                        optarg);
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
        case 'Y': sa.keep_job = true; break;
        case 's':
            sa.step_ms = strtod(optarg, &end);
            if (*end || !(sa.step_ms >= 0) || sa.step_ms > 600000) {
                fprintf(stderr, "spillctl: --step-ms: \"%s\" is not in [0, 600000]\n", optarg);
                return 2;
            }
            break;
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
        case 'h': help = true; break;
        case 'V': printf("%s\n", spw_version()); return 0;
        default:
            fprintf(stderr, "spillctl: see spillctl --help (or spillctl COMMAND --help)\n");
            return 2;
        }
    }
    const char *cmd = optind < argc ? argv[optind] : NULL;
    if (cmd && !strcmp(cmd, "help") && !help) {     /* spillctl help [COMMAND]; help --help is help's own */
        cmd = optind + 1 < argc ? argv[optind + 1] : NULL;
        help = true;
    }
    if (cmd && !spw_ctl_known_command(cmd)) {
        fprintf(stderr, "spillctl: unknown command \"%s\" (commands: ", cmd);
        spw_ctl_command_list(stderr);
        fprintf(stderr, "; spillctl --help for more)\n");
        return 2;
    }
    if (help) {
        spw_ctl_usage(stdout, cmd);
        return 0;
    }
    if (!cmd) {
        fprintf(stderr, "spillctl: no command given (commands: ");
        spw_ctl_command_list(stderr);
        fprintf(stderr, "; spillctl --help for more)\n");
        return 2;
    }
    const char *sub = optind + 1 < argc ? argv[optind + 1] : NULL;
    const int args = !strcmp(cmd, "journal") || (!strcmp(cmd, "job") && sub && !strcmp(sub, "cancel")) ? 2
                     : !strcmp(cmd, "job") || !strcmp(cmd, "explain");
    if (argc - optind > 1 + args) {
        fprintf(stderr, "spillctl: %s: unexpected argument \"%s\" (spillctl %s --help)\n", cmd,
                argv[optind + 1 + args], cmd);
        return 2;
    }
    if (!strcmp(cmd, "journal")) {
        if (!sub || strcmp(sub, "dump") || optind + 2 >= argc) {
            fprintf(stderr, "spillctl: journal: use spillctl journal dump DIR (the dispatcher's --work-dir)\n");
            return 2;
        }
        return spw_ctl_journal_dump(argv[optind + 2], json);
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
    if (!strcmp(cmd, "ops"))
        return spw_ctl_ops(json);
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
        int st = spw_watch_run(dispatcher, token, watch_job, interval_ms, count, timeout_ms, &spw_ctl_stop);
        spw_rpc_shutdown();
        return st;
    }
    if (!strcmp(cmd, "workers") || !strcmp(cmd, "jobs") || !strcmp(cmd, "job")) {
        if (!dispatcher) {
            fprintf(stderr, "spillctl: %s needs --dispatcher HOST:PORT (or SPILLWAY_DISPATCHER)\n", cmd);
            return 2;
        }
        spw_rpc_init();
        const bool cancel = !strcmp(cmd, "job") && sub && !strcmp(sub, "cancel") && optind + 2 < argc;
        int st = spw_inspect_run(dispatcher, token, cancel ? "cancel" : cmd,
                                 cancel ? argv[optind + 2] : optind + 1 < argc ? argv[optind + 1] : NULL, json,
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
            int st = spw_ctl_run_local(pipeline, threads, max_batches, max_seconds, warmup, sa.consume_rate, dump, keys_path,
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
        int st = spw_ctl_run_service(pipeline, &sa, max_batches, max_seconds, dump, keys_path, json, quiet);
        spw_rpc_shutdown();
        return st;
    }
    return spw_ctl_validate(pipeline);     /* the one command left: the name was checked above */
}

