/* dispatcher/listing.c - a job's source listed once (dispatcher/manifests.h): a client's GetManifest lists it
 * (or joins a listing of it in flight: the ranks of one job), its CreateJob takes that listing by hash; the
 * job's workers get it by job. Listing runs without mu (a big folder or remote shards take time); mu is held
 * only to read the job. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/manifests.h"
#include "dispatcher/service_internal.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "pipeline/fusion.h"
#include "pipeline/manifest.h"
#include "pipeline/source.h"
#include "pipeline/spec_proto.h"

#define AHEAD_STR_(x) #x
#define AHEAD_STR(x) AHEAD_STR_(x)

#define FRESH_MS 60000              /* CreateJob takes its client's listing when it is at most this old */

/* What names a listing: the fields that decide what spw_source_open lists. malloc'd; NULL out of memory. */
static char *listing_key(const struct spw_source_spec *sp)
{
    char *key = NULL;
    if (asprintf(&key, "%d\x1f%d\x1f%s\x1f%s\x1f%s\x1f%s\x1f%d\x1f%s", (int)sp->format, (int)sp->media, sp->path,
                 sp->label_key ? sp->label_key : "", sp->ca_file ? sp->ca_file : "",
                 sp->header_file ? sp->header_file : "", sp->no_labels, sp->annotations ? sp->annotations : "") < 0)
        return NULL;
    for (int f = 0; f < sp->n_fields; f++) {        /* which members (or files) a sample needs */
        char *more = NULL;
        if (asprintf(&more, "%s\x1f%s\x1e%s", key, sp->fields[f].from, sp->fields[f].path ? sp->fields[f].path : "")
            < 0) {
            free(key);
            return NULL;
        }
        free(key);
        key = more;
    }
    return key;
}

/* List spec's source and keep it packed; or take the listing *hash (nonzero: the one its client took) made
 * since since_ms, or the listing another call was making of the same source meanwhile. */
static int list_source(struct disp_service *s, const struct spw_source_spec *spec, const char *key,
                       int64_t since_ms, uint64_t *hash, int64_t *samples, char *msg, size_t msglen)
{
    const int64_t t0 = spw_now_ms();
    if (*hash && disp_manifests_fresh(s->manifests, key, since_ms, hash, samples))
        return SPW_RPC_OK;
    *hash = 0;
    const bool claimed = disp_manifests_claim(s->manifests, key);
    if (!claimed && disp_manifests_fresh(s->manifests, key, t0, hash, samples))
        return SPW_RPC_OK;
    struct spw_source *src = NULL;
    int st = SPW_RPC_OK, rc = -1;
    size_t len = 0;
    if (spw_source_open(spec, &src, msg, msglen) != 0) {
        st = SPW_RPC_FAILED_PRECONDITION;
    } else {
        *hash = src->manifest_hash;
        *samples = src->n;
        uint8_t *packed = NULL;
        if ((rc = spw_manifest_pack(src, &packed, &len)) == 0)
            disp_manifests_add(s->manifests, key, *hash, *samples, packed, len, spw_now_ms());
        spw_source_close(src);
        spw_log(rc ? SPW_LOG_WARN : SPW_LOG_INFO, "dispatcher", "listed source path=\"%s\" samples=%lld "
                "manifest=%016llx packed_bytes=%zu ms=%lld%s", spec->path, (long long)*samples,
                (unsigned long long)*hash, len, (long long)(spw_now_ms() - t0),
                rc ? " (too big to keep: workers list it themselves)" : "");
    }
    if (claimed)
        disp_manifests_release(s->manifests, key);
    return st;
}

int disp_list_source(struct disp_service *s, const struct spw_source_spec *spec, uint64_t *hash, int64_t *samples,
                     char *msg, size_t msglen)
{
    char *key = listing_key(spec);
    if (!key)
        return snprintf(msg, msglen, "out of memory"), SPW_RPC_RESOURCE_EXHAUSTED;
    const int st = list_source(s, spec, key, spw_now_ms() - FRESH_MS, hash, samples, msg, msglen);
    free(key);
    return st;
}

