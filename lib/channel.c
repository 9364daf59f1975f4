/* lib/channel.c - the channel both ends share (see channel.h): opening one, the offer/ticket exchange of a
 * direct one on each side, control messages on the call, and the data path through the transport's ops.
 * Threads: as channel.h. */
#include "lib/channel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/channel_internal.h"
#include "lib/log.h"

static struct spw_channel *channel_new(const struct spw_channel_opts *o, const char *role)
{
    struct spw_channel *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ops = &spw_channel_grpc_ops;
    c->o = *o;
    c->role = role;
    snprintf(c->peer, sizeof c->peer, "%s", o->peer ? o->peer : "");
    c->o.peer = c->peer;
    return c;
}

int spw_channel_open(const struct spw_channel_opts *o, const char *addr, bool expect_offer, struct spw_channel **out)
{
    struct spw_channel *c = channel_new(o, "client");
    if (!c)
        return -ENOMEM;
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    c->expect_offer = expect_offer && o->codec;
    *out = c;
    return 0;
}

int spw_channel_take_offer(struct spw_channel *c, uint32_t port, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES])
{
    char err[512];
    struct spw_direct_conn *conn = NULL;
    const int rc = spw_direct_connect(c->addr, (int)port, ticket, c->o.tls, 2000, &conn, err, sizeof err);
    if (rc != 0) {
        c->offer_failed = true;
        spw_log(SPW_LOG_WARN, c->role, "worker=%s: %s: its elements come on the gRPC stream instead", c->peer, err);
    }
    uint8_t buf[256];
    const size_t n = c->o.codec->answer(c->o.codec_ctx, rc == 0, buf, sizeof buf);
    const struct iovec iov = {buf, n};
    if (!n || spw_rpc_stream_send(c->o.call, &iov, 1) != 0) {
        spw_direct_close(conn);
        return -EPIPE;
    }
    if (conn) {
        char how[128];
        c->conn = conn;
        c->ops = &spw_channel_direct_ops;
        spw_log(SPW_LOG_DEBUG, c->role, "worker=%s: elements on a data connection to port %u (%s)", c->peer, port,
                spw_direct_describe(conn, how, sizeof how));
    }
    return 0;
}

/* The sender's side of the exchange: 0 with *out the connection, -1 to send on the call (the receiver could
 * not connect, or no offer could be made), -2 when the call must end. */
static int offer(struct spw_channel *c, struct spw_direct_listener *l, int64_t *credit, struct spw_direct_conn **out)
{
    uint8_t ticket[SPW_DIRECT_TICKET_BYTES], buf[128], *in = NULL;
    size_t inlen = 0, n;
    if (spw_direct_ticket(l, ticket) != 0 ||
        !(n = c->o.codec->offer(c->o.codec_ctx, (uint32_t)spw_direct_port(l), ticket, buf, sizeof buf)))
        return -1;                      /* too many offers outstanding: this one goes on the call */
    const struct iovec iov = {buf, n};
    int state = -1;
    struct spw_direct_conn *conn = NULL;
    if (spw_rpc_stream_send(c->o.call, &iov, 1) == 0 && spw_rpc_stream_recv(c->o.call, 10000, &in, &inlen) == 1)
        state = c->o.codec->answer_of(c->o.codec_ctx, in, inlen, credit);
    free(in);
    spw_direct_take(l, ticket, state == 1 ? 3000 : 0, &conn);    /* spends the ticket */
    if (conn && state != 1) {
        spw_direct_close(conn);
        conn = NULL;
    }
    if (state == 0) {
        spw_log(SPW_LOG_INFO, c->role, "%s: the client could not open a data connection to port %d: its elements "
                "go on the gRPC stream", c->peer, spw_direct_port(l));
        return -1;
    }
    if (!conn) {
        spw_log(SPW_LOG_WARN, c->role, "%s: %s: ending the stream", c->peer,
                state == 1 ? "the client said it connected, and no connection presented its ticket"
                           : "no answer to the data connection's offer");
        return -2;
    }
    char how[128];
    spw_log(SPW_LOG_DEBUG, c->role, "%s: elements on a data connection (%s)", c->peer,
            spw_direct_describe(conn, how, sizeof how));
    *out = conn;
    return 0;
}

int spw_channel_accept(const struct spw_channel_opts *o, struct spw_direct_listener *l, bool asked,
                       int64_t *credit, struct spw_channel **out, char *why, size_t whylen)
{
    struct spw_channel *c = channel_new(o, "worker");
    if (!c) {
        snprintf(why, whylen, "out of memory");
        return -ENOMEM;
    }
    struct spw_direct_conn *conn = NULL;
    const int got = l && asked && o->codec ? offer(c, l, credit, &conn) : -1;
    if (got == -2) {
        snprintf(why, whylen, "the data connection was not made");
        free(c);
        return -EPIPE;
    }
    if (conn) {
        c->conn = conn;
        c->ops = &spw_channel_direct_ops;
    }
    *out = c;
    return 0;
}

void spw_channel_destroy(struct spw_channel *c)
{
    if (!c)
        return;
    c->ops->close(c);
    free(c);
}

int spw_channel_recv(struct spw_channel *c, int timeout_ms, struct spw_channel_msg *m, char *err, size_t errlen)
{
    *m = (struct spw_channel_msg){0};
    return c->ops->recv(c, timeout_ms, m, err, errlen);
}

void spw_channel_msg_done(struct spw_channel *c, struct spw_channel_msg *m)
{
    c->ops->msg_done(c, m);
}

int spw_channel_send(struct spw_channel *c, const struct iovec *iov, int n)
{
    return c->ops->send(c, iov, n);
}

int spw_channel_tell(struct spw_channel *c, const struct iovec *iov, int n)
{
    return spw_rpc_stream_send(c->o.call, iov, n);
}

int spw_channel_hear(struct spw_channel *c, int timeout_ms, uint8_t **msg, size_t *len)
{
    return spw_rpc_stream_recv(c->o.call, timeout_ms, msg, len);
}

const char *spw_channel_kind(const struct spw_channel *c)
{
    return c->ops->kind;
}

bool spw_channel_offer_failed(const struct spw_channel *c)
{
    return c->offer_failed;
}
