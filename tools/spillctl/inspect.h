/* tools/spillctl/inspect.h - spillctl's read-only commands: workers, jobs, job ID (the dispatcher) and profile (a
 * worker), as human tables or --json. Single-threaded; one RPC per command. */
#ifndef SPW_SPILLCTL_INSPECT_H
#define SPW_SPILLCTL_INSPECT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Run `what` ("workers", "jobs" or "job") against the dispatcher at target. job_id for "job". Returns the
 * process exit status (0, 1 on an RPC error, 2 on usage). */
/* A job id argument of `what` (job, job cancel, explain): 0 with *id set, or 2 (the usage status) having
 * said on stderr that a positive integer is needed. */
int spw_ctl_job_id(const char *arg, const char *what, unsigned long long *id);
int spw_inspect_run(const char *target, const char *auth_token, const char *what, const char *job_id, int json,
                    int timeout_ms);

/* spillctl profile: ask the worker at `worker` to measure the pipeline in file `pipeline` on `samples`
 * elements (0 = its default) and print the cost and bytes per element of every cut. Returns the exit status. */
int spw_inspect_profile(const char *worker, const char *auth_token, const char *pipeline, int samples, int json,
                        int timeout_ms);

struct ProtobufCMessage;
/* One unary call to target (a message in *resp, *len; malloc'd). Returns 0, or 1 after saying why on stderr. */
int spw_inspect_call(const char *target, const char *token, const char *method, const struct ProtobufCMessage *req,
                     int timeout_ms, uint8_t **resp, size_t *len);

/* Write s as a JSON string literal (quotes, escapes) to f. */
void spw_json_string(FILE *f, const char *s);

#endif
