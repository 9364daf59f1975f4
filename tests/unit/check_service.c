/* tests/unit/check_service.c - the dispatcher's handlers called directly (no sockets): a worker registers and
 * heartbeats, a client creates a job over a real image folder, the worker leases splits, the client acks
 * them to the end; bad requests get a status that says what is wrong (malformed bytes, bad pipeline, wrong
 * manifest hash, a zombie client incarnation, unknown ids); profiles asked ahead of CreateJob are taken once;
 * the reply adapter packs what a handler filled and frees what it handed over. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "dispatcher/codec.h"
#include "dispatcher/profile_ahead.h"
#include "dispatcher/service.h"
#include "lib/clock.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "proto/spillway.pb-c.h"

#define FIX "tests/data/fixtures/"

static struct disp_service *S;
static char g_root[64];
static char msg[512];

static void setup(void)
{
    struct disp_service_opts o = {.worker_timeout_ms = 60000, .client_timeout_ms = 60000,
                                  .heartbeat_interval_ms = 500, .speculate_after_ms = 0, .default_split_size = 2};
    char err[256];
    ck_assert_int_eq(disp_service_create(&o, &S, err, sizeof err), 0);
    snprintf(g_root, sizeof g_root, "/tmp/spw-svc-XXXXXX");
    ck_assert(mkdtemp(g_root) != NULL);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/a %s/b && cp " FIX "rgb420.jpg %s/a/1.jpg && cp " FIX "gray.jpg %s/a/2.jpg"
             " && cp " FIX "rgb444.jpg %s/b/3.jpg", g_root, g_root, g_root, g_root, g_root);
    ck_assert_int_eq(system(cmd), 0);
}

static void teardown(void)
{
    disp_service_destroy(S);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_root);
    ck_assert_int_eq(system(cmd), 0);
}

typedef int (*handler)(void *, const uint8_t *, size_t, uint8_t **, size_t *, char *, size_t);

/* Pack m, call h, return the status; *resp gets the reply bytes. */
static int call(handler h, const ProtobufCMessage *m, uint8_t **resp, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n + 1);
    protobuf_c_message_pack(m, buf);
    *resp = NULL;
    msg[0] = 0;
    int st = h(S, buf, n, resp, len, msg, sizeof msg);
    free(buf);
    return st;
}

static Spillway__V1__Pipeline *pipeline(const char *path)
{
    static Spillway__V1__Pipeline p;
    static Spillway__V1__Source src;
    static Spillway__V1__Batch batch;
    static Spillway__V1__Op op, *ops[1];
    spillway__v1__pipeline__init(&p);
    spillway__v1__source__init(&src);
    spillway__v1__batch__init(&batch);
    spillway__v1__op__init(&op);
    src.format = SPILLWAY__V1__SOURCE_FORMAT__SOURCE_FORMAT_IMAGE_FOLDER;
    src.opt_format_case = SPILLWAY__V1__SOURCE__OPT_FORMAT_FORMAT;
    src.path = (char *)path;
    op.op = SPILLWAY__V1__OP_KIND__OP_KIND_DECODE_JPEG;
    ops[0] = &op;
    batch.size = 2;
    batch.opt_size_case = SPILLWAY__V1__BATCH__OPT_SIZE_SIZE;
    p.source = &src;
    p.n_ops = 1;
    p.ops = ops;
    p.batch = &batch;
    return &p;
}

static uint64_t g_secret;    /* the last registered worker's secret */

static uint64_t register_worker(void)
{
    Spillway__V1__RegisterWorkerRequest r = SPILLWAY__V1__REGISTER_WORKER_REQUEST__INIT;
    r.address = "127.0.0.1:7000";
    r.protocol_version = SPW_PROTOCOL_VERSION;
    r.threads = 2;
    uint8_t *resp;
    size_t len;
    ck_assert_int_eq(call(disp_register_worker, &r.base, &resp, &len), 0);
    Spillway__V1__RegisterWorkerResponse *o = spillway__v1__register_worker_response__unpack(NULL, len, resp);
    uint64_t id = o->worker_id;
    g_secret = o->secret;
    ck_assert_uint_ne(g_secret, 0);
    ck_assert_int_eq(o->heartbeat_interval_ms, 500);
    spillway__v1__register_worker_response__free_unpacked(o, NULL);
    free(resp);
    return id;
}

