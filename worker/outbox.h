/* worker/outbox.h - one job's messages on their way to its clients. A producer packs elements into
 * ElementBatch messages with its own builder (the stacked element bytes written once; compressed at the level
 * the rank's stream asked for when that saves); each message is queued for its split's rank in a queue
 * bounded by what that rank's stream drained lately (QUEUE_AHEAD of it, within queue_bytes), producers
 * waiting for room. A rank's stream takes messages against the credit its client granted and puts one back
 * when its client went away. No sockets: check_outbox tests it alone.
 * Threads: one mutex per outbox, any thread; a builder belongs to one producer thread. */
#ifndef SPW_WORKER_OUTBOX_H
#define SPW_WORKER_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "lib/tensor.h"
#include "pipeline/element.h"
#include "pipeline/fields.h"
#include "pipeline/wire.h"

#define WRK_MSG_TARGET_BYTES (1u << 20)     /* a message holds about this much */
#define WRK_BUILDER_MAX (SPW_WIRE_MAX_ELEMENTS / 64)

struct wrk_msg {                /* one encoded ElementBatch: iovecs over scratch + data + labels */
    struct wrk_msg *next;
    uint8_t *scratch, *data;    /* owned; data holds the elements raw or compressed */
    int64_t *labels;            /* owned */
    uint8_t *fields;            /* owned: the elements' packed source.fields (NULL: none) */
    int64_t *field_offsets;     /* owned: [elements + 1] where each element's fields start in fields */
    struct iovec iov[1 + 2 * SPW_WIRE_MAX_TENSORS];
    int iovcnt;
    size_t bytes;
    size_t elements;
};
void wrk_msg_free(struct wrk_msg *m);

struct wrk_outbox;
struct wrk_outbox_opts {
    int world;                  /* ranks: one queue each */
    size_t queue_bytes;         /* a queue's bound whatever its stream drains */
    int64_t *zstd_in, *zstd_out;    /* element bytes compressed, and what they became (atomic; NULL: none) */
};
int wrk_outbox_create(const struct wrk_outbox_opts *o, struct wrk_outbox **out);
/* Frees what is still queued; accepts NULL. */
void wrk_outbox_destroy(struct wrk_outbox *o);
/* From now on pushes drop their message and every wait ends. */
void wrk_outbox_stop(struct wrk_outbox *o);

/* A producer's message in the making: the split's fields in b (wrk_builder_begin), its elements stacked. */
struct wrk_builder {
    struct spw_wire_batch b;
    int64_t positions[WRK_BUILDER_MAX], samples[WRK_BUILDER_MAX], labels[WRK_BUILDER_MAX];
    int64_t tombstones[WRK_BUILDER_MAX];
    char *tombstone_errors[WRK_BUILDER_MAX];     /* owned; freed at flush */
    uint8_t *data;              /* stacked element data (handed to the message at flush) */
    size_t data_cap;
    size_t elem_bytes, cap_elems, n;
    enum spw_dtype dtype;
    int ndim;
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    int slot_err;               /* why wrk_builder_slot last returned NULL: -ENOMEM or SPW_ETOOBIG */
    size_t slot_bytes;          /* the element size it was asked for */
    struct spw_zstd *z;         /* this producer's compression context, at level z_level */
    int z_level;
    bool with_fields;           /* the job's source has fields: every message carries them */
    uint8_t *fields;            /* the elements' packed fields (pipeline/fields.h), back to back */
    size_t fields_len, fields_cap;
    int64_t field_offsets[WRK_BUILDER_MAX + 1];
};
void wrk_builder_init(struct wrk_builder *bd);
void wrk_builder_release(struct wrk_builder *bd);
/* Start a split's (or a micro-batch's) messages: empty, with these fields. */
void wrk_builder_begin(struct wrk_builder *bd, uint64_t job, uint64_t epoch, uint64_t split, uint64_t generation,
                       int cut);
/* Room for one more element of that dtype and shape, flushing first when the message is full or the shape
 * changes: where its bytes go, or NULL (bd->slot_err: SPW_ETOOBIG over the wire's element cap, -ENOMEM). */
uint8_t *wrk_builder_slot(struct wrk_outbox *o, struct wrk_builder *bd, enum spw_dtype dt, int ndim,
                          const int64_t *shape);
/* The element just written at wrk_builder_slot's address, with its fields (NULL without; packed here). 0, or
 * -ENOMEM / SPW_ETOOBIG (element and fields over the wire's element cap): then it is not added. */
int wrk_builder_added(struct wrk_builder *bd, int64_t pos, int64_t sample, int64_t label,
                      const struct spw_fields *fields);
/* One element's value added (copied, unless the run wrote it at a slot already: v->placed), with its fields
 * (NULL without). 0, slot_err, or wrk_builder_added's error. */
int wrk_builder_add(struct wrk_outbox *o, struct wrk_builder *bd, int64_t pos, int64_t sample, int64_t label,
                    const struct spw_value *v, const struct spw_fields *fields);
/* A sample that could not be made, sent as a tombstone with err (flushing first when the list is full). */
void wrk_builder_tombstone(struct wrk_outbox *o, struct wrk_builder *bd, int64_t pos, const char *err);
/* Encode what the builder holds as one message (end: the split's last) and queue it for the split's rank,
 * waiting for room; the builder starts empty again. 0, -ENOMEM, -EINVAL. */
int wrk_builder_flush(struct wrk_outbox *o, struct wrk_builder *bd, bool end);

/* A rank's stream: attach (0, -EINVAL outside the world, -EBUSY when another streams it) at a zstd level for
 * the messages made from now on (0: raw), then take, put back, detach. */
int wrk_outbox_attach(struct wrk_outbox *o, int rank, int compress_level);
void wrk_outbox_set_direct(struct wrk_outbox *o, int rank, bool direct);
/* The rank's next message if credit allows it (a message of one element bigger than the whole grant goes
 * once the grant is a full message's, overdrawing it), waiting up to wait_ms for one to be queued; NULL when
 * there is none or too little credit (*stopped: the outbox stopped). The caller frees it once sent. */
struct wrk_msg *wrk_outbox_take(struct wrk_outbox *o, int rank, int64_t credit, int wait_ms, bool *stopped);
/* A taken message its client never got: back at the head of the rank's queue, for its next stream. */
void wrk_outbox_put_back(struct wrk_outbox *o, int rank, struct wrk_msg *m);
/* The attached stream's unspent credit (metrics). */
void wrk_outbox_credit(struct wrk_outbox *o, int rank, int64_t credit);
void wrk_outbox_detach(struct wrk_outbox *o, int rank);

struct wrk_outbox_stats {
    int64_t queue_bytes;        /* made and waiting for a client stream */
    int64_t credit_bytes;       /* credit the streams hold unspent */
    int streams, direct_streams;
    int busy_queues;            /* ranks with a message queued */
};
void wrk_outbox_stats(struct wrk_outbox *o, struct wrk_outbox_stats *out);

#endif
