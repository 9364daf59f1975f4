/* worker/jobs.c - the jobs a worker serves (see jobs.h, jobs_internal.h): starting a listed job (its source,
 * its Python ops checked, its outbox and producer threads), stopping one no longer listed once no stream
 * holds it, and what the heartbeat and metrics report of them. Producers are producer.c's, streams
 * stream.c's. Threads: the registration thread changes the job list, under w->mu; the rest any thread. */
#include "worker/jobs.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/heap.h"
#include "lib/log.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/manifest.h"
#include "pipeline/python_op.h"
#include "pipeline/spec_proto.h"
#include "worker/jobs_internal.h"

#define TRIM_WHILE_STOPPING (128 << 10)     /* glibc's default */

/* ---- job lifecycle ---- */

static void job_release(struct job *jb)
{
    wrk_producer_drop_queued(jb);
    wrk_outbox_destroy(jb->out);
    free(jb->group_ns);
    free(jb->group_elements);
    spw_element_ctx_destroy(&jb->ctx);
    spw_source_close(jb->src);
    spw_spec_free(jb->spec);
    pthread_mutex_destroy(&jb->mu);
    pthread_cond_destroy(&jb->cv);
    free(jb);
}

/* The job's source from the listing the dispatcher made (GetManifest), so that a folder or remote shards are
 * not listed again by every worker; listed here when the dispatcher keeps none (too big) or is an older one. */
static int open_source(struct wrk_jobs *w, struct job *jb, char *err, size_t errlen)
{
    uint8_t *packed = NULL;
    size_t len = 0;
    uint64_t hash = 0;
    char why[512] = "";
    const int64_t t0 = spw_now_ms();
    if (spw_manifest_fetch(w->ch, jb->id, NULL, -1, 600000, &packed, &len, &hash, why, sizeof why) == 0 &&
        spw_manifest_open(&jb->spec->source, packed, len, jb->manifest_hash, &jb->src, why, sizeof why) == 0) {
        free(packed);
        spw_log(SPW_LOG_INFO, "worker", "source from the dispatcher's listing job=%llu samples=%lld bytes=%zu ms=%lld",
                (unsigned long long)jb->id, (long long)jb->src->n, len, (long long)(spw_now_ms() - t0));
        return 0;
    }
    free(packed);
    spw_log(SPW_LOG_WARN, "worker", "listing the source here job=%llu: the dispatcher's listing: %s",
            (unsigned long long)jb->id, why);
    return spw_source_open(&jb->spec->source, &jb->src, err, errlen);
}

/* Start serving a task. NULL when this worker cannot serve it, with the reason in why. */
/* Every Python op of the job's part on this worker imports here (--python, --python-path): else the job is
 * refused with the reason, as with a missing mount, rather than failing each of its elements. */
static int python_ops_import(const struct job *jb, char *why, size_t whylen)
{
    const int n_groups = jb->cut < jb->ctx.n_groups ? jb->cut : jb->ctx.n_groups;
    const int last = n_groups > 0 ? jb->ctx.groups[n_groups - 1].first + jb->ctx.groups[n_groups - 1].count : 0;
    for (int i = 0; i < last; i++) {
        const struct spw_op_spec *op = &jb->spec->ops[i];
        bool seen = op->kind != SPW_OP_PYTHON;
        for (int k = 0; k < i && !seen; k++)
            seen = jb->spec->ops[k].kind == SPW_OP_PYTHON && !strcmp(jb->spec->ops[k].function, op->function);
        char err[400];
        if (!seen && spw_python_op_check(op->function, err, sizeof err) != 0) {
            snprintf(why, whylen, "ops[%d] python: %.200s", i, err);
            return -1;
        }
    }
    return 0;
}