static Spillway__V1__CreateJobResponse *create_job(uint64_t incarnation)
{
    Spillway__V1__CreateJobRequest r = SPILLWAY__V1__CREATE_JOB_REQUEST__INIT;
    r.pipeline = pipeline(g_root);
    r.protocol_version = SPW_PROTOCOL_VERSION;
    r.cut = -1;
    r.incarnation = incarnation;
    uint8_t *resp;
    size_t len;
    int st = call(disp_create_job, &r.base, &resp, &len);
    ck_assert_msg(st == 0, "CreateJob: %d %s", st, msg);
    Spillway__V1__CreateJobResponse *o = spillway__v1__create_job_response__unpack(NULL, len, resp);
    free(resp);
    return o;
}

/* A worker's heartbeat reply carries each job's pipeline as packed at CreateJob (WorkerHeartbeatResponseWire,
 * no unpack and repack per heartbeat); it decodes as the WorkerHeartbeatResponse workers read, equal to the
 * pipeline created. */
START_TEST(test_service_heartbeat_tasks_decode_as_created)
{
    uint64_t w = register_worker();
    Spillway__V1__CreateJobResponse *job = create_job(1);
    Spillway__V1__WorkerHeartbeatRequest hb = SPILLWAY__V1__WORKER_HEARTBEAT_REQUEST__INIT;
    hb.worker_id = w;
    hb.secret = g_secret;
    uint8_t *resp;
    size_t len;
    ck_assert_int_eq(call(disp_worker_heartbeat, &hb.base, &resp, &len), 0);
    Spillway__V1__WorkerHeartbeatResponse *o = spillway__v1__worker_heartbeat_response__unpack(NULL, len, resp);
    ck_assert_ptr_nonnull(o);
    ck_assert_uint_eq(o->n_tasks, 1);
    ck_assert_uint_eq(o->tasks[0]->job, job->job);
    ck_assert_int_eq(o->tasks[0]->cut, 1);
    ck_assert_uint_ne(o->tasks[0]->job_secret, 0);
    const Spillway__V1__Pipeline *got = o->tasks[0]->pipeline, *want = pipeline(g_root);
    ck_assert_ptr_nonnull(got);
    size_t n = spillway__v1__pipeline__get_packed_size(got);
    ck_assert_uint_eq(n, spillway__v1__pipeline__get_packed_size(want));
    uint8_t *a = malloc(n), *b = malloc(n);
    spillway__v1__pipeline__pack(got, a);
    spillway__v1__pipeline__pack(want, b);
    ck_assert(memcmp(a, b, n) == 0);
    ck_assert_str_eq(got->source->path, g_root);
    free(a);
    free(b);
    spillway__v1__worker_heartbeat_response__free_unpacked(o, NULL);
    free(resp);
    spillway__v1__create_job_response__free_unpacked(job, NULL);
}
END_TEST

/* A worker that sends the digest of the list it holds gets a few bytes while the list is unchanged, and the
 * whole list again when a job is added, when it sends 0 (a fresh or old worker) or a digest of another list. */
START_TEST(test_service_heartbeat_sends_tasks_only_when_changed)
{
    uint64_t w = register_worker();
    Spillway__V1__CreateJobResponse *job = create_job(1);
    Spillway__V1__WorkerHeartbeatRequest hb = SPILLWAY__V1__WORKER_HEARTBEAT_REQUEST__INIT;
    hb.worker_id = w;
    hb.secret = g_secret;
    uint8_t *resp;
    size_t len;
    Spillway__V1__WorkerHeartbeatResponse *o;
    uint64_t digests[4];
    for (int k = 0; k < 4; k++) {
        /* k = 0: a fresh worker (digest 0); 1: it holds that list; 2: a new job; 3: a digest of no list */
        if (k == 2) {
            Spillway__V1__CreateJobResponse *j2 = create_job(1);
            ck_assert_ptr_nonnull(j2);
            spillway__v1__create_job_response__free_unpacked(j2, NULL);
        }
        if (k == 3)
            hb.tasks_digest ^= 0x5a5a;
        ck_assert_int_eq(call(disp_worker_heartbeat, &hb.base, &resp, &len), 0);
        o = spillway__v1__worker_heartbeat_response__unpack(NULL, len, resp);
        ck_assert_ptr_nonnull(o);
        ck_assert_uint_ne(o->tasks_digest, 0);
        digests[k] = o->tasks_digest;
        if (k == 1) {
            ck_assert(o->tasks_unchanged);
            ck_assert_uint_eq(o->n_tasks, 0);
            ck_assert_uint_lt(len, 16);
        } else {
            ck_assert(!o->tasks_unchanged);
            ck_assert_uint_eq(o->n_tasks, k == 0 ? 1 : 2);
            ck_assert_uint_eq(o->tasks[0]->job, job->job);
        }
        hb.tasks_digest = o->tasks_digest;
        spillway__v1__worker_heartbeat_response__free_unpacked(o, NULL);
        free(resp);
    }
    ck_assert_uint_eq(digests[0], digests[1]);
    ck_assert_uint_ne(digests[1], digests[2]);
    ck_assert_uint_eq(digests[2], digests[3]);
    spillway__v1__create_job_response__free_unpacked(job, NULL);
}
END_TEST

