/* tests/tools/healthcheck.c - one grpc.health.v1.Health/Check call, as a Kubernetes grpc probe makes it:
 * prints "status=NAME serving=SERVING|NOT_SERVING|UNKNOWN" (serving only with status OK).
 *   healthcheck HOST:PORT [SERVICE [TOKEN]]
 * Exit 0 when the call came back with a status, 1 on local failure, 2 on bad arguments. */
#include <stdio.h>
#include <stdlib.h>

#include "lib/rpc.h"
#include "proto/health.pb-c.h"

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: healthcheck HOST:PORT [SERVICE [TOKEN]]\n");
        return 2;
    }
    spw_rpc_init();
    struct spw_rpc_channel_opts o = {.auth_token = argc > 3 ? argv[3] : NULL};
    struct spw_rpc_channel *ch;
    if (spw_rpc_channel_create(argv[1], &o, &ch) != 0)
        return 1;
    Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    req.service = argc > 2 ? argv[2] : "";
    uint8_t *resp = NULL;
    size_t len = 0;
    char msg[256] = "";
    int st = spw_rpc_call_msg(ch, "/grpc.health.v1.Health/Check", &req.base, 3000, &resp, &len, msg, sizeof msg);
    const char *serving = "-";
    Grpc__Health__V1__HealthCheckResponse *r =
        st == SPW_RPC_OK ? grpc__health__v1__health_check_response__unpack(NULL, len, resp) : NULL;
    if (r)
        serving = r->status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING ? "SERVING"
                  : r->status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING ? "NOT_SERVING"
                                                                                                       : "UNKNOWN";
    printf("status=%s serving=%s msg=%s\n", spw_rpc_status_name(st), serving, msg);
    if (r)
        grpc__health__v1__health_check_response__free_unpacked(r, NULL);
    free(resp);
    spw_rpc_channel_destroy(ch);
    spw_rpc_shutdown();
    return 0;
}
