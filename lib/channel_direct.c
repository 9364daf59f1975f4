/* lib/channel_direct.c - the direct transport (see channel.h, direct.h): data messages on a ticketed TCP
 * connection (TLS or not: lib/direct.c hides which) beside the call, each read whole into a buffer the channel keeps; the call carries control.
 * When the worker closes the connection the call ends with a status: the receiver drains the call for it.
 * Threads: as channel.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/channel_internal.h"
#include "lib/err.h"
#include "lib/log.h"

/* The worker closed the data connection (between messages, or mid-message: it died or stopped; nothing of a
 * message cut short is used) and ends the call: wait for that end. 0 when it came, -EPIPE when not. */
static int drain_call(struct spw_channel *c)
{
    struct spw_rpc_msg *m;
    int rc;
    while ((rc = spw_rpc_stream_recv_parts(c->o.call, c->o.stop && c->o.stop(c->o.stop_ctx) ? 1 : 2000, &m)) == 1)
        spw_rpc_msg_free(m);
    return rc == -ETIMEDOUT ? -EPIPE : 0;
}

static int direct_recv(struct spw_channel *c, int timeout_ms, struct spw_channel_msg *m, char *err, size_t errlen)
{
    size_t len;
    int rc = spw_direct_next(c->conn, timeout_ms, c->o.max_message, &len, c->o.stop, c->o.stop_ctx, err, errlen);
    if (rc == 1) {
        if (len > c->cap) {             /* <= the cap, checked in spw_direct_next */
            uint8_t *nb = realloc(c->buf, len);
            if (!nb) {
                snprintf(err, errlen, "out of memory for a message");
                return -ENOMEM;
            }
            c->buf = nb;
            c->cap = len;
        }
        if ((rc = spw_direct_read(c->conn, c->buf, len, c->o.stop, c->o.stop_ctx)) == 0) {
            c->part = (struct iovec){c->buf, len};
            *m = (struct spw_channel_msg){.parts = &c->part, .n = 1, .len = len};
            return 1;
        }
    }
    if (rc == -ETIMEDOUT || rc == SPW_EFORMAT || rc == SPW_ETOOBIG || rc == -ECANCELED)
        return rc;
    if (rc != 0)
        spw_log(SPW_LOG_WARN, c->role, "the data connection from worker=%s broke mid-message (%s): closing its "
                "stream", c->peer, strerror(-rc));
    return drain_call(c);
}

static void direct_msg_done(struct spw_channel *c, struct spw_channel_msg *m)
{
}

static int direct_send(struct spw_channel *c, const struct iovec *iov, int n)
{
    return spw_direct_send(c->conn, iov, n, c->o.stop, c->o.stop_ctx);
}

static void direct_close(struct spw_channel *c)
{
    spw_direct_close(c->conn);      /* the receiver reads its end, then the call's status */
    c->conn = NULL;
    free(c->buf);
    c->buf = NULL;
}

const struct spw_channel_ops spw_channel_direct_ops = {
    .kind = "direct", .recv = direct_recv, .msg_done = direct_msg_done, .send = direct_send, .close = direct_close,
};
