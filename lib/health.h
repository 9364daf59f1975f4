/* lib/health.h - the standard gRPC health service (grpc.health.v1.Health/Check, proto/health.proto) for a
 * daemon, so Kubernetes' native grpc probes need no sidecar. Service "" and the daemon's own service name
 * answer its readiness (SERVING or NOT_SERVING, as the daemon sets it); "liveness" answers SERVING while the
 * process serves calls at all; any other name is NOT_FOUND. Watch is not served. Thread-safe: the status is
 * an atomic the daemon sets from any thread. */
#ifndef SPW_LIB_HEALTH_H
#define SPW_LIB_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/rpc.h"

#define SPW_HEALTH_METHOD "/grpc.health.v1.Health/Check"

struct spw_health {
    char service[64];           /* the daemon's service, e.g. "spillway.v1.Worker" */
    int serving;                /* atomic: 1 ready, 0 not (starting, unregistered, draining) */
};

/* Not serving until spw_health_set says so. */
void spw_health_init(struct spw_health *h, const char *service);
void spw_health_set(struct spw_health *h, bool serving);
bool spw_health_serving(const struct spw_health *h);
/* Register Health/Check for h on srv (before it starts). Returns spw_rpc_server_add_unary's code. */
int spw_health_add(struct spw_rpc_server *srv, struct spw_health *h);
/* A server that answers Health/Check for h alone on host:port, with no token and a 4 KiB message cap (for
 * probes when the daemon requires a token). *port gets the bound port. Returns 0 or a negative code with
 * err filled. */
int spw_health_server_start(struct spw_health *h, const char *host, int port, struct spw_rpc_server **out,
                            int *bound, char *err, size_t errlen);

#endif
