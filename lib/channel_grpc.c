/* lib/channel_grpc.c - the gRPC transport (see channel.h): data messages on the StreamElements call itself,
 * received in gRPC's slices without a copy. The receiver's first message may be the worker's offer of a data
 * connection: taken here, after which the channel is a direct one. Threads: as channel.h. */
#include <errno.h>
#include <stdio.h>

#include "lib/channel_internal.h"
#include "lib/err.h"

static int grpc_recv(struct spw_channel *c, int timeout_ms, struct spw_channel_msg *m, char *err, size_t errlen)
{
    struct spw_rpc_msg *msg;
    const int rc = spw_rpc_stream_recv_parts(c->o.call, timeout_ms, &msg);
    if (rc == -ETIMEDOUT)
        return rc;
    if (rc != 1)
        return 0;       /* the worker finished or the call failed: its status says which */
    *m = (struct spw_channel_msg){.call_msg = msg};
    m->parts = spw_rpc_msg_parts(msg, &m->n, &m->len);
    uint32_t port;
    uint8_t ticket[SPW_DIRECT_TICKET_BYTES];
    if (c->received++ == 0 && c->expect_offer && c->o.codec->offer_of(c->o.codec_ctx, m->parts, m->n, &port, ticket)) {
        spw_rpc_msg_free(msg);
        *m = (struct spw_channel_msg){0};
        if (spw_channel_take_offer(c, port, ticket) != 0) {
            snprintf(err, errlen, "the answer to the data connection's offer could not be sent");
            return -EPIPE;
        }
        return c->ops->recv(c, timeout_ms, m, err, errlen);
    }
    return 1;
}

static void grpc_msg_done(struct spw_channel *c, struct spw_channel_msg *m)
{
    spw_rpc_msg_free(m->call_msg);
    m->call_msg = NULL;
}

static int grpc_send(struct spw_channel *c, const struct iovec *iov, int n)
{
    return spw_rpc_stream_send(c->o.call, iov, n);
}

static void grpc_close(struct spw_channel *c)
{
}

const struct spw_channel_ops spw_channel_grpc_ops = {
    .kind = "grpc", .recv = grpc_recv, .msg_done = grpc_msg_done, .send = grpc_send, .close = grpc_close,
};
