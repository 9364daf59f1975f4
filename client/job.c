/* client/job.c - libspillway's public API (spillway/client.h). In-process jobs wrap the executor. Service
 * jobs tie together the dispatcher session and worker streams (remote.h), the prefetch buffer (assembler.c)
 * and the client's own threads, which lease whole splits as the job's client producer; the consumer thread
 * also rescues a stalled head batch by computing its missing elements (dedupe makes any copy safe).
 * Thread model: one consumer thread calls next/release/stats/destroy; local threads are owned here. */
#include "spillway/client.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "client/assembler.h"
#include "client/probe.h"
#include "client/remote.h"
#include "client/rest_of.h"
#include "lib/clock.h"
#include "lib/cpulimit.h"
#include "lib/err.h"
#include "lib/heap.h"
#include "lib/log.h"
#include "pipeline/backend.h"
#include "pipeline/compress.h"
#include "pipeline/element.h"
#include "pipeline/executor.h"
#include "pipeline/fusion.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/manifest.h"
#include "pipeline/mix.h"
#include "pipeline/order.h"
#include "pipeline/planner.h"
#include "pipeline/produce.h"
#include "pipeline/profile.h"
#include "pipeline/spec_proto.h"

#define DEFAULT_PREFETCH ((int64_t)256 << 20)
#define DEFAULT_CREDIT ((int64_t)64 << 20)
#define DEFAULT_RESCUE_MS 3000
#define POLL_MS 100
#define LOCAL_NICE 19
#define MICROBATCH 16          /* places a backend makes at a time */
#define PLAN_SAMPLES 256       /* fewer are biased: the first elements cost ~20% more here */
#define GPU_PLAN_SAMPLES 64    /* the GPU producer's: 15 micro-batches after a warm-up */
/* Client CPU per received byte besides the copy, from scripts/bench/stream.sh. The probe measures its own
 * (sent along as recv_ns_per_byte) but read 1.3-2 ns/byte on a loaded 2-core VM where the bench reads 0.3:
 * not trusted for planning until the evaluation says which is right. */
#define RECV_NS_PER_BYTE 0.3
#define PROBE_MS 600
#define PROBE_DISPATCHER_WAIT_MS 300000     /* opts.dispatcher_wait_ms 0: as CreateJob (client/attach.c), for a
                                               resume; before a job exists, 30 s */
#define PROBE_CREATE_WAIT_MS 30000
#define PLAN_LOCAL_OFF 0.02    /* a planned local share below this: the client produces no splits itself */
#define QUOTA_LOCAL_MIN 0.1     /* under a binding CPU quota, own threads run only for a planned share this big */
#define IDLE_HELP_MS 100        /* an idle local thread computes head elements missing this long */
#define OWN_RESCUE_MS 300       /* the head waits this long on a split the client's own (low-priority) threads
                                   hold: they may be starved of CPU by busier threads, so it is computed here */

struct spw_job {
    struct spw_job_opts o;          /* its strings are the job's own copies (o_strings) */
    char *o_strings[7];
    pid_t pid;                      /* the process that created the job (fork detection) */
    struct spw_pipeline_spec *spec;
    struct spw_source *src;
    char errmsg[512];
    struct spw_executor *ex;        /* in-process */
    struct spw_backend *gpu;        /* opts.gpu: the executor's GPU thread, or own thread 0, makes elements on it */
    struct remote *r;               /* service */
    struct remote_job rj;
    struct assembler *a;
    struct spw_element_ctx ctx;
    bool ctx_ok;
    struct spw_producer prod;       /* this client's own threads make elements through it */
    const struct spw_backend *backends[2];  /* ... on these: [GPU, CPU] for own thread 0 with a GPU, the rest
                                               [CPU] (backends + gpu_rows - 1) */
    int gpu_rows;                   /* 1: own thread 0 makes micro-batches on the GPU first */
    struct spw_order order;
    int64_t *missing;               /* head rescue scratch: batch.size positions */
    pthread_t local[256];
    int n_local, n_held;
    int n_planned;                  /* own threads the plan runs; the rest wait for the job to be handed back */
    pthread_mutex_t mu;
    bool stopping;
    double planned_cores;           /* C in the facts this client sent */
    struct {                        /* under mu: the split each local thread is producing (count 0: none) */
        uint64_t epoch;
        int64_t first, count;
    } held[256];
    struct spw_job_stats st;
    int64_t created_ns;             /* when spw_job_create made it */
    int64_t consumed, wait_ns;      /* atomics: the trainer's elements taken and ns waited in next() */
    int64_t starved_ns;             /* atomic: ns the trainer's thread was ready between next() calls but had
                                       no CPU (its run delay: a spent quota's throttling, busy cores) */
    int64_t exit_delay_ns;          /* the consuming thread's run delay when it last left next() ... */
    pid_t exit_tid;                 /* ... and that thread (0: none yet); the consuming thread's only */
    int64_t empty_batches;          /* in-process: batches whose every sample was skipped, not delivered but
                                       passed (a checkpoint counts them) */
    int64_t own_cpu_ns;             /* atomic: CPU the client's own production took (re-planning's f) */
    struct spw_rpc_tls *tls;        /* loaded from o.tls_* (NULL: plaintext, or the process's default) */
    struct spw_rpc_channel_opts peer;   /* how to call the dispatcher and workers: token, TLS */
    struct probe_result *links;     /* a planned job's links, probed before the workers profile (open_common) */
    bool rest_of;                   /* opts.rest_of: the rest of an old run's epoch (rest) */
    struct rest_of_plan rest;
};

void spw_job_opts_init(struct spw_job_opts *o)
{
    memset(o, 0, sizeof *o);
    o->local_cores = -1;
    o->cut = SPW_CUT_DEFAULT;
}

int spw_job_cut_parse(const char *s, int *cut)
{
    if (!s)
        return -EINVAL;
    if (!strcmp(s, "auto"))
        return *cut = SPW_CUT_AUTO, 0;
    if (!strcmp(s, "all"))
        return *cut = SPW_CUT_ALL, 0;
    char *end;
    errno = 0;
    long k = strtol(s, &end, 10);
    if (*s < '0' || *s > '9' || *end || errno || k > 255)
        return -EINVAL;
    *cut = (int)k;
    return 0;
}

int spw_job_compress_parse(const char *s, int *compress)
{
    if (!s)
        return -EINVAL;
    if (!strcmp(s, "auto"))
        return *compress = SPW_COMPRESS_AUTO, 0;
    if (!strcmp(s, "off"))
        return *compress = SPW_COMPRESS_OFF, 0;
    if (!strcmp(s, "zstd"))
        return *compress = SPW_ZSTD_DEFAULT_LEVEL, 0;
    if (strncmp(s, "zstd:", 5) != 0 || s[5] < '0' || s[5] > '9')
        return -EINVAL;
    char *end;
    errno = 0;
    long level = strtol(s + 5, &end, 10);
    if (*end || errno || level < SPW_ZSTD_MIN_LEVEL || level > SPW_ZSTD_MAX_LEVEL)
        return -EINVAL;
    *compress = (int)level;
    return 0;
}

/* The cut a service job runs with: the caller's, else $SPILLWAY_CUT's, else planned. */
static int resolve_cut(int cut, int *out, char *err, size_t errlen)
{
    const char *env = getenv("SPILLWAY_CUT");
    if (cut != SPW_CUT_DEFAULT)
        *out = cut;
    else if (!env || !*env)
        *out = SPW_CUT_AUTO;
    else if (spw_job_cut_parse(env, out) != 0)
        return spw_fail(err, errlen, -EINVAL, "SPILLWAY_CUT=\"%.64s\" is not auto, all or a group boundary in "
                        "[0, 255]", env);
    return 0;
}

