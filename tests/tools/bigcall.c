/* tests/tools/bigcall.c - sends N concurrent unary calls of SIZE_MB MiB to one method on one channel and
 * prints one line per call, "status=NAME", so a test can see what large requests cost a server (not the
 * client library; no retries, no parsing of the reply). The body is a valid protobuf message of any type:
 * one unknown length-delimited field (number 15) of zero bytes, which a proto3 decoder reads and ignores.
 *   bigcall HOST:PORT METHOD SIZE_MB N [TOKEN]
 * TOKEN: sent as "authorization: Bearer TOKEN"; absent: no authorization metadata. Exit 0 when every call came
 * back with a status (whichever), 1 on local failure, 2 on bad arguments. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/rpc.h"

#define MAX_CALLS 64

struct call_arg {
    struct spw_rpc_channel *ch;
    const char *method;
    const uint8_t *req;
    size_t len;
    int status;
    char msg[256];
};

static void *call_main(void *p)
{
    struct call_arg *a = p;
    uint8_t *resp = NULL;
    size_t n = 0;
    a->status = spw_rpc_call(a->ch, a->method, a->req, a->len, 60000, &resp, &n, a->msg, sizeof a->msg);
    free(resp);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: bigcall HOST:PORT METHOD SIZE_MB N [TOKEN]\n");
        return 2;
    }
    const size_t mb = strtoul(argv[3], NULL, 10);
    const int n = atoi(argv[4]);
    if (mb < 1 || mb > 2000 || n < 1 || n > MAX_CALLS) {
        fprintf(stderr, "bigcall: SIZE_MB 1..2000 and N 1..%d\n", MAX_CALLS);
        return 2;
    }
    const size_t len = mb << 20;
    /* The channel's cap applies to sends too: raise it to the request's size. */
    struct spw_rpc_channel_opts o = {.max_message_bytes = len + (1u << 20),
                                     .auth_token = argc == 6 ? argv[5] : NULL};
    struct spw_rpc_channel *ch = NULL;
    uint8_t *req = calloc(1, len);
    size_t at = 0;
    if (req) {          /* field 15, wire type 2, then its length as a varint: the rest of the body */
        size_t vlen = 1;
        while (vlen < 10 && (len - 1 - vlen) >> (7 * vlen))
            vlen++;
        req[at++] = 15 << 3 | 2;
        for (size_t v = len - 1 - vlen, i = 0; i < vlen; i++, v >>= 7)
            req[at++] = (uint8_t)((v & 0x7f) | (i + 1 < vlen ? 0x80 : 0));
    }
    struct call_arg args[MAX_CALLS];
    pthread_t tids[MAX_CALLS];
    int ret = 1, started = 0;

    if (!req || spw_rpc_channel_create(argv[1], &o, &ch) != 0) {
        fprintf(stderr, "bigcall: cannot allocate %zu MiB or create a channel to %s\n", mb, argv[1]);
        goto out;
    }
    for (; started < n; started++) {
        args[started] = (struct call_arg){.ch = ch, .method = argv[2], .req = req, .len = len, .status = -1};
        if (pthread_create(&tids[started], NULL, call_main, &args[started]) != 0) {
            fprintf(stderr, "bigcall: cannot start thread %d\n", started);
            break;
        }
    }
    ret = started == n ? 0 : 1;
    for (int i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
        if (args[i].status < 0)
            ret = 1;
        printf("status=%s msg=%s\n", spw_rpc_status_name(args[i].status), args[i].msg);
    }
out:
    spw_rpc_channel_destroy(ch);
    free(req);
    return ret;
}
