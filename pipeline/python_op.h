/* pipeline/python_op.h - the "python" op: a user's function ("package.module:name", with the op's kwargs and
 * a numpy Generator seeded from (seed, epoch, sample, op)) run on one element in a Python helper process, so
 * Python never runs inside a trainer's or worker's threads and a crash or a hang costs one element, not the
 * process. Thread model: each producing thread starts its own helper on first use (never one interpreter
 * serialising all threads) and it ends with the thread; nothing is shared between threads. */
#ifndef SPW_PIPELINE_PYTHON_OP_H
#define SPW_PIPELINE_PYTHON_OP_H

#include "pipeline/op_registry.h"

/* The op's run (its registry row's cpu): replaces *v with the function's result - a uint8 [h, w, 3] array
 * becomes an image, anything else a tensor. Returns 0, or SPW_EUSER (the function raised, returned what
 * cannot be an element, or its helper crashed, timed out or could not start; the message says which), or
 * -ENOMEM, with the message in call->err. Environment: SPILLWAY_PYTHON (the interpreter, default python3)
 * and SPILLWAY_PYTHONPATH (put before PYTHONPATH for the helper), read when a helper starts. */
int spw_python_op_run(struct spw_op_call *call, struct spw_value *v);

/* The op's run on many elements (its registry row's cpu_many): the same results as spw_python_op_run on
 * each, with one round trip to the helper per SPW_PYTHON_OP_MANY_MAX of them; a function that hangs or
 * crashes the helper fails only the element it was running (the helper says which through the shared
 * memory), and the others are run again by a new helper. The results are borrowed (value.h): they lie in
 * the thread's shared memory until its next spw_python_op_stage, the CPU backend's next micro-batch. */
void spw_python_op_run_many(struct spw_op_call *calls, struct spw_value *const *vs, int *rcs, int n);
#define SPW_PYTHON_OP_MANY_MAX 32

/* The op's stage (its registry row's): where the op before it may write its input - the calling thread's
 * shared memory with its helper - so that spw_python_op_run_many need not copy it there. */
const struct spw_element_dest *spw_python_op_stage(const struct spw_op_spec *op);

/* Whether function ("package.module:name") imports here, as a helper would import it: starts a helper,
 * asks, ends it (about 0.1 s). Returns 0, or SPW_EUSER with the reason in err (the interpreter does not start,
 * the module or the name is not found, it is not callable), or -ENOMEM. Any thread. */
int spw_python_op_check(const char *function, char *err, size_t errlen);

/* The largest element a function may return (bytes): 1 GiB. */
#define SPW_PYTHON_OP_MAX_BYTES ((size_t)1 << 30)

#endif
