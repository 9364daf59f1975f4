/* lib/channel_internal.h - what a transport of lib/channel.h implements, and the channel they share. Only
 * lib/channel*.c include it. Threads: as lib/channel.h. */
#ifndef SPW_LIB_CHANNEL_INTERNAL_H
#define SPW_LIB_CHANNEL_INTERNAL_H

#include "lib/channel.h"

/* A transport's data path (control messages always go on the call: channel.c). */
struct spw_channel_ops {
    const char *kind;
    int (*recv)(struct spw_channel *c, int timeout_ms, struct spw_channel_msg *m, char *err, size_t errlen);
    void (*msg_done)(struct spw_channel *c, struct spw_channel_msg *m);
    int (*send)(struct spw_channel *c, const struct iovec *iov, int n);
    void (*close)(struct spw_channel *c);
};

struct spw_channel {
    const struct spw_channel_ops *ops;
    struct spw_channel_opts o;
    const char *role;                   /* "worker" (sender) or "client" (receiver): the logs' component */
    char peer[256], addr[256];
    bool expect_offer, offer_failed;
    int64_t received;                   /* data messages so far (receiver) */
    struct spw_direct_conn *conn;       /* direct: the data connection */
    uint8_t *buf;                       /* direct: a message, whole, kept from one to the next */
    size_t cap;
    struct iovec part;
};

extern const struct spw_channel_ops spw_channel_grpc_ops;
extern const struct spw_channel_ops spw_channel_direct_ops;

/* Receiver: the offer that came first: connect to the worker's port, present the ticket, answer whether it
 * worked; on success the channel's data comes on the connection from now on. 0, or -EPIPE when the answer
 * could not be sent (the call failed). */
int spw_channel_take_offer(struct spw_channel *c, uint32_t port, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES]);

#endif