/* A client heartbeat's worker list only when it changed (ClientHeartbeatRequest.workers_digest): a worker
 * joining changes it at once (the cached digest of every usable worker follows registrations), and a refusal
 * takes the refusing worker off that job's list alone. */
START_TEST(test_service_client_heartbeat_sends_workers_only_when_changed)
{
    register_worker();
    Spillway__V1__CreateJobResponse *job = create_job(1);
    Spillway__V1__ClientHeartbeatRequest hb = SPILLWAY__V1__CLIENT_HEARTBEAT_REQUEST__INIT;
    hb.job = job->job;
    hb.incarnation = 1;
    hb.job_secret = job->job_secret;
    uint8_t *resp;
    size_t len;
    uint64_t digests[5], second = 0, second_secret = 0;
    for (int k = 0; k < 5; k++) {
        /* k = 0: no list held (digest 0); 1: it holds that list; 2: a second worker joined; 3: a wrong digest;
         * 4: the second worker refused the job (the list of a job with a refusal is made for it alone) */
        if (k == 2) {
            Spillway__V1__RegisterWorkerRequest r = SPILLWAY__V1__REGISTER_WORKER_REQUEST__INIT;
            r.address = "127.0.0.1:7001";
            r.protocol_version = SPW_PROTOCOL_VERSION;
            r.threads = 2;
            ck_assert_int_eq(call(disp_register_worker, &r.base, &resp, &len), 0);
            Spillway__V1__RegisterWorkerResponse *o = spillway__v1__register_worker_response__unpack(NULL, len, resp);
            second = o->worker_id;
            second_secret = o->secret;
            spillway__v1__register_worker_response__free_unpacked(o, NULL);
            free(resp);
        }
        if (k == 3)
            hb.workers_digest ^= 0x5a5a;
        if (k == 4) {
            Spillway__V1__WorkerHeartbeatRequest wh = SPILLWAY__V1__WORKER_HEARTBEAT_REQUEST__INIT;
            Spillway__V1__JobRefusal no = SPILLWAY__V1__JOB_REFUSAL__INIT, *nop = &no;
            no.job = job->job;
            no.reason = "cannot read the dataset";
            wh.worker_id = second;
            wh.secret = second_secret;
            wh.n_cannot_serve = 1;
            wh.cannot_serve = &nop;
            ck_assert_int_eq(call(disp_worker_heartbeat, &wh.base, &resp, &len), 0);
            free(resp);
        }
        ck_assert_int_eq(call(disp_client_heartbeat, &hb.base, &resp, &len), 0);
        Spillway__V1__ClientHeartbeatResponse *h = spillway__v1__client_heartbeat_response__unpack(NULL, len, resp);
        ck_assert_ptr_nonnull(h);
        ck_assert_uint_ne(h->workers_digest, 0);
        digests[k] = h->workers_digest;
        if (k == 1) {
            ck_assert(h->workers_unchanged);
            ck_assert_uint_eq(h->n_workers, 0);
            ck_assert_uint_lt(len, 16);
        } else {
            ck_assert(!h->workers_unchanged);
            ck_assert_uint_eq(h->n_workers, k == 0 || k == 4 ? 1 : 2);
            ck_assert_str_eq(h->workers[0]->address, "127.0.0.1:7000");
        }
        hb.workers_digest = h->workers_digest;
        spillway__v1__client_heartbeat_response__free_unpacked(h, NULL);
        free(resp);
    }
    ck_assert_uint_eq(digests[0], digests[1]);
    ck_assert_uint_ne(digests[1], digests[2]);
    ck_assert_uint_eq(digests[2], digests[3]);
    ck_assert_uint_eq(digests[4], digests[0]);     /* the same one worker: the same digest by either path */
    ck_assert_uint_eq(digests[4], digests[0]);     /* the same one worker: the same digest by either path */
    spillway__v1__create_job_response__free_unpacked(job, NULL);
}
END_TEST

