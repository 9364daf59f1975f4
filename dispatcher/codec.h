/* dispatcher/codec.h - the one place the dispatcher turns messages into bytes and state errors into gRPC
 * statuses (lib/rpc.h's SPW_RPC_* codes, the only status enum), and the unary adapter that unpacks a
 * request by its descriptor, hands the typed message to its handler and frees it. Pure functions; safe from
 * any thread. */
#ifndef SPW_DISPATCHER_CODEC_H
#define SPW_DISPATCHER_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Pack m into a malloc'd *out of *len bytes. Returns SPW_RPC_OK, or SPW_RPC_RESOURCE_EXHAUSTED with msg. */
int disp_pack(const ProtobufCMessage *m, uint8_t **out, size_t *len, char *msg, size_t msglen);
/* The same, returning the buffer (NULL when out of memory): for messages the service keeps (plans). */
uint8_t *disp_pack_keep(const ProtobufCMessage *m, size_t *len);
/* The status for a state or service error code: -ENOENT NOT_FOUND, -ESTALE FAILED_PRECONDITION, a cap or
 * -ENOMEM RESOURCE_EXHAUSTED, -EIO (the journal) UNAVAILABLE, anything else INVALID_ARGUMENT. */
int disp_status_of(int rc);

/* A typed handler: the unpacked request in, *resp packed with disp_pack (or left NULL) out; returns a
 * SPW_RPC_* status with msg. */
typedef int (*disp_typed_fn)(void *svc, const ProtobufCMessage *req, uint8_t **resp, size_t *resp_len, char *msg,
                             size_t msglen);
/* Unpack req_bytes as `desc` (INVALID_ARGUMENT "malformed request" when they are not one), call fn, free. */
int disp_unary(void *svc, const ProtobufCMessageDescriptor *desc, disp_typed_fn fn, const uint8_t *req,
               size_t len, uint8_t **resp, size_t *resp_len, char *msg, size_t msglen);

/* The public unary handler `name` (lib/rpc's shape) for the typed handler fn of requests of `desc`. */
#define DISP_UNARY(name, desc, fn)                                                                            \
    int name(void *svc, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,          \
             size_t msglen)                                                                                    \
    {                                                                                                          \
        return disp_unary(svc, &(desc), fn, req, len, resp, resp_len, msg, msglen);                           \
    }

#endif