static struct job *job_start(struct wrk_jobs *w, const Spillway__V1__JobTask *t, char *why, size_t whylen)
{
    struct job *jb = calloc(1, sizeof *jb);
    char err[512];
    if (!jb) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    jb->id = t->job;
    jb->manifest_hash = t->manifest_hash;
    jb->secret = t->job_secret;
    jb->cut = t->cut;
    jb->world = t->world_size > 0 ? t->world_size : 1;
    jb->owner = w;
    pthread_mutex_init(&jb->mu, NULL);
    pthread_cond_init(&jb->cv, NULL);
    if (spw_spec_from_proto(t->pipeline, &jb->spec, err, sizeof err) != 0 ||
        open_source(w, jb, err, sizeof err) != 0) {
        snprintf(why, whylen, "%.255s", err);
        goto fail;
    }
    if (jb->src->manifest_hash != t->manifest_hash) {
        snprintf(why, whylen, "the dataset listing differs from the dispatcher's (%lld samples, manifest %016llx "
                 "here; %016llx there)", (long long)jb->src->n, (unsigned long long)jb->src->manifest_hash,
                 (unsigned long long)t->manifest_hash);
        goto fail;
    }
    const struct wrk_outbox_opts oo = {.world = jb->world, .queue_bytes = w->o.queue_bytes,
                                       .zstd_in = &w->zstd_in, .zstd_out = &w->zstd_out};
    if (wrk_outbox_create(&oo, &jb->out) != 0 || spw_element_ctx_init(&jb->ctx, jb->spec) != 0 ||
        !(jb->group_ns = calloc((size_t)jb->ctx.n_groups + 1, sizeof(int64_t))) ||
        !(jb->group_elements = calloc((size_t)jb->ctx.n_groups + 1, sizeof(int64_t)))) {
        snprintf(why, whylen, "out of memory");
        goto fail;
    }
    if (python_ops_import(jb, why, whylen) != 0)
        goto fail;
    jb->prod = (struct spw_producer){.spec = jb->spec, .src = jb->src, .ctx = &jb->ctx, .component = "worker",
                                     .job = jb->id, .failures = jb->failures, .group_ns = jb->group_ns,
                                     .group_elements = jb->group_elements};
    spw_order_init(&jb->order, jb->src->n, jb->spec->source.shuffle, jb->spec->source.seed);
    int n = w->o.threads > MAX_THREADS - 1 ? MAX_THREADS - 1 : w->o.threads;
    char no_gpu[256] = "";
    bool on_gpu = w->gpu && spw_gpu_can_make(&jb->ctx, jb->cut, no_gpu, sizeof no_gpu);
    if (on_gpu && spw_mb_queue_create(MBQ_CAP, &jb->mbq) != 0) {
        on_gpu = false;
        snprintf(no_gpu, sizeof no_gpu, "no memory for its queue");
    }
    for (int i = 0; i < n; i++)
        if (pthread_create(&jb->tids[jb->n_tids], NULL, wrk_producer_main, jb) == 0)
            jb->n_tids++;
    if (on_gpu && pthread_create(&jb->tids[jb->n_tids], NULL, wrk_gpu_producer_main, jb) != 0) {
        on_gpu = false;         /* the CPU producers still drain the queue */
        snprintf(no_gpu, sizeof no_gpu, "no thread for the GPU");
    }
    if (on_gpu)
        jb->n_tids++;
    else if (w->gpu)
        spw_log(SPW_LOG_INFO, "worker", "job=%llu is made on the CPU only: %s", (unsigned long long)jb->id, no_gpu);
    spw_log(SPW_LOG_INFO, "worker", "serving job=%llu samples=%lld cut=%d threads=%d%s", (unsigned long long)jb->id,
            (long long)jb->src->n, jb->cut, jb->n_tids, on_gpu ? " (one on the GPU)" : "");
    return jb;
fail:
    job_release(jb);
    return NULL;
}

static void job_stop(struct job *jb)
{
    pthread_mutex_lock(&jb->mu);
    jb->stopping = true;
    pthread_cond_broadcast(&jb->cv);
    pthread_mutex_unlock(&jb->mu);
    wrk_outbox_stop(jb->out);           /* producers waiting for room, streams waiting for messages */
    for (int i = 0; i < jb->n_tids; i++)
        pthread_join(jb->tids[i], NULL);
    jb->n_tids = 0;
}

int wrk_jobs_create(const struct wrk_jobs_opts *o, struct wrk_jobs **out)
{
    struct wrk_jobs *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->o = *o;
    w->gpu = o->gpu;
    if (!w->o.queue_bytes)
        w->o.queue_bytes = (size_t)256 << 20;
    if (w->o.threads <= 0)
        w->o.threads = 1;
    w->dispatcher = strdup(o->dispatcher);
    w->token = o->auth_token ? strdup(o->auth_token) : NULL;
    w->o.dispatcher = w->dispatcher;
    w->o.auth_token = w->token;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    struct spw_rpc_channel_opts co = {.auth_token = w->token};
    if (!w->dispatcher || spw_rpc_channel_create(w->dispatcher, &co, &w->ch) != 0) {
        wrk_jobs_destroy(w);
        return -ENOMEM;
    }
    *out = w;
    return 0;
}