START_TEST(test_service_job_runs_to_the_end)
{
    uint64_t w = register_worker();
    Spillway__V1__CreateJobResponse *job = create_job(1);
    ck_assert_int_eq(job->samples, 3);
    ck_assert_int_eq(job->splits_per_epoch, 2);
    ck_assert_int_eq(job->cut, 1);                 /* default: the whole pipeline on the workers */
    ck_assert_uint_eq(job->n_workers, 1);
    Spillway__V1__LeaseSplitRequest lr = SPILLWAY__V1__LEASE_SPLIT_REQUEST__INIT;
    lr.job = job->job;
    lr.worker_id = w;
    lr.worker_secret = g_secret;
    lr.max_splits = 8;
    uint8_t *resp;
    size_t len;
    lr.manifest_hash = job->manifest_hash;
    ck_assert_int_eq(call(disp_lease_split, &lr.base, &resp, &len), 7);     /* without the job's secret */
    ck_assert(strstr(msg, "wrong job secret") != NULL);
    lr.job_secret = job->job_secret;
    lr.worker_secret = 0;
    ck_assert_int_eq(call(disp_lease_split, &lr.base, &resp, &len), 7);     /* a worker's id without its secret */
    lr.worker_secret = g_secret;
    ck_assert_int_eq(call(disp_lease_split, &lr.base, &resp, &len), 0);
    Spillway__V1__LeaseSplitResponse *ls = spillway__v1__lease_split_response__unpack(NULL, len, resp);
    free(resp);
    ck_assert_uint_eq(ls->n_leases, 2);
    ck_assert_int_eq(ls->leases[1]->first_position, 2);
    ck_assert_int_eq(ls->leases[1]->count, 1);
    Spillway__V1__DescribeJobRequest dr = SPILLWAY__V1__DESCRIBE_JOB_REQUEST__INIT;
    dr.job = job->job;
    ck_assert_int_eq(call(disp_describe_job, &dr.base, &resp, &len), 0);
    Spillway__V1__DescribeJobResponse *d = spillway__v1__describe_job_response__unpack(NULL, len, resp);
    free(resp);
    ck_assert_uint_eq(d->n_leased, 2);
    ck_assert_uint_eq(d->leased[0]->holder, w);
    spillway__v1__describe_job_response__free_unpacked(d, NULL);
    /* the client acks both splits: the one-epoch job is finished */
    Spillway__V1__SplitRef a0 = SPILLWAY__V1__SPLIT_REF__INIT, a1 = SPILLWAY__V1__SPLIT_REF__INIT;
    a1.split = 1;
    Spillway__V1__SplitRef *acks[2] = {&a0, &a1};
    Spillway__V1__ClientHeartbeatRequest hb = SPILLWAY__V1__CLIENT_HEARTBEAT_REQUEST__INIT;
    hb.job = job->job;
    hb.incarnation = UINT64_MAX;                /* a forged heartbeat: a huge incarnation, no job secret */
    hb.n_acked = 2;
    hb.acked = acks;
    ck_assert(job->job_secret != 0);
    ck_assert_int_eq(call(disp_client_heartbeat, &hb.base, &resp, &len), 7);
    ck_assert(strstr(msg, "wrong job secret") != NULL);
    hb.incarnation = 1;                         /* nothing of it was applied: the real client goes on */
    hb.job_secret = job->job_secret;
    ck_assert_int_eq(call(disp_client_heartbeat, &hb.base, &resp, &len), 0);
    Spillway__V1__ClientHeartbeatResponse *h = spillway__v1__client_heartbeat_response__unpack(NULL, len, resp);
    free(resp);
    ck_assert(h->finished);
    spillway__v1__client_heartbeat_response__free_unpacked(h, NULL);
    spillway__v1__lease_split_response__free_unpacked(ls, NULL);
    spillway__v1__create_job_response__free_unpacked(job, NULL);
}
END_TEST

