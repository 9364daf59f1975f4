/* dispatcher/create_job.c - the CreateJob handler, in the steps a call goes through: validate the request
 * (protocol, rank, spec, name), find the job it joins (by id, by its checkpoint's job, by name), plan a new
 * one (cut -2: the workers are profiled, or the client is told to run alone), create it or check the join,
 * then attach the client (its incarnation, its resume point) and reply. Each step either passes or answers
 * the call with a status. Thread model: runs on its own thread per call (a slow method); takes the service
 * lock only around state access, never while listing a source or calling workers. */
#include "dispatcher/service_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/rpc.h"
#include "pipeline/element_size.h"
#include "pipeline/fusion.h"
#include "pipeline/plan_proto.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "pipeline/wire.h"

#define CUT_PLAN (-2)
#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-"

struct call {                       /* one CreateJob call's working state */
    const Spillway__V1__CreateJobRequest *r;
    int world;
    struct spw_pipeline_spec *spec;
    struct spw_group groups[256];
    int n_groups, cut;
    uint64_t job;                   /* the job joined or created (0 until known) */
    Spillway__V1__Plan *plan;       /* when planned here */
    struct disp_profiles *profiles; /* the plan's workers' profiles, until disp_remember_plan takes them */
    int alive_at_plan;
    bool answered;                  /* a step sent the reply itself (the client runs the job alone) */
};

static void free_unpacked_plan(void *plan)
{
    spillway__v1__plan__free_unpacked(plan, NULL);
}

static void free_plan(void *plan)
{
    spw_plan_proto_free(plan);
}

/* Answer a rank of a named job another rank of which was told to run in its client: the same plan. Returns
 * SPW_RPC_NOT_FOUND (nothing answered) when there is no such decision. */
static int reply_named_local(struct disp_service *s, const Spillway__V1__CreateJobRequest *r, int n_groups,
                             struct disp_reply *reply)
{
    Spillway__V1__Plan *same = disp_replanner_named_local(s->replanner, r->job_name);
    if (!same)
        return SPW_RPC_NOT_FOUND;
    disp_reply_later(reply, same, free_unpacked_plan);
    spw_log(SPW_LOG_INFO, "dispatcher", "no offload for rank %d of job name \"%s\", as planned for another rank "
            "why=\"%s\"", r->rank, r->job_name, same->why);
    Spillway__V1__CreateJobResponse *out = disp_reply_new(reply, &spillway__v1__create_job_response__descriptor);
    if (out) {
        out->groups = n_groups;
        out->plan = same;
    }
    return SPW_RPC_OK;
}

/* Remember that the named job runs in its clients (for its other ranks), unless another rank has created a job
 * of that name meanwhile: false then (join it instead). */
static bool remember_named_local(struct disp_service *s, const char *name, const Spillway__V1__Plan *plan)
{
    pthread_mutex_lock(&s->mu);
    const bool job_exists = disp_state_named_job(s->st, name) != 0;
    if (!job_exists)
        disp_replanner_remember_named_local(s->replanner, name, plan);
    pthread_mutex_unlock(&s->mu);
    return !job_exists;
}

/* A client may join job `job` only with the job's own pipeline, dataset listing and world. */
static int check_join(struct disp_service *s, uint64_t job, const Spillway__V1__CreateJobRequest *r, int world,
                      char *msg, size_t msglen)
{
    struct disp_job_info ji;
    size_t have_len = 0;
    pthread_mutex_lock(&s->mu);
    int rc = disp_state_job(s->st, job, &ji);
    const uint8_t *have = rc == 0 ? disp_state_job_pipeline(s->st, job, &have_len) : NULL;
    const size_t want_len = spillway__v1__pipeline__get_packed_size(r->pipeline);
    uint8_t *want = have ? malloc(want_len ? want_len : 1) : NULL;
    bool same = want && spillway__v1__pipeline__pack(r->pipeline, want) == have_len &&
                !memcmp(want, have, have_len);
    pthread_mutex_unlock(&s->mu);
    free(want);
    if (rc != 0)
        return snprintf(msg, msglen, "job %llu: no such job", (unsigned long long)job), SPW_RPC_NOT_FOUND;
    if (ji.finished && !r->resume)
        return snprintf(msg, msglen, "job %llu has finished", (unsigned long long)job), SPW_RPC_FAILED_PRECONDITION;
    if (!same)
        return snprintf(msg, msglen, "job %llu%s%s%s runs another pipeline: ranks of one job must send the same "
                        "spec", (unsigned long long)job, ji.name[0] ? " (\"" : "", ji.name, ji.name[0] ? "\")" : ""),
               SPW_RPC_FAILED_PRECONDITION;
    if (ji.world_size != world)
        return snprintf(msg, msglen, "job %llu has a world of %d ranks, this client says %d",
                        (unsigned long long)job, ji.world_size, world), SPW_RPC_FAILED_PRECONDITION;
    if (r->split_size > 0 && r->split_size != ji.split_size)
        return snprintf(msg, msglen, "job %llu uses splits of %d samples, this client asks for %d",
                        (unsigned long long)job, ji.split_size, r->split_size), SPW_RPC_FAILED_PRECONDITION;
    return SPW_RPC_OK;
}

