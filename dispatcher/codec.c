/* dispatcher/codec.c - messages to bytes, errors to statuses, the unary adapter (see codec.h). Pure. */
#include "dispatcher/codec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/state.h"
#include "lib/err.h"
#include "lib/rpc.h"
#include "proto/spillway.pb-c.h"

int disp_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len, char *msg, size_t msglen)
{
    uint8_t *buf = disp_pack_keep(m, len);
    if (!buf) {
        snprintf(msg, msglen, "out of memory");
        return SPW_RPC_RESOURCE_EXHAUSTED;
    }
    *out = buf;
    return SPW_RPC_OK;
}

uint8_t *disp_pack_keep(const ProtobufCMessage *m, size_t *len)
{
    const size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf)
        *len = protobuf_c_message_pack(m, buf);
    return buf;
}

int disp_status_of(int rc)
{
    switch (rc) {
    case -ENOENT: return SPW_RPC_NOT_FOUND;
    case -ESTALE: return SPW_RPC_FAILED_PRECONDITION;
    case SPW_ETOOBIG: return SPW_RPC_RESOURCE_EXHAUSTED;
    case -ENOMEM: return SPW_RPC_RESOURCE_EXHAUSTED;
    case -EIO: return SPW_RPC_UNAVAILABLE;          /* the journal cannot be written: retry later */
    default: return SPW_RPC_INVALID_ARGUMENT;
    }
}

int disp_unary(void *svc, const ProtobufCMessageDescriptor *desc, disp_typed_fn fn, const uint8_t *req,
               size_t len, uint8_t **resp, size_t *resp_len, char *msg, size_t msglen)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, req);
    if (!m) {
        snprintf(msg, msglen, "malformed %s (%zu bytes)", desc->short_name, len);
        return SPW_RPC_INVALID_ARGUMENT;
    }
    const int status = fn(svc, m, resp, resp_len, msg, msglen);
    protobuf_c_message_free_unpacked(m, NULL);
    return status;
}

#define SAME_KIND(k) _Static_assert((int)DISP_##k == (int)SPILLWAY__V1__JOURNAL_KIND__JOURNAL_##k, #k)
SAME_KIND(REGISTER_WORKER);
SAME_KIND(WORKER_HEARTBEAT);
SAME_KIND(WORKER_DEAD);
SAME_KIND(CREATE_JOB);
SAME_KIND(CLIENT_HEARTBEAT);
SAME_KIND(CLIENT_EXPIRED);
SAME_KIND(LEASE);
SAME_KIND(ACK);
SAME_KIND(FINISH_JOB);
SAME_KIND(SET_CUT);
SAME_KIND(CLIENT_RESUME);
SAME_KIND(CLIENT_ONLY);
SAME_KIND(REMOVE_JOB);
SAME_KIND(WORKER_REFUSES);
SAME_KIND(ID_FLOOR);
SAME_KIND(RESTORE_ENDED);
_Static_assert(DISP_RESTORE_ENDED == 16, "a new update kind needs its name in proto/spillway.proto's JournalKind");

int disp_update_encode(const struct disp_update *u, uint8_t **out, size_t *len)
{
    Spillway__V1__JournalUpdate m = SPILLWAY__V1__JOURNAL_UPDATE__INIT;
    m.kind = (int32_t)u->kind;
    m.worker = u->worker;
    m.job = u->job;
    m.producer = u->producer;
    m.manifest_hash = u->manifest_hash;
    m.incarnation = u->incarnation;
    m.now_ms = u->now_ms;
    m.epoch = u->epoch;
    m.split = u->split;
    m.generation = u->generation;
    m.n_samples = u->n_samples;
    m.epochs = u->epochs;
    m.first_epoch = u->first_epoch;
    m.split_size = u->split_size;
    m.cut = u->cut;
    m.world_size = u->world_size;
    m.rank = u->rank;
    m.threads = u->threads;
    m.max_workers = u->max_workers;
    m.address = (char *)(u->address ? u->address : "");
    m.pipeline.data = (uint8_t *)u->pipeline;
    m.pipeline.len = u->pipeline ? u->pipeline_len : 0;
    m.name = (char *)(u->name ? u->name : "");
    m.n_splits = u->n_splits;
    m.splits = (uint64_t *)u->splits;
    m.reason = (char *)(u->reason ? u->reason : "");
    m.client = (char *)(u->client ? u->client : "");
    m.secret = u->secret;
    m.acked = u->acked;
    m.pending = u->pending;
    m.refusals = u->refusals;
    m.flags = u->flags;
    return (*out = disp_pack_keep(&m.base, len)) ? 0 : -ENOMEM;
}

int disp_update_decode(const uint8_t *rec, size_t len, struct disp_update *u, ProtobufCMessage **msg)
{
    Spillway__V1__JournalUpdate *m = spillway__v1__journal_update__unpack(NULL, len, rec);
    if (!m)
        return -EINVAL;
    *u = (struct disp_update){.kind = (enum disp_update_kind)m->kind, .worker = m->worker, .job = m->job,
                              .producer = m->producer, .manifest_hash = m->manifest_hash,
                              .incarnation = m->incarnation, .now_ms = m->now_ms, .epoch = m->epoch,
                              .split = m->split, .generation = m->generation, .n_samples = m->n_samples,
                              .epochs = m->epochs, .first_epoch = m->first_epoch, .split_size = m->split_size,
                              .cut = m->cut, .world_size = m->world_size, .rank = m->rank, .threads = m->threads,
                              .max_workers = m->max_workers, .address = m->address, .pipeline = m->pipeline.data,
                              .pipeline_len = m->pipeline.len, .name = m->name, .splits = m->splits,
                              .n_splits = m->n_splits, .reason = m->reason, .client = m->client,
                              .secret = m->secret, .acked = m->acked, .pending = m->pending,
                              .refusals = m->refusals, .flags = m->flags};
    *msg = &m->base;
    return 0;
}
