/* pipeline/stream_msgs.c - the StreamElements call's messages besides elements (see stream_msgs.h). Pure. */
#include "pipeline/stream_msgs.h"

#include <string.h>

#include "pipeline/wire.h"
#include "proto/spillway.pb-c.h"

size_t spw_stream_request_pack(const struct spw_stream_request *r, int64_t credit, bool direct, int state,
                               uint8_t *buf, size_t cap)
{
    Spillway__V1__StreamRequest req = SPILLWAY__V1__STREAM_REQUEST__INIT;
    req.job = r->job;
    req.job_secret = r->secret;
    req.rank = r->rank;
    req.incarnation = r->incarnation;
    req.credit_bytes = credit;
    req.compress_level = r->compress_level;
    req.direct = direct;
    req.direct_state = (Spillway__V1__DirectState)state;
    return spillway__v1__stream_request__get_packed_size(&req) <= cap ? spillway__v1__stream_request__pack(&req, buf)
                                                                       : 0;
}

static size_t offer(void *ctx, uint32_t port, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES], uint8_t *buf,
                    size_t cap)
{
    const struct spw_stream_request *r = ctx;
    struct spw_wire_batch b = {.job = r->job, .direct_port = port};
    memcpy(b.direct_ticket, ticket, SPW_DIRECT_TICKET_BYTES);
    struct iovec iov[1];
    return spw_wire_encode(&b, buf, cap, iov, 1) == 1 ? iov[0].iov_len : 0;
}

static int answer_of(void *ctx, const uint8_t *msg, size_t len, int64_t *credit)
{
    Spillway__V1__StreamRequest *req = spillway__v1__stream_request__unpack(NULL, len, msg);
    if (!req)
        return -1;
    *credit += req->credit_bytes;
    const int state = req->direct_state == SPILLWAY__V1__DIRECT_STATE__DIRECT_CONNECTED ? 1
                      : req->direct_state == SPILLWAY__V1__DIRECT_STATE__DIRECT_FAILED ? 0 : -1;
    spillway__v1__stream_request__free_unpacked(req, NULL);
    return state;
}

static int offer_of(void *ctx, const struct iovec *parts, int n, uint32_t *port,
                    uint8_t ticket[SPW_DIRECT_TICKET_BYTES])
{
    struct spw_wire_batch b;
    char err[64];
    if (spw_wire_decode_parts(parts, n, &b, err, sizeof err) != 0)
        return 0;       /* not an offer: the caller's own decode says what is wrong with it */
    const int is_offer = b.direct_port != 0;
    *port = b.direct_port;
    memcpy(ticket, b.direct_ticket, SPW_DIRECT_TICKET_BYTES);
    spw_wire_batch_free(&b);
    return is_offer;
}

static size_t answer(void *ctx, bool connected, uint8_t *buf, size_t cap)
{
    return spw_stream_request_pack(ctx, 0, false, connected ? SPILLWAY__V1__DIRECT_STATE__DIRECT_CONNECTED
                                                            : SPILLWAY__V1__DIRECT_STATE__DIRECT_FAILED, buf, cap);
}

const struct spw_channel_codec spw_stream_codec = {
    .offer = offer, .answer_of = answer_of, .offer_of = offer_of, .answer = answer,
};