/* Elements travel one per message at most: refuse a cut whose elements the spec makes too big to send. */
static int check_element_size(const struct spw_pipeline_spec *spec, const struct spw_group *groups, int cut,
                              char *msg, size_t msglen)
{
    int64_t bytes;
    int op;
    const int n_ops = cut > 0 ? groups[cut - 1].first + groups[cut - 1].count : 0;
    if (!spw_element_fixed_bytes(spec, n_ops, &bytes, &op) || bytes <= (int64_t)SPW_WIRE_MAX_ELEMENT_BYTES)
        return SPW_RPC_OK;
    snprintf(msg, msglen, "ops[%d] (%s) makes elements of %lld bytes at cut %d, over the %zu-byte message cap: "
             "a smaller size, or an earlier cut", op, spw_op_name(spec->ops[op].kind), (long long)bytes, cut,
             SPW_WIRE_MAX_ELEMENT_BYTES);
    return SPW_RPC_INVALID_ARGUMENT;
}

/* Step 1: what the request says must make sense on its own. */
static int validate(struct call *c, char *msg, size_t msglen)
{
    const Spillway__V1__CreateJobRequest *r = c->r;
    int status = disp_check_protocol("this client", r->protocol_version, r->build, msg, msglen);
    if (status != SPW_RPC_OK)
        return status;
    if (r->rank < 0 || r->rank >= c->world)
        return snprintf(msg, msglen, "rank %d is outside the world of %d", r->rank, c->world), SPW_RPC_INVALID_ARGUMENT;
    if (r->max_workers < 0)
        return snprintf(msg, msglen, "max_workers %d: use 0 (every worker) or a positive count", r->max_workers),
               SPW_RPC_INVALID_ARGUMENT;
    if (!r->pipeline)
        return snprintf(msg, msglen, "pipeline: required"), SPW_RPC_INVALID_ARGUMENT;
    if (spw_spec_from_proto(r->pipeline, &c->spec, msg, msglen) != 0)
        return SPW_RPC_INVALID_ARGUMENT;
    if (strlen(r->job_name) > DISP_JOB_NAME_MAX || strspn(r->job_name, NAME_CHARS) != strlen(r->job_name))
        return snprintf(msg, msglen, "job_name: at most %d of A-Z a-z 0-9 . _ : - (got \"%.40s\")",
                        DISP_JOB_NAME_MAX, r->job_name), SPW_RPC_INVALID_ARGUMENT;
    if ((r->cut < -1 && r->cut != CUT_PLAN) || (r->cut == CUT_PLAN && !r->job_name[0] && !r->resume && r->job))
        return snprintf(msg, msglen, "cut %d: use -1 (default), -2 (plan it, new jobs only) or a group boundary",
                        r->cut), SPW_RPC_INVALID_ARGUMENT;
    c->n_groups = spw_fusion_groups(c->spec, c->groups);
    c->cut = r->cut < 0 ? c->n_groups : r->cut;
    return SPW_RPC_OK;
}

/* Step 2: the job this client joins: the one it names by id (with its secret); the one its checkpoint was
 * taken in, when the checkpoint has the job's secret (one rank of several rejoins it even when finished,
 * producing its missing rest itself: the other ranks are done with it; a lone trainer gets a new job when it
 * finished); the named one (a job's name is its ranks' rendezvous: knowing it is enough to join); else none
 * (a new one). */
