/* dispatcher/codec.c - messages to bytes, errors to statuses, the unary adapter (see codec.h). Pure. */
#include "dispatcher/codec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