static bool job_stopping(struct spw_job *j)
{
    pthread_mutex_lock(&j->mu);
    bool s = j->stopping;
    pthread_mutex_unlock(&j->mu);
    return s;
}

/* Places of one epoch this client's threads make, a micro-batch at a time through the backends: each place
 * nobody has claimed yet is made, claimed and put in its batch (or parked beyond the window). A place is
 * claimed only when the element's final write is due (its last op asks for memory, lazy_place): that write
 * goes straight into the batch (~40 us less per 600 KB element than computing it here and copying it), and
 * a claimed place, which holds its batch back, is held only for that last op (these threads run at low
 * priority and may wait long for the CPU while busier threads run). */
struct local_mb;
struct lazy_claim {
    struct local_mb *m;
    int k;
    bool claimed;
    enum asm_claim c;
    struct asm_ticket t;
};
struct local_mb {
    struct spw_job *j;
    uint64_t epoch;
    bool wait;                  /* wait for each place's prefetch window (leased splits) */
    const int64_t *base;        /* every place of the run */
    int n_first;                /* the first n_first delivered add to *first, the others to *rest */
    int64_t *first, *rest;
    const int64_t *places;      /* the micro-batch running now: its places, samples ... */
    const int64_t *samples;
    int64_t *count[MICROBATCH]; /* ... and what each delivered element adds to */
    struct lazy_claim claim[MICROBATCH];
    struct spw_element_dest dest[MICROBATCH];
};

/* spw_element_dest.place for element k: claim its place now; its batch memory when it is ours to place,
 * else NULL (the runner allocates: parked, or dropped as a duplicate, in local_done). */
static void *lazy_place(void *opaque, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    struct lazy_claim *lc = opaque;
    struct local_mb *m = lc->m;
    if (!lc->claimed)
        lc->c = asm_claim_place(m->j->a, m->epoch, m->places[lc->k], &lc->t);
    lc->claimed = true;
    return lc->c == ASM_PLACE ? asm_dst(m->j->a, &lc->t, dt, ndim, shape) : NULL;
}

static const struct spw_element_dest *local_dest(void *opaque, int k)
{
    struct local_mb *m = opaque;
    m->claim[k] = (struct lazy_claim){.m = m, .k = k};
    m->dest[k] = (struct spw_element_dest){lazy_place, &m->claim[k], m->j->spec->batch.layout};
    return &m->dest[k];
}

static bool local_want(void *opaque, int k)
{
    struct local_mb *m = opaque;
    if (job_stopping(m->j))
        return false;
    if (m->wait)
        asm_wait_window(m->j->a, m->epoch, m->places[k], 1000);
    return !asm_claimed(m->j->a, m->epoch, m->places[k]);
}

static void local_done(void *opaque, int k, int rc, struct spw_value *v, const char *err)
{
    struct local_mb *m = opaque;
    struct spw_job *j = m->j;
    struct asm_ticket t = m->claim[k].t;
    enum asm_claim c = m->claim[k].claimed ? m->claim[k].c : asm_claim_place(j->a, m->epoch, m->places[k], &t);
    if (c != ASM_DUP && c != ASM_DROP) {
        char msg[1024], ferr[512];
        struct spw_fields *fields = NULL;
        if (rc == 0 && (rc = spw_fields_take(v, j->src, j->spec, m->samples[k], &fields, ferr,
                                             sizeof ferr)) != 0)
            err = ferr;
        if (rc != 0 && spw_produce_failed(&j->prod, m->samples[k], rc, err, NULL, msg, sizeof msg))
            asm_fail(j->a, rc, msg);
        asm_finish(j->a, &t, c, v, fields, rc == 0, m->count[k]);
    }
    spw_value_free(v);
}

static int64_t local_sample(void *opaque, int i)
{
    struct local_mb *m = opaque;
    return spw_order_at(&m->j->order, m->epoch, asm_pos_of(m->j->a, m->base[i]));
}

static void local_begin(void *opaque, int k0, int n, const int64_t *samples)
{
    struct local_mb *m = opaque;
    m->places = m->base + k0;
    m->samples = samples;
    for (int k = 0; k < n; k++)
        m->count[k] = k0 + k < m->n_first ? m->first : m->rest;
}

static bool local_stop(void *opaque)
{
    return job_stopping(((struct local_mb *)opaque)->j);
}

/* Make places[0..n) of epoch (gpu: on the GPU first); the first n_first delivered add to *first, the others
 * to *rest. */
static void make_places(struct spw_job *j, bool gpu, uint64_t epoch, const int64_t *places, int n, bool wait,
                        int n_first, int64_t *first, int64_t *rest)
{
    const struct spw_backend *const *table = gpu ? j->backends : j->backends + j->gpu_rows;
    const int64_t cpu0 = spw_thread_cpu_ns();
    struct local_mb m = {.j = j, .epoch = epoch, .wait = wait, .base = places, .n_first = n_first, .first = first,
                         .rest = rest};
    const struct spw_run run = {.epoch = epoch, .cut = j->ctx.n_groups, .n = n, .mb_max = MICROBATCH,
                                .opaque = &m, .sample_of = local_sample, .begin = local_begin, .stop = local_stop,
                                .want = local_want, .dest = local_dest, .done = local_done};
    spw_backend_run_all(table, gpu ? 2 : 1, &j->prod, &run);
    __atomic_add_fetch(&j->own_cpu_ns, spw_thread_cpu_ns() - cpu0, __ATOMIC_RELAXED);
}

/* Publish the split local thread `me` is producing (NULL: none), for the head rescue. */
static void hold(struct spw_job *j, int me, const struct remote_lease *l)
{
    pthread_mutex_lock(&j->mu);
    j->held[me].epoch = l ? l->epoch : 0;
    j->held[me].first = l ? l->first_position : 0;
    j->held[me].count = l ? l->count : 0;
    pthread_mutex_unlock(&j->mu);
}

/* The head batch's places only this client produces (padding, epochs no lease brings), at once; and with
 * idle set (no split to lease: the epoch's rest is leased to workers, maybe slow ones: a capped link, a busy
 * machine) the rest of its missing elements rather than wait; a worker's late copies are dropped as
 * duplicates. Returns whether it found any. */
static bool help_head(struct spw_job *j, bool gpu, bool idle)
{
    uint64_t epoch;
    int64_t places[64], stalled;
    int n_self;
    int n = asm_head_missing(j->a, &epoch, places, 64, &stalled, &n_self);
    if (!idle || stalled < IDLE_HELP_MS)
        n = n_self;
    make_places(j, gpu, epoch, places, n, false, n, &j->st.local_elements, NULL);
    return n > 0;
}

/* A client thread: lease a split of this job, produce it whole, repeat. Leases only while the prefetch
 * buffer has room for what it makes, so work goes where it is needed (work-conserving). With a GPU, thread 0
 * makes its micro-batches there first (FusionFlow's GPU producer, decoding on this CPU). */
