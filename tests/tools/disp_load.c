/* tests/tools/disp_load.c - a load generator for one dispatcher: simulated workers and clients, each on its own
 * connection, at the real components' periods: workers register, heartbeat at the interval the dispatcher
 * gives, lease LEASE_AHEAD splits ahead per job they serve and produce them one after another, --split-ms each
 * (so each (worker, job) pair asks for one split per --split-ms: the "due" rate), and when a job has
 * nothing pending poll again after --idle-poll-ms, four times, then doubling to 800 ms (worker/producer.c's
 * idle_wait; --no-backoff: the flat 50 ms workers used before); one client per job creates it (cut
 * auto with --planned) and heartbeats every 200 ms with the splits its workers finished as acks. As real peers
 * do, each worker heartbeat carries a progress entry per job it serves (elements, bytes, CPU, cumulative; at
 * most 64, worker/registration.c's cap), and each client heartbeat its trainer's rate, wait and CPU, its own
 * progress and what arrived from each worker's stream (at most 64 streams, client/remote_internal.h's cap);
 * --bare sends heartbeats without them (this generator before 2026-12-07). Reports per
 * RPC method the calls, errors, p50/p99 latency, and the dispatcher's CPU and RSS (--pid) over --seconds,
 * then how many workers the dispatcher still lists alive. Threads: --threads for the leases, each driving its
 * share of the simulated workers with blocking calls, and --hb-threads for the heartbeats (workers' and
 * clients'), as real workers and clients heartbeat from threads of their own: a slow dispatcher delays a
 * heartbeat by its own latency, not by the leases queued before it on the same thread.
 *   disp_load --dispatcher HOST:PORT --data DIR --workers N --jobs J [--split-size S] [--seconds T]
 *             [--threads K] [--hb-threads H] [--split-ms M] [--idle-poll-ms P] [--no-backoff] [--pid PID]
 *             [--planned] [--bare]
 * Prints one JSON object. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "proto/spillway.pb-c.h"

#define LEASE_AHEAD 2
#define CLIENT_HEARTBEAT_MS 200
#define MAX_JOBS 4096              /* --jobs; the dispatcher runs with --max-jobs at least that */
#define RPC_TIMEOUT_MS 5000
#define MAX_REPORTED 64             /* progress entries per worker heartbeat, streams per client: the real caps */
#define PROGRESS_REFRESH_MS 30000   /* a worker reports an unchanged job again after this (worker/jobs.c) */
#define ELEMENT_BYTES 150528        /* a 224x224x3 uint8 element on the wire */
#define WORKER_NS_PER_ELEMENT 4000000   /* a worker's CPU per element reported (ImageNet decode + crop) */
#define CLIENT_NS_PER_ELEMENT 60000     /* a client's receiving thread's CPU per element reported */

enum method { M_REGISTER, M_WORKER_HB, M_LEASE, M_CLIENT_HB, M_CREATE, M_N };
static const char *const method_names[M_N] = {"RegisterWorker", "WorkerHeartbeat", "LeaseSplit", "ClientHeartbeat",
                                              "CreateJob"};

struct stat_set {               /* one thread's calls of one method */
    int64_t calls, errors, deadline, exhausted, n_lat, cap_lat;   /* deadline, exhausted: errors of those statuses */
    int32_t *lat_us;
};

struct held {
    uint64_t epoch, split;
    int64_t done_at;
};

struct sim_job {                /* a job as one worker sees it */
    uint64_t id, secret, manifest;
    struct held held[LEASE_AHEAD];
    int n_held;
    int64_t next_lease_ms;
    int idle;                   /* empty polls in a row */
    int64_t splits_done;        /* atomic: the lease thread counts, the heartbeat thread reports */
    int64_t reported_done, reported_ms;     /* in the last heartbeat that had it (the heartbeat thread's) */
};

