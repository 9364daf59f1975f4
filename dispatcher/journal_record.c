/* dispatcher/journal_record.c - journal records (see journal_record.h). One table names struct disp_update's
 * members; a kind's record message lists which of them it keeps, so encode and decode walk the message's
 * descriptor and copy each field to or from the member of the same name (matched once, at first use, not per
 * record: acks are journaled on the heartbeat's path). Pure; safe from any thread (pthread_once). */
#include "dispatcher/journal_record.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/codec.h"
#include "dispatcher/state.h"
#include "proto/spillway.pb-c.h"

/* JournalUpdate's oneof field for kind K is K + RECORD_FIELD_BASE (past the flat form's 1-30). */
#define RECORD_FIELD_BASE 30

#define SAME_KIND(k, field)                                                                                     \
    _Static_assert((int)DISP_##k == (int)SPILLWAY__V1__JOURNAL_KIND__JOURNAL_##k, #k);                          \
    _Static_assert((int)DISP_##k + RECORD_FIELD_BASE == (int)SPILLWAY__V1__JOURNAL_UPDATE__UPDATE_##field, #k)
SAME_KIND(REGISTER_WORKER, REGISTER_WORKER);
SAME_KIND(WORKER_HEARTBEAT, WORKER_HEARTBEAT);
SAME_KIND(WORKER_DEAD, WORKER_DEAD);
SAME_KIND(CREATE_JOB, CREATE_JOB);
SAME_KIND(CLIENT_HEARTBEAT, CLIENT_HEARTBEAT);
SAME_KIND(CLIENT_EXPIRED, CLIENT_EXPIRED);
SAME_KIND(LEASE, LEASE);
SAME_KIND(ACK, ACK);
SAME_KIND(FINISH_JOB, FINISH_JOB);
SAME_KIND(SET_CUT, SET_CUT);
SAME_KIND(CLIENT_RESUME, CLIENT_RESUME);
SAME_KIND(CLIENT_ONLY, CLIENT_ONLY);
SAME_KIND(REMOVE_JOB, REMOVE_JOB);
SAME_KIND(WORKER_REFUSES, WORKER_REFUSES);
SAME_KIND(ID_FLOOR, ID_FLOOR);
SAME_KIND(RESTORE_ENDED, RESTORE_ENDED);
_Static_assert(DISP_RESTORE_ENDED == 16, "a new update kind needs its name in proto/spillway.proto's JournalKind "
                                          "and its record message in JournalUpdate's oneof");

/* A member of struct disp_update by the name record fields use. */
enum member_type { M_4 = 1, M_8, M_STRING, M_BYTES, M_U64S };
struct member {
    const char *name;
    size_t off, len_off;    /* len_off: of the length, for bytes and arrays */
    enum member_type type;
};
#define SCALAR(n) {#n, offsetof(struct disp_update, n), 0, sizeof(((struct disp_update *)0)->n) == 4 ? M_4 : M_8}
static const struct member MEMBERS[] = {
    SCALAR(worker), SCALAR(job), SCALAR(producer), SCALAR(manifest_hash), SCALAR(incarnation), SCALAR(now_ms),
    SCALAR(epoch), SCALAR(split), SCALAR(generation), SCALAR(n_samples), SCALAR(epochs), SCALAR(first_epoch),
    SCALAR(split_size), SCALAR(cut), SCALAR(world_size), SCALAR(rank), SCALAR(threads), SCALAR(max_workers),
    SCALAR(secret), SCALAR(acked), SCALAR(pending), SCALAR(refusals), SCALAR(flags), SCALAR(buffered_bytes),
    {"address", offsetof(struct disp_update, address), 0, M_STRING},
    {"name", offsetof(struct disp_update, name), 0, M_STRING},
    {"gpu", offsetof(struct disp_update, name), 0, M_STRING},      /* a worker's `name` is its GPU */
    {"client", offsetof(struct disp_update, client), 0, M_STRING},
    {"reason", offsetof(struct disp_update, reason), 0, M_STRING},
    {"pipeline", offsetof(struct disp_update, pipeline), offsetof(struct disp_update, pipeline_len), M_BYTES},
    {"splits", offsetof(struct disp_update, splits), offsetof(struct disp_update, n_splits), M_U64S},
};

static enum member_type type_of_field(const ProtobufCFieldDescriptor *f)
{
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return f->type == PROTOBUF_C_TYPE_UINT64 || f->type == PROTOBUF_C_TYPE_FIXED64 ? M_U64S : 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
        return M_4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
        return M_8;
    case PROTOBUF_C_TYPE_STRING:
        return M_STRING;
    case PROTOBUF_C_TYPE_BYTES:
        return M_BYTES;
    default:
        return 0;
    }
}

/* The member a record field is copied to and from, or NULL when disp_update has none of its name and type. */
static const struct member *member_of(const ProtobufCFieldDescriptor *f)
{
    for (size_t i = 0; i < sizeof MEMBERS / sizeof MEMBERS[0]; i++)
        if (!strcmp(MEMBERS[i].name, f->name))
            return MEMBERS[i].type == type_of_field(f) ? &MEMBERS[i] : NULL;
    return NULL;
}

/* Each kind's record fields matched to their members, once: members[kind][i] for field i of its record
 * message (NULL: no member of that name and type, which encoding refuses). */
#define RECORD_MAX_FIELDS 32
static const struct member *record_members[DISP_RESTORE_ENDED + 1][RECORD_MAX_FIELDS];
static bool record_ok[DISP_RESTORE_ENDED + 1];
static pthread_once_t records_once = PTHREAD_ONCE_INIT;

static const ProtobufCMessageDescriptor *record_descriptor(int kind);

static void match_records(void)
{
    for (int k = 1; k <= DISP_RESTORE_ENDED; k++) {
        const ProtobufCMessageDescriptor *d = record_descriptor(k);
        record_ok[k] = d && d->n_fields <= RECORD_MAX_FIELDS;
        for (unsigned i = 0; record_ok[k] && i < d->n_fields; i++)
            record_ok[k] = (record_members[k][i] = member_of(&d->fields[i])) != NULL;
    }
}

const ProtobufCMessageDescriptor *disp_update_record_of(int kind)
{
    return record_descriptor(kind);
}

static const ProtobufCMessageDescriptor *record_descriptor(int kind)
{
    if (kind <= 0)
        return NULL;
    const ProtobufCFieldDescriptor *slot = protobuf_c_message_descriptor_get_field(
        &spillway__v1__journal_update__descriptor, (unsigned)kind + RECORD_FIELD_BASE);
    return slot && slot->type == PROTOBUF_C_TYPE_MESSAGE ? slot->descriptor : NULL;
}

/* Copy one field between the record message (at rec) and the update (at upd); to_record says which way. */
static void copy_field(const ProtobufCFieldDescriptor *f, const struct member *mb, char *rec, char *upd,
                       bool to_record)
{
    char *r = rec + f->offset, *u = upd + mb->off;
    switch (mb->type) {
    case M_4:
        to_record ? memcpy(r, u, 4) : memcpy(u, r, 4);
        break;
    case M_8:
        to_record ? memcpy(r, u, 8) : memcpy(u, r, 8);
        break;
    case M_STRING:
        if (to_record)
            *(const char **)r = *(const char **)u ? *(const char **)u : "";
        else
            *(const char **)u = *(const char **)r;
        break;
    case M_BYTES: {
        ProtobufCBinaryData *b = (ProtobufCBinaryData *)r;
        size_t *n = (size_t *)(upd + mb->len_off);
        if (to_record) {
            b->data = *(uint8_t **)u;
            b->len = b->data ? *n : 0;
        } else {
            *(uint8_t **)u = b->data;
            *n = b->len;
        }
        break;
    }
    case M_U64S: {
        size_t *count = (size_t *)(rec + f->quantifier_offset), *n = (size_t *)(upd + mb->len_off);
        if (to_record) {
            *(uint64_t **)r = *(uint64_t **)u;
            *count = *(uint64_t **)u ? *n : 0;
        } else {
            *(uint64_t **)u = *(uint64_t **)r;
            *n = *count;
        }
        break;
    }
    }
}

int disp_update_encode(const struct disp_update *u, uint8_t **out, size_t *len)
{
    pthread_once(&records_once, match_records);
    const int kind = (int)u->kind;
    const ProtobufCMessageDescriptor *d = kind > 0 && kind <= DISP_RESTORE_ENDED && record_ok[kind]
                                              ? record_descriptor(kind) : NULL;
    if (!d)
        return -EINVAL;
    ProtobufCMessage *rec = malloc(d->sizeof_message);
    if (!rec)
        return -ENOMEM;
    d->message_init(rec);
    for (unsigned i = 0; i < d->n_fields; i++)
        copy_field(&d->fields[i], record_members[kind][i], (char *)rec, (char *)u, true);
    Spillway__V1__JournalUpdate m = SPILLWAY__V1__JOURNAL_UPDATE__INIT;
    m.update_case = (Spillway__V1__JournalUpdate__UpdateCase)((int)u->kind + RECORD_FIELD_BASE);
    const ProtobufCFieldDescriptor *slot = protobuf_c_message_descriptor_get_field(
        &spillway__v1__journal_update__descriptor, m.update_case);
    *(ProtobufCMessage **)((char *)&m + slot->offset) = rec;
    *out = disp_pack_keep(&m.base, len);
    free(rec);
    return *out ? 0 : -ENOMEM;
}

/* The form written before 2026-12-05: one flat message whose `kind` says which fields count. */
static void decode_flat(const Spillway__V1__JournalUpdate *m, struct disp_update *u)
{
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
}

int disp_update_decode(const uint8_t *rec, size_t len, struct disp_update *u, ProtobufCMessage **msg)
{
    Spillway__V1__JournalUpdate *m = spillway__v1__journal_update__unpack(NULL, len, rec);
    if (!m)
        return -EINVAL;
    if (m->update_case == SPILLWAY__V1__JOURNAL_UPDATE__UPDATE__NOT_SET) {
        decode_flat(m, u);
    } else {
        const int kind = (int)m->update_case - RECORD_FIELD_BASE;
        pthread_once(&records_once, match_records);
        const ProtobufCMessageDescriptor *d = kind > 0 && kind <= DISP_RESTORE_ENDED ? record_descriptor(kind)
                                                                                      : NULL;
        const ProtobufCFieldDescriptor *slot = protobuf_c_message_descriptor_get_field(
            &spillway__v1__journal_update__descriptor, m->update_case);
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)((const char *)m + slot->offset);
        *u = (struct disp_update){.kind = (enum disp_update_kind)kind};
        for (unsigned i = 0; d && sub && i < d->n_fields && i < RECORD_MAX_FIELDS; i++)
            if (record_members[kind][i])
                copy_field(&d->fields[i], record_members[kind][i], (char *)sub, (char *)u, false);
    }
    if (u->kind <= 0 || u->kind > DISP_RESTORE_ENDED) {
        /* A kind past ours, or a member this release has no field for: a later release's record. */
        const bool later = u->kind > DISP_RESTORE_ENDED || (u->kind == 0 && m->base.n_unknown_fields > 0);
        spillway__v1__journal_update__free_unpacked(m, NULL);
        return later ? -EPROTONOSUPPORT : -EINVAL;
    }
    *msg = &m->base;
    return 0;
}