START_TEST(test_service_bad_requests_say_what_is_wrong)
{
    uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f}, *resp;
    size_t len;
    ck_assert_int_eq(disp_create_job(S, junk, sizeof junk, &resp, &len, msg, sizeof msg), 3);
    ck_assert(strstr(msg, "malformed") != NULL);
    /* a pipeline whose source does not exist */
    Spillway__V1__CreateJobRequest r = SPILLWAY__V1__CREATE_JOB_REQUEST__INIT;
    r.pipeline = pipeline("/nonexistent/spw");
    r.protocol_version = SPW_PROTOCOL_VERSION;
    r.cut = -1;
    ck_assert_int_eq(call(disp_create_job, &r.base, &resp, &len), 9);
    ck_assert(strstr(msg, "/nonexistent/spw") != NULL);
    /* a cut past the pipeline */
    r.pipeline = pipeline(g_root);
    r.cut = 7;
    ck_assert_int_eq(call(disp_create_job, &r.base, &resp, &len), 3);
    ck_assert(strstr(msg, "cut 7") != NULL);
    /* planning (cut -2) without the client's facts, or with facts that do not fit the pipeline's cuts */
    r.cut = -2;
    ck_assert_int_eq(call(disp_create_job, &r.base, &resp, &len), 3);
    ck_assert(strstr(msg, "client's facts") != NULL);
    Spillway__V1__ClientFacts cf = SPILLWAY__V1__CLIENT_FACTS__INIT;
    double costs[5] = {1, 2, 3, 4, 5};
    cf.n_remote_ns = cf.n_bytes = 5;
    cf.remote_ns = cf.bytes = costs;
    cf.local_ns = 1e6;
    cf.cores = 1;
    r.client = &cf;
    ck_assert_int_eq(call(disp_create_job, &r.base, &resp, &len), 3);
    ck_assert(strstr(msg, "5 costs and 5 sizes") != NULL);
    cf.n_remote_ns = cf.n_bytes = 2;                 /* the right count (1 group: cuts 0 and 1) */
    cf.cores = -1;
    ck_assert_int_eq(call(disp_create_job, &r.base, &resp, &len), 3);
    ck_assert(strstr(msg, "cores") != NULL);
    cf.cores = 1;           /* valid, and no worker: a job all the same (its client makes it), no offload yet */
    ck_assert_int_eq(call(disp_create_job, &r.base, &resp, &len), 0);
    Spillway__V1__CreateJobResponse *local = spillway__v1__create_job_response__unpack(NULL, len, resp);
    free(resp);
    ck_assert_uint_ne(local->job, 0);
    ck_assert_int_eq(local->cut, local->groups);
    ck_assert(local->plan && !local->plan->offload && local->plan->workers == 0);
    spillway__v1__create_job_response__free_unpacked(local, NULL);
    r.client = NULL;
    /* a worker that names a GPU of over 127 bytes is refused before anything is stored */
    Spillway__V1__RegisterWorkerRequest reg = SPILLWAY__V1__REGISTER_WORKER_REQUEST__INIT;
    char big_gpu[200];
    memset(big_gpu, 'g', sizeof big_gpu - 1);
    big_gpu[sizeof big_gpu - 1] = 0;
    reg.address = "127.0.0.1:7000";
    reg.protocol_version = SPW_PROTOCOL_VERSION;
    reg.gpu = big_gpu;
    ck_assert_int_eq(call(disp_register_worker, &reg.base, &resp, &len), 3);
    ck_assert_msg(strstr(msg, "gpu at most 127 bytes") != NULL, "%s", msg);
    free(resp);
    /* wrong manifest hash, unknown worker, zombie client */
    uint64_t w = register_worker();
    Spillway__V1__CreateJobResponse *job = create_job(5);
    Spillway__V1__LeaseSplitRequest lr = SPILLWAY__V1__LEASE_SPLIT_REQUEST__INIT;
    lr.job = job->job;
    lr.job_secret = job->job_secret;
    lr.worker_id = w;
    lr.worker_secret = g_secret;
    lr.manifest_hash = job->manifest_hash ^ 1;
    ck_assert_int_eq(call(disp_lease_split, &lr.base, &resp, &len), 9);
    ck_assert(strstr(msg, "manifest") != NULL);
    lr.manifest_hash = job->manifest_hash;
    lr.worker_id = 999;
    ck_assert_int_eq(call(disp_lease_split, &lr.base, &resp, &len), 5);
    lr.worker_id = 0;
    lr.incarnation = 5;                          /* the client's own incarnation, without the job's secret */
    lr.job_secret = 0;
    ck_assert_int_eq(call(disp_lease_split, &lr.base, &resp, &len), 7);
    ck_assert(strstr(msg, "wrong job secret") != NULL);
    lr.job_secret = job->job_secret;
    lr.incarnation = 4;                          /* older than the creating client's 5 */
    ck_assert_int_eq(call(disp_lease_split, &lr.base, &resp, &len), 9);
    ck_assert(strstr(msg, "incarnation") != NULL);
    lr.job = 12345;
    ck_assert_int_eq(call(disp_lease_split, &lr.base, &resp, &len), 5);
    Spillway__V1__WorkerHeartbeatRequest wh = SPILLWAY__V1__WORKER_HEARTBEAT_REQUEST__INIT;
    wh.worker_id = 4242;
    ck_assert_int_eq(call(disp_worker_heartbeat, &wh.base, &resp, &len), 5);
    /* a known worker's id without its secret grants nothing */
    wh.worker_id = w;
    wh.secret = g_secret + 1;
    ck_assert_int_eq(call(disp_worker_heartbeat, &wh.base, &resp, &len), 7);
    /* a known worker's heartbeat lists the job as a task, with its pipeline */
    wh.secret = g_secret;
    ck_assert_int_eq(call(disp_worker_heartbeat, &wh.base, &resp, &len), 0);
    Spillway__V1__WorkerHeartbeatResponse *t = spillway__v1__worker_heartbeat_response__unpack(NULL, len, resp);
    free(resp);
    ck_assert_uint_eq(t->n_tasks, 2);       /* and the job made with no worker alive, above */
    const Spillway__V1__JobTask *mine = t->tasks[t->tasks[0]->job == job->job ? 0 : 1];
    ck_assert_uint_eq(mine->job, job->job);
    ck_assert_str_eq(mine->pipeline->source->path, g_root);
    ck_assert_uint_eq(mine->job_secret, job->job_secret);   /* the worker checks streams against it */
    spillway__v1__worker_heartbeat_response__free_unpacked(t, NULL);
    spillway__v1__create_job_response__free_unpacked(job, NULL);
}
END_TEST

