/* tools/spillctl/ops.h - `spillctl ops`: every op this build runs, from the op registry (ops.c).
 * Single-threaded. */
#ifndef SPW_SPILLCTL_OPS_H
#define SPW_SPILLCTL_OPS_H

/* Print the ops (name, class, fields with their defaults; one line each, or with json the registry's schema
 * document, pipeline/op_schema.h) to stdout. Returns the exit status: 0, or 1 out of memory. */
int spw_ctl_ops(int json);

#endif