void wrk_jobs_set_worker_id(struct wrk_jobs *w, uint64_t id, uint64_t secret)
{
    pthread_mutex_lock(&w->mu);
    w->worker_id = id;
    w->worker_secret = secret;
    w->report_round++;          /* a restarted dispatcher holds no progress: every job's counts again */
    pthread_mutex_unlock(&w->mu);
}

/* A job is its id and its secret: a dispatcher restarted without a journal may give the id to another job. */
static bool is_job(const struct job *jb, uint64_t id, uint64_t secret)
{
    return jb->id == id && jb->secret == secret;
}

struct job *wrk_find_job(struct wrk_jobs *w, uint64_t id, uint64_t secret, struct job **same_id)
{
    *same_id = NULL;
    for (struct job *jb = w->jobs; jb; jb = jb->next) {
        if (is_job(jb, id, secret))
            return jb;
        if (jb->id == id)
            *same_id = jb;
    }
    return NULL;
}

void wrk_jobs_update(struct wrk_jobs *w, const Spillway__V1__WorkerHeartbeatResponse *tasks)
{
    struct job *stop = NULL;
    pthread_mutex_lock(&w->mu);
    /* Jobs no longer listed: unlink; stopped below (outside the lock) once no stream uses them. */
    for (struct job **pp = &w->jobs; *pp;) {
        bool listed = false;
        for (size_t i = 0; i < tasks->n_tasks; i++)
            listed = listed || is_job(*pp, tasks->tasks[i]->job, tasks->tasks[i]->job_secret);
        if (!listed && (*pp)->refs == 0) {
            struct job *jb = *pp;
            *pp = jb->next;
            jb->next = stop;
            stop = jb;
        } else {
            pp = &(*pp)->next;
        }
    }
    /* Refusals of jobs no longer listed are done with: the dispatcher heard them. */
    int kept = 0;
    for (int r = 0; r < w->n_refused; r++)
        for (size_t i = 0; i < tasks->n_tasks; i++)
            if (tasks->tasks[i]->job == w->refused[r].job) {
                w->refused[kept++] = w->refused[r];
                break;
            }
    w->n_refused = kept;
    for (size_t i = 0; i < tasks->n_tasks; i++) {
        const uint64_t id = tasks->tasks[i]->job;
        bool known = false;
        for (struct job *jb = w->jobs; jb; jb = jb->next)
            known = known || is_job(jb, id, tasks->tasks[i]->job_secret);
        for (int r = 0; r < w->n_refused; r++)
            known = known || w->refused[r].job == id;
        if (known)
            continue;
        char why[256];
        /* Not under the lock: starting a job may fetch its listing and check its Python ops (seconds), and
         * streams wait on the lock. Only this thread (the registration's) changes the job list. */
        pthread_mutex_unlock(&w->mu);
        struct job *jb = job_start(w, tasks->tasks[i], why, sizeof why);
        pthread_mutex_lock(&w->mu);
        if (jb) {
            jb->next = w->jobs;
            w->jobs = jb;
            pthread_cond_broadcast(&w->cv);
            continue;
        }
        /* Log once and tell the dispatcher (wrk_jobs_refusals), which stops giving this worker the job. */
        spw_log(SPW_LOG_ERROR, "worker", "cannot serve job=%llu: %s", (unsigned long long)id, why);
        struct refusal *more = realloc(w->refused, sizeof *more * (size_t)(w->n_refused + 1));
        if (more) {
            w->refused = more;
            w->refused[w->n_refused].job = id;
            snprintf(w->refused[w->n_refused++].reason, sizeof more->reason, "%s", why);
        }
    }
    pthread_mutex_unlock(&w->mu);
    bool stopped = stop != NULL;
    if (stopped)    /* while a job's memory is freed, let each heap's top go back to the system too */
        mallopt(M_TRIM_THRESHOLD, TRIM_WHILE_STOPPING);
    while (stop) {
        struct job *jb = stop;
        stop = jb->next;
        spw_log(SPW_LOG_INFO, "worker", "stopping job=%llu (no longer a task)", (unsigned long long)jb->id);
        job_stop(jb);
        pthread_mutex_lock(&w->mu);
        if (w->n_retired < (int)(sizeof w->retired / sizeof w->retired[0])) {
            w->retired[w->n_retired].job = jb->id;
            w->retired[w->n_retired].elements = __atomic_load_n(&jb->sent_elements, __ATOMIC_RELAXED);
            w->retired[w->n_retired].io = jb->src->io;      /* its producers have ended */
            w->retired[w->n_retired++].bytes = __atomic_load_n(&jb->sent_bytes, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&w->mu);
        job_release(jb);
    }
    if (stopped) {
        malloc_trim(0);             /* hand the job's buffers back to the system, not just to malloc */
        mallopt(M_TRIM_THRESHOLD, SPW_HEAP_TRIM_THRESHOLD);   /* main() set it (lib/heap.h) */
    }
}

void wrk_jobs_destroy(struct wrk_jobs *w)
{
    if (!w)
        return;
    while (w->jobs) {
        struct job *jb = w->jobs;
        w->jobs = jb->next;
        job_stop(jb);
        job_release(jb);
    }
    spw_rpc_channel_destroy(w->ch);
    free(w->refused);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->dispatcher);
    free(w->token);
    free(w);
}