/* A client will have this pipeline planned (plan_ahead): its workers' profiles, asked now
 * (dispatcher/profile_ahead.h) while the client measures itself. Best effort: CreateJob asks any it lacks. */
static void profile_ahead(struct disp_service *s, const Spillway__V1__GetManifestRequest *r,
                          const struct spw_pipeline_spec *spec)
{
    struct spw_group groups[256];
    const int n_cuts = spw_fusion_groups(spec, groups) + 1;
    Spillway__V1__WorkerAddress **ws = NULL;
    char why[256];
    if (r->max_workers < 0 || n_cuts > SPW_PLAN_MAX_CUTS ||
        disp_refuse_new_work(s, "asking profiles ahead", why, sizeof why) != SPW_RPC_OK)
        return;                 /* best effort: CreateJob asks what it lacks */
    pthread_mutex_lock(&s->mu);
    const size_t n = disp_alive_workers(s, 0, r->max_workers, &ws);
    pthread_mutex_unlock(&s->mu);
    char **addrs = calloc(n + 1, sizeof *addrs);
    for (size_t i = 0; addrs && i < n; i++)
        addrs[i] = ws[i]->address;
    char host[64] = "";
    spw_rpc_peer_host(spw_rpc_current_peer(), host, sizeof host);      /* "" when not an IP */
    const int rc = n && addrs ? disp_ahead_start(s->ahead, host, r->pipeline, n_cuts, addrs, (int)n, spw_now_ms())
                              : 0;
    if (rc)
        spw_log(SPW_LOG_INFO, "dispatcher", "profiles not asked ahead for %s (%s): CreateJob will ask", host,
                rc == -EAGAIN ? "its " AHEAD_STR(DISP_AHEAD_PER_HOST) " asks are running"
                : rc == -EBUSY ? AHEAD_STR(DISP_AHEAD_MAX) " asks kept"
                : rc == -E2BIG ? "a pipeline over 1 MiB"
                               : "out of memory");
    free(addrs);
    disp_free_addresses(ws);
}

/* Which listing a request names: a job's (a worker; listed again if it was evicted, and it must still be the
 * job's), or a pipeline's (a client; its first chunk lists or takes a fresh listing, later ones name it by
 * hash). Sets *key (malloc'd) and *hash. */