static void *local_main(void *arg)
{
    struct spw_job *j = arg;
    pthread_setname_np(pthread_self(), "spw-local");
    pthread_mutex_lock(&j->mu);
    const int me = j->n_held++;
    pthread_mutex_unlock(&j->mu);
    const bool gpu = me == 0 && j->gpu_rows;
    /* Work-conserving on the client's cores: finishing arrived remote elements (stream threads) and the
     * trainer come first; whole splits here take what is left. Linux nices threads one by one. */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), LOCAL_NICE);
    while (me >= j->n_planned && !job_stopping(j) && !remote_client_only(j->r))
        usleep(100 * 1000);     /* held in reserve: runs once re-planning hands the job back to this client */
    while (!job_stopping(j)) {
        int64_t total, delivered, parked;
        asm_progress(j->a, &total, &delivered, &parked);
        if (parked > j->o.prefetch_bytes / 4) {
            usleep(20 * 1000);
            continue;
        }
        if (help_head(j, gpu, false))
            continue;
        struct remote_lease l;
        int got = remote_lease(j->r, &l);
        if (got == 2)
            break;
        if (got != 1) {
            if (got != 0 || !help_head(j, gpu, true))
                usleep(got == 0 ? 10 * 1000 : 50 * 1000);
            continue;
        }
        hold(j, me, &l);
        for (int k0 = 0; k0 < l.count && !job_stopping(j); k0 += MICROBATCH) {
            int64_t places[MICROBATCH];
            int n = 0;
            for (int k = k0; k < l.count && k < k0 + MICROBATCH; k++)
                if ((places[n] = asm_place_of(j->a, l.first_position + k)) >= 0)
                    n++;        /* not this rank's (the dispatcher leases a client only its own splits) */
            make_places(j, gpu, l.epoch, places, n, true, n, &j->st.local_elements, NULL);
        }
        hold(j, me, NULL);
    }
    return NULL;
}

/* opts.gpu: the GPU backend, or one line saying why the CPU makes everything. */
static void open_gpu(struct spw_job *j)
{
    char why[512];
    if (!j->o.gpu || j->gpu)
        return;
    struct spw_gpu_opts go = {.device = j->o.gpu_device, .mem_budget = j->o.gpu_mem_budget};
    if (spw_gpu_backend_open(&go, &j->gpu, why, sizeof why) == 0)
        spw_log(SPW_LOG_INFO, "client", "gpu: making elements on %s", spw_gpu_backend_describe(j->gpu));
    else
        spw_log(SPW_LOG_WARN, "client", "gpu: device %d not used, the CPU makes every element: %s",
                j->o.gpu_device, why);
}

/* Run the job in this process on the executor (no dispatcher, or the planner said offloading does not pay). */
static int start_in_process(struct spw_job *j, char *err, size_t errlen)
{
    open_gpu(j);
    struct spw_executor_opts eo = {
        .threads = j->o.local_cores > 0 ? j->o.local_cores : (int)sysconf(_SC_NPROCESSORS_ONLN),
        .max_batches = j->o.max_batches, .rank = j->o.rank, .world_size = j->o.world_size,
        .split_size = j->o.split_size, .first_batch = j->o.resume.batches, .gpu = j->gpu,
        .device_batches = j->o.device_batches};
    struct spw_group groups[256];
    j->st.groups = j->st.cut = spw_fusion_groups(j->spec, groups);
    return spw_executor_create(j->spec, j->src, &eo, &j->ex, err, errlen);
}

/* The client's GPU producer for the planner (0, 0: none, or a pipeline it cannot make). */
static void measure_gpu(struct spw_job *j, double *rate, double *cpu_ns)
{
    struct spw_element_ctx ctx;
    char err[256];
    *rate = *cpu_ns = 0;
    if (!j->gpu || j->o.local_cores == 0 || spw_element_ctx_init(&ctx, j->spec) != 0)
        return;
    const struct spw_producer p = {.spec = j->spec, .src = j->src, .ctx = &ctx, .component = "client"};
    if (spw_gpu_backend_measure(j->gpu, &p, GPU_PLAN_SAMPLES, rate, cpu_ns, err, sizeof err) == 0)
        spw_log(SPW_LOG_INFO, "client", "gpu: %.0f elements/s at %.0f us of CPU each, for the planner", *rate,
                *cpu_ns / 1e3);
    else
        spw_log(SPW_LOG_INFO, "client", "gpu: not in the plan: %s", err);
    spw_element_ctx_destroy(&ctx);
}

/* A planned job's links from the workers (a short probe, client/probe.h), measured first: before the
 * client's GetManifest starts the workers' profiles (dispatcher/profile_ahead.h), which would take the
 * workers' CPUs from the probe's senders. */
static int probe_first(struct spw_job *j, char *err, size_t errlen)
{
    const int64_t t0 = spw_now_ns();
    if (!(j->links = calloc(1, sizeof *j->links)))
        return -ENOMEM;
    /* A dispatcher not up yet (a trainer pod that starts first) or restarting is waited for, as CreateJob
     * waits for it (client/attach.c), for dispatcher_wait_ms; logged once. */
    const int64_t wait_ms = j->o.dispatcher_wait_ms > 0 ? j->o.dispatcher_wait_ms
                            : j->o.resume.job           ? PROBE_DISPATCHER_WAIT_MS
                                                        : PROBE_CREATE_WAIT_MS;
    int rc, backoff_ms = 100;
    while ((rc = probe_links(j->o.dispatcher, &j->peer, j->o.max_workers, PROBE_MS, j->links, err, errlen)) ==
               -EAGAIN && (spw_now_ns() - t0) / 1000000 + backoff_ms <= wait_ms) {
        if (backoff_ms == 100)
            spw_log(SPW_LOG_WARN, "client", "dispatcher %s does not answer yet (%s): retrying for up to %lld s",
                    j->o.dispatcher, err, (long long)wait_ms / 1000);
        if (spw_sleep_unless(backoff_ms, j->o.cancel)) {
            snprintf(err, errlen, "interrupted while the dispatcher %s did not answer", j->o.dispatcher);
            return -ECANCELED;
        }
        backoff_ms = backoff_ms < 2000 ? 2 * backoff_ms : 2000;
    }
    if (rc == -EAGAIN) {            /* never answered: say where and for how long */
        char cause[512];
        snprintf(cause, sizeof cause, "%s", err);
        snprintf(err, errlen, "the dispatcher %s did not answer in %lld s (%s)", j->o.dispatcher,
                 (long long)(spw_now_ns() - t0) / 1000000000, cause);
    }
    if (rc)
        return rc;
    spw_log(SPW_LOG_DEBUG, "client", "probed the links from %d workers in %.2f s", j->links->n,
            (double)(spw_now_ns() - t0) / 1e9);
    return 0;
}

/* This client's costs for the planner, measured now on a few elements (DESIGN §7: f and s(k)), and its
 * links (j->links). The facts point into buf, link_msgs/ptrs and j->links. */