/* A job's remote shard reads into its progress entry (nothing when it read none). */
static void source_io(const struct spw_shard_stats *s, Spillway__V1__ProducerProgress *out, Spillway__V1__SourceIo *io)
{
    if (__atomic_load_n(&s->requests, __ATOMIC_RELAXED) <= 0)
        return;
    spillway__v1__source_io__init(io);
    io->bytes = __atomic_load_n(&s->bytes, __ATOMIC_RELAXED);
    io->requests = __atomic_load_n(&s->requests, __ATOMIC_RELAXED);
    io->retries = __atomic_load_n(&s->retries, __ATOMIC_RELAXED);
    out->source = io;
}

/* Heartbeats carry what changed: at 300 jobs, a worker's jobs unchanged in most heartbeats would cost the
 * dispatcher a report each (issue 42). An unchanged job is sent again every PROGRESS_REFRESH_MS, so that a
 * stalled job's rate is not stale for longer (a lost heartbeat's counts come again at once: `again`). */
#define PROGRESS_REFRESH_MS 30000

static int by_reported_ms(const void *a, const void *b)
{
    const int64_t x = (*(struct job *const *)a)->reported_ms, y = (*(struct job *const *)b)->reported_ms;
    return (x > y) - (x < y);
}

int wrk_jobs_progress(struct wrk_jobs *w, Spillway__V1__ProducerProgress *out, Spillway__V1__SourceIo *io, int cap,
                      bool again)
{
    int n = 0;
    pthread_mutex_lock(&w->mu);
    if (again)
        w->report_round++;
    for (; n < w->n_retired && n < cap; n++) {      /* final counts first, once; past the cap: the next beat */
        spillway__v1__producer_progress__init(&out[n]);
        out[n].job = w->retired[n].job;
        out[n].elements = w->retired[n].elements;
        out[n].bytes = w->retired[n].bytes;
        source_io(&w->retired[n].io, &out[n], &io[n]);
    }
    memmove(w->retired, w->retired + n, (size_t)(w->n_retired - n) * sizeof w->retired[0]);
    w->n_retired -= n;
    /* The jobs due (changed, not sent for PROGRESS_REFRESH_MS, or all after a registration), the longest
     * unreported first when more are due than fit. */
    const int64_t now = spw_now_ms();
    int n_jobs = 0, n_due = 0;
    for (struct job *jb = w->jobs; jb; jb = jb->next)
        n_jobs++;
    struct job **due = n_jobs ? malloc((size_t)n_jobs * sizeof *due) : NULL;
    for (struct job *jb = w->jobs; due && jb; jb = jb->next)
        if (jb->reported_round != w->report_round || now - jb->reported_ms >= PROGRESS_REFRESH_MS ||
            __atomic_load_n(&jb->sent_elements, __ATOMIC_RELAXED) != jb->reported_elements ||
            __atomic_load_n(&jb->sent_bytes, __ATOMIC_RELAXED) != jb->reported_bytes)
            due[n_due++] = jb;
    if (n_due > cap - n)
        qsort(due, (size_t)n_due, sizeof *due, by_reported_ms);
    /* The whole process's CPU, sending included: a cost per element only while it serves one job. */
    const int64_t cpu_ns = n_jobs == 1 ? spw_process_cpu_ns() : 0;
    int taken = 0;
    for (; taken < n_due && n < cap; taken++, n++) {
        struct job *jb = due[taken];
        spillway__v1__producer_progress__init(&out[n]);
        out[n].job = jb->id;
        out[n].elements = jb->reported_elements = __atomic_load_n(&jb->sent_elements, __ATOMIC_RELAXED);
        out[n].bytes = jb->reported_bytes = __atomic_load_n(&jb->sent_bytes, __ATOMIC_RELAXED);
        out[n].cpu_ns = cpu_ns;
        jb->reported_ms = now;
        jb->reported_round = w->report_round;
        source_io(&jb->src->io, &out[n], &io[n]);
    }
    free(due);
    pthread_mutex_unlock(&w->mu);
    return n;
}

