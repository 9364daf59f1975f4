/* tools/spillctl/inspect.c - spillctl workers|jobs|job ID (one unary RPC to the dispatcher) and profile (one to a
 * worker), printed as a table or as JSON. Single-threaded. */
#include "tools/spillctl/inspect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/methods.h"
#include "lib/rpc.h"
#include "pipeline/fusion.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "proto/spillway.pb-c.h"

int spw_inspect_call(const char *target, const char *token, const char *method, const ProtobufCMessage *req,
                     int timeout_ms, uint8_t **resp, size_t *len)
{
    struct spw_rpc_channel *ch;
    struct spw_rpc_channel_opts o = {.auth_token = token};
    if (spw_rpc_channel_create(target, &o, &ch) != 0) {
        fprintf(stderr, "spillctl: cannot create a channel to %s\n", target);
        return 1;
    }
    char msg[512] = "";
    int st = spw_rpc_call_msg(ch, method, req, timeout_ms, resp, len, msg, sizeof msg);
    const bool tls = spw_rpc_channel_tls(ch);
    spw_rpc_channel_destroy(ch);
    if (st != SPW_RPC_OK) {
        fprintf(stderr, "spillctl: %s at %s failed: status %d: %s%s\n", method, target, st, msg,
                spw_rpc_tls_hint(st, msg, tls));
        return 1;
    }
    return 0;
}

static int call(const char *target, const char *token, const char *method, const ProtobufCMessage *req,
                int timeout_ms, uint8_t **resp, size_t *len)
{
    return spw_inspect_call(target, token, method, req, timeout_ms, resp, len);
}

/* Workers that make elements on a GPU as well (from ListWorkers), so that producers show as worker:N:gpu. */
static uint64_t g_gpu_workers[256];
static size_t g_n_gpu_workers;

/* What limits a job, from the fraction of time its trainer waited for data: a trainer that hardly waits is
 * the bottleneck (the producers keep up, and their rates show only what it takes); one that waits a fifth of
 * the time or more is held back by the producers. */
#define TRAINER_BOUND_WAIT 0.05
#define PRODUCER_BOUND_WAIT 0.2

static const char *bottleneck(double wait)
{
    return wait < TRAINER_BOUND_WAIT ? "trainer" : wait >= PRODUCER_BOUND_WAIT ? "producers" : "balanced";
}

static const char *bottleneck_why(double wait)
{
    return wait < TRAINER_BOUND_WAIT ? "the trainer is the bottleneck (the producers keep up)"
           : wait >= PRODUCER_BOUND_WAIT ? "the producers are the bottleneck (more workers would help)"
                                         : "producers and trainer about even";
}

static const char *producer_name(uint64_t holder, char *buf, size_t n)
{
    bool gpu = false;
    for (size_t i = 0; i < g_n_gpu_workers && !(holder >> 63); i++)
        gpu |= g_gpu_workers[i] == holder;
    if (holder >> 63)       /* dispatcher/state.h: the rank, and bit 19 for the client's GPU thread */
        snprintf(buf, n, "client:rank%llu%s", (unsigned long long)(holder & 0x7FFFF),
                 holder & (UINT64_C(1) << 19) ? ":gpu" : "");
    else
        snprintf(buf, n, "worker:%llu%s", (unsigned long long)holder, gpu ? ":gpu" : "");
    return buf;
}

static void print_job_json(const Spillway__V1__JobInfo *j)
{
    printf("{\"job\": %llu, \"manifest_hash\": \"%016llx\", \"samples\": %lld, \"epochs\": %lld, "
           "\"splits_per_epoch\": %lld, \"split_size\": %d, \"cut\": %d, \"world_size\": %d, \"epoch\": %lld, "
           "\"acked\": %lld, \"leased\": %lld, \"pending\": %lld, \"paused\": %s, \"finished\": %s, \"name\": \"%s\", "
           "\"client_only\": %s, \"expired\": %s, \"cancelled\": %s, \"closed\": %s, \"ended\": %s, \"client\": \"%s\"}",
           (unsigned long long)j->job, (unsigned long long)j->manifest_hash, (long long)j->samples,
           (long long)j->epochs, (long long)j->splits_per_epoch, j->split_size, j->cut, j->world_size,
           (long long)j->epoch, (long long)j->acked, (long long)j->leased, (long long)j->pending,
           j->paused ? "true" : "false", j->finished ? "true" : "false", j->name, j->client_only ? "true" : "false",
           j->expired ? "true" : "false", j->cancelled ? "true" : "false", j->closed ? "true" : "false",
           j->ended ? "true" : "false", j->client);
}

