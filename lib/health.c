/* lib/health.c - grpc.health.v1.Health/Check over lib/rpc (see health.h). The messages come from the standard
 * health.proto through protoc-c. Thread-safe. */
#include "lib/health.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/health.pb-c.h"

void spw_health_init(struct spw_health *h, const char *service)
{
    memset(h, 0, sizeof *h);
    snprintf(h->service, sizeof h->service, "%s", service);
}

void spw_health_set(struct spw_health *h, bool serving)
{
    __atomic_store_n(&h->serving, serving ? 1 : 0, __ATOMIC_RELEASE);
}

bool spw_health_serving(const struct spw_health *h)
{
    return __atomic_load_n(&h->serving, __ATOMIC_ACQUIRE) != 0;
}

/* The unary handler (ctx = struct spw_health *). */
static int check(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, char *msg,
                 size_t msglen)
{
    struct spw_health *h = ctx;
    Grpc__Health__V1__HealthCheckRequest *r = grpc__health__v1__health_check_request__unpack(NULL, len, req);
    if (!r) {
        snprintf(msg, msglen, "malformed HealthCheckRequest");
        return SPW_RPC_INVALID_ARGUMENT;
    }
    Grpc__Health__V1__HealthCheckResponse out = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    int status = SPW_RPC_OK;
    if (!*r->service || !strcmp(r->service, h->service))
        out.status = spw_health_serving(h) ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                                           : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    else if (!strcmp(r->service, "liveness"))
        out.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    else {
        snprintf(msg, msglen, "unknown service \"%.64s\" (this is %s; also \"\" and \"liveness\")", r->service,
                 h->service);
        status = SPW_RPC_NOT_FOUND;
    }
    grpc__health__v1__health_check_request__free_unpacked(r, NULL);
    if (status != SPW_RPC_OK)
        return status;
    const size_t n = grpc__health__v1__health_check_response__get_packed_size(&out);
    if (!(*resp = malloc(n ? n : 1))) {
        snprintf(msg, msglen, "out of memory");
        return SPW_RPC_RESOURCE_EXHAUSTED;
    }
    *resp_len = grpc__health__v1__health_check_response__pack(&out, *resp);
    return SPW_RPC_OK;
}

int spw_health_add(struct spw_rpc_server *srv, struct spw_health *h)
{
    return spw_rpc_server_add_unary(srv, SPW_HEALTH_METHOD, check, h);
}

int spw_health_server_start(struct spw_health *h, const char *host, int port, struct spw_rpc_server **out,
                            int *bound, char *err, size_t errlen)
{
    char addr[300];
    snprintf(addr, sizeof addr, strchr(host, ':') && host[0] != '[' ? "[%s]:%d" : "%s:%d", host, port);
    struct spw_rpc_server_opts o = {.listen_addr = addr, .io_threads = 1, .max_message_bytes = 4096};
    struct spw_rpc_server *srv;
    int rc = spw_rpc_server_create(&o, &srv, err, errlen);
    if (rc)
        return rc;
    if ((rc = spw_health_add(srv, h)) != 0 || (rc = spw_rpc_server_start(srv, bound)) != 0) {
        snprintf(err, errlen, "health server on %s: cannot start (%d)", addr, rc);
        spw_rpc_server_destroy(srv);
        return rc;
    }
    *out = srv;
    return 0;
}