static int find_job(struct disp_service *s, struct call *c, char *msg, size_t msglen)
{
    const Spillway__V1__CreateJobRequest *r = c->r;
    struct disp_job_info ji;
    char why[256];
    int status = SPW_RPC_OK;
    c->job = r->job;
    pthread_mutex_lock(&s->mu);
    if (r->job && !disp_state_job_secret_ok(s->st, r->job, r->job_secret))
        status = disp_wrong_job_secret(s, r->job, msg, msglen);
    if (!c->job && r->resume && r->resume->job && disp_state_job(s->st, r->resume->job, &ji) == 0 &&
        (!ji.finished || c->world > 1)) {
        if (disp_state_job_secret_ok(s->st, r->resume->job, r->resume->job_secret))
            c->job = r->resume->job;
        else
            spw_log(SPW_LOG_WARN, "dispatcher", "a checkpoint of job=%llu without that job's secret: not rejoined "
                    "(peer=%s)", (unsigned long long)r->resume->job, spw_rpc_current_peer());
    }
    pthread_mutex_unlock(&s->mu);
    if (status != SPW_RPC_OK)
        return status;
    if (c->job && !r->job && check_join(s, c->job, r, c->world, why, sizeof why) != SPW_RPC_OK) {
        spw_log(SPW_LOG_INFO, "dispatcher", "a checkpoint of job=%llu: not rejoined, a new job instead: %s",
                (unsigned long long)c->job, why);
        c->job = 0;
    }
    pthread_mutex_lock(&s->mu);
    if (!c->job && r->job_name[0])
        c->job = disp_state_named_job(s->st, r->job_name);
    pthread_mutex_unlock(&s->mu);
    return SPW_RPC_OK;
}

/* Step 3: a new job with cut -2 is planned: its cut, or no job at all when offloading to the alive workers
 * does not pay (answered here: the client runs it alone). */
static int plan(struct disp_service *s, struct call *c, struct disp_reply *reply, char *msg, size_t msglen)
{
    const Spillway__V1__CreateJobRequest *r = c->r;
    if (r->cut != CUT_PLAN || c->job)
        return SPW_RPC_OK;
    if (!r->client)
        return snprintf(msg, msglen, "cut -2 (plan it) needs the client's facts"), SPW_RPC_INVALID_ARGUMENT;
    /* Another rank of this named job was told to run in its client: so is this one (one rank in-process and
     * another on the service would leave the service job's rank unserved). */
    const bool named = r->job_name[0] && c->world > 1;
    int status;
    if (named && (status = reply_named_local(s, r, c->n_groups, reply)) != SPW_RPC_NOT_FOUND) {
        c->answered = true;
        return status;
    }
    if ((status = disp_plan_new_job(s, r, c->n_groups, &c->cut, &c->plan, &c->alive_at_plan, &c->profiles, msg,
                                    msglen)) != SPW_RPC_OK)
        return status;
    /* No worker alive to plan with: the job is made on the service all the same, its clients making every
     * element until workers join (the re-planner plans it then, with their profiles), so that its trainer's
     * measured demand is exported (workers_needed) and an autoscaler can start workers from none. */
    if (c->plan->offload || c->alive_at_plan == 0)
        return SPW_RPC_OK;
    if (named && !remember_named_local(s, r->job_name, c->plan)) {
        /* Another rank created the named job while this one planned: join it. */
        spw_plan_proto_free(c->plan);
        c->plan = NULL;
        c->cut = c->n_groups;
        pthread_mutex_lock(&s->mu);
        c->job = disp_state_named_job(s->st, r->job_name);
        pthread_mutex_unlock(&s->mu);
        return SPW_RPC_OK;
    }
    /* Offloading does not pay: no job on the service; the client runs it alone. */
    spw_log(SPW_LOG_INFO, "dispatcher", "planned: no offload why=\"%s\"", c->plan->why);
    c->answered = true;
    Spillway__V1__CreateJobResponse *out = disp_reply_new(reply, &spillway__v1__create_job_response__descriptor);
    if (out) {
        out->groups = c->n_groups;
        out->plan = c->plan;    /* create_job hands it to the reply */
    }
    return SPW_RPC_OK;
}

/* A cap (the host's unfinished jobs, or all) that the new job would pass, held by a job nobody uses (paused,
 * or no rank heard from for DISP_IDLE_JOB_MS: a trainer killed -9, a loader never closed): end that job
 * first, journaled like any end. Call with mu held. */