static void print_refusals_json(Spillway__V1__JobRefusal *const *v, size_t n)
{
    printf("[");
    for (size_t i = 0; i < n; i++) {
        printf("%s{\"job\": %llu, \"worker_id\": %llu, \"reason\": ", i ? ", " : "", (unsigned long long)v[i]->job,
               (unsigned long long)v[i]->worker_id);
        spw_json_string(stdout, v[i]->reason);
        printf("}");
    }
    printf("]");
}

static void print_job_header(void)
{
    printf("%-6s %-9s %-7s %-6s %-5s %-6s %-7s %-7s %-7s %-8s %s\n", "JOB", "SAMPLES", "EPOCHS", "EPOCH", "CUT",
           "SPLITS", "ACKED", "LEASED", "PENDING", "STATE", "NAME");
}

static void print_job_row(const Spillway__V1__JobInfo *j)
{
    printf("%-6llu %-9lld %-7lld %-6lld %-5d %-6lld %-7lld %-7lld %-7lld %-8s %s\n", (unsigned long long)j->job,
           (long long)j->samples, (long long)j->epochs, (long long)j->epoch, j->cut, (long long)j->splits_per_epoch,
           (long long)j->acked, (long long)j->leased, (long long)j->pending,
           j->cancelled ? "cancelled" : j->closed ? "closed" : j->expired ? "expired" : j->finished ? "finished"
           : j->paused ? "paused" : j->client_only ? "client" : "running", j->name);
}

int spw_ctl_job_id(const char *arg, const char *what, unsigned long long *id)
{
    char *end;
    *id = arg ? strtoull(arg, &end, 10) : 0;
    if (!arg || *end || !*id) {
        fprintf(stderr, "spillctl: %s needs a job id (a positive integer)\n", what);
        return 2;
    }
    return 0;
}