struct sim_worker {
    struct spw_rpc_channel *ch;
    int index;                  /* in g_workers */
    uint64_t id, secret, tasks_digest;
    int64_t hb_every_ms, next_hb_ms;
    struct sim_job *jobs;       /* g_n_clients of them (every job may come to every worker) */
    int n_jobs;
    int report_from;            /* where the next heartbeat starts looking for jobs to report */
    uint64_t refused[8];        /* jobs not of this generator (a real client's beside it): refused as a real
                                   worker refuses a job it cannot serve, in every heartbeat (the heartbeat
                                   thread's) */
    int n_refused;
};

struct client {
    struct spw_rpc_channel *ch;
    uint64_t job, secret, workers_digest;   /* as clients do: the worker list again only when it changed */
    int64_t next_hb_ms;
    pthread_mutex_t mu;         /* acks: workers' threads add, the client's thread sends */
    Spillway__V1__SplitRef *acks;
    int n_acks, cap_acks;
    int64_t *received;          /* per worker index, elements its stream brought (atomics; NULL with --bare) */
    int64_t consumed, consumed_at_hb;   /* elements acked in all, and at the last heartbeat (client thread) */
};

static const char *g_target;
static int g_split_ms = 1000, g_idle_ms = 50, g_backoff = 1;
static struct client *g_clients;
static int g_n_clients;
static struct sim_worker *g_workers;
static int g_n_workers, g_split_size = 64, g_bare;
static volatile int g_stop;

static void record(struct stat_set *st, int status, int64_t t0)
{
    st->calls++;
    st->errors += status != SPW_RPC_OK;
    st->deadline += status == SPW_RPC_DEADLINE_EXCEEDED;
    st->exhausted += status == SPW_RPC_RESOURCE_EXHAUSTED;
    if (st->n_lat == st->cap_lat) {
        st->cap_lat = st->cap_lat ? 2 * st->cap_lat : 4096;
        st->lat_us = realloc(st->lat_us, sizeof *st->lat_us * (size_t)st->cap_lat);
    }
    int64_t us = (spw_now_ns() - t0) / 1000;
    st->lat_us[st->n_lat++] = (int32_t)(us > INT32_MAX ? INT32_MAX : us);
}

static struct client *client_of(uint64_t job)
{
    for (int i = 0; i < g_n_clients; i++)
        if (g_clients[i].job == job)
            return &g_clients[i];
    return NULL;
}

static void ack_later(uint64_t job, uint64_t epoch, uint64_t split, int worker)
{
    struct client *c = client_of(job);
    if (!c)
        return;
    if (c->received)
        __atomic_add_fetch(&c->received[worker], g_split_size, __ATOMIC_RELAXED);
    pthread_mutex_lock(&c->mu);
    if (c->n_acks == c->cap_acks) {
        c->cap_acks = c->cap_acks ? 2 * c->cap_acks : 64;
        c->acks = realloc(c->acks, sizeof *c->acks * (size_t)c->cap_acks);
    }
    spillway__v1__split_ref__init(&c->acks[c->n_acks]);
    c->acks[c->n_acks].epoch = epoch;
    c->acks[c->n_acks].split = split;
    c->n_acks++;
    pthread_mutex_unlock(&c->mu);
}

static int register_worker(struct sim_worker *w, int k, struct stat_set *st)
{
    Spillway__V1__RegisterWorkerRequest r = SPILLWAY__V1__REGISTER_WORKER_REQUEST__INIT;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", 20000 + k % 40000);
    r.address = addr;
    r.threads = 2;
    r.protocol_version = SPW_PROTOCOL_VERSION;
    r.build = "disp_load";
    Spillway__V1__RegisterWorkerResponse *o = NULL;
    int64_t t0 = spw_now_ns();
    int rc = spw_rpc_call_reply(w->ch, SPW_PATH(REGISTER_WORKER), &r.base, RPC_TIMEOUT_MS,
                                &spillway__v1__register_worker_response__descriptor, (ProtobufCMessage **)&o, NULL, 0);
    record(st, rc, t0);
    if (rc != SPW_RPC_OK)
        return -1;
    w->id = o->worker_id;
    w->secret = o->secret;
    w->hb_every_ms = o->heartbeat_interval_ms > 0 ? o->heartbeat_interval_ms : 1000;
    protobuf_c_message_free_unpacked(&o->base, NULL);
    return 0;
}

