/* lib/channel.h - one element stream's transport behind one interface. The sender (a worker) sends data
 * messages as iovecs and hears the receiver's control messages (credit grants); the receiver (a client)
 * reads data messages in parts and tells control messages. Control always travels on the StreamElements
 * call; data on the call too (the gRPC transport, channel_grpc.c) or on a ticketed TCP connection beside it
 * (the direct transport, channel_direct.c over lib/direct.h, with TLS when the call has it). The offer/ticket exchange that opens a direct
 * channel is here (channel.c); the messages it exchanges are in the caller's formats (struct
 * spw_channel_codec). A third transport is one file with a struct spw_channel_ops.
 * Threads: one thread uses a channel at a time. */
#ifndef SPW_LIB_CHANNEL_H
#define SPW_LIB_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "lib/direct.h"
#include "lib/rpc.h"

struct spw_channel;

/* The offer/ticket exchange's messages, in the caller's formats. ctx: spw_channel_opts.codec_ctx. */
struct spw_channel_codec {
    /* Sender: an offer of a data connection on port with ticket, into buf (cap bytes): its length, 0 when
     * it cannot be made. */
    size_t (*offer)(void *ctx, uint32_t port, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES], uint8_t *buf,
                    size_t cap);
    /* Sender: the receiver's answer: 1 it connected, 0 it could not, -1 no answer; credit granted with it is
     * added to *credit. */
    int (*answer_of)(void *ctx, const uint8_t *msg, size_t len, int64_t *credit);
    /* Receiver: whether a data message is an offer (1, with *port and ticket), or not (0). */
    int (*offer_of)(void *ctx, const struct iovec *parts, int n, uint32_t *port,
                    uint8_t ticket[SPW_DIRECT_TICKET_BYTES]);
    /* Receiver: the answer, connected or not, into buf: its length, 0 when it cannot be made. */
    size_t (*answer)(void *ctx, bool connected, uint8_t *buf, size_t cap);
};

struct spw_channel_opts {
    struct spw_rpc_stream *call;        /* the StreamElements call (the caller's: it finishes it) */
    const char *peer;                   /* for logs: the worker's address, or the job and rank */
    spw_direct_stop_fn stop;            /* asked while a data connection waits: true ends the wait */
    void *stop_ctx;
    size_t max_message;                 /* receiver: a data message's cap, checked before reading it */
    const struct spw_direct_tls *tls;   /* receiver: TLS for a data connection (NULL: plaintext; the sender's
                                           listener has its own); must outlive the channel */
    const struct spw_channel_codec *codec;
    void *codec_ctx;
};

/* A data message received: its parts, their count and total length (valid until spw_channel_msg_done). */
struct spw_channel_msg {
    const struct iovec *parts;
    int n;
    size_t len;
    struct spw_rpc_msg *call_msg;       /* the transport's (gRPC: the message as it arrived) */
};

/* Sender: a channel on o->call. With a listener and asked (the receiver's first request said so), the
 * exchange first: an offer with a fresh ticket, the receiver's answer (credit with it added to *credit), and
 * data on the connection that presented the ticket - or on the call when the receiver could not connect.
 * Returns 0; -EPIPE (why says it) when the call must end: the exchange failed, or the receiver said it
 * connected and no connection came; -ENOMEM. */
int spw_channel_accept(const struct spw_channel_opts *o, struct spw_direct_listener *l, bool asked,
                       int64_t *credit, struct spw_channel **out, char *why, size_t whylen);
/* Receiver: a channel on o->call, to the worker at addr. expect_offer: its first request asked for a data
 * connection, so an offer may come first: it is taken inside spw_channel_recv (connect, present the ticket,
 * answer), and data then comes on the connection (or, when it could not be made, on the call). */
int spw_channel_open(const struct spw_channel_opts *o, const char *addr, bool expect_offer,
                     struct spw_channel **out);
void spw_channel_destroy(struct spw_channel *c);   /* closes a data connection; accepts NULL */

/* Receiver: the next data message into *m, waiting up to timeout_ms. Returns 1; -ETIMEDOUT (none yet); 0:
 * the call ended (spw_rpc_stream_finish gives its status); -EPIPE: the data connection broke or the exchange
 * failed and the call did not end by itself (cancel it); -ECANCELED: o->stop said so; SPW_EFORMAT,
 * SPW_ETOOBIG or -ENOMEM for a message refused (err says why: trust the peer no further). */
int spw_channel_recv(struct spw_channel *c, int timeout_ms, struct spw_channel_msg *m, char *err, size_t errlen);
void spw_channel_msg_done(struct spw_channel *c, struct spw_channel_msg *m);
/* Receiver: a control message to the sender, on the call. Returns 0 or as spw_rpc_stream_send. */
int spw_channel_tell(struct spw_channel *c, const struct iovec *iov, int n);
/* Sender: a data message. Returns 0, or a negative code when the receiver is gone. */
int spw_channel_send(struct spw_channel *c, const struct iovec *iov, int n);
/* Sender: the next control message (malloc'd *msg), waiting up to timeout_ms; returns as
 * spw_rpc_stream_recv (1, -ETIMEDOUT, or the call's end). */
int spw_channel_hear(struct spw_channel *c, int timeout_ms, uint8_t **msg, size_t *len);

/* "grpc" or "direct". */
const char *spw_channel_kind(const struct spw_channel *c);
/* Receiver: an offer came and no data connection could be made (ask no more of this worker). */
bool spw_channel_offer_failed(const struct spw_channel *c);

#endif
