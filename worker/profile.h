/* worker/profile.h - Worker.Profile: measure a pipeline's candidate prefixes on this worker under full load
 * (all its threads busy on the first elements of epoch 0) and report, for every cut k, the cost per element
 * W(k) (read + groups [0, k) + packing b_k bytes) and the bytes per element b_k; with a GPU, what its GPU
 * producer makes of the whole pipeline (elements/s, CPU per element). Input for the planner; not
 * the planner; and Worker.Probe, bytes to time the link with. Profile runs on its own thread (a slow unary
 * method) and starts the measuring threads; Probe runs on its stream's thread. */
#ifndef SPW_WORKER_PROFILE_H
#define SPW_WORKER_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/rpc.h"

struct spw_backend;

struct wrk_profile_opts {
    int threads;                /* measuring threads: the worker's --threads */
    const struct spw_backend *gpu;  /* its GPU backend (--gpu): measured as a producer too; NULL = none */
};

/* The Profile handler (ctx = struct wrk_profile_opts *, which must outlive the server). */
int wrk_profile(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                size_t msglen);

/* The Probe stream handler (ctx unused): reads one ProbeRequest and sends that many bytes (capped) in ~1 MiB
 * chunks, so the client can time the link. */
int wrk_probe(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen);

#endif