/* When a worker that has just learnt a job first leases it: spread over one --split-ms, as real workers
 * join jobs and finish splits at different moments. Without it every (worker, job) pair asks at the same
 * instant each --split-ms: a burst of workers x jobs calls that a closed-loop generator stretches over the
 * window, so a short window measured the start-up burst rather than the steady rate. */
static int64_t lease_phase_ms(uint64_t worker, uint64_t job)
{
    uint64_t h = worker * 0x9E3779B97F4A7C15ull ^ job * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (int64_t)(h % (uint64_t)g_split_ms);
}

static void worker_heartbeat(struct sim_worker *w, int64_t now, struct stat_set *st)
{
    Spillway__V1__WorkerHeartbeatRequest r = SPILLWAY__V1__WORKER_HEARTBEAT_REQUEST__INIT;
    r.worker_id = w->id;
    r.secret = w->secret;
    r.tasks_digest = w->tasks_digest;       /* as workers do: the whole list only when it changed */
    Spillway__V1__ProducerProgress prog[MAX_REPORTED], *progp[MAX_REPORTED];
    const int n_jobs = __atomic_load_n(&w->n_jobs, __ATOMIC_ACQUIRE);
    /* As workers report (worker/jobs.c): a job whose count changed, or unreported for PROGRESS_REFRESH_MS; at
     * most MAX_REPORTED, the rest from where this one stopped next time. */
    const int from = w->report_from;
    for (int i = 0; !g_bare && i < n_jobs && r.n_jobs < MAX_REPORTED; i++) {
        struct sim_job *j = &w->jobs[(from + i) % n_jobs];
        const int64_t done = __atomic_load_n(&j->splits_done, __ATOMIC_RELAXED);
        if (done == j->reported_done && j->reported_ms && now - j->reported_ms < PROGRESS_REFRESH_MS)
            continue;
        Spillway__V1__ProducerProgress *p = &prog[r.n_jobs];
        spillway__v1__producer_progress__init(p);
        p->job = j->id;
        p->elements = done * g_split_size;
        p->bytes = p->elements * ELEMENT_BYTES;
        p->cpu_ns = p->elements * WORKER_NS_PER_ELEMENT;
        progp[r.n_jobs++] = p;
        j->reported_done = done;
        j->reported_ms = now;
        w->report_from = (from + i + 1) % n_jobs;
    }
    r.jobs = progp;
    Spillway__V1__JobRefusal ref[8], *refp[8];
    for (int i = 0; i < w->n_refused; i++) {
        spillway__v1__job_refusal__init(&ref[i]);
        ref[i].job = w->refused[i];
        ref[i].reason = (char *)"disp_load serves only its own jobs";
        refp[i] = &ref[i];
    }
    r.n_cannot_serve = (size_t)w->n_refused;
    r.cannot_serve = refp;
    r.buffered_bytes = g_bare ? 0 : (int64_t)(n_jobs < MAX_REPORTED ? n_jobs : MAX_REPORTED) * LEASE_AHEAD * ELEMENT_BYTES;
    Spillway__V1__WorkerHeartbeatResponse *o = NULL;
    int64_t t0 = spw_now_ns();
    int rc = spw_rpc_call_reply(w->ch, SPW_PATH(WORKER_HEARTBEAT), &r.base, RPC_TIMEOUT_MS,
                                &spillway__v1__worker_heartbeat_response__descriptor, (ProtobufCMessage **)&o, NULL,
                                0);
    record(st, rc, t0);
    w->next_hb_ms = now + w->hb_every_ms;
    if (rc != SPW_RPC_OK)
        return;
    if (!o->tasks_unchanged)
        w->tasks_digest = o->tasks_digest;
    /* New jobs join (published to the worker's lease thread by the release store of n_jobs); the held leases
     * of known ones stay, theirs alone. */
    for (size_t i = 0; i < o->n_tasks; i++) {
        if (!client_of(o->tasks[i]->job)) {
            int k = 0;
            while (k < w->n_refused && w->refused[k] != o->tasks[i]->job)
                k++;
            if (k == w->n_refused && k < (int)(sizeof w->refused / sizeof w->refused[0]))
                w->refused[w->n_refused++] = o->tasks[i]->job;
            continue;
        }
        const int n = __atomic_load_n(&w->n_jobs, __ATOMIC_RELAXED);
        int k = 0;
        while (k < n && w->jobs[k].id != o->tasks[i]->job)
            k++;
        if (k == n && k < g_n_clients) {
            memset(&w->jobs[k], 0, sizeof w->jobs[k]);
            w->jobs[k].id = o->tasks[i]->job;
            w->jobs[k].secret = o->tasks[i]->job_secret;
            w->jobs[k].manifest = o->tasks[i]->manifest_hash;
            w->jobs[k].next_lease_ms = now + lease_phase_ms(w->id, w->jobs[k].id);
            __atomic_store_n(&w->n_jobs, n + 1, __ATOMIC_RELEASE);
        }
    }
    protobuf_c_message_free_unpacked(&o->base, NULL);
}