static int measure_facts(struct spw_job *j, Spillway__V1__ClientFacts *cf, double *buf,
                         Spillway__V1__WorkerLink *link_msgs, Spillway__V1__WorkerLink **link_ptrs, char *err,
                         size_t errlen)
{
    struct spw_profile *me = malloc(sizeof *me);
    struct spw_plan_input *in = calloc(1, sizeof *in);
    const int cores = j->o.local_cores > 0 ? j->o.local_cores : 1;
    const int64_t t0 = spw_now_ns();
    int rc = me && in ? spw_profile_run(j->spec, j->src, PLAN_SAMPLES, cores, SPW_PROFILE_BUDGET_MS, me, err, errlen)
                      : -ENOMEM;
    spw_log(SPW_LOG_DEBUG, "client", "measured for the planner: itself in %.2f s",
            (double)(spw_now_ns() - t0) / 1e9);
    struct probe_result *links = j->links;
    if (rc == 0 && !links)
        rc = spw_fail(err, errlen, -EINVAL, "no links probed");
    if (rc == 0) {
        spw_plan_client_costs(me, RECV_NS_PER_BYTE, in);
        spillway__v1__client_facts__init(cf);
        cf->n_remote_ns = cf->n_bytes = (size_t)in->n_cuts;
        cf->remote_ns = buf;
        cf->bytes = buf + in->n_cuts;
        memcpy(cf->remote_ns, in->remote_ns, sizeof(double) * (size_t)in->n_cuts);
        memcpy(cf->bytes, in->bytes, sizeof(double) * (size_t)in->n_cuts);
        cf->n_zstd_ratio = cf->n_zstd_compress_ns_per_byte = cf->n_zstd_decompress_ns_per_byte = (size_t)in->n_cuts;
        cf->zstd_ratio = buf + 2 * in->n_cuts;
        cf->zstd_compress_ns_per_byte = buf + 3 * in->n_cuts;
        cf->zstd_decompress_ns_per_byte = buf + 4 * in->n_cuts;
        memcpy(cf->zstd_ratio, me->zstd_ratio, sizeof(double) * (size_t)in->n_cuts);
        memcpy(cf->zstd_compress_ns_per_byte, me->zstd_compress_ns, sizeof(double) * (size_t)in->n_cuts);
        memcpy(cf->zstd_decompress_ns_per_byte, me->zstd_decompress_ns, sizeof(double) * (size_t)in->n_cuts);
        cf->compress = j->o.compress;
        cf->local_ns = in->local_ns;
        const double limit = spw_cpu_limit();
        cf->cores = cores < limit ? cores : limit;     /* a CPU quota caps what the threads get */
        j->planned_cores = cf->cores;
        cf->rate = j->o.trainer_rate > 0 ? j->o.trainer_rate : 0;
        cf->local_off = j->o.local_cores == 0;
        cf->nic_bytes_per_s = links->nic_bytes_per_s;
        cf->recv_ns_per_byte = links->recv_ns_per_byte;
        measure_gpu(j, &cf->gpu_elements_per_s, &cf->gpu_cpu_ns);
        cf->n_links = 0;
        for (int i = 0; i < links->n && i < PROBE_MAX_WORKERS; i++) {
            if (links->bytes_per_s[i] <= 0)
                continue;
            spillway__v1__worker_link__init(&link_msgs[cf->n_links]);
            link_msgs[cf->n_links].address = links->addr[i];
            link_msgs[cf->n_links].bytes_per_s = links->bytes_per_s[i];
            link_ptrs[cf->n_links] = &link_msgs[cf->n_links];
            cf->n_links++;
        }
        cf->links = link_ptrs;
    }
    free(me);
    free(in);
    return rc;
}

/* This rank's share of each epoch with splits of `split` samples (as the executor and assembler cut it),
 * and the batches it makes. */
static int rank_share(const struct spw_job *j, int split, struct spw_rank_view *v, int64_t *per_epoch)
{
    const int world = j->o.world_size > 1 ? j->o.world_size : 1;
    const int64_t B = j->spec->batch.size;
    int rc = spw_rank_view_init(v, j->src->n, world > 1 ? j->o.rank : 0, world, split,
                                !j->spec->batch.drop_remainder);
    *per_epoch = rc ? 0 : j->spec->batch.drop_remainder ? v->len / B : (v->len + B - 1) / B;
    return rc;
}

static bool place_given(const struct spw_checkpoint *c, int64_t given, int64_t p)
{
    return c->places ? (c->places[p >> 3] >> (p & 7)) & 1 : p < given;
}

/* Check checkpoint c against this job, and say what the dispatcher needs of it: the epoch in progress and
 * this rank's splits of it wholly delivered (done, allocated). Returns 0, or -EINVAL with the reason. */
static int resume_point(struct spw_job *j, const struct spw_checkpoint *c, struct remote_resume *rr,
                        uint64_t **done, char *err, size_t errlen)
{
    const int split = c->split_size > 0 ? c->split_size : SPW_DEFAULT_SPLIT;
    if (j->o.split_size > 0 && j->o.split_size != split)
        return spw_fail(err, errlen, -EINVAL, "resume: the checkpoint's ranks were cut in splits of %d samples, "
                        "this job asks for %d", split, j->o.split_size);
    struct spw_rank_view v;
    int64_t pe;
    if (rank_share(j, split, &v, &pe) != 0 || pe < 1)
        return spw_fail(err, errlen, -EINVAL, "resume: rank %d of %d has no share of %lld samples", j->o.rank,
                        j->o.world_size, (long long)j->src->n);
    const int64_t places = v.own > v.len ? v.own : v.len, given = c->batches % pe * j->spec->batch.size;
    if (c->places && c->places_len != (size_t)(places + 7) / 8)
        return spw_fail(err, errlen, -EINVAL, "resume: the checkpoint's bitmap has %zu bytes, this rank's epoch "
                        "needs %lld: taken with another rank, world size or batch size?", c->places_len,
                        (long long)(places + 7) / 8);
    bool prefix = true;
    for (int64_t p = 0; c->places && p < places; p++)
        prefix = prefix && place_given(c, given, p) == (p < given);
    if (!prefix && (!j->o.dispatcher || j->o.ordered))
        return spw_fail(err, errlen, -EINVAL, "resume: the checkpoint comes from an unordered run through a "
                        "dispatcher (batches in arrival order); resume it through a dispatcher without ordered");
    const int64_t splits = (v.own + split - 1) / split;
    *done = calloc((size_t)splits + 1, sizeof **done);
    if (!*done)
        return spw_fail(err, errlen, -ENOMEM, "out of memory");
    *rr = (struct remote_resume){.job = c->job, .job_secret = c->job_secret, .epoch = (uint64_t)(c->batches / pe),
                                 .done = *done};
    for (int64_t k = 0; k < splits; k++) {
        bool all = true;
        for (int64_t p = k * split; p < (k + 1) * split && p < v.own && all; p++)
            all = place_given(c, given, p);
        if (all)
            (*done)[rr->n_done++] = (uint64_t)(v.rank + k * v.world);
    }
    return 0;
}

/* remote_opts.delivered: what the trainer has been given so far as a resume point, for re-attaching to a
 * dispatcher that lost the job. Heartbeat thread. */
static int delivered_point(void *ctx, struct remote_resume *rr, uint64_t **done)
{
    struct spw_job *j = ctx;
    struct spw_checkpoint c = {.split_size = j->rj.split_size, .places_len = asm_place_bytes(j->a)};
    if (!(c.places = malloc(c.places_len ? c.places_len : 1)))
        return -ENOMEM;
    asm_checkpoint(j->a, &c.batches, c.places);
    char err[256];
    const int rc = resume_point(j, &c, rr, done, err, sizeof err);
    if (rc)
        spw_log(SPW_LOG_ERROR, "client", "cannot re-attach job=%llu: %s", (unsigned long long)j->rj.job, err);
    free(c.places);
    return rc;
}

