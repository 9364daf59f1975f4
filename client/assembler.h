/* client/assembler.h - the client's prefetch buffer: batch slots indexed by position in the epoch order,
 * filled by any producer (worker streams, local threads, the head rescue) and delivered whole. It is where
 * exactly-once is decided: a per-epoch position bitmap drops duplicates, per-split counters say when a
 * split is complete (then it is acked), elements beyond the window are parked until it moves.
 * Thread model: one mutex; claims, placement and delivery from any threads; copies happen outside it. */
#ifndef SPW_CLIENT_ASSEMBLER_H
#define SPW_CLIENT_ASSEMBLER_H

#include <stdbool.h>
#include <stdint.h>

#include "pipeline/element.h"
#include "pipeline/executor.h"
#include "pipeline/source.h"
#include "pipeline/spec.h"

struct asm_opts {
    const struct spw_pipeline_spec *spec;
    const struct spw_source *src;   /* labels and paths of the keys */
    int64_t prefetch_bytes;         /* bounds the window of batches being assembled */
    bool ordered;
    int64_t max_batches;            /* 0 = all epochs */
    int split_size;
    int64_t splits_per_epoch;
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

struct assembler;

int asm_create(const struct asm_opts *o, struct assembler **out);
void asm_destroy(struct assembler *a);

/* Claim (epoch, pos) for one producer; the first claim wins. Counts the position toward its split. */
enum asm_claim asm_claim(struct assembler *a, uint64_t epoch, int64_t pos);
/* Memory for a claimed ASM_PLACE element of that shape inside its batch, or NULL when the shape differs
 * from the batch's (the batch then fails with a message). */
uint8_t *asm_dst(struct assembler *a, uint64_t epoch, int64_t pos, enum spw_dtype dt, int ndim,
                 const int64_t *shape);
/* Finish a claimed ASM_PLACE position: ok = its data is in place; !ok = skipped (tombstone). */
void asm_done(struct assembler *a, uint64_t epoch, int64_t pos, bool ok);
/* Take an ASM_PARK element's value (owned; placed when the window reaches it). */
void asm_park(struct assembler *a, uint64_t epoch, int64_t pos, struct spw_value *v);

/* Next batch per the delivery mode, waiting up to timeout_ms. Returns 0, -ETIMEDOUT, SPW_ECLOSED at the end,
 * SPW_ESPEC (mixed shapes; message in err) or the error set by asm_fail. */
int asm_next(struct assembler *a, int timeout_ms, struct spw_batch **out, char *err, size_t errlen);
void asm_release(struct assembler *a, struct spw_batch *b);
/* Stop with an error: asm_next returns rc from now on. */
void asm_fail(struct assembler *a, int rc, const char *msg);

/* Positions of the head batch (the next in order) that nobody has claimed, at most cap, and how long the
 * head has waited without any position arriving (ms). Returns the count. */
int asm_head_missing(struct assembler *a, uint64_t *epoch, int64_t *pos, int cap, int64_t *stalled_ms);
/* Move complete splits not yet acked into out (at most cap); returns the count. */
int asm_take_acks(struct assembler *a, struct asm_split *out, int cap);
/* Put acks back after a failed heartbeat. */
void asm_return_acks(struct assembler *a, const struct asm_split *acks, int n);
/* Wait until the window can take a position of (epoch, pos) or the timeout passes; true if it can. */
bool asm_wait_window(struct assembler *a, uint64_t epoch, int64_t pos, int timeout_ms);
/* Total batches the job delivers (-1 = forever) and delivered so far. */
void asm_progress(struct assembler *a, int64_t *total, int64_t *delivered, int64_t *parked_bytes);

#endif