/* Profiles asked ahead of CreateJob (dispatcher/profile_ahead.h): taken once, by the same pipeline and cut
 * count only; each worker it asked is marked (one that gave no profile too: CreateJob does not ask it again);
 * at most four kept and two per client host (a host's third replaces its oldest ended one), none of a
 * pipeline over 1 MiB; one left untaken is dropped a minute after it ended. Nothing listens on the workers'
 * ports: each ask is refused at once. */
START_TEST(test_service_profiles_asked_ahead_are_taken_once)
{
    struct disp_ahead *a;
    ck_assert_int_eq(disp_ahead_create(&(struct disp_ask){.timeout_ms = 5000}, &a), 0);
    char w1[] = "127.0.0.1:1", w2[] = "127.0.0.1:2";
    char *addrs[2] = {w1, w2};
    bool asked[2] = {false, false};
    struct disp_profiles known = {0};
    const char *host = "10.0.0.1";
    ck_assert_int_eq(disp_ahead_start(a, host, pipeline("/x"), 2, addrs, 1, 0), 0);
    ck_assert_int_eq(disp_ahead_start(a, host, pipeline("/x"), 2, addrs, 1, 0), 0);      /* the same: one ask */
    ck_assert_int_eq(disp_ahead_take(a, pipeline("/y"), 2, addrs, 2, asked, &known, 5000, 0), -ENOENT);
    ck_assert_int_eq(disp_ahead_take(a, pipeline("/x"), 3, addrs, 2, asked, &known, 5000, 0), -ENOENT);
    ck_assert_int_eq(disp_ahead_take(a, pipeline("/x"), 2, addrs, 2, asked, &known, 30000, 0), 0);
    ck_assert(asked[0] && !asked[1]);
    ck_assert_int_eq(known.n, 0);
    ck_assert_int_eq(disp_ahead_take(a, pipeline("/x"), 2, addrs, 2, asked, &known, 5000, 0), -ENOENT);
    char path[32];
    for (int i = 0; i < DISP_AHEAD_MAX; i++) {     /* two hosts, two each */
        snprintf(path, sizeof path, "/p%d", i);
        ck_assert_int_eq(disp_ahead_start(a, i < 2 ? "10.0.0.1" : "10.0.0.2", pipeline(path), 2, addrs, 2, 0), 0);
    }
    ck_assert_int_eq(disp_ahead_start(a, "10.0.0.3", pipeline("/q"), 2, addrs, 2, 0), -EBUSY);
    for (int t = 0; t < 300 && disp_ahead_running(a) > 0; t++)
        usleep(100 * 1000);
    /* A host's third replaces one of its own ended ones (/p0 or /p1, whichever ended first), not another
     * host's; the other is still there to take. */
    ck_assert_int_eq(disp_ahead_start(a, host, pipeline("/p4"), 2, addrs, 2, 0), 0);
    const int r0 = disp_ahead_take(a, pipeline("/p0"), 2, addrs, 2, asked, &known, 5000, 0),
              r1 = disp_ahead_take(a, pipeline("/p1"), 2, addrs, 2, asked, &known, 5000, 0);
    ck_assert((r0 == -ENOENT) != (r1 == -ENOENT));
    for (int t = 0; t < 300 && disp_ahead_running(a) > 0; t++)
        usleep(100 * 1000);
    usleep(5 * 1000);                           /* /p5 ends at least 5 ms after /p4 */
    ck_assert_int_eq(disp_ahead_start(a, host, pipeline("/p5"), 2, addrs, 2, 0), 0);
    for (int t = 0; t < 300 && disp_ahead_running(a) > 0; t++)
        usleep(100 * 1000);
    ck_assert_int_eq(disp_ahead_start(a, host, pipeline("/p6"), 2, addrs, 2, 0), 0);     /* replaces /p4 */
    ck_assert_int_eq(disp_ahead_take(a, pipeline("/p4"), 2, addrs, 2, asked, &known, 5000, 0), -ENOENT);
    ck_assert_int_eq(disp_ahead_start(a, "10.0.0.3", pipeline("/q"), 2, addrs, 2, 0), -EBUSY);
    char *huge = malloc(DISP_AHEAD_MAX_PIPELINE_BYTES + 2);        /* a pipeline too big to keep */
    memset(huge, 'a', DISP_AHEAD_MAX_PIPELINE_BYTES + 1);
    huge[DISP_AHEAD_MAX_PIPELINE_BYTES + 1] = 0;
    ck_assert_int_eq(disp_ahead_start(a, host, pipeline(huge), 2, addrs, 2, 0), -E2BIG);
    free(huge);
    for (int t = 0; t < 300 && disp_ahead_running(a) > 0; t++)
        usleep(100 * 1000);
    ck_assert_int_eq(disp_ahead_running(a), 0);
    /* A minute after they ended: all four dropped. */
    ck_assert_int_eq(disp_ahead_start(a, host, pipeline("/q"), 2, addrs, 2, spw_now_ms() + DISP_AHEAD_KEEP_MS + 1000), 0);
    ck_assert_int_eq(disp_ahead_take(a, pipeline("/p0"), 2, addrs, 2, asked, &known, 5000, 0), -ENOENT);
    struct disp_ahead_counts n;
    disp_ahead_counts(a, &n);
    ck_assert_msg(n.started == 9 && n.taken == 2 && n.expired == 6 && n.refused == 3, "%llu %llu %llu %llu",
                  (unsigned long long)n.started, (unsigned long long)n.taken, (unsigned long long)n.expired,
                  (unsigned long long)n.refused);
    disp_ahead_destroy(a);          /* with /q's ask maybe still running: waits for it */
}
END_TEST

