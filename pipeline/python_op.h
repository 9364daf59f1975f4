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

/* Whether function ("package.module:name") imports here, as a helper would import it: starts a helper,
 * asks, ends it (about 0.1 s). Returns 0, or SPW_EUSER with the reason in err (the interpreter does not start,
 * the module or the name is not found, it is not callable), or -ENOMEM. Any thread. */
int spw_python_op_check(const char *function, char *err, size_t errlen);

/* The largest element a function may return (bytes): 1 GiB. */
#define SPW_PYTHON_OP_MAX_BYTES ((size_t)1 << 30)

#endif
