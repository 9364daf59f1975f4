/* tools/spillctl/journal.c - `spillctl journal dump DIR` (see journal.h): lib/journal's read-only replay,
 * each record decoded as a JournalUpdate (either form) and its set fields printed through protobuf-c's
 * descriptors (so a new field or kind prints without a change here), secrets as "set". Single-threaded. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/journal.h"
#include "proto/spillway.pb-c.h"
#include "tools/spillctl/journal.h"

struct dump {
    int64_t offset;     /* of the next record */
    int64_t index;
    int json;
};

/* One field's value at p, when it is set (not proto3's zero). */
static void print_field(const ProtobufCFieldDescriptor *f, const void *p, int json, int *first)
{
    char v[96] = "";
    const char *s = NULL;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        if (*(const int32_t *)p)
            snprintf(v, sizeof v, "%" PRId32, *(const int32_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if (*(const uint32_t *)p)
            snprintf(v, sizeof v, "%" PRIu32, *(const uint32_t *)p);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if (*(const int64_t *)p)
            snprintf(v, sizeof v, "%" PRId64, *(const int64_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        if (*(const uint64_t *)p)
            snprintf(v, sizeof v, "%" PRIu64, *(const uint64_t *)p);
        break;
    case PROTOBUF_C_TYPE_STRING:
        s = *(const char *const *)p;
        if (!s || !*s)
            return;
        break;
    case PROTOBUF_C_TYPE_BYTES:
        if (((const ProtobufCBinaryData *)p)->len)
            snprintf(v, sizeof v, "%zu bytes", ((const ProtobufCBinaryData *)p)->len);
        break;
    default:
        return;
    }
    if (!s && !*v)
        return;
    if (strstr(f->name, "secret"))
        snprintf(v, sizeof v, "set");      /* a credential: never printed */
    if (json) {
        printf("%s\"%s\": ", *first ? "" : ", ", f->name);
        if (s) {
            putchar('"');
            for (; *s; s++)
                printf(*s == '"' || *s == '\\' ? "\\%c" : (unsigned char)*s < 0x20 ? "\\u%04x" : "%c",
                       (unsigned char)*s);
            putchar('"');
        } else {
            printf(strchr(v, ' ') || !strcmp(v, "set") ? "\"%s\"" : "%s", v);
        }
    } else {
        printf(" %s=", f->name);
        if (s)
            printf("\"%s\"", s);
        else
            printf("%s", v);
    }
    *first = 0;
}

/* Every set field of msg but the flat form's `kind`: repeated ones as their count. */
static void print_fields(const ProtobufCMessage *msg, int json)
{
    const ProtobufCMessageDescriptor *desc = msg->descriptor;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        if (!strcmp(f->name, "kind") || f->type == PROTOBUF_C_TYPE_MESSAGE)
            continue;
        const char *base = (const char *)msg + f->offset;
        int first = 0;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            const size_t n = *(const size_t *)((const char *)msg + f->quantifier_offset);
            if (n)
                printf(json ? ", \"%s_count\": %zu" : " %s=[%zu]", f->name, n);
            continue;
        }
        print_field(f, base, json, &first);
    }
}

/* A record is a JournalUpdate: one message per kind in its oneof `update` (the field's name is the kind's,
 * in lower case), or, written before 2026-12-05, the flat form (`kind` and the fields it used). */
static int print_record(void *ctx, const uint8_t *rec, size_t len, char *why, size_t whylen)
{
    (void)why, (void)whylen;
    struct dump *d = ctx;
    const int64_t at = d->offset;
    d->offset += 8 + (int64_t)len;
    Spillway__V1__JournalUpdate *m = spillway__v1__journal_update__unpack(NULL, len, rec);
    const ProtobufCMessage *fields = m ? &m->base : NULL;
    char name[48] = "UNDECODABLE";
    const char *form = "none";
    if (m && m->update_case != SPILLWAY__V1__JOURNAL_UPDATE__UPDATE__NOT_SET) {
        const ProtobufCFieldDescriptor *slot =
            protobuf_c_message_descriptor_get_field(m->base.descriptor, m->update_case);
        fields = *(ProtobufCMessage *const *)((const char *)m + slot->offset);
        for (size_t i = 0; i + 1 < sizeof name && slot->name[i]; i++)
            name[i] = (char)toupper((unsigned char)slot->name[i]), name[i + 1] = 0;
        form = "typed";
    } else if (m) {
        const ProtobufCEnumValue *kind = protobuf_c_enum_descriptor_get_value(&spillway__v1__journal_kind__descriptor,
                                                                              m->kind);
        snprintf(name, sizeof name, "%s", kind ? kind->name + strlen("JOURNAL_") : "UNKNOWN");
        form = "flat";
    }
    if (d->json)
        printf("{\"record\": %" PRId64 ", \"offset\": %" PRId64 ", \"bytes\": %zu, \"kind\": \"%s\", \"form\": \"%s\"",
               d->index, at, len, name, form);
    else
        printf("%6" PRId64 " @%-10" PRId64 " %-17s%s", d->index, at, name, !strcmp(form, "flat") ? " (flat)" : "");
    d->index++;
    if (fields)
        print_fields(fields, d->json);
    if (m)
        spillway__v1__journal_update__free_unpacked(m, NULL);
    printf(d->json ? "}\n" : "\n");
    return 0;
}

int spw_ctl_journal_dump(const char *dir, int json)
{
    struct dump d = {.json = json};
    struct spw_journal_opened info;
    char err[512];
    const int rc = spw_journal_read(dir, print_record, &d, &info, err, sizeof err);
    if (rc) {
        fprintf(stderr, "spillctl: journal dump: %s\n", err);
        return 1;
    }
    const char *verdict = info.corrupt_at >= 0 ? "corrupt" : info.dropped_bytes ? "torn-tail" : "clean";
    if (json) {
        printf("{\"summary\": \"%s\", \"records\": %" PRId64 ", \"bytes\": %" PRId64 ", \"dropped_bytes\": %" PRId64
               ", \"corrupt_at\": %" PRId64 ", \"dropped_records\": %" PRId64 "}\n", verdict, info.records,
               info.bytes, info.dropped_bytes, info.corrupt_at, info.dropped_records);
    } else if (info.corrupt_at >= 0) {
        printf("CORRUPT: record %" PRId64 " at offset %" PRId64 " is bad and %" PRId64 " valid records follow it. "
               "The dispatcher refuses to start on this journal; --journal-recover would keep the %" PRId64
               " records above and drop %" PRId64 " bytes (%" PRId64 " records) - keeping a copy of the file.\n",
               info.records, info.corrupt_at, info.dropped_records - 1, info.records, info.dropped_bytes,
               info.dropped_records);
    } else if (info.dropped_bytes) {
        printf("%" PRId64 " records; a torn tail of %" PRId64 " bytes after them (a crash mid-write: the next "
               "start cuts it off)\n", info.records, info.dropped_bytes);
    } else {
        printf("%" PRId64 " records, %" PRId64 " bytes, clean\n", info.records, info.bytes);
    }
    return info.corrupt_at >= 0;
}
