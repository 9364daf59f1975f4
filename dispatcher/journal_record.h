/* dispatcher/journal_record.h - a durable state update (struct disp_update) as a journal record and back: a
 * JournalUpdate with one message per update kind in its oneof (proto/spillway.proto), fields matched to
 * disp_update's members by name; records of the previous release's flat form are still read. Pure functions;
 * safe from any thread. */
#ifndef SPW_DISPATCHER_JOURNAL_RECORD_H
#define SPW_DISPATCHER_JOURNAL_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

struct disp_update;
/* u as a journal record: malloc'd *out of *len bytes. Returns 0, -ENOMEM, or -EINVAL for an update kind
 * without a record message (or a record field disp_update has no member for: a programming error the unit
 * tests catch). */
int disp_update_encode(const struct disp_update *u, uint8_t **out, size_t *len);
/* A journal record (either form) back into *u, whose strings, pipeline and splits point into *msg (free it
 * with protobuf_c_message_free_unpacked after applying u). Returns 0, -EINVAL for bytes that are not a
 * record, or -EPROTONOSUPPORT for one of a kind this release does not know (a later release's). */
int disp_update_decode(const uint8_t *rec, size_t len, struct disp_update *u, ProtobufCMessage **msg);
/* The record message of an update kind (NULL for none): for tools that print records. */
const ProtobufCMessageDescriptor *disp_update_record_of(int kind);

#endif
