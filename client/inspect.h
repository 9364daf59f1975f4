/* client/inspect.h - spillctl's read-only dispatcher commands: workers, jobs, job ID (human tables or
 * --json). Single-threaded; one RPC per command. */
#ifndef SPW_CLIENT_INSPECT_H
#define SPW_CLIENT_INSPECT_H

/* Run `what` ("workers", "jobs" or "job") against the dispatcher at target. job_id for "job". Returns the
 * process exit status (0, 1 on an RPC error, 2 on usage). */
int spw_inspect_run(const char *target, const char *auth_token, const char *what, const char *job_id, int json,
                    int timeout_ms);

#endif