/* How this client speaks to the dispatcher and its workers (TLS, token): j->tls and j->peer. */
static int peer_setup(struct spw_job *j, char *err, size_t errlen)
{
    int rc = spw_rpc_tls_load(j->o.tls_cert, j->o.tls_key, j->o.tls_ca, false, &j->tls, err, errlen);
    if (rc)
        return rc;
    if (j->tls && !j->tls->ca_pem && j->tls->cert_pem) {
        snprintf(err, errlen, "tls_cert is for mutual TLS: give tls_ca too");
        return -EINVAL;
    }
    if (j->o.auth_token && *j->o.auth_token && !j->tls && !spw_rpc_channel_tls_default() && !j->o.insecure) {
        snprintf(err, errlen, "a token would travel in the clear: give tls_ca (SPILLWAY_TLS_CA), or insecure "
                 "(SPILLWAY_INSECURE=1) on a network you trust");
        return -EPERM;
    }
    j->peer = (struct spw_rpc_channel_opts){.auth_token = j->o.auth_token, .tls = j->tls};
    return 0;
}

/* The source from the dispatcher's listing (GetManifest), which its CreateJob then takes as the job's: a
 * folder or remote shards listed once, by the dispatcher. Listed here when the dispatcher cannot (an older
 * one, not up yet, or a listing too big to ship); CreateJob then compares the two. A job to be planned says
 * so: the workers profile the pipeline while this client measures itself (dispatcher/profile_ahead.h). */
static int open_source(struct spw_job *j, char *err, size_t errlen)
{
    Spillway__V1__Pipeline *pipe = NULL;
    struct spw_rpc_channel *ch = NULL;
    uint8_t *packed = NULL;
    size_t len = 0;
    uint64_t hash = 0;
    char why[512] = "could not ask (out of memory)";
    if (j->o.dispatcher && spw_spec_to_proto(j->spec, &pipe) == 0 &&
        spw_rpc_channel_create(j->o.dispatcher, &j->peer, &ch) == 0 &&
        spw_manifest_fetch(ch, 0, &pipe->base, j->o.cut == SPW_CUT_AUTO ? j->o.max_workers : -1, 600000, &packed,
                           &len, &hash, why, sizeof why) == 0 &&
        spw_manifest_open(&j->spec->source, packed, len, hash, &j->src, why, sizeof why) == 0)
        spw_log(SPW_LOG_INFO, "client", "source from the dispatcher's listing samples=%lld bytes=%zu",
                (long long)j->src->n, len);
    spw_rpc_channel_destroy(ch);
    spw_spec_proto_free(pipe);
    free(packed);
    if (j->src)
        return 0;
    if (j->o.dispatcher)
        spw_log(SPW_LOG_WARN, "client", "listing the source here: the dispatcher's listing: %s", why);
    return spw_source_open(&j->spec->source, &j->src, err, errlen);
}

/* opts.rest_of: the rest of the old run's epoch, in this process (a fraction of an epoch, once); an empty
 * rest makes no executor (take_batch ends at once). */
static int start_rest_of(struct spw_job *j, char *err, size_t errlen)
{
    int rc = rest_of_apply(j->spec, j->src, &j->o, &j->rest, err, errlen);
    if (rc)
        return rc;
    j->o.rest_of = (struct spw_world_change){0};  /* the caller's array: not kept */
    spw_log(SPW_LOG_INFO, "client", "world size changed: the rest of epoch %lld, %lld samples, among %d ranks "
            "(this rank %lld batches) in this process; then the run goes on at batch %lld", (long long)j->rest.epoch,
            (long long)j->rest.rest, j->o.world_size > 1 ? j->o.world_size : 1, (long long)j->rest.per_epoch,
            (long long)j->rest.next_batch);
    if (j->rest.per_epoch < 1)
        return 0;
    j->o.split_size = j->rest.split;
    j->o.resume.batches = j->rest.first_batch;
    return start_in_process(j, err, errlen);
}

/* $SPILLWAY_DIRECT=off: take workers' elements on their gRPC streams, not on data connections (which a
 * worker offers unless its --data-port is -1 or it runs TLS). */
static bool direct_off(void)
{
    const char *e = getenv("SPILLWAY_DIRECT");
    return e && (!strcmp(e, "off") || !strcmp(e, "0"));
}