/* The one method list (lib/methods.h) is the proto's two services, method for method, and the dispatcher's
 * list (DISP_METHODS) registers each Dispatcher method once and nothing else. */
START_TEST(test_service_method_lists_are_the_protos)
{
    const ProtobufCServiceDescriptor *services[] = {&spillway__v1__dispatcher__descriptor,
                                                    &spillway__v1__worker__descriptor};
    int n = 0;
    for (size_t s = 0; s < 2; s++) {
        for (unsigned i = 0; i < services[s]->n_methods; i++, n++) {
            char path[128];
            snprintf(path, sizeof path, "/spillway.v1.%s/%s", services[s]->short_name, services[s]->methods[i].name);
            int found = 0;
            for (int m = 0; m < SPW_METHOD_COUNT; m++)
                found += !strcmp(spw_method_path((enum spw_method)m), path);
            ck_assert_msg(found == 1, "%s is in lib/methods.h %d times", path, found);
        }
    }
    ck_assert_int_eq(n, SPW_METHOD_COUNT);
    ck_assert_ptr_null(spw_method_path(SPW_METHOD_COUNT));
    int registered[SPW_METHOD_COUNT] = {0};
#define COUNT(ID, fn, slow, callers) registered[SPW_M_##ID]++;
    DISP_METHODS(COUNT)
#undef COUNT
    for (int m = 0; m < SPW_METHOD_COUNT; m++)
        ck_assert_int_eq(registered[m], !strncmp(spw_method_path((enum spw_method)m), "/spillway.v1.Dispatcher/", 24));
}
END_TEST