int spw_inspect_run(const char *target, const char *token, const char *what, const char *job_id, int json,
                    int timeout_ms)
{
    uint8_t *resp = NULL;
    size_t len = 0;
    int rc;
    if (!strcmp(what, "workers")) {
        Spillway__V1__ListWorkersRequest req = SPILLWAY__V1__LIST_WORKERS_REQUEST__INIT;
        if ((rc = call(target, token, SPW_PATH(LIST_WORKERS), &req.base, timeout_ms, &resp, &len)))
            return rc;
        Spillway__V1__ListWorkersResponse *r = spillway__v1__list_workers_response__unpack(NULL, len, resp);
        free(resp);
        if (!r) {
            fprintf(stderr, "spillctl: malformed ListWorkers reply\n");
            return 1;
        }
        if (json) {
            printf("{\"workers\": [");
            for (size_t i = 0; i < r->n_workers; i++) {
                const Spillway__V1__WorkerInfo *w = r->workers[i];
                printf("%s{\"worker_id\": %llu, \"address\": ", i ? ", " : "", (unsigned long long)w->worker_id);
                spw_json_string(stdout, w->address);
                printf(", \"threads\": %d, \"gpu\": ", w->threads);
                spw_json_string(stdout, w->gpu ? w->gpu : "");
                printf(", \"alive\": %s, \"last_heartbeat_ms_ago\": %lld, \"leases\": %lld, \"cannot_serve\": ",
                       w->alive ? "true" : "false", (long long)w->last_heartbeat_ms_ago, (long long)w->leases);
                print_refusals_json(w->cannot_serve, w->n_cannot_serve);
                printf("}");
            }
            printf("]}\n");
        } else {
            printf("%-8s %-24s %-8s %-6s %-12s %-7s %s\n", "WORKER", "ADDRESS", "THREADS", "ALIVE", "HEARTBEAT",
                   "LEASES", "GPU");
            for (size_t i = 0; i < r->n_workers; i++) {
                const Spillway__V1__WorkerInfo *w = r->workers[i];
                char ago[32];
                snprintf(ago, sizeof ago, "%lldms ago", (long long)w->last_heartbeat_ms_ago);
                printf("%-8llu %-24s %-8d %-6s %-12s %-7lld %s\n", (unsigned long long)w->worker_id, w->address,
                       w->threads, w->alive ? "yes" : "no", ago, (long long)w->leases,
                       w->gpu && *w->gpu ? w->gpu : "-");
                for (size_t k = 0; k < w->n_cannot_serve; k++)
                    printf("         cannot serve job %llu: %s\n", (unsigned long long)w->cannot_serve[k]->job,
                           w->cannot_serve[k]->reason);
            }
        }
        spillway__v1__list_workers_response__free_unpacked(r, NULL);
        return 0;
    }
    if (!strcmp(what, "jobs")) {
        Spillway__V1__ListJobsRequest req = SPILLWAY__V1__LIST_JOBS_REQUEST__INIT;
        if ((rc = call(target, token, SPW_PATH(LIST_JOBS), &req.base, timeout_ms, &resp, &len)))
            return rc;
        Spillway__V1__ListJobsResponse *r = spillway__v1__list_jobs_response__unpack(NULL, len, resp);
        free(resp);
        if (!r) {
            fprintf(stderr, "spillctl: malformed ListJobs reply\n");
            return 1;
        }
        if (json) {
            printf("{\"jobs\": [");
            for (size_t i = 0; i < r->n_jobs; i++) {
                printf("%s", i ? ", " : "");
                print_job_json(r->jobs[i]);
            }
            printf("]}\n");
        } else {
            print_job_header();
            for (size_t i = 0; i < r->n_jobs; i++)
                print_job_row(r->jobs[i]);
        }
        spillway__v1__list_jobs_response__free_unpacked(r, NULL);
        return 0;
    }
    if (!strcmp(what, "job") && job_id && !strcmp(job_id, "cancel")) {
        fprintf(stderr, "spillctl: job cancel needs a job id (spillctl job cancel ID)\n");
        return 2;
    }
    if (!strcmp(what, "cancel")) {
        unsigned long long id;
        if (spw_ctl_job_id(job_id, "job cancel", &id))
            return 2;
        Spillway__V1__CancelJobRequest req = SPILLWAY__V1__CANCEL_JOB_REQUEST__INIT;
        req.job = id;
        if ((rc = call(target, token, SPW_PATH(CANCEL_JOB), &req.base, timeout_ms, &resp, &len)))
            return rc;
        Spillway__V1__CancelJobResponse *r = spillway__v1__cancel_job_response__unpack(NULL, len, resp);
        free(resp);
        if (json)
            printf("{\"job\": %llu, \"cancelled\": true, \"was_finished\": %s}\n", id,
                   r && r->was_finished ? "true" : "false");
        else
            printf("job %llu cancelled%s\n", id, r && r->was_finished ? " (it had finished)" : "");
        if (r)
            spillway__v1__cancel_job_response__free_unpacked(r, NULL);
        return 0;
    }
    if (!strcmp(what, "job")) {
        unsigned long long id;
        if (spw_ctl_job_id(job_id, "job", &id))
            return 2;
        Spillway__V1__ListWorkersRequest wreq = SPILLWAY__V1__LIST_WORKERS_REQUEST__INIT;
        if (call(target, token, SPW_PATH(LIST_WORKERS), &wreq.base, timeout_ms, &resp, &len) == 0) {
            Spillway__V1__ListWorkersResponse *wr = spillway__v1__list_workers_response__unpack(NULL, len, resp);
            for (size_t i = 0; wr && i < wr->n_workers && g_n_gpu_workers < 256; i++)
                if (wr->workers[i]->gpu && *wr->workers[i]->gpu)
                    g_gpu_workers[g_n_gpu_workers++] = wr->workers[i]->worker_id;
            if (wr)
                spillway__v1__list_workers_response__free_unpacked(wr, NULL);
            free(resp);
        }
        Spillway__V1__DescribeJobRequest req = SPILLWAY__V1__DESCRIBE_JOB_REQUEST__INIT;
        req.job = id;
        if ((rc = call(target, token, SPW_PATH(DESCRIBE_JOB), &req.base, timeout_ms, &resp, &len)))
            return rc;
        Spillway__V1__DescribeJobResponse *r = spillway__v1__describe_job_response__unpack(NULL, len, resp);
        free(resp);
        if (!r || !r->job) {
            fprintf(stderr, "spillctl: malformed DescribeJob reply\n");
            if (r)
                spillway__v1__describe_job_response__free_unpacked(r, NULL);
            return 1;
        }
        char name[48];
        double measured = 0;            /* what all producers deliver now, against the plan's prediction */
        for (size_t i = 0; i < r->n_producers; i++)     /* a client's GPU row is part of its own */
            if (!(r->producers[i]->producer >> 63 && r->producers[i]->producer & (UINT64_C(1) << 19)))
                measured += r->producers[i]->elements_per_s;
        if (json) {
            printf("{\"job\": ");
            print_job_json(r->job);
            printf(", \"leased\": [");
            for (size_t i = 0; i < r->n_leased; i++)
                printf("%s{\"epoch\": %llu, \"split\": %llu, \"generation\": %llu, \"holder\": \"%s\"}",
                       i ? ", " : "", (unsigned long long)r->leased[i]->epoch,
                       (unsigned long long)r->leased[i]->split, (unsigned long long)r->leased[i]->generation,
                       producer_name(r->leased[i]->holder, name, sizeof name));
            printf("], \"producers\": [");
            for (size_t i = 0; i < r->n_producers; i++) {
                const Spillway__V1__ProducerStats *p = r->producers[i];
                printf("%s{\"producer\": \"%s\", \"elements\": %lld, \"bytes\": %lld, \"elements_per_s\": %.1f, "
                       "\"bytes_per_s\": %.0f, \"cpu_ns_per_element\": %.0f",
                       i ? ", " : "", producer_name(p->producer, name, sizeof name), (long long)p->elements,
                       (long long)p->bytes, p->elements_per_s, p->bytes_per_s, p->cpu_ns_per_element);
                if (p->source)
                    printf(", \"source\": {\"bytes\": %lld, \"requests\": %lld, \"retries\": %lld}",
                           (long long)p->source->bytes, (long long)p->source->requests,
                           (long long)p->source->retries);
                printf("}");
            }
            printf("], \"client_remote_ns\": %.0f, \"cannot_serve\": ", r->client_remote_ns);
            print_refusals_json(r->cannot_serve, r->n_cannot_serve);
            if (r->plan)
                printf(", \"predicted_elements_per_s\": %.1f, \"measured_elements_per_s\": %.1f, \"plan_cut\": %d",
                       r->plan->throughput, measured, r->plan->cut);
            if (r->client_wait_fraction >= 0)
                printf(", \"delivered_elements_per_s\": %.1f, \"trainer_wait_fraction\": %.3f, \"bottleneck\": \"%s\"",
                       r->client_elements_per_s, r->client_wait_fraction, bottleneck(r->client_wait_fraction));
            printf("}\n");
        } else {
            print_job_header();
            print_job_row(r->job);
            if (r->job->ended)
                printf("\nended: the job left the dispatcher's table; this is its summary\n");
            if (r->plan)
                printf("\nplanned: cut %d, %.0f elements/s predicted; producers making %.0f elements/s now (last "
                       "heartbeats); spillctl explain %llu for the table\n",
                       r->plan->cut, r->plan->throughput, measured, (unsigned long long)id);
            if (r->client_wait_fraction >= 0)
                printf("%sdelivered: %.0f elements/s to the trainer, which waits for data %.0f%% of the time: %s\n",
                       r->plan ? "" : "\n", r->client_elements_per_s, 100 * r->client_wait_fraction,
                       bottleneck_why(r->client_wait_fraction));
            printf("\n%-16s %10s %10s %12s %10s %12s\n", "PRODUCER", "ELEMENTS", "MB", "ELEMENTS/S", "MB/S",
                   "CPU US/EL");
            for (size_t i = 0; i < r->n_producers; i++) {
                const Spillway__V1__ProducerStats *p = r->producers[i];
                printf("%-16s %10lld %10.1f %12.1f %10.1f %12.0f\n", producer_name(p->producer, name, sizeof name),
                       (long long)p->elements, (double)p->bytes / 1e6, p->elements_per_s, p->bytes_per_s / 1e6,
                       p->cpu_ns_per_element / 1e3);
            }
            for (size_t i = 0; i < r->n_producers; i++) {
                const Spillway__V1__SourceIo *io = r->producers[i]->source;
                if (io)
                    printf("%s read %.1f MB of remote shards in %lld requests, %lld retried\n",
                           producer_name(r->producers[i]->producer, name, sizeof name), (double)io->bytes / 1e6,
                           (long long)io->requests, (long long)io->retries);
            }
            if (r->client_remote_ns > 0)
                printf("client: %.0f us CPU per remote element (receiving and gRPC threads)\n",
                       r->client_remote_ns / 1e3);
            for (size_t i = 0; i < r->n_cannot_serve; i++)
                printf("worker:%llu cannot serve this job: %s\n", (unsigned long long)r->cannot_serve[i]->worker_id,
                       r->cannot_serve[i]->reason);
            printf("\n%-7s %-7s %-11s %s\n", "EPOCH", "SPLIT", "GENERATION", "HELD BY");
            for (size_t i = 0; i < r->n_leased; i++)
                printf("%-7llu %-7llu %-11llu %s\n", (unsigned long long)r->leased[i]->epoch,
                       (unsigned long long)r->leased[i]->split, (unsigned long long)r->leased[i]->generation,
                       producer_name(r->leased[i]->holder, name, sizeof name));
        }
        spillway__v1__describe_job_response__free_unpacked(r, NULL);
        return 0;
    }
    fprintf(stderr, "spillctl: unknown command \"%s\"\n", what);
    return 2;
}