static int resolve(struct disp_service *s, const Spillway__V1__GetManifestRequest *r, char **key, uint64_t *hash,
                   char *msg, size_t msglen)
{
    const unsigned caller = spw_rpc_current_caller();
    uint8_t *pipe_copy = NULL;
    size_t pipe_len = 0;
    Spillway__V1__Pipeline *job_pipe = NULL;
    const Spillway__V1__Pipeline *pipe = r->pipeline;
    uint64_t job_hash = 0;
    int st = SPW_RPC_OK;
    if (r->job) {
        if (!(caller & SPW_RPC_CALLER_WORKER))
            return snprintf(msg, msglen, "GetManifest by job is for workers"), SPW_RPC_PERMISSION_DENIED;
        if ((st = disp_lock_call(s, msg, msglen)) != 0)
            return st;
        struct disp_job_info ji;
        const uint8_t *p = disp_state_job(s->st, r->job, &ji) == 0 ? disp_state_job_pipeline(s->st, r->job, &pipe_len)
                                                                    : NULL;
        if (p && (pipe_copy = malloc(pipe_len)))
            memcpy(pipe_copy, p, pipe_len);
        job_hash = ji.manifest_hash;
        pthread_mutex_unlock(&s->mu);
        if (!p)
            return snprintf(msg, msglen, "job %llu is not in the table", (unsigned long long)r->job),
                   SPW_RPC_NOT_FOUND;
        if (!pipe_copy || !(job_pipe = spillway__v1__pipeline__unpack(NULL, pipe_len, pipe_copy)))
            st = SPW_RPC_RESOURCE_EXHAUSTED, snprintf(msg, msglen, "out of memory");
        free(pipe_copy);
        pipe = job_pipe;
    } else if (!r->pipeline) {
        return snprintf(msg, msglen, "GetManifest: give job or pipeline"), SPW_RPC_INVALID_ARGUMENT;
    } else if (!(caller & SPW_RPC_CALLER_CLIENT)) {
        return snprintf(msg, msglen, "GetManifest by pipeline is for clients"), SPW_RPC_PERMISSION_DENIED;
    }
    struct spw_pipeline_spec *spec = NULL;
    if (st == SPW_RPC_OK && spw_spec_from_proto(pipe, &spec, msg, msglen) != 0)
        st = SPW_RPC_INVALID_ARGUMENT;
    if (st == SPW_RPC_OK && !r->job && r->plan_ahead && !r->offset && !r->manifest_hash)
        profile_ahead(s, r, spec);
    if (st == SPW_RPC_OK && !(*key = listing_key(&spec->source)))
        st = SPW_RPC_RESOURCE_EXHAUSTED, snprintf(msg, msglen, "out of memory");
    int64_t samples = 0;
    if (st == SPW_RPC_OK && r->job) {       /* the job's listing when kept; else listed again, and still the same */
        *hash = job_hash;
        if ((st = list_source(s, &spec->source, *key, 0, hash, &samples, msg, msglen)) == SPW_RPC_OK &&
            *hash != job_hash)
            st = SPW_RPC_FAILED_PRECONDITION,
            snprintf(msg, msglen, "the source of job %llu changed since it was created (its listing is %016llx now, "
                     "%016llx then)", (unsigned long long)r->job, (unsigned long long)*hash,
                     (unsigned long long)job_hash);
    } else if (st == SPW_RPC_OK && r->manifest_hash) {
        *hash = r->manifest_hash;       /* a later chunk: the listing the first named (read checks the key) */
    } else if (st == SPW_RPC_OK) {
        *hash = 0;
        st = list_source(s, &spec->source, *key, 0, hash, &samples, msg, msglen);
    }
    spw_spec_free(spec);
    if (job_pipe)
        spillway__v1__pipeline__free_unpacked(job_pipe, NULL);
    return st;
}

static int get_manifest(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg, size_t msglen)
{
    struct disp_service *s = svc;
    const Spillway__V1__GetManifestRequest *r = (const Spillway__V1__GetManifestRequest *)req;
    char *key = NULL;
    uint64_t hash = 0;
    int st = resolve(s, r, &key, &hash, msg, msglen);
    uint8_t *chunk = NULL;
    size_t len = 0;
    uint64_t total = 0;
    int64_t samples = 0;
    if (st == SPW_RPC_OK) {
        const int rc = disp_manifests_read(s->manifests, r->job ? NULL : key, hash, r->offset, SPW_MANIFEST_CHUNK,
                                           spw_now_ms(), &chunk, &len, &total, &samples);
        disp_reply_later(reply, chunk, free);
        if (rc == -ERANGE)
            st = SPW_RPC_OUT_OF_RANGE, snprintf(msg, msglen, "offset %llu is past the manifest's end",
                                                (unsigned long long)r->offset);
        else if (rc == -ENOENT)
            st = SPW_RPC_NOT_FOUND, snprintf(msg, msglen, "listing %016llx is not kept (too big, or evicted): list "
                                             "the source where it is read", (unsigned long long)hash);
        else if (rc)
            st = SPW_RPC_RESOURCE_EXHAUSTED, snprintf(msg, msglen, "out of memory");
    }
    free(key);
    Spillway__V1__GetManifestResponse *out =
        st == SPW_RPC_OK ? disp_reply_new(reply, &spillway__v1__get_manifest_response__descriptor) : NULL;
    if (out) {
        out->manifest_hash = hash;
        out->chunk = (ProtobufCBinaryData){.len = len, .data = chunk};
        out->total_bytes = total;
        out->samples = samples;
    }
    return st;
}

DISP_UNARY(disp_get_manifest, spillway__v1__get_manifest_request__descriptor, get_manifest)
