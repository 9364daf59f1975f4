/* pipeline/combinators.h - the combinators random_apply, random_choice and random_order (torchvision's
 * RandomApply, RandomChoice, RandomOrder): a registry row each, whose CPU run decides from the op's own
 * stream which of its ops run and in which order, then runs each through its own row with a stream keyed
 * by its place in the tree (spw_combinator_key), so an element's result does not depend on the thread,
 * machine or backend that makes it. Thread-safe: state is per call. */
#ifndef SPW_PIPELINE_COMBINATORS_H
#define SPW_PIPELINE_COMBINATORS_H

#include <stdint.h>

#include "lib/rng.h"
#include "pipeline/op_registry.h"
#include "pipeline/value.h"

/* Which of op's ops run, in order, into order[] (SPW_OP_MAX_NESTED entries): random_apply all of them with
 * probability p (else none), random_choice one (by its weights, else uniformly), random_order all in a
 * uniformly random order. Draws from r; returns how many (-1 for an op that is not a combinator). */
int spw_combinator_plan(const struct spw_op_spec *op, struct spw_rng *r, int order[SPW_OP_MAX_NESTED]);
/* The rng op key of the k-th op of a combinator whose own key is parent (a top-level op's key is its index):
 * never 0, and distinct from every top-level index (its high bit is set). */
uint32_t spw_combinator_key(uint32_t parent, int k);
/* The call of c's combinator's op k: its spec, its key and its stream (spw_combinator_key under c's). */
void spw_combinator_sub(const struct spw_op_call *c, int k, struct spw_op_call *sub);
/* The rows' CPU run (spw_op_run_fn). */
int spw_combinator_run(struct spw_op_call *c, struct spw_value *v);

#endif
