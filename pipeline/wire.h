/* pipeline/wire.h - ElementBatch on the wire without copying tensor data. Encoding writes the small protobuf
 * parts (header fields, each tensor's dtype/shape and length prefixes) into a scratch buffer and points
 * iovecs at the tensors' own bytes: the concatenation is a valid spillway.v1.ElementBatch. Decoding walks
 * the message and returns pointers into it for tensor data, so the receiver copies each payload once, into
 * its destination, also from a message left in the parts gRPC received it in. Every count and size read
 * from the wire is checked against a cap before use.
 * Pure functions; thread-safe on distinct buffers. */
#ifndef SPW_PIPELINE_WIRE_H
#define SPW_PIPELINE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "lib/direct.h"
#include "lib/rpc.h"
#include "lib/tensor.h"

#define SPW_WIRE_MAX_TENSORS 8
#define SPW_WIRE_MAX_ELEMENTS 65536     /* positions + tombstones in one message */
#define SPW_WIRE_MAX_ERROR 512          /* bytes of one tombstone's error (longer ones are cut on encoding) */
/* The largest element a worker sends: one message under the receiver's default cap, with room for the
 * message's own fields. */
#define SPW_WIRE_MAX_ELEMENT_BYTES ((size_t)SPW_RPC_DEFAULT_MAX_MESSAGE - ((size_t)64 << 10))
/* A compressed tensor's data never decompresses to more than this (checked at decode, before allocating). */
#define SPW_WIRE_MAX_RAW_BYTES ((size_t)64 << 20)

/* Tensor.encoding: how a tensor's data bytes hold its elements. */
enum spw_wire_encoding {
    SPW_WIRE_RAW = 0,               /* the elements' bytes, stacked */
    SPW_WIRE_ZSTD = 1,              /* one zstd frame per element (shape[0] of them): pipeline/compress.h */
};

struct spw_wire_tensor {
    enum spw_dtype dtype;
    int ndim;
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    const uint8_t *data;                /* encode: the bytes to send; decode: points into the message when the
                                           bytes lie in one part, else NULL (use offset) */
    size_t nbytes;                      /* of data, as sent */
    size_t offset;                      /* decode: where the bytes start in the whole message */
    enum spw_wire_encoding encoding;
    size_t raw_bytes;                   /* decode: the bytes its shape and dtype say (= nbytes when raw) */
};

struct spw_wire_batch {
    uint64_t job, epoch, split, generation;
    int32_t cut;
    bool end_of_split;
    size_t n_positions, n_tombstones, n_samples;
    int64_t *positions, *tombstones, *samples;   /* encode: caller's arrays; decode: allocated */
    size_t n_tombstone_errors;          /* at most n_tombstones: why each failed ("" = not said) */
    char **tombstone_errors;            /* encode: caller's strings; decode: allocated, NUL-terminated */
    int n_tensors;
    struct spw_wire_tensor tensors[SPW_WIRE_MAX_TENSORS];
    uint32_t direct_port;               /* a worker's offer of a data connection (lib/direct.h), 0 = none: */
    uint8_t direct_ticket[SPW_DIRECT_TICKET_BYTES];     /* its port and ticket (decode: both or neither) */
};

/* Bytes of scratch spw_wire_encode needs for b (header and per-tensor prefixes). */
size_t spw_wire_scratch_size(const struct spw_wire_batch *b);
/* Encode b as iovecs (at most 1 + 2 * n_tensors, into iov with room for cap entries); headers go to scratch
 * (spw_wire_scratch_size bytes). Returns the iovec count, or -EINVAL / -ENOSPC. The data iovecs point at the
 * tensors' bytes: keep them alive until the send completes. */
int spw_wire_encode(const struct spw_wire_batch *b, uint8_t *scratch, size_t scratch_cap, struct iovec *iov,
                    int cap);
/* Total bytes of an encoding. */
size_t spw_wire_encoded_size(const struct spw_wire_batch *b);
/* Decode msg into out: tensor data points into msg (keep msg alive); position arrays are allocated (free
 * with spw_wire_batch_free). Returns 0 or SPW_EFORMAT / SPW_ETOOBIG with the reason in err. */
int spw_wire_decode(const uint8_t *msg, size_t len, struct spw_wire_batch *out, char *err, size_t errlen);
/* The same for a message in parts (as gRPC hands it over): a tensor whose bytes span parts has data NULL
 * and is read with spw_wire_copy. Keep the parts alive while using out. */
int spw_wire_decode_parts(const struct iovec *iov, int n, struct spw_wire_batch *out, char *err, size_t errlen);
/* Copy len bytes from offset of a message in parts into dst (the range must lie inside the message). */
void spw_wire_copy(const struct iovec *iov, int n, size_t offset, size_t len, uint8_t *dst);
/* len bytes from offset of a message in parts: in place when one part holds them, else copied into spill
 * (len bytes; NULL spill: none). NULL when the range runs past the message or there is no spill. */
const uint8_t *spw_wire_view(const struct iovec *iov, int n, size_t offset, size_t len, uint8_t *spill);
void spw_wire_batch_free(struct spw_wire_batch *b);

#endif