static void lease(struct sim_worker *w, struct sim_job *j, int64_t now, struct stat_set *st)
{
    Spillway__V1__LeaseSplitRequest r = SPILLWAY__V1__LEASE_SPLIT_REQUEST__INIT;
    r.job = j->id;
    r.worker_id = w->id;
    r.worker_secret = w->secret;
    r.job_secret = j->secret;
    r.manifest_hash = j->manifest;
    r.max_splits = LEASE_AHEAD - j->n_held;
    Spillway__V1__LeaseSplitResponse *o = NULL;
    int64_t t0 = spw_now_ns();
    int rc = spw_rpc_call_reply(w->ch, SPW_PATH(LEASE_SPLIT), &r.base, RPC_TIMEOUT_MS,
                                &spillway__v1__lease_split_response__descriptor, (ProtobufCMessage **)&o, NULL, 0);
    record(st, rc, t0);
    int wait_ms = g_idle_ms;
    for (int k = 4; g_backoff && k < j->idle && wait_ms < 800; k++)
        wait_ms *= 2;
    j->next_lease_ms = now + (wait_ms > 800 ? 800 : wait_ms);
    j->idle++;
    if (rc != SPW_RPC_OK)
        return;
    for (size_t i = 0; i < o->n_leases && j->n_held < LEASE_AHEAD; i++) {
        /* the first held split is being produced; the next starts when it is done */
        int64_t start = j->n_held ? j->held[j->n_held - 1].done_at : now;
        j->held[j->n_held++] = (struct held){o->leases[i]->epoch, o->leases[i]->split, start + g_split_ms};
    }
    if (o->n_leases > 0) {
        j->next_lease_ms = j->held[0].done_at;      /* ask again when a slot frees */
        j->idle = 0;
    }
    protobuf_c_message_free_unpacked(&o->base, NULL);
}

/* One worker's heartbeat if due at `now`; returns when it is next due. */
static int64_t step_worker_hb(struct sim_worker *w, int64_t now, struct stat_set *st)
{
    if (now >= w->next_hb_ms)
        worker_heartbeat(w, now, &st[M_WORKER_HB]);
    return w->next_hb_ms;
}

/* One worker's due leases at `now`; returns when they are next due. */
static int64_t step_worker(struct sim_worker *w, int64_t now, struct stat_set *st)
{
    int64_t next = now + 50;
    const int n_jobs = __atomic_load_n(&w->n_jobs, __ATOMIC_ACQUIRE);
    for (int k = 0; k < n_jobs && !g_stop; k++) {
        struct sim_job *j = &w->jobs[k];
        while (j->n_held > 0 && j->held[0].done_at <= now) {     /* produced: its client acks it */
            ack_later(j->id, j->held[0].epoch, j->held[0].split, w->index);
            __atomic_add_fetch(&j->splits_done, 1, __ATOMIC_RELAXED);
            memmove(&j->held[0], &j->held[1], sizeof j->held[0] * (size_t)(--j->n_held));
        }
        if (j->n_held < LEASE_AHEAD && now >= j->next_lease_ms)
            lease(w, j, now, &st[M_LEASE]);
        if (j->next_lease_ms < next)
            next = j->next_lease_ms;
    }
    return next;
}

