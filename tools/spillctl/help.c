/* tools/spillctl/help.c - spillctl's help: one entry per command (its synopsis and options), the options
 * every command takes, and the exit statuses; `spillctl --help` prints them all, `spillctl CMD --help` one.
 * Pure (constant tables); any thread. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tools/spillctl/help.h"

struct command_help {
    const char *name;
    const char *synopsis;
    const char *options;
};

static const struct command_help commands[] = {
    {"run",
     "spillctl run --local --pipeline FILE.json [--threads N] [--max-batches M] [--max-seconds S]\n"
     "             [--dump DIR | --keys FILE] [--json] [--quiet] [--warmup-batches W] [--consume-rate R]\n"
     "             [--gpu N [--gpu-mem-budget B]]\n"
     "spillctl run --dispatcher HOST:PORT --pipeline FILE.json [--cut auto|all|K] [--local-cores N]\n"
     "             [--local-share auto|off] [--workers N] [--consume-rate R] [--ordered] [--prefetch-mb MB]\n"
     "             [--credit-mb MB] [--max-batches M] [--max-seconds S] [--dump DIR | --keys FILE] [--json]\n"
     "             [--quiet] [--gpu N [--gpu-mem-budget B]] [--keep-job] [--step-ms MS]\n",
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
     "  --cut auto|all|K  auto (the default, or $SPILLWAY_CUT): measure this client, let the dispatcher\n"
     "                profile the workers and plan the cut and this client's share - or run here alone\n"
     "                when offloading does not pay (the JSON's plan says which and why); all: every\n"
     "                fusion group on the workers; K: groups [0, K) on the workers, the rest here\n"
     "  --compress auto|off|zstd[:N]  workers send element payloads zstd-compressed (level N, default 1;\n"
     "                each element its own frame, checked here); auto (the default): the plan weighs\n"
     "                each cut raw and compressed (compressing where a link binds); raw when not planned\n"
     "  --local-cores N  client threads producing whole splits too (default 1; 0 = none)\n"
     "  --local-share auto|off  off: the client produces nothing itself (= --local-cores 0)\n"
     "  --workers N   use at most N workers (the first N alive; a dead one's place goes to the next);\n"
     "                default: all of them\n"
     "  --dispatcher-wait-ms N  retry a dispatcher that stops answering this long before failing\n"
     "                (default 300000 once the job exists: a restarted dispatcher with --work-dir is back\n"
     "                well within it; 30000 before, so a wrong address fails fast)\n"
     "  --gpu N       one more producer thread makes micro-batches on CUDA device N (--local: beside the\n"
     "                threads; with a dispatcher: beside --local-cores, on this client's own splits); no\n"
     "                plugin, driver or device: said once, the CPU makes everything\n"
     "  --gpu-mem-budget B  device memory reserved once: bytes (K/M/G/Ki/Mi/Gi) or a fraction of what is\n"
     "                free (default 0.25)\n"
     "  --consume-rate R  consume at most R elements/s, like a trainer (default: unlimited); with\n"
     "                --cut auto, the rate the plan aims for (also with --local)\n"
     "  --step-ms MS  with --dispatcher: after each batch, sleep MS as a training step's compute would\n"
     "                (states no rate: the dispatcher measures the trainer's demand from its waits)\n"
     "  --ordered     deliver batches in epoch order: byte-identical to run --local\n"
     "  --keep-job    a run that stops before the job's end (--max-batches, --max-seconds, a signal)\n"
     "                leaves its job paused for a resume (the dispatcher's --paused-job-ms); by default\n"
     "                the job ends with the run, its workers freed\n"
     "  --prefetch-mb MB  batches assembled ahead (default 256)\n"
     "  --credit-mb MB    bytes all workers together may have in flight to this client (default 64)\n"},
    {"validate", "spillctl validate --pipeline FILE.json\n",
     "validate        parse and validate a spec; print it with every default filled in. Exit 2: the spec is\n"
     "                wrong; 1: a python op's function does not import here (SPILLWAY_PYTHON, _PYTHONPATH)\n"},
    {"ops", "spillctl ops [--json]\n",
     "ops             every op this build runs: its class and fields with their defaults (* required);\n"
     "                --json: the op registry's schema (names, types, choices, ranges, defaults, docs)\n"},
    {"workers", "spillctl --dispatcher HOST:PORT workers [--json]\n",
     "workers         the dispatcher's workers: address, threads, alive, last heartbeat, splits held\n"},
    {"jobs", "spillctl --dispatcher HOST:PORT jobs [--json]\n",
     "jobs            the dispatcher's jobs: samples, epochs, cut, splits acked/leased/pending, state\n"
     "                (running, paused, client: handed back to its clients by re-planning, finished)\n"},
    {"job", "spillctl --dispatcher HOST:PORT job ID [--json]\n"
            "spillctl --dispatcher HOST:PORT job cancel ID [--json]\n",
     "job ID          one job: which producer holds which split, and per producer the elements and\n"
     "                bytes it delivered, its recent rates and CPU per element (from heartbeats: up to\n"
     "                one interval old), and the client's CPU per element received\n"
     "job cancel ID   end job ID now: its workers stop, its trainers fail with \"cancelled\" (not\n"
     "                re-created); it stays listed as cancelled among the ended jobs\n"},
    {"explain", "spillctl --dispatcher HOST:PORT explain ID [--json]\n",
     "explain ID      how the dispatcher planned job ID (run with --cut auto): the plan command's table\n"},
    {"journal", "spillctl journal dump DIR [--json]\n",
     "journal dump DIR  a dispatcher's journal (its --work-dir), record by record (offset, kind, the fields\n"
     "                set; secrets only as \"set\"), read without changing it, also while the dispatcher\n"
     "                runs; then whether it ends cleanly, in a torn tail (cut off at the next start) or in\n"
     "                corruption (the dispatcher refuses to start; --journal-recover would drop what is\n"
     "                printed). Exit 1 when corrupt or unreadable\n"},
    {"watch", "spillctl --dispatcher HOST:PORT watch [--job ID] [--interval-ms N] [--count N]\n",
     "watch           a live view of the unfinished jobs (--job ID: that one) and the workers, asked again\n"
     "                every --interval-ms (default 1000) until Ctrl-C or --count views: per job its rate\n"
     "                against the plan's and the trainer's, the trainer's wait, cut, epoch, splits, and\n"
     "                per producer its rate, share and CPU per element; per worker its leases, bytes\n"
     "                buffered and CPU per element. Redrawn in place on a terminal, appended otherwise\n"},
    {"profile", "spillctl profile --worker HOST:PORT --pipeline FILE.json [--samples N] [--json]\n",
     "profile         ask a worker to measure every cut of the pipeline with all its threads busy: cost\n"
     "                (read + prefix + packing) and bytes per element - the planner's input\n"
     "  --worker HOST:PORT  the worker;  --samples N  elements to measure (default 256, at most 4096)\n"},
    {"plan",
     "spillctl plan --dispatcher HOST:PORT --pipeline FILE.json [--local-cores N] [--consume-rate R]\n"
     "              [--cut K] [--local-share auto|off] [--workers N] [--samples N] [--json]\n",
     "plan            measure this client's costs (on --local-cores threads) and profile every worker the\n"
     "                dispatcher lists, then print the planner's table per cut (bytes, remote capacity,\n"
     "                client cost, predicted throughput, mix, workers needed for --consume-rate) and its\n"
     "                choice; --cut, --local-share off and --workers N are the overrides. Creates no job.\n"},
    {"help", "spillctl help [COMMAND]      (or spillctl [COMMAND] --help)\n",
     "help            this text, or one command's\n"},
};

static const char common[] =
    "Options of every command:\n"
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
    "  --help        this text (after a command: that command's);  --version  the build's version\n"
    "\n"
    "Exit status: 0 success; 1 runtime error (a dispatcher or worker unreachable or refusing, a corrupt\n"
    "sample under on_error: fail, a file that cannot be written); 2 usage error (unknown command or option,\n"
    "a bad value, a missing argument) or an invalid pipeline spec.\n";

static const struct command_help *find(const char *name)
{
    for (size_t i = 0; name && i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

bool spw_ctl_known_command(const char *name)
{
    return find(name) != NULL;
}

void spw_ctl_command_list(FILE *f)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "%s%s", i ? ", " : "", commands[i].name);
}

void spw_ctl_usage(FILE *f, const char *cmd)
{
    const struct command_help *one = find(cmd);
    const size_t n = sizeof commands / sizeof commands[0];
    bool first = true;
    for (size_t i = 0; i < n; i++)
        if (!one || one == &commands[i])
            for (const char *s = commands[i].synopsis; *s; first = false) {
                const char *nl = strchr(s, '\n');
                fprintf(f, "%s%.*s\n", first ? "usage: " : "       ", (int)(nl - s), s);
                s = nl + 1;
            }
    if (!one)
        fprintf(f, "       spillctl --help | --version\n");
    fprintf(f, "\n");
    for (size_t i = 0; i < n; i++)
        if (!one || one == &commands[i])
            fprintf(f, "%s", commands[i].options);
    fprintf(f, "\n%s", common);
}
