/* client/assembler.h - the client's prefetch buffer: batch slots filled by any producer (worker streams,
 * local threads, the head rescue) and delivered whole. Ordered jobs place each element by its position in
 * the epoch order (batches byte-identical to a local run); unordered jobs fill each epoch's batches in
 * arrival order (no head-of-line blocking; same samples per epoch, not the same grouping). It is where
 * exactly-once is decided: a per-epoch position bitmap drops duplicates, per-split counters say when a
 * split is complete (then it is acked), elements beyond the window are parked until it moves.
 * Thread model: one mutex; claims, placement and delivery from any threads; copies happen outside it. */
#ifndef SPW_CLIENT_ASSEMBLER_H
#define SPW_CLIENT_ASSEMBLER_H

#include <stdbool.h>
#include <stdint.h>

#include "pipeline/element.h"
#include "pipeline/executor.h"
#include "pipeline/fields.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"

struct asm_opts {
    const struct spw_pipeline_spec *spec;
    const struct spw_source *src;   /* labels and paths of the keys */
    int64_t prefetch_bytes;         /* bounds the window of batches being assembled */
    bool ordered;
    int64_t max_batches;            /* 0 = all epochs (after the resume point) */
    int split_size;
    int64_t splits_per_epoch;
    int rank, world_size;           /* this client's share of each epoch (spw_rank_view); world 0 = 1 */
    int64_t resume_batches;         /* batches already delivered (a checkpoint): delivery starts here */
    const uint8_t *resume_places;   /* the checkpoint's delivered places of its epoch (NULL: its first
                                       batches'); resume_places_len must be asm_place_bytes */
    size_t resume_places_len;
    uint64_t self_below_epoch;      /* epochs below this no lease brings: this client produces them */
};

enum asm_claim {
    ASM_PLACE,      /* the position is yours: asm_dst, copy, asm_done */
    ASM_PARK,       /* yours, but beyond the window: hand an owned value to asm_park */
    ASM_DUP,        /* already claimed or delivered: drop it */
    ASM_DROP,       /* counted but not delivered (drop_remainder tail, past max_batches) */
};

struct asm_split {
    uint64_t epoch, split;
};

struct asm_ticket {             /* a claimed element and, once placed, its batch and index in it */
    uint64_t epoch;
    int64_t place, sample;      /* place: this rank's index of the element in its epoch (see below) */
    int64_t gbatch;
    int idx;
};

struct assembler;

/* Places: a rank's epoch is `len` places (spw_rank_view): places [0, own) are the order positions of its
 * splits, in order; places [own, len) pad the short ranks (they repeat the first places' samples and only
 * this client produces them). With one rank, place = position. Returns -EINVAL for a rank outside the world
 * or a checkpoint that does not fit the job. */
int asm_create(const struct asm_opts *o, struct assembler **out);
void asm_destroy(struct assembler *a);

/* The place of order position pos in this rank's epoch, or -1 (another rank's); and back (the position a
 * place's sample sits at). */
int64_t asm_place_of(const struct assembler *a, int64_t pos);
int64_t asm_pos_of(const struct assembler *a, int64_t place);
/* Whether (epoch, place) is claimed already (or its epoch is over): a producer can skip it. */
bool asm_claimed(struct assembler *a, uint64_t epoch, int64_t place);
/* Claim (epoch, order position pos) for one producer; the first claim wins; another rank's position is a
 * duplicate. Counts it toward its split. Fills *t for ASM_PLACE and ASM_PARK. asm_claim_place claims by
 * place (the client's own production, padding included). */
enum asm_claim asm_claim(struct assembler *a, uint64_t epoch, int64_t pos, struct asm_ticket *t);
enum asm_claim asm_claim_place(struct assembler *a, uint64_t epoch, int64_t place, struct asm_ticket *t);
/* Memory for a claimed ASM_PLACE element of that shape inside its batch, or NULL when the shape differs
 * from the batch's (the batch then fails with a message). */