int spw_inspect_profile(const char *worker, const char *auth_token, const char *pipeline, int samples, int json,
                        int timeout_ms)
{
    char err[1024];
    struct spw_pipeline_spec *spec;
    if (spw_spec_load_file(pipeline, &spec, err, sizeof err) != 0) {
        fprintf(stderr, "spillctl: %s\n", err);    /* err names the file */
        return 2;
    }
    Spillway__V1__Pipeline *pipe;
    if (spw_spec_to_proto(spec, &pipe) != 0) {
        spw_spec_free(spec);
        return 1;
    }
    Spillway__V1__ProfileRequest req = SPILLWAY__V1__PROFILE_REQUEST__INIT;
    req.pipeline = pipe;
    req.samples = samples;
    uint8_t *resp = NULL;
    size_t len = 0;
    int rc = call(worker, auth_token, SPW_PATH(PROFILE), &req.base, timeout_ms, &resp, &len);
    spw_spec_proto_free(pipe);
    Spillway__V1__ProfileResponse *r = rc ? NULL : spillway__v1__profile_response__unpack(NULL, len, resp);
    free(resp);
    if (!r) {
        if (!rc)
            fprintf(stderr, "spillctl: malformed Profile reply\n");
        spw_spec_free(spec);
        return 1;
    }
    struct spw_group groups[256];
    const int ng = spw_fusion_groups(spec, groups);
    if (json) {
        printf("{\"threads\": %d, \"samples\": %d, \"skipped\": %lld, \"gpu_elements_per_s\": %.1f, "
               "\"gpu_cpu_ns\": %.0f, \"cuts\": [", r->threads, r->samples, (long long)r->skipped,
               r->gpu_elements_per_s, r->gpu_cpu_ns);
        for (size_t i = 0; i < r->n_cuts; i++)
            printf("%s{\"cut\": %d, \"ns_per_element\": %.0f, \"bytes_per_element\": %.0f}", i ? ", " : "",
                   r->cuts[i]->cut, r->cuts[i]->ns_per_element, r->cuts[i]->bytes_per_element);
        printf("]}\n");
    } else {
        printf("%d elements on %d threads (%lld skipped); per element per thread, all threads busy:\n", r->samples,
               r->threads, (long long)r->skipped);
        printf("%-4s %-52s %12s %12s\n", "CUT", "RUNS ON THE WORKER", "US/ELEMENT", "KB/ELEMENT");
        for (size_t i = 0; i < r->n_cuts; i++) {
            const int k = r->cuts[i]->cut;
            char what[64] = "read";
            if (k > 0 && k <= ng)
                snprintf(what, sizeof what, "read + groups 0-%d (up to %s)", k - 1,
                         spw_op_name(spec->ops[groups[k - 1].first + groups[k - 1].count - 1].kind));
            printf("%-4d %-52s %12.1f %12.1f\n", k, what, r->cuts[i]->ns_per_element / 1e3,
                   r->cuts[i]->bytes_per_element / 1e3);
        }
        if (r->gpu_elements_per_s > 0)
            printf("its GPU makes the whole pipeline at %.1f elements/s, %.1f us of CPU each\n",
                   r->gpu_elements_per_s, r->gpu_cpu_ns / 1e3);
    }
    spillway__v1__profile_response__free_unpacked(r, NULL);
    spw_spec_free(spec);
    return 0;
}

void spw_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}