static void make_room(struct disp_service *s, const char *client, int64_t now)
{
    struct disp_job_info ji;
    /* Just after a restart, replayed ranks have not been heard from yet: only paused jobs are idle. */
    const int64_t idle_ms = now - s->started_ms <= s->o.client_timeout_ms ? INT64_MAX / 2 : DISP_IDLE_JOB_MS;
    const uint64_t victim = disp_state_job_to_make_room(s->st, client, now, idle_ms);
    if (!victim || disp_state_job(s->st, victim, &ji) != 0)
        return;
    struct disp_update u = {.kind = DISP_REMOVE_JOB, .job = victim, .now_ms = now};
    if (disp_commit(s, &u, NULL, 0) != 0)
        return;
    disp_forget_job(s, victim);
    spw_log(SPW_LOG_INFO, "dispatcher", "job ended to make room job=%llu host=\"%s\" state=%s for_host=\"%s\": a "
            "cap was reached and nobody used it", (unsigned long long)victim, ji.client,
            ji.paused ? "paused" : "silent", client);
}

/* Step 4: the job joined must take this client; a new one is created (its source listed outside the lock, a
 * big folder takes time; or the listing its client fetched a moment before: dispatcher/listing.c). */
static int create(struct disp_service *s, struct call *c, struct disp_reply *reply, char *msg,
                  size_t msglen)
{
    const Spillway__V1__CreateJobRequest *r = c->r;
    if (c->cut > c->n_groups)
        return snprintf(msg, msglen, "cut %d is past the pipeline's %d fusion groups", c->cut, c->n_groups),
               SPW_RPC_INVALID_ARGUMENT;
    int status = check_element_size(c->spec, c->groups, c->cut, msg, msglen);
    if (status != SPW_RPC_OK)
        return status;
    const int split_size = r->split_size > 0 ? r->split_size : s->o.default_split_size;
    if (split_size > 65536)
        return snprintf(msg, msglen, "split_size %d is above 65536", split_size), SPW_RPC_INVALID_ARGUMENT;
    if (c->job)
        return check_join(s, c->job, r, c->world, msg, msglen);
    uint64_t manifest_hash = r->manifest_hash;
    int64_t n_samples = 0;
    if ((status = disp_list_source(s, &c->spec->source, &manifest_hash, &n_samples, msg, msglen)) != SPW_RPC_OK)
        return status;
    size_t plen;
    uint8_t *pipe_bytes = disp_pack_keep(&r->pipeline->base, &plen);
    char client[DISP_CLIENT_MAX + 1];
    spw_rpc_peer_host(spw_rpc_current_peer(), client, sizeof client);    /* "" when not an IP */
    struct disp_update u = {.kind = DISP_CREATE_JOB, .pipeline = pipe_bytes, .pipeline_len = plen,
                            .manifest_hash = manifest_hash, .n_samples = n_samples, .split_size = split_size,
                            .epochs = c->spec->source.epochs, .cut = c->cut, .world_size = c->world,
                            .max_workers = r->max_workers, .now_ms = spw_now_ms(), .name = r->job_name,
                            .client = client, .first_epoch = r->resume ? (int64_t)r->resume->epoch : 0,
                            .secret = disp_new_secret()};
    int rc = 0;
    uint64_t named = 0;
    bool told_local = false;
    pthread_mutex_lock(&s->mu);
    if (!pipe_bytes) {
        snprintf(msg, msglen, "out of memory");
        status = SPW_RPC_RESOURCE_EXHAUSTED;
    } else if (c->world > 1 && r->job_name[0] && disp_replanner_named_local_exists(s->replanner, r->job_name)) {
        told_local = true;              /* another rank was told to run in its client meanwhile */
    } else if ((named = disp_state_named_job(s->st, r->job_name)) == 0) {
        make_room(s, client, u.now_ms);
        rc = disp_commit(s, &u, msg, msglen);
        c->job = u.job;
        /* A cap of unfinished jobs: a trainer killed a moment ago makes room once its jobs fall silent. */
        if (rc == SPW_ETOOBIG && strstr(msg, "unfinished jobs")) {
            const size_t at = strlen(msg);
            snprintf(msg + at, msglen - at, "; a job nobody uses (paused, or silent for %d s) is ended to make "
                     "room", DISP_IDLE_JOB_MS / 1000);
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(pipe_bytes);
    if (told_local) {
        c->answered = true;
        return reply_named_local(s, r, c->n_groups, reply);
    }
    if (status == SPW_RPC_OK && named)      /* another rank created it meanwhile (planning runs unlocked) */
        return check_join(s, c->job = named, r, c->world, msg, msglen);
    if (status == SPW_RPC_OK && rc)
        status = disp_status_of(rc);
    if (status == SPW_RPC_OK) {
        if (c->plan) {
            disp_replanner_remember(s->replanner, c->job, c->plan, r->client, c->alive_at_plan, c->profiles);
            c->profiles = NULL;
        }
        spw_log(SPW_LOG_INFO, "dispatcher", "job created job=%llu samples=%lld manifest=%016llx cut=%d/%d "
                "split_size=%d epochs=%lld world=%d name=\"%s\" first_epoch=%lld path=\"%s\"",
                (unsigned long long)c->job, (long long)n_samples, (unsigned long long)manifest_hash, c->cut,
                c->n_groups, split_size, (long long)c->spec->source.epochs, c->world, r->job_name,
                (long long)u.first_epoch, c->spec->source.path);
    }
    return status;
}

/* Step 5: the client is attached to the job (its incarnation fences an older one; a resumed rank's
 * delivered splits count as acked) and told the job, its cut and the workers to stream from. */
static int attach_and_reply(struct disp_service *s, struct call *c, struct disp_reply *reply, char *msg,
                            size_t msglen)
{
    const Spillway__V1__CreateJobRequest *r = c->r;
    Spillway__V1__WorkerAddress **workers = NULL;
    size_t n_workers = 0;
    struct disp_job_info ji;
    pthread_mutex_lock(&s->mu);
    struct disp_update hb = {.kind = DISP_CLIENT_HEARTBEAT, .job = c->job, .rank = r->rank,
                             .incarnation = r->incarnation ? r->incarnation : 1, .now_ms = spw_now_ms()};
    int rc = disp_commit(s, &hb, msg, msglen);
    if (rc == 0 && r->resume) {
        struct disp_update ru = {.kind = DISP_CLIENT_RESUME, .job = c->job, .rank = r->rank,
                                 .epoch = r->resume->epoch, .splits = r->resume->done_splits,
                                 .n_splits = r->resume->n_done_splits, .now_ms = spw_now_ms()};
        rc = disp_commit(s, &ru, msg, msglen);
    }
    if (rc == 0)
        rc = disp_state_job(s->st, c->job, &ji);
    if (rc == 0 && !ji.client_only) {
        n_workers = disp_alive_workers(s, ji.id, ji.max_workers, &workers);
        disp_reply_later(reply, workers, disp_free_addresses);
    }
    const uint64_t secret = disp_state_job_secret(s->st, c->job);
    pthread_mutex_unlock(&s->mu);
    if (rc)
        return disp_status_of(rc);
    if (r->resume || r->job || r->job_name[0])
        spw_log(SPW_LOG_INFO, "dispatcher", "client joined job=%llu rank=%d resume_epoch=%lld open_epoch=%lld",
                (unsigned long long)c->job, r->rank, r->resume ? (long long)r->resume->epoch : -1LL,
                (long long)ji.epoch);
    Spillway__V1__CreateJobResponse *out = disp_reply_new(reply, &spillway__v1__create_job_response__descriptor);
    if (out) {
        out->job = c->job;
        out->manifest_hash = ji.manifest_hash;
        out->samples = ji.n_samples;
        out->cut = ji.cut;
        out->split_size = ji.split_size;
        out->splits_per_epoch = ji.splits_per_epoch;
        out->n_workers = n_workers;
        out->workers = workers;
        out->groups = c->n_groups;
        out->plan = c->plan;    /* create_job hands it to the reply */
        out->open_epoch = ji.epoch;
        out->job_secret = secret;
    }
    return SPW_RPC_OK;
}

static int create_job(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg, size_t msglen)
{
    struct disp_service *s = svc;
    const Spillway__V1__CreateJobRequest *r = (const Spillway__V1__CreateJobRequest *)req;
    struct call c = {.r = r, .world = r->world_size > 0 ? r->world_size : 1};
    int status = validate(&c, msg, msglen);
    if (status == SPW_RPC_OK)
        status = find_job(s, &c, msg, msglen);
    if (status == SPW_RPC_OK && !c.job)         /* joining a job that runs is not new work */
        status = disp_refuse_new_work(s, "a new job", msg, msglen);
    if (status == SPW_RPC_OK)
        status = plan(s, &c, reply, msg, msglen);
    if (status == SPW_RPC_OK && !c.answered)
        status = create(s, &c, reply, msg, msglen);
    if (status == SPW_RPC_OK && !c.answered)
        status = attach_and_reply(s, &c, reply, msg, msglen);
    disp_reply_later(reply, c.plan, free_plan);     /* the reply may point to it */
    free(c.profiles);
    spw_spec_free(c.spec);
    return status;
}

DISP_UNARY(disp_create_job, spillway__v1__create_job_request__descriptor, create_job)
