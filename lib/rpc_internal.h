/* lib/rpc_internal.h - private to lib/rpc*.c: the stream object both sides share and small gRPC helpers.
 * Not for callers outside lib/rpc*.c. Thread model as in lib/rpc.h: a stream's send-side fields belong to
 * its one sender thread, recv-side fields to its one receiver thread; each plucks only its own tags. */
#ifndef SPW_LIB_RPC_INTERNAL_H
#define SPW_LIB_RPC_INTERNAL_H

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "lib/rpc.h"

/* Messages of at least this size get their parts of ZC_MIN bytes or more referenced, not copied. */
#define SPW_RPC_ZC_MIN (16u << 10)

struct spw_rpc_stream {
    grpc_call *call;
    grpc_completion_queue *cq;      /* pluck queue bound to this call only */
    int client;
    size_t max_msg;
    atomic_int cancelled;           /* spw_rpc_stream_cancel was called */
    /* Distinct addresses used as pluck tags; each is plucked by one thread only. */
    char tag_imd, tag_send, tag_poll, tag_recv, tag_close, tag_status;
    /* send side */
    int imd_pending;                /* client: open's SEND_INITIAL_METADATA batch not yet plucked */
    int imd_sent;                   /* server: initial metadata went out (with the first message) */
    int send_closed;                /* client half-closed */
    int send_failed;
    /* recv side */
    int recv_pending;               /* a RECV_MESSAGE batch is in flight (a timed-out recv) */
    int recv_ended;                 /* saw end of stream */
    int recv_failed;
    int rimd_done;                  /* client: RECV_INITIAL_METADATA was in an earlier batch */
    grpc_byte_buffer *recv_bb;
    grpc_metadata_array rimd;       /* client: the server's initial metadata */
    /* server: RECV_CLOSE_ON_SERVER result */
    int close_cancelled;
};

/* Deadline helpers (monotonic clock; ms <= 0 = infinite). */
gpr_timespec spw_rpc__deadline(int timeout_ms);

/* Copy a received byte buffer into one malloc'd block (never NULL). 0 or -ENOMEM. */
int spw_rpc__bb_flatten(grpc_byte_buffer *bb, uint8_t **out, size_t *len);

/* Copy a slice into a NUL-terminated caller buffer (msg may be NULL). */
void spw_rpc__slice_to_msg(grpc_slice s, char *msg, size_t msglen);

/* Initialise the fields common to both sides; call and cq are set by the caller. */
void spw_rpc__stream_init(struct spw_rpc_stream *st, int client, size_t max_msg);

/* Pluck a tag with no deadline, for batches that must complete (the call is cancelled or finishing). */
grpc_event spw_rpc__pluck(grpc_completion_queue *cq, void *tag);

/* Take / drop the library's gRPC reference (installs the log hook first). */
/* "Bearer <token>" (malloc'd) for a token, or NULL for none; *oom set when allocation failed. */
char *spw_rpc__bearer(const char *token, bool *oom);
void spw_rpc__ref(void);
void spw_rpc__unref(void);

/* Last gRPC ERROR log line seen on this thread ("" if none); used to explain a failed bind. */
const char *spw_rpc__last_log(void);
void spw_rpc__clear_last_log(void);

#endif