static int64_t step_client(struct client *c, int64_t now, struct stat_set *st)
{
    if (now < c->next_hb_ms)
        return c->next_hb_ms;
    Spillway__V1__ClientHeartbeatRequest r = SPILLWAY__V1__CLIENT_HEARTBEAT_REQUEST__INIT;
    r.job = c->job;
    r.incarnation = 1;
    r.job_secret = c->secret;
    pthread_mutex_lock(&c->mu);
    Spillway__V1__SplitRef **refs = malloc(sizeof *refs * (size_t)(c->n_acks + 1));
    Spillway__V1__SplitRef *acks = c->acks;
    const int n = c->n_acks;
    c->acks = NULL;
    c->n_acks = c->cap_acks = 0;
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < n; i++)
        refs[i] = &acks[i];
    r.n_acked = (size_t)n;
    r.acked = refs;
    r.workers_digest = c->workers_digest;
    /* As a real client: its trainer's rate, wait and CPU, its own threads' progress (none: every split is
     * the workers'), and what arrived from each worker's stream. */
    Spillway__V1__ProducerProgress own = SPILLWAY__V1__PRODUCER_PROGRESS__INIT, rx[MAX_REPORTED], *rxp[MAX_REPORTED];
    c->consumed += (int64_t)n * g_split_size;
    if (c->received) {
        own.job = c->job;
        r.own = &own;
        r.consumed_per_s = (double)(c->consumed - c->consumed_at_hb) * 1000.0 / CLIENT_HEARTBEAT_MS;
        r.wait_fraction = 0.05;
        r.cpu_cores = 1.0;
        for (int w = 0; w < g_n_workers && r.n_received < MAX_REPORTED; w++) {
            const int64_t got = __atomic_load_n(&c->received[w], __ATOMIC_RELAXED);
            if (!got)
                continue;
            spillway__v1__producer_progress__init(&rx[r.n_received]);
            rx[r.n_received].job = c->job;
            rx[r.n_received].worker_id = g_workers[w].id;
            rx[r.n_received].elements = got;
            rx[r.n_received].bytes = got * ELEMENT_BYTES;
            rx[r.n_received].cpu_ns = got * CLIENT_NS_PER_ELEMENT;
            rxp[r.n_received] = &rx[r.n_received];
            r.n_received++;
        }
        r.received = rxp;
    }
    c->consumed_at_hb = c->consumed;
    Spillway__V1__ClientHeartbeatResponse *o = NULL;
    int64_t t0 = spw_now_ns();
    int rc = spw_rpc_call_reply(c->ch, SPW_PATH(CLIENT_HEARTBEAT), &r.base, RPC_TIMEOUT_MS,
                                &spillway__v1__client_heartbeat_response__descriptor, (ProtobufCMessage **)&o, NULL,
                                0);
    record(st, rc, t0);
    if (o && !o->workers_unchanged)
        c->workers_digest = o->workers_digest;
    if (o)
        protobuf_c_message_free_unpacked(&o->base, NULL);
    free(refs);
    free(acks);
    c->next_hb_ms = now + CLIENT_HEARTBEAT_MS;
    return c->next_hb_ms;
}

struct thread_arg {
    bool heartbeats;            /* this thread's: the heartbeats of its workers and clients; else leases */
    struct sim_worker *workers;
    int n_workers;
    struct client *clients;
    int n_clients;
    struct stat_set st[M_N];
};