int wrk_jobs_refusals(struct wrk_jobs *w, Spillway__V1__JobRefusal *out, int cap)
{
    int n = 0;
    pthread_mutex_lock(&w->mu);
    for (; n < w->n_refused && n < cap; n++) {
        spillway__v1__job_refusal__init(&out[n]);
        out[n].job = w->refused[n].job;
        out[n].reason = w->refused[n].reason;
    }
    pthread_mutex_unlock(&w->mu);
    return n;
}

int wrk_jobs_drain(struct wrk_jobs *w, int64_t timeout_ms)
{
    __atomic_store_n(&w->draining, 1, __ATOMIC_RELEASE);
    const int64_t deadline = spw_now_ms() + timeout_ms;
    for (;;) {
        int left = 0;       /* splits held, and messages queued, over every job */
        pthread_mutex_lock(&w->mu);
        for (struct job *jb = w->jobs; jb; jb = jb->next) {
            left += __atomic_load_n(&jb->held_splits, __ATOMIC_ACQUIRE);
            pthread_mutex_lock(&jb->mu);
            const bool stopping = jb->stopping;
            pthread_mutex_unlock(&jb->mu);
            struct wrk_outbox_stats os;
            wrk_outbox_stats(jb->out, &os);
            left += stopping ? 0 : os.busy_queues;
        }
        pthread_mutex_unlock(&w->mu);
        if (!left || spw_now_ms() >= deadline)
            return left;
        usleep(50 * 1000);
    }
}

int64_t wrk_jobs_direct_refused(struct wrk_jobs *w)
{
    return w->o.direct ? spw_direct_refused(w->o.direct) : -1;
}

void wrk_jobs_compressed(struct wrk_jobs *w, int64_t *in, int64_t *out)
{
    *in = __atomic_load_n(&w->zstd_in, __ATOMIC_RELAXED);
    *out = __atomic_load_n(&w->zstd_out, __ATOMIC_RELAXED);
}

int wrk_jobs_stats(struct wrk_jobs *w, struct wrk_job_stat *out, int cap)
{
    int n = 0;
    pthread_mutex_lock(&w->mu);
    for (struct job *jb = w->jobs; jb && n < cap; jb = jb->next, n++) {
        struct wrk_job_stat *o = &out[n];
        memset(o, 0, sizeof *o);
        o->job = jb->id;
        o->elements = __atomic_load_n(&jb->sent_elements, __ATOMIC_RELAXED);
        o->bytes = __atomic_load_n(&jb->sent_bytes, __ATOMIC_RELAXED);
        o->held_splits = __atomic_load_n(&jb->held_splits, __ATOMIC_RELAXED);
        o->skip = jb->spec->on_error != SPW_ON_ERROR_FAIL;
        for (int k = 0; k < SPW_FAIL_KINDS; k++)
            o->failures[k] = __atomic_load_n(&jb->failures[k], __ATOMIC_RELAXED);
        struct wrk_outbox_stats os;
        wrk_outbox_stats(jb->out, &os);
        o->queue_bytes = os.queue_bytes;
        o->streams = os.streams;
        o->direct_streams = os.direct_streams;
        o->credit_bytes = os.credit_bytes;
        o->n_groups = jb->ctx.n_groups < WRK_MAX_GROUPS ? jb->ctx.n_groups : WRK_MAX_GROUPS;
        for (int g = 0; g < o->n_groups; g++) {
            o->group_ns[g] = __atomic_load_n(&jb->group_ns[g], __ATOMIC_RELAXED);
            o->group_elements[g] = __atomic_load_n(&jb->group_elements[g], __ATOMIC_RELAXED);
            const struct spw_group *gr = &jb->ctx.groups[g];
            size_t off = 0;
            for (int i = gr->first; i < gr->first + gr->count && off < sizeof o->group_ops[g]; i++)
                off += (size_t)snprintf(o->group_ops[g] + off, sizeof o->group_ops[g] - off, "%s%s",
                                        i > gr->first ? "+" : "", spw_op_name(jb->spec->ops[i].kind));
        }
    }
    pthread_mutex_unlock(&w->mu);
    return n;
}
