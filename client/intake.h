/* client/intake.h - what the client does with a worker's message: decode it, check every field the worker
 * controls, and for each element claim its position in the assembler (the first copy wins), run the suffix
 * groups when it arrived before the pipeline's end, and copy the result once, into its batch slot;
 * tombstones skip (or fail) their samples. The receive loop (streams.c) is `while (recv) intake_message()`:
 * intake runs inline on the stream's thread (the one place to change for another policy).
 * Threads: any number of streams at once, each with its own struct intake_rx. */
#ifndef SPW_CLIENT_INTAKE_H
#define SPW_CLIENT_INTAKE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "client/assembler.h"
#include "pipeline/element.h"
#include "pipeline/order.h"
#include "pipeline/source.h"

struct remote_job;
struct spw_zstd;

struct intake {                         /* fixed once the remote is started; all outlive the streams */
    struct assembler *a;
    const struct spw_element_ctx *ctx;
    const struct spw_source *src;
    const struct spw_order *order;
    const struct remote_job *job;       /* its groups and samples; its id for logs */
    int64_t *elements;                  /* elements delivered (atomic) */
};

/* One stream's buffers, kept from one message to the next; zero-initialised, freed with intake_rx_free. */
struct intake_rx {
    const struct iovec *parts;          /* the message being taken */
    int n;
    uint8_t *scratch;                   /* an element that spans parts, gathered */
    size_t scratch_cap;
    uint8_t *raw;                       /* a compressed message's elements, decompressed */
    size_t raw_cap;
    struct iovec raw_part;              /* parts then point here */
    struct spw_zstd *z;                 /* made at the first compressed message */
    uint8_t *fields;                    /* the message's source.fields bytes, gathered */
    size_t fields_cap;
    int64_t *field_offsets;             /* [positions + 1], checked */
    size_t field_offsets_cap;
    struct spw_fields **unpacked;       /* [positions]: each element's fields, checked, until taken */
    size_t unpacked_cap, n_unpacked;
    int64_t parked;                     /* elements of the last message parked (beyond the window): the
                                           stream is ahead of the head batch */
};

/* Take one message from worker `from` on a stream opened for job. Returns NULL with the elements it held
 * (*elements) and how many of them were duplicates (*dups); or why it is refused (nothing of it delivered;
 * the caller closes the stream and trusts the worker no further). */
const char *intake_message(const struct intake *in, struct intake_rx *rx, uint64_t job, const struct iovec *parts,
                           int n, const char *from, int64_t *elements, int64_t *dups, char *err, size_t errlen);
void intake_rx_free(struct intake_rx *rx);

#endif