/* The reply adapter: typed handlers that fill a reply from memory the reply owns. */
static int g_later;
static void count_later(void *p)
{
    g_later++;
    free(p);
}

static int fill_cancel_reply(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *m, size_t mlen)
{
    const Spillway__V1__CancelJobRequest *r = (const Spillway__V1__CancelJobRequest *)req;
    disp_reply_later(reply, malloc(16), count_later);
    if (r->job == 2) {
        snprintf(m, mlen, "job 2 is refused");
        return SPW_RPC_NOT_FOUND;
    }
    if (r->job == 3)
        ck_assert_ptr_null(disp_reply_alloc(reply, SIZE_MAX - 8));     /* cannot be had: the call fails */
    Spillway__V1__CancelJobResponse *out = disp_reply_new(reply, &spillway__v1__cancel_job_response__descriptor);
    ck_assert_ptr_nonnull(out);
    out->was_finished = r->job == 1;
    return SPW_RPC_OK;
}

START_TEST(test_codec_adapter_packs_the_reply_and_frees_its_memory)
{
    for (uint64_t job = 1; job <= 3; job++) {
        Spillway__V1__CancelJobRequest rq = SPILLWAY__V1__CANCEL_JOB_REQUEST__INIT;
        rq.job = job;
        uint8_t buf[32], *resp = NULL;
        size_t len = spillway__v1__cancel_job_request__pack(&rq, buf), rlen = 0;
        g_later = 0;
        msg[0] = 0;
        const int st = disp_unary(NULL, &spillway__v1__cancel_job_request__descriptor, fill_cancel_reply, buf, len,
                                  &resp, &rlen, msg, sizeof msg);
        ck_assert_int_eq(g_later, 1);       /* what was handed over is freed, whatever the outcome */
        if (job == 1) {
            ck_assert_int_eq(st, SPW_RPC_OK);
            Spillway__V1__CancelJobResponse *out = spillway__v1__cancel_job_response__unpack(NULL, rlen, resp);
            ck_assert(out && out->was_finished);
            spillway__v1__cancel_job_response__free_unpacked(out, NULL);
        } else {
            ck_assert_int_eq(st, job == 2 ? SPW_RPC_NOT_FOUND : SPW_RPC_RESOURCE_EXHAUSTED);
            ck_assert_ptr_null(resp);
            ck_assert_str_eq(msg, job == 2 ? "job 2 is refused" : "out of memory");
        }
        free(resp);
    }
    uint8_t *resp = NULL;
    size_t rlen = 0;
    g_later = 0;
    ck_assert_int_eq(disp_unary(NULL, &spillway__v1__cancel_job_request__descriptor, fill_cancel_reply,
                                (const uint8_t *)"\xff\xff", 2, &resp, &rlen, msg, sizeof msg),
                     SPW_RPC_INVALID_ARGUMENT);
    ck_assert_int_eq(g_later, 0);       /* malformed: the handler never ran */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("service");
    TCase *tc = tcase_create("service");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_service_job_runs_to_the_end);
    tcase_add_test(tc, test_service_heartbeat_tasks_decode_as_created);
    tcase_add_test(tc, test_service_heartbeat_sends_tasks_only_when_changed);
    tcase_add_test(tc, test_service_client_heartbeat_sends_workers_only_when_changed);
    tcase_add_test(tc, test_service_bad_requests_say_what_is_wrong);
    tcase_add_test(tc, test_service_profiles_asked_ahead_are_taken_once);
    tcase_add_test(tc, test_service_method_lists_are_the_protos);
    tcase_add_test(tc, test_codec_adapter_packs_the_reply_and_frees_its_memory);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