uint8_t *asm_dst(struct assembler *a, const struct asm_ticket *t, enum spw_dtype dt, int ndim, const int64_t *shape);
/* Finish a claimed ASM_PLACE element: ok = its data is in place; !ok = skipped (tombstone). */
void asm_done(struct assembler *a, const struct asm_ticket *t, bool ok);
/* Take an ASM_PARK element's value (owned; an empty value is a skipped sample) and fields (NULL: none); placed
 * when the window reaches it. */
void asm_park(struct assembler *a, const struct asm_ticket *t, struct spw_value *v, struct spw_fields *fields);

/* Next batch per the delivery mode, waiting up to timeout_ms. Returns 0, -ETIMEDOUT, SPW_ECLOSED at the end,
 * SPW_ESPEC (mixed shapes), spw_batch_build's error (SPW_ETOOBIG: padding past its cap, ...) with its message
 * in err, or the error set by asm_fail; a failure is returned again by every later call. */
int asm_next(struct assembler *a, int timeout_ms, struct spw_batch **out, char *err, size_t errlen);
void asm_release(struct assembler *a, struct spw_batch *b);
/* A run's final write for a claimed ASM_PLACE element, straight into its place in the batch: the dest for
 * spw_element_run. place is storage the dest points at; it must outlive the run. */
struct asm_place {
    struct assembler *a;
    const struct asm_ticket *t;
};
struct spw_element_dest asm_element_dest(struct assembler *a, const struct asm_ticket *t, struct asm_place *place);
/* Hand over a claimed element (ASM_PLACE or ASM_PARK): ok with its value (copied into its place unless the
 * run already wrote it there, v->placed; parked, taking v, for ASM_PARK) and its source.fields (taken; NULL
 * without), or !ok (skipped; v empty). *delivered (may be NULL) counts it, atomically, before its batch can
 * complete. The caller frees v. */
void asm_finish(struct assembler *a, const struct asm_ticket *t, enum asm_claim c, struct spw_value *v,
                struct spw_fields *fields, bool ok, int64_t *delivered);
/* Stop with an error: asm_next returns rc from now on. */
void asm_fail(struct assembler *a, int rc, const char *msg);

/* Places the head batch (the oldest undelivered) still waits for that nobody has claimed, at most cap,
 * and how long the head has waited without progress (ms). The first *n_self of them only this client
 * produces (padding, epochs below self_below_epoch): nobody else will. Returns the count. */
int asm_head_missing(struct assembler *a, uint64_t *epoch, int64_t *places, int cap, int64_t *stalled_ms,
                     int *n_self);
/* Move complete splits not yet acked into out (at most cap); returns the count. */
int asm_take_acks(struct assembler *a, struct asm_split *out, int cap);
/* Put acks back after a failed heartbeat. */
void asm_return_acks(struct assembler *a, const struct asm_split *acks, int n);
/* Ack again every split of epochs from_epoch on that this client holds whole (a job made anew: its dispatcher
 * must hear what this client already has). */
void asm_reack(struct assembler *a, uint64_t from_epoch);
/* Wait until the window can take (epoch, place) without parking it, or the timeout passes; true if it can. */
bool asm_wait_window(struct assembler *a, uint64_t epoch, int64_t place, int timeout_ms);
/* Total batches the job delivers (-1 = forever) and delivered so far. */
void asm_progress(struct assembler *a, int64_t *total, int64_t *delivered, int64_t *parked_bytes);

/* What the trainer has been given, for a checkpoint: batches delivered since the run began (previous runs'
 * included) and a bitmap of the delivered places of the epoch in progress (epoch batches / batches per
 * epoch), asm_place_bytes() long. Every earlier epoch is delivered whole. */
size_t asm_place_bytes(const struct assembler *a);
void asm_checkpoint(struct assembler *a, int64_t *batches, uint8_t *places);
int64_t asm_batches_per_epoch(const struct assembler *a);

#endif