/* A job on the service: plan (SPW_CUT_AUTO), create or join it, start the streams and the client's threads. */
static int open_service(struct spw_job *j, const struct remote_resume *rr, char *err, size_t errlen)
{
    int rc;
    Spillway__V1__ClientFacts facts;
    double facts_buf[5 * (SPW_PROFILE_MAX_GROUPS + 1)];      /* ClientFacts' five per-cut arrays */
    Spillway__V1__WorkerLink link_msgs[PROBE_MAX_WORKERS], *link_ptrs[PROBE_MAX_WORKERS];
    open_gpu(j);                /* before the job exists: it is planned with it, and heartbeats report it */
    if (j->o.cut == SPW_CUT_AUTO &&
        (rc = measure_facts(j, &facts, facts_buf, link_msgs, link_ptrs, err, errlen)) != 0)
        return rc;
    Spillway__V1__Pipeline *pipe;
    if (spw_spec_to_proto(j->spec, &pipe) != 0) {
        snprintf(err, errlen, "cannot serialize the pipeline");
        return -ENOMEM;
    }
    struct remote_opts ro = {.dispatcher = j->o.dispatcher, .auth_token = j->o.auth_token, .cut = j->o.cut,
                             .local_cores = j->o.local_cores, .split_size = j->o.split_size,
                             .max_workers = j->o.max_workers,
                             .compress_level = j->o.compress > 0 ? j->o.compress
                                               : j->o.compress == SPW_COMPRESS_AUTO && j->o.cut == SPW_CUT_AUTO
                                               ? REMOTE_COMPRESS_PLANNED : 0,
                             .credit_bytes = j->o.credit_bytes, .park_cap_bytes = j->o.prefetch_bytes / 4,
                             .manifest_hash = j->src->manifest_hash,
                             .own_counts = {&j->st.local_elements, &j->st.rescued_elements},
                             .own_cpu_ns = &j->own_cpu_ns, .own_gpu = j->gpu,
                             .consumed = &j->consumed, .wait_ns = &j->wait_ns, .starved_ns = &j->starved_ns,
                             .facts = j->o.cut == SPW_CUT_AUTO ? &facts : NULL,
                             .rank = j->o.rank, .world_size = j->o.world_size, .job_name = j->o.job_name,
                             .resume = rr, .delivered = delivered_point, .delivered_ctx = j,
                             .dispatcher_wait_ms = j->o.dispatcher_wait_ms,
                             .tls = j->tls, .no_direct = direct_off(), .cancel = j->o.cancel,
                             .keep_job = j->o.keep_job};
    rc = remote_create(&ro, pipe, &j->r, &j->rj, err, errlen);
    spw_spec_proto_free(pipe);
    free(j->links);             /* the facts pointed into it */
    j->links = NULL;
    j->st.planned = j->rj.planned;
    j->st.compress_level = j->rj.compress_level;
    j->st.offloaded = j->rj.offload;
    j->st.predicted = j->rj.predicted;
    snprintf(j->st.plan_why, sizeof j->st.plan_why, "%s", j->rj.why);
    if (rc == REMOTE_RUN_LOCALLY)
        return start_in_process(j, err, errlen);
    if (rc)
        return rc;
    if (j->rj.samples != j->src->n) {
        snprintf(err, errlen, "the dispatcher's job has %lld samples, this client sees %lld",
                 (long long)j->rj.samples, (long long)j->src->n);
        return -ECONNREFUSED;
    }
    if (spw_element_ctx_init(&j->ctx, j->spec) != 0)
        return -ENOMEM;
    j->ctx_ok = true;
    j->prod = (struct spw_producer){.spec = j->spec, .src = j->src, .ctx = &j->ctx, .component = "client"};
    char why[256];
    if (j->gpu && !spw_gpu_can_make(&j->ctx, j->ctx.n_groups, why, sizeof why))
        spw_log(SPW_LOG_INFO, "client", "gpu: this client's own threads make the job on the CPU only: %s", why);
    else if (j->gpu && j->o.local_cores == 0)
        spw_log(SPW_LOG_INFO, "client", "gpu: not used: local_cores 0 (this client makes no splits itself)");
    else if (j->gpu)
        j->gpu_rows = 1;
    j->backends[0] = j->gpu_rows ? j->gpu : &spw_backend_cpu;
    j->backends[1] = &spw_backend_cpu;
    spw_order_init(&j->order, j->src->n, j->spec->source.shuffle, j->spec->source.seed);
    struct asm_opts ao = {.spec = j->spec, .src = j->src, .prefetch_bytes = j->o.prefetch_bytes,
                          .ordered = j->o.ordered, .max_batches = j->o.max_batches, .split_size = j->rj.split_size,
                          .splits_per_epoch = j->rj.splits_per_epoch, .rank = j->o.rank,
                          .world_size = j->o.world_size, .resume_batches = j->o.resume.batches,
                          .resume_places = j->o.resume.places, .resume_places_len = j->o.resume.places_len,
                          .self_below_epoch = j->rj.open_epoch > 0 ? (uint64_t)j->rj.open_epoch : 0};
    if ((rc = asm_create(&ao, &j->a)) != 0) {
        snprintf(err, errlen, rc == -ENOMEM ? "out of memory" : "rank %d of %d with splits of %d samples: no share "
                 "of the job's %lld samples, or a checkpoint that does not fit it", j->o.rank, j->o.world_size,
                 j->rj.split_size, (long long)j->src->n);
        return rc;
    }
    if (!(j->missing = malloc(sizeof(int64_t) * (size_t)j->spec->batch.size))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    j->st.job = j->prod.job = j->rj.job;
    j->st.cut = j->rj.cut;
    j->st.groups = j->rj.groups;
    if (remote_start(j->r, j->a, &j->ctx, j->src, &j->order) != 0) {
        snprintf(err, errlen, "cannot start the client's threads");
        return -EAGAIN;
    }
    const int own = (j->o.local_cores < 0 ? 1 : j->o.local_cores) + j->gpu_rows;     /* the GPU's thread: one more */
    int n = own;
    /* Off only when the client's CPU is all needed for remote elements (not when the trainer's rate binds:
     * then own threads cost nothing, the prefetch buffer stops them). */
    if (j->rj.planned && j->rj.local_share < PLAN_LOCAL_OFF && j->rj.remote_cores >= 0.95 * j->planned_cores &&
        n > 0) {
        spw_log(SPW_LOG_INFO, "client", "planned local share %.3f: this client produces no splits itself",
                j->rj.local_share);
        n = 0;      /* the plan gives the client's CPU to the suffix of remote elements */
    }
    /* Under a binding CPU quota niceness does not protect the remote elements' suffix: own threads draw on
     * the same budget and a throttled period stalls the stream threads too. Measured (docs/planner.md,
     * session 8): at a planned share of ~0.01 own threads cost 30%, at ~0.2 they gained 8-13%. */
    if (j->rj.planned && n > 0 && j->rj.local_share < QUOTA_LOCAL_MIN && spw_cpu_quota_binds()) {
        spw_log(SPW_LOG_INFO, "client", "under a CPU quota with a planned local share of %.3f: this client "
                "produces no splits itself", j->rj.local_share);
        n = 0;
    }
    /* Threads the plan turned off still start, in reserve: a planned job that re-planning hands back to the
     * client (no worker serves it any more) needs them; with --local-cores 0 there are none. */
    j->n_planned = n;
    for (; j->n_local < own && j->n_local < 256; j->n_local++)
        if (pthread_create(&j->local[j->n_local], NULL, local_main, j) != 0)
            break;
    return 0;
}

/* With a dispatcher, relative paths in the source (its path, unless a URL; the CA and header files) are this
 * process's: the dispatcher and the workers get them made absolute from the working directory (as this client
 * lists them), not resolved in their own. */
static int absolute_source(struct spw_pipeline_spec *spec, char *err, size_t errlen)
{
    char **paths[] = {&spec->source.path, &spec->source.ca_file, &spec->source.header_file};
    for (size_t k = 0; k < sizeof paths / sizeof *paths; k++) {
        char *p = *paths[k], cwd[PATH_MAX], *abs = NULL;
        if (!p || p[0] == '/' || (k == 0 && spw_shard_is_url(p)))
            continue;
        if (!getcwd(cwd, sizeof cwd))
            return spw_fail(err, errlen, -errno, "source path \"%s\" is relative and the working directory is "
                            "unknown (%s): give an absolute path", p, strerror(errno));
        if (asprintf(&abs, "%s/%s", cwd, p) < 0)
            return spw_fail(err, errlen, -ENOMEM, "out of memory");
        free(p);
        *paths[k] = abs;
    }
    return 0;
}

static int open_common(struct spw_job *j, char *err, size_t errlen)
{
    j->rest_of = j->o.rest_of.world > 0;
    if (j->rest_of)
        j->o.dispatcher = NULL;         /* the rest of an epoch is made here, from a listing made here */
    int rc = j->o.dispatcher ? absolute_source(j->spec, err, errlen) : 0;
    if (rc == 0 && j->o.dispatcher)
        rc = peer_setup(j, err, errlen);
    if (rc == 0 && j->o.dispatcher)
        rc = resolve_cut(j->o.cut, &j->o.cut, err, errlen);
    if (rc == 0 && j->o.dispatcher && j->o.cut == SPW_CUT_AUTO)
        rc = probe_first(j, err, errlen);
    if (rc == 0)
        rc = open_source(j, err, errlen);
    if (rc == 0)
        rc = spw_mix_check_source(&j->spec->batch.mix, j->src, err, errlen);
    if (rc)
        return rc;
    j->st.samples = j->src->n;
    j->st.manifest_hash = j->src->manifest_hash;
    if (j->o.resume.manifest && j->o.resume.manifest != j->src->manifest_hash) {
        snprintf(err, errlen, "resume: the checkpoint was taken on another dataset listing (manifest %016llx, "
                 "this source %016llx)", (unsigned long long)j->o.resume.manifest,
                 (unsigned long long)j->src->manifest_hash);
        return SPW_ESOURCE;
    }
    if (j->rest_of)
        return start_rest_of(j, err, errlen);
    struct remote_resume rr;
    uint64_t *done = NULL;
    const bool resuming = j->o.resume.batches > 0;
    if (resuming && (rc = resume_point(j, &j->o.resume, &rr, &done, err, errlen)) != 0)
        return rc;
    if (resuming)       /* the checkpoint's split size */
        j->o.split_size = j->o.resume.split_size > 0 ? j->o.resume.split_size : SPW_DEFAULT_SPLIT;
    const int64_t epochs = j->spec->source.epochs;
    if (!j->o.dispatcher || (resuming && epochs > 0 && (int64_t)rr.epoch >= epochs)) {
        free(done);         /* in-process; or nothing left of a resumed run */
        return start_in_process(j, err, errlen);
    }
    if (j->o.world_size > 1 && !j->o.job_name) {
        free(done);
        snprintf(err, errlen, "world_size %d with a dispatcher: give every rank the same job_name, so that they "
                 "share one job", j->o.world_size);
        return -EINVAL;
    }
    rc = open_service(j, resuming ? &rr : NULL, err, errlen);
    free(done);
    return rc;
}

static int create(struct spw_pipeline_spec *spec, const struct spw_job_opts *o, struct spw_job **out, char *err,
                  size_t errlen)
{
    struct spw_job *j = calloc(1, sizeof *j);
    if (!j) {
        spw_spec_free(spec);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    j->o = *o;
    /* The caller's strings may go once this returns (the Python binding frees its options): keep copies. */
    const char **keep[] = {&j->o.dispatcher, &j->o.auth_token, &j->o.tls_ca, &j->o.tls_cert, &j->o.tls_key,
                           &j->o.job_name, &j->o.gpu_mem_budget};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++)
        if (*keep[i] && !(*keep[i] = j->o_strings[i] = strdup(*keep[i]))) {
            spw_job_destroy(j);
            spw_spec_free(spec);
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
    if (j->o.prefetch_bytes <= 0)
        j->o.prefetch_bytes = DEFAULT_PREFETCH;
    if (j->o.credit_bytes <= 0)
        j->o.credit_bytes = DEFAULT_CREDIT;
    if (j->o.rescue_after_ms <= 0)
        j->o.rescue_after_ms = DEFAULT_RESCUE_MS;
    j->spec = spec;
    j->pid = getpid();
    j->created_ns = spw_now_ns();
    pthread_mutex_init(&j->mu, NULL);
    int rc = open_common(j, err, errlen);
    if (rc) {
        spw_job_destroy(j);
        return rc;
    }
    *out = j;
    return 0;
}

/* When the library loads (a trainer's dlopen, ctypes, or a program linked with it): the malloc settings the
 * daemons and spillctl use (lib/heap.h), so a trainer's process keeps freed element buffers instead of
 * unmapping and re-faulting them (docs/planner.md measured 3x the CPU per received element without them).
 * SPILLWAY_MALLOC=default leaves glibc's settings alone. */
__attribute__((constructor)) static void heap_settings_at_load(void)
{
    const char *v = getenv("SPILLWAY_MALLOC");
    if (!v || strcmp(v, "default") != 0)
        spw_heap_keep_freed();
}

int spw_job_create_json(const char *json, const struct spw_job_opts *o, struct spw_job **out, char *err,
                        size_t errlen)
{
    struct spw_pipeline_spec *spec;
    int rc = spw_spec_parse_json(json, &spec, err, errlen);
    return rc ? rc : create(spec, o, out, err, errlen);
}

int spw_job_create_proto(const uint8_t *pipeline, size_t len, const struct spw_job_opts *o, struct spw_job **out,
                         char *err, size_t errlen)
{
    Spillway__V1__Pipeline *msg = spillway__v1__pipeline__unpack(NULL, len, pipeline);
    if (!msg) {
        snprintf(err, errlen, "malformed spillway.v1.Pipeline message");
        return SPW_ESPEC;
    }
    struct spw_pipeline_spec *spec;
    int rc = spw_spec_from_proto(msg, &spec, err, errlen);
    spillway__v1__pipeline__free_unpacked(msg, NULL);
    return rc ? rc : create(spec, o, out, err, errlen);
}

/* Whether this client's own threads hold (epoch, place). */
static bool held_here(struct spw_job *j, uint64_t epoch, int64_t place)
{
    const int64_t pos = asm_pos_of(j->a, place);
    bool r = false;
    pthread_mutex_lock(&j->mu);
    for (int i = 0; i < j->n_held && !r; i++)
        r = j->held[i].count && j->held[i].epoch == epoch && pos >= j->held[i].first &&
            pos < j->held[i].first + j->held[i].count;
    pthread_mutex_unlock(&j->mu);
    return r;
}

/* Compute the head batch's missing elements here when it has waited too long (a dead, stalled or
 * credit-starved producer; sooner when the client's own low-priority threads hold them); copies that arrive
 * later are dropped as duplicates. */
static void rescue_head(struct spw_job *j)
{
    uint64_t epoch;
    int64_t stalled;
    int n_self;
    int n = asm_head_missing(j->a, &epoch, j->missing, j->spec->batch.size, &stalled, &n_self);
    if (stalled < j->o.rescue_after_ms) {       /* only what nobody else produces or own threads hold */
        int k = n_self;
        for (int i = n_self; i < n && stalled >= OWN_RESCUE_MS; i++)
            if (held_here(j, epoch, j->missing[i]))
                j->missing[k++] = j->missing[i];
        n = k;
    }
    if (n == 0)
        return;
    if (n > n_self)
        spw_log(SPW_LOG_WARN, "client", "head batch stalled for %lld ms: computing its %d missing elements here",
                (long long)stalled, n - n_self);
    make_places(j, false, epoch, j->missing, n, false, n_self, &j->st.local_elements, &j->st.rescued_elements);
}

/* Every worker refused the job and this client has no threads of its own: fail the job with the workers'
 * reason rather than computing each head batch here, slowly. */
static bool no_producer(struct spw_job *j)
{
    char why[256], msg[512];
    if (j->n_local > 0 || !remote_no_worker(j->r, why, sizeof why))
        return false;
    snprintf(msg, sizeof msg, "no producer can serve job %llu: %s (and this client runs no threads of its own: "
             "local_cores 0)", (unsigned long long)j->rj.job, why);
    asm_fail(j->a, SPW_ESOURCE, msg);
    return true;
}

/* The next batch from the assembler: waiting, and rescuing a stalled head batch. */
static int take_remote(struct spw_job *job, struct spw_batch **out)
{
    int rc;
    for (;;) {
        if (job->o.cancel && *job->o.cancel)
            asm_fail(job->a, -ECANCELED, "interrupted (opts.cancel)");    /* this call and every later one */
        if ((rc = asm_next(job->a, POLL_MS, out, job->errmsg, sizeof job->errmsg)) != -ETIMEDOUT)
            break;
        if (!no_producer(job))
            rescue_head(job);
    }
    return rc;
}

/* The next batch from the executor or the assembler, the trainer's wait and CPU starvation counted. */
static int take_batch(struct spw_job *job, struct spw_batch **out)
{
    int rc;
    if (!job->ex && !job->a)
        return SPW_ECLOSED;             /* an empty rest of an epoch (opts.rest_of) */
    const int64_t t0 = spw_now_ns();
    const pid_t tid = gettid();
    const int64_t delay0 = spw_thread_run_delay_ns();   /* what the trainer's step lost to a busy CPU */
    if (delay0 >= 0 && tid == job->exit_tid && delay0 >= job->exit_delay_ns)
        __atomic_add_fetch(&job->starved_ns, delay0 - job->exit_delay_ns, __ATOMIC_RELAXED);
    if (job->ex) {
        rc = spw_executor_next(job->ex, out);
        if (rc != 0 && rc != SPW_ECLOSED)
            snprintf(job->errmsg, sizeof job->errmsg, "%s", spw_executor_errmsg(job->ex));
    } else {
        rc = take_remote(job, out);
    }
    __atomic_add_fetch(&job->wait_ns, spw_now_ns() - t0, __ATOMIC_RELAXED);
    if (rc == 0)
        __atomic_add_fetch(&job->consumed, (int64_t)(*out)->n, __ATOMIC_RELAXED);
    job->exit_delay_ns = delay0 >= 0 ? spw_thread_run_delay_ns() : -1;
    job->exit_tid = job->exit_delay_ns >= 0 ? tid : 0;
    return rc;
}

int spw_job_next(struct spw_job *job, struct spw_batch **out)
{
    if (getpid() != job->pid) {
        snprintf(job->errmsg, sizeof job->errmsg,
                 "this Spillway job was created in process %d and used in a forked child (%d), e.g. a DataLoader "
                 "worker with num_workers > 0: gRPC does not survive fork(). Create the job in the process that "
                 "iterates it, and use Spillway's own loader (num_workers=0) - it already runs in parallel",
                 (int)job->pid, (int)getpid());
        return SPW_EFORKED;
    }
    int rc;
    /* A batch whose every sample was skipped is passed over (its place counted as delivered: checkpoints
     * stay right), never handed out empty: a training step on it would fail far from the cause. */
    while ((rc = take_batch(job, out)) == 0 && (*out)->n == 0) {
        job->st.skipped += (*out)->skipped;
        if (job->ex)
            job->empty_batches++;
        spw_job_release(job, *out);
    }
    if (rc == 0) {
        job->st.batches++;
        job->st.elements += (*out)->n;
        job->st.skipped += (*out)->skipped;
    }
    return rc;
}

void spw_job_release(struct spw_job *job, struct spw_batch *b)
{
    if (job->ex)
        spw_executor_release(job->ex, b);
    else
        asm_release(job->a, b);
}

const char *spw_job_errmsg(const struct spw_job *job)
{
    return job->errmsg;
}

void spw_job_stats(struct spw_job *job, struct spw_job_stats *out)
{
    pthread_mutex_lock(&job->mu);
    *out = job->st;
    pthread_mutex_unlock(&job->mu);
    out->local_elements = __atomic_load_n(&job->st.local_elements, __ATOMIC_RELAXED);
    out->rescued_elements = __atomic_load_n(&job->st.rescued_elements, __ATOMIC_RELAXED);
    if (job->r) {
        struct remote_stats rs;
        remote_stats(job->r, &rs);
        out->remote_elements = rs.elements;
        out->duplicates_dropped = rs.duplicates;
        out->bytes_received = rs.bytes;
        out->workers = rs.streams;
    } else {
        out->local_elements = out->elements;
    }
    if (job->ex) {
        struct spw_exec_stats es;
        spw_executor_stats(job->ex, &es);
        out->device_batches = es.device_batches;
    }
    if (job->gpu) {
        struct spw_gpu_stats gs;
        spw_gpu_backend_stats(job->gpu, &gs);
        out->gpu_elements = gs.elements;
        out->gpu_arena_bytes = (int64_t)gs.arena_bytes;
        out->gpu_arena_used = (int64_t)gs.arena_used;
        out->gpu_arena_peak = (int64_t)gs.arena_peak;
    }
}

void spw_job_times(struct spw_job *job, struct spw_job_times *out)
{
    out->elapsed_s = (double)(spw_now_ns() - job->created_ns) / 1e9;
    out->wait_s = (double)__atomic_load_n(&job->wait_ns, __ATOMIC_RELAXED) / 1e9;
    out->starved_s = (double)__atomic_load_n(&job->starved_ns, __ATOMIC_RELAXED) / 1e9;
}

int spw_job_op_time(struct spw_job *job, int i, struct spw_op_time *out)
{
    if (!job->ex || i < 0)
        return -ENOENT;
    struct spw_exec_stats *es = malloc(sizeof *es);
    if (!es)
        return -ENOMEM;
    spw_executor_stats(job->ex, es);
    const int rc = i < es->n_steps ? 0 : -ENOENT;
    if (rc == 0) {
        snprintf(out->name, sizeof out->name, "%s", es->steps[i].name);
        out->elements = es->steps[i].elements;
        out->ns_total = es->steps[i].ns_total;
    }
    free(es);
    return rc;
}

int spw_job_checkpoint(struct spw_job *job, struct spw_checkpoint *out)
{
    memset(out, 0, sizeof *out);
    out->manifest = job->src->manifest_hash;
    if (job->ex || job->rest_of) {  /* in order: the batches say it all */
        out->batches = job->o.resume.batches + job->st.batches + job->empty_batches;
        out->split_size = job->o.split_size > 0 ? job->o.split_size : SPW_DEFAULT_SPLIT;
        return 0;
    }
    out->job = job->rj.job;
    out->job_secret = job->rj.secret;
    remote_keep(job->r);        /* a checkpoint is for a resume: closing leaves the job to rejoin */
    out->split_size = job->rj.split_size;
    out->places_len = asm_place_bytes(job->a);
    if (!(out->places = malloc(out->places_len ? out->places_len : 1)))
        return -ENOMEM;
    asm_checkpoint(job->a, &out->batches, out->places);
    return 0;
}

void spw_checkpoint_clear(struct spw_checkpoint *c)
{
    free(c->places);
    memset(c, 0, sizeof *c);
}

int spw_job_classes(const struct spw_job *job, const char *const **names)
{
    *names = (const char *const *)job->src->classes;
    return job->src->n_classes;
}

int spw_job_rest_of(const struct spw_job *job, int64_t *epoch, int64_t *next_batch, int64_t *per_epoch_after)
{
    if (!job->rest_of)
        return 0;
    *epoch = job->rest.epoch;
    *next_batch = job->rest.next_batch;
    *per_epoch_after = job->rest.per_epoch_after;
    return 1;
}

int64_t spw_job_batches_per_epoch(const struct spw_job *job)
{
    if (job->rest_of)
        return job->rest.per_epoch;
    if (job->a)
        return asm_batches_per_epoch(job->a);
    struct spw_rank_view v;
    int64_t per_epoch;
    return rank_share(job, job->o.split_size > 0 ? job->o.split_size : SPW_DEFAULT_SPLIT, &v, &per_epoch) == 0
               ? per_epoch
               : 0;
}

void spw_job_stop(struct spw_job *job)
{
    if (!job)
        return;
    pthread_mutex_lock(&job->mu);
    job->stopping = true;
    pthread_mutex_unlock(&job->mu);
    if (job->a)
        asm_fail(job->a, SPW_ECLOSED, "the job was stopped");   /* wakes window waiters */
    for (int i = 0; i < job->n_local; i++)
        pthread_join(job->local[i], NULL);
    job->n_local = 0;
    remote_destroy(job->r);     /* after the local threads, which lease through it, have ended */
    job->r = NULL;
}

void spw_job_destroy(struct spw_job *job)
{
    if (!job)
        return;
    spw_job_stop(job);
    spw_rpc_tls_free(job->tls);
    asm_destroy(job->a);
    spw_executor_destroy(job->ex);
    if (job->gpu) {
        char summary[320];
        spw_gpu_backend_summary(job->gpu, summary, sizeof summary);
        spw_log(SPW_LOG_INFO, "client", "gpu: %s", summary);
        spw_gpu_backend_close(job->gpu);
    }
    if (job->ctx_ok)
        spw_element_ctx_destroy(&job->ctx);
    free(job->missing);
    free(job->links);
    spw_source_close(job->src);
    spw_spec_free(job->spec);
    pthread_mutex_destroy(&job->mu);
    for (size_t i = 0; i < sizeof job->o_strings / sizeof job->o_strings[0]; i++)
        free(job->o_strings[i]);
    free(job);
}