static void *thread_main(void *arg)
{
    struct thread_arg *a = arg;
    while (!g_stop) {
        int64_t now = spw_now_ms(), next = now + 50;
        for (int i = 0; i < a->n_workers && !g_stop; i++) {
            int64_t t = a->heartbeats ? step_worker_hb(&a->workers[i], now, a->st)
                                      : step_worker(&a->workers[i], now, a->st);
            next = t < next ? t : next;
            now = spw_now_ms();
        }
        for (int i = 0; i < a->n_clients && !g_stop; i++) {
            int64_t t = step_client(&a->clients[i], now, &a->st[M_CLIENT_HB]);
            next = t < next ? t : next;
        }
        now = spw_now_ms();
        if (next > now)
            usleep((useconds_t)((next - now) * 1000));
    }
    return NULL;
}

static int create_job(struct client *c, const char *data, int split_size, bool planned, struct stat_set *st)
{
    Spillway__V1__Pipeline p = SPILLWAY__V1__PIPELINE__INIT;
    Spillway__V1__Source src = SPILLWAY__V1__SOURCE__INIT;
    Spillway__V1__Batch batch = SPILLWAY__V1__BATCH__INIT;
    Spillway__V1__Op op = SPILLWAY__V1__OP__INIT, *ops[1] = {&op};
    src.format = SPILLWAY__V1__SOURCE_FORMAT__SOURCE_FORMAT_IMAGE_FOLDER;
    src.opt_format_case = SPILLWAY__V1__SOURCE__OPT_FORMAT_FORMAT;
    src.path = (char *)data;
    src.epochs = 0;                         /* forever: the load does not end with an epoch */
    src.opt_epochs_case = SPILLWAY__V1__SOURCE__OPT_EPOCHS_EPOCHS;
    op.op = SPILLWAY__V1__OP_KIND__OP_KIND_DECODE_JPEG;
    batch.size = 16;
    batch.opt_size_case = SPILLWAY__V1__BATCH__OPT_SIZE_SIZE;
    p.source = &src;
    p.n_ops = 1;
    p.ops = ops;
    p.batch = &batch;
    Spillway__V1__CreateJobRequest r = SPILLWAY__V1__CREATE_JOB_REQUEST__INIT;
    Spillway__V1__ClientFacts facts = SPILLWAY__V1__CLIENT_FACTS__INIT;
    r.pipeline = &p;
    r.protocol_version = SPW_PROTOCOL_VERSION;
    r.cut = planned ? -2 : -1;
    if (planned)
        r.client = &facts;
    r.incarnation = 1;
    r.split_size = split_size;
    Spillway__V1__CreateJobResponse *o = NULL;
    char msg[512] = "";
    int64_t t0 = spw_now_ns();
    int rc = spw_rpc_call_reply(c->ch, SPW_PATH(CREATE_JOB), &r.base, 120000,
                                &spillway__v1__create_job_response__descriptor, (ProtobufCMessage **)&o, msg,
                                sizeof msg);
    record(st, rc, t0);
    if (rc != SPW_RPC_OK) {
        fprintf(stderr, "disp_load: CreateJob: %s\n", msg);
        return -1;
    }
    c->job = o->job;
    c->secret = o->job_secret;
    protobuf_c_message_free_unpacked(&o->base, NULL);
    return 0;
}

