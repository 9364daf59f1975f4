/* pipeline/stream_msgs.h - the StreamElements call's messages besides elements, which both ends build: the
 * client's StreamRequest (its job, credit, compression, the answer to an offer) and the worker's offer of a
 * data connection (an ElementBatch with a port and a ticket), and lib/channel's codec over them. Pure; any
 * thread. */
#ifndef SPW_PIPELINE_STREAM_MSGS_H
#define SPW_PIPELINE_STREAM_MSGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/channel.h"

/* What a client's requests on one stream say (the codec's ctx, on both ends: a worker fills job only). */
struct spw_stream_request {
    uint64_t job, secret;
    int32_t rank;
    uint64_t incarnation;
    int32_t compress_level;
};

/* A StreamRequest granting credit; direct asks for a data connection (the first request), state answers an
 * offer (SPILLWAY__V1__DIRECT_STATE__*; 0 otherwise). Into buf: its length, 0 when it does not fit. */
size_t spw_stream_request_pack(const struct spw_stream_request *r, int64_t credit, bool direct, int state,
                               uint8_t *buf, size_t cap);

/* lib/channel's offer/ticket exchange in these messages; codec_ctx: a struct spw_stream_request. */
extern const struct spw_channel_codec spw_stream_codec;

#endif
