/* dispatcher/codec.h - the one place the dispatcher turns messages into bytes and state errors into gRPC
 * statuses (lib/rpc.h's SPW_RPC_* codes, the only status enum), and the unary adapter that unpacks a
 * request by its descriptor, hands the typed message to its handler, packs the reply the handler filled and
 * frees both. Pure functions; safe from any thread. */
#ifndef SPW_DISPATCHER_CODEC_H
#define SPW_DISPATCHER_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Pack m into a malloc'd buffer of *len bytes (NULL when out of memory): for messages the service keeps
 * (plans, journal records); replies are packed by disp_unary. */
uint8_t *disp_pack_keep(const ProtobufCMessage *m, size_t *len);
/* The status for a state or service error code: -ENOENT NOT_FOUND, -ESTALE FAILED_PRECONDITION, a cap or
 * -ENOMEM RESOURCE_EXHAUSTED, -EIO (the journal) UNAVAILABLE, anything else INVALID_ARGUMENT. */
int disp_status_of(int rc);

/* A reply under construction. A handler makes its reply message with disp_reply_new and fills it; the
 * adapter packs it after the handler returned - after any lock the handler held - so everything the message
 * points to must be the reply's own: disp_reply_alloc, _strdup and _copy, or memory handed over with
 * disp_reply_later; never the state's. All of it is freed once the reply is packed (or the call failed). A
 * failed allocation returns NULL and fails the call with RESOURCE_EXHAUSTED. One thread (the handler's). */
struct disp_reply;
/* The reply message, of type d, initialised: the one the adapter packs. */
void *disp_reply_new(struct disp_reply *r, const ProtobufCMessageDescriptor *d);
void *disp_reply_alloc(struct disp_reply *r, size_t n);      /* zeroed */
char *disp_reply_strdup(struct disp_reply *r, const char *s);    /* s NULL: "" */
void *disp_reply_copy(struct disp_reply *r, const void *p, size_t n);
/* fn(p) once the reply is packed (or the call failed); p NULL: nothing. */
void disp_reply_later(struct disp_reply *r, void *p, void (*fn)(void *));

/* A typed handler: the unpacked request in, the reply made with disp_reply_new (or none: an empty reply);
 * returns a SPW_RPC_* status with msg. */
typedef int (*disp_typed_fn)(void *svc, const ProtobufCMessage *req, struct disp_reply *reply, char *msg,
                             size_t msglen);
/* Unpack req_bytes as `desc` (INVALID_ARGUMENT "malformed request" when they are not one), call fn, pack its
 * reply into a malloc'd *resp, free the request and the reply's memory. */
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