/* utime + stime of pid in seconds, and its RSS in bytes. */
static int proc_usage(int pid, double *cpu_s, int64_t *rss)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    long rss_pages = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d %*u %*u %ld",
                     &ut, &st, &rss_pages) != 3)
        return -1;
    *cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    *rss = rss_pages * sysconf(_SC_PAGESIZE);
    return 0;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int alive_workers(void)
{
    struct spw_rpc_channel *ch;
    if (spw_rpc_channel_create(g_target, NULL, &ch))
        return -1;
    Spillway__V1__ListWorkersRequest r = SPILLWAY__V1__LIST_WORKERS_REQUEST__INIT;
    Spillway__V1__ListWorkersResponse *o = NULL;
    int alive = -1;
    if (spw_rpc_call_reply(ch, SPW_PATH(LIST_WORKERS), &r.base, 30000,
                           &spillway__v1__list_workers_response__descriptor, (ProtobufCMessage **)&o, NULL,
                           0) == SPW_RPC_OK) {
        alive = 0;
        for (size_t i = 0; i < o->n_workers; i++)
            alive += o->workers[i]->alive;
        protobuf_c_message_free_unpacked(&o->base, NULL);
    }
    spw_rpc_channel_destroy(ch);
    return alive;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"dispatcher", required_argument, NULL, 'd'}, {"data", required_argument, NULL, 'D'},
        {"workers", required_argument, NULL, 'w'},    {"jobs", required_argument, NULL, 'j'},
        {"split-size", required_argument, NULL, 's'}, {"seconds", required_argument, NULL, 't'},
        {"threads", required_argument, NULL, 'T'},    {"split-ms", required_argument, NULL, 'm'},
        {"idle-poll-ms", required_argument, NULL, 'i'}, {"pid", required_argument, NULL, 'p'},
        {"planned", no_argument, NULL, 'P'},          {"no-backoff", no_argument, NULL, 'B'},
        {"hb-threads", required_argument, NULL, 'H'}, {"bare", no_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    const char *data = NULL;
    int n_workers = 10, n_jobs = 1, split_size = 64, seconds = 10, lease_threads = 8, hb_threads = 2, pid = 0;
    bool planned = false;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': g_target = optarg; break;
        case 'D': data = optarg; break;
        case 'w': n_workers = atoi(optarg); break;
        case 'j': n_jobs = atoi(optarg); break;
        case 's': split_size = atoi(optarg); break;
        case 't': seconds = atoi(optarg); break;
        case 'T': lease_threads = atoi(optarg); break;
        case 'H': hb_threads = atoi(optarg); break;
        case 'm': g_split_ms = atoi(optarg); break;
        case 'i': g_idle_ms = atoi(optarg); break;
        case 'p': pid = atoi(optarg); break;
        case 'P': planned = true; break;
        case 'B': g_backoff = 0; break;
        case 'b': g_bare = 1; break;
        default:
            fprintf(stderr, "usage: see the comment at the top of tests/tools/disp_load.c\n");
            return 2;
        }
    }
    if (!g_target || !data || n_workers < 1 || n_jobs < 1 || n_jobs > MAX_JOBS || lease_threads < 1 ||
        hb_threads < 1 || seconds < 1 || g_split_ms < 1) {
        fprintf(stderr, "disp_load: --dispatcher, --data, --workers >= 1, --jobs in [1, %d], --threads >= 1, "
                "--hb-threads >= 1, --split-ms >= 1\n", MAX_JOBS);
        return 2;
    }
    const int threads = lease_threads + hb_threads;
    g_split_size = split_size;
    g_n_workers = n_workers;
    spw_rpc_init();
    struct spw_rpc_channel_opts co = {.private_connection = true};
    struct thread_arg *ta = calloc((size_t)threads, sizeof *ta);
    struct sim_worker *workers = g_workers = calloc((size_t)n_workers, sizeof *workers);
    g_clients = calloc((size_t)n_jobs, sizeof *g_clients);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    if (!ta || !workers || !g_clients || !tids)
        return 1;
    struct stat_set setup[M_N] = {0};
    /* Jobs first: creating 100 ImageNet-sized ones takes seconds, and workers registered before them would
     * be declared dead meanwhile (nothing heartbeats them until the threads start). */
    const int64_t t_create = spw_now_ns();
    for (int i = 0; i < n_jobs; i++) {
        pthread_mutex_init(&g_clients[i].mu, NULL);
        if (!g_bare && !(g_clients[i].received = calloc((size_t)n_workers, sizeof *g_clients[i].received)))
            return 1;
        if (spw_rpc_channel_create(g_target, &co, &g_clients[i].ch) ||
            create_job(&g_clients[i], data, split_size, planned, &setup[M_CREATE]))
            return 1;
        g_n_clients++;
    }
    const double create_s = (double)(spw_now_ns() - t_create) * 1e-9;
    for (int i = 0; i < n_workers; i++) {
        workers[i].index = i;
        if (!(workers[i].jobs = calloc((size_t)n_jobs, sizeof *workers[i].jobs)))
            return 1;
        if (spw_rpc_channel_create(g_target, &co, &workers[i].ch) || register_worker(&workers[i], i, &setup[M_REGISTER])) {
            fprintf(stderr, "disp_load: worker %d did not register\n", i);
            return 1;
        }
    }
    for (int t = 0; t < threads; t++) {      /* shares of the workers' leases; of the heartbeats */
        const bool hb = t >= lease_threads;
        const int k = hb ? t - lease_threads : t, of = hb ? hb_threads : lease_threads;
        const int w0 = (int)((int64_t)n_workers * k / of), w1 = (int)((int64_t)n_workers * (k + 1) / of);
        const int c0 = (int)((int64_t)n_jobs * k / of), c1 = (int)((int64_t)n_jobs * (k + 1) / of);
        ta[t].heartbeats = hb;
        ta[t].workers = workers + w0;
        ta[t].n_workers = w1 - w0;
        ta[t].clients = g_clients + c0;
        ta[t].n_clients = hb ? c1 - c0 : 0;
    }
    double cpu0 = 0, cpu1 = 0;
    int64_t rss = 0;
    if (pid)
        proc_usage(pid, &cpu0, &rss);
    const int64_t t0 = spw_now_ns();
    for (int t = 0; t < threads; t++)
        pthread_create(&tids[t], NULL, thread_main, &ta[t]);
    sleep((unsigned)seconds);
    g_stop = 1;
    for (int t = 0; t < threads; t++)
        pthread_join(tids[t], NULL);
    const double secs = (double)(spw_now_ns() - t0) * 1e-9;
    if (pid)
        proc_usage(pid, &cpu1, &rss);
    const int alive = alive_workers();

    printf("{\"workers\": %d, \"jobs\": %d, \"split_size\": %d, \"seconds\": %.2f, \"create_jobs_s\": %.3f, "
           "\"dispatcher_cores\": %.3f, \"dispatcher_rss_mb\": %.1f, \"alive_at_end\": %d, "
           "\"leases_due_per_s\": %.1f, \"real_peers\": %s, \"methods\": {",
           n_workers, n_jobs, split_size, secs, create_s, pid ? (cpu1 - cpu0) / secs : -1.0,
           (double)rss / (1 << 20), alive, (double)n_workers * n_jobs * 1000.0 / g_split_ms, g_bare ? "false" : "true");
    for (int m = M_WORKER_HB; m <= M_CLIENT_HB; m++) {
        struct stat_set all = {0};
        for (int t = 0; t < threads; t++) {
            struct stat_set *s = &ta[t].st[m];
            all.calls += s->calls;
            all.errors += s->errors;
            all.deadline += s->deadline;
            all.exhausted += s->exhausted;
            all.lat_us = realloc(all.lat_us, sizeof *all.lat_us * (size_t)(all.n_lat + s->n_lat + 1));
            memcpy(all.lat_us + all.n_lat, s->lat_us, sizeof *s->lat_us * (size_t)s->n_lat);
            all.n_lat += s->n_lat;
        }
        qsort(all.lat_us, (size_t)all.n_lat, sizeof *all.lat_us, cmp_i32);
        const double p50 = all.n_lat ? all.lat_us[all.n_lat / 2] / 1000.0 : 0;
        const double p99 = all.n_lat ? all.lat_us[(all.n_lat * 99) / 100] / 1000.0 : 0;
        printf("%s\"%s\": {\"per_s\": %.1f, \"errors\": %lld, \"deadline_exceeded\": %lld, "
               "\"resource_exhausted\": %lld, \"p50_ms\": %.2f, \"p99_ms\": %.2f}", m == M_WORKER_HB ? "" : ", ",
               method_names[m], (double)all.calls / secs, (long long)all.errors, (long long)all.deadline,
               (long long)all.exhausted, p50, p99);
        free(all.lat_us);
    }
    printf("}}\n");
    for (int i = 0; i < n_workers; i++) {
        spw_rpc_channel_destroy(workers[i].ch);
        free(workers[i].jobs);
    }
    for (int i = 0; i < n_jobs; i++)
        spw_rpc_channel_destroy(g_clients[i].ch);
    spw_rpc_shutdown();
    return 0;
}
