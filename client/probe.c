/* client/probe.c - link probes (see probe.h). Each thread asks its worker for far more bytes than it will
 * wait for, receives (without copying: the parts stay gRPC's) until the duration is up, and cancels; its
 * rate is what arrived in the second half of that time (the first warms the connection up), measured while
 * every worker sends, so contention at the client shows. CPU per byte comes from the receiving threads' own
 * CPU clocks over the same half. */
#include "client/probe.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/rpc.h"
#include "proto/spillway.pb-c.h"

#define PROBE_ASK_BYTES ((int64_t)1 << 30)

struct prober {
    const char *addr;
    const struct spw_rpc_channel_opts *peer;
    int duration_ms;
    bool answered;                      /* the stream opened and the request went out */
    int64_t bytes, start_ns, end_ns, cpu_ns;
};

/* Arrivals counted from one message on: the bytes after it over the time since it arrived (a message's
 * own bytes were on the way before anyone saw it, so the first one only starts the clock). */
struct arrivals {
    int n;
    int64_t first_ns, last_ns, bytes_after_first, cpu_first;
};

static void arrived(struct arrivals *a, int64_t now, size_t len)
{
    if (a->n++ == 0) {
        a->first_ns = now;
        a->cpu_first = spw_thread_cpu_ns();
    } else {
        a->bytes_after_first += (int64_t)len;
    }
    a->last_ns = now;
}

static void *prober_main(void *arg)
{
    struct prober *p = arg;
    const struct spw_rpc_channel_opts co = *p->peer;
    struct spw_rpc_channel *ch;
    struct spw_rpc_stream *st;
    if (spw_rpc_channel_create(p->addr, &co, &ch) != 0)
        return NULL;
    if (spw_rpc_stream_open(ch, "/spillway.v1.Worker/Probe", 0, &st) != 0) {
        spw_rpc_channel_destroy(ch);
        return NULL;
    }
    Spillway__V1__ProbeRequest req = SPILLWAY__V1__PROBE_REQUEST__INIT;
    req.bytes = PROBE_ASK_BYTES;
    uint8_t buf[32];
    struct iovec iov = {buf, spillway__v1__probe_request__pack(&req, buf)};
    const int64_t t0 = spw_now_ns();
    const int64_t mid = t0 + (int64_t)p->duration_ms * 500000, until = t0 + (int64_t)p->duration_ms * 1000000;
    /* The first half warms the connection up (HTTP/2 windows grow from 64 KiB): measure the second, or the
     * whole time when too little arrived in the second half (a slow link). */
    struct arrivals all = {0}, late = {0};
    size_t first_len = 0;
    if (spw_rpc_stream_send(st, &iov, 1) == 0) {
        p->answered = true;
        for (;;) {
            const int64_t now = spw_now_ns();
            if (now >= until)
                break;
            struct spw_rpc_msg *m;
            if (spw_rpc_stream_recv_parts(st, (int)((until - now) / 1000000) + 1, &m) != 1)
                break;
            int n;
            size_t len;
            spw_rpc_msg_parts(m, &n, &len);
            spw_rpc_msg_free(m);
            const int64_t at = spw_now_ns();
            if (all.n == 0)
                first_len = len;
            arrived(&all, at, len);
            if (at >= mid)
                arrived(&late, at, len);
        }
    }
    const struct arrivals *a = late.n >= 3 ? &late : &all;
    if (a->n >= 2) {
        p->bytes = a->bytes_after_first;
        p->start_ns = a->first_ns;
        p->end_ns = a->last_ns;
        p->cpu_ns = spw_thread_cpu_ns() - a->cpu_first;
    } else if (p->answered) {
        /* At most one message in the whole time: the link carries at most that much per that time. */
        p->bytes = all.n ? (int64_t)first_len : 1;
        p->start_ns = t0;
        p->end_ns = spw_now_ns();
    }
    spw_rpc_stream_cancel(st);
    spw_rpc_stream_finish(st, NULL, 0);
    spw_rpc_channel_destroy(ch);
    return NULL;
}

int probe_links(const char *dispatcher, const struct spw_rpc_channel_opts *peer, int max_workers, int duration_ms,
                struct probe_result *out,
                char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct spw_rpc_channel *disp;
    if (spw_rpc_channel_create(dispatcher, peer, &disp) != 0) {
        snprintf(err, errlen, "bad dispatcher address \"%s\"", dispatcher);
        return -EIO;
    }
    Spillway__V1__ListWorkersRequest lw = SPILLWAY__V1__LIST_WORKERS_REQUEST__INIT;
    ProtobufCMessage *reply;
    char msg[256] = "";
    int st = spw_rpc_call_reply(disp, "/spillway.v1.Dispatcher/ListWorkers", &lw.base, 10000,
                                &spillway__v1__list_workers_response__descriptor, &reply, msg, sizeof msg);
    spw_rpc_channel_destroy(disp);
    Spillway__V1__ListWorkersResponse *ws = (Spillway__V1__ListWorkersResponse *)reply;
    if (!ws) {
        snprintf(err, errlen, "ListWorkers: %s: %s", spw_rpc_status_name(st), msg);
        return -EIO;
    }
    struct prober pr[PROBE_MAX_WORKERS];
    pthread_t tids[PROBE_MAX_WORKERS];
    int started[PROBE_MAX_WORKERS] = {0};
    const int cap = max_workers > 0 && max_workers < PROBE_MAX_WORKERS ? max_workers : PROBE_MAX_WORKERS;
    for (size_t i = 0; i < ws->n_workers && out->n < cap; i++) {
        if (!ws->workers[i]->alive)
            continue;
        const int k = out->n++;
        snprintf(out->addr[k], sizeof out->addr[k], "%s", ws->workers[i]->address);
        pr[k] = (struct prober){.addr = out->addr[k], .peer = peer, .duration_ms = duration_ms};
        started[k] = pthread_create(&tids[k], NULL, prober_main, &pr[k]) == 0;
    }
    int64_t bytes = 0, cpu = 0, first = INT64_MAX, last = 0;
    for (int k = 0; k < out->n; k++) {
        if (!started[k])
            continue;
        pthread_join(tids[k], NULL);
        if (pr[k].bytes <= 0 || pr[k].end_ns <= pr[k].start_ns)
            continue;
        out->bytes_per_s[k] = (double)pr[k].bytes * 1e9 / (double)(pr[k].end_ns - pr[k].start_ns);
        bytes += pr[k].bytes;
        cpu += pr[k].cpu_ns;
        first = pr[k].start_ns < first ? pr[k].start_ns : first;
        last = pr[k].end_ns > last ? pr[k].end_ns : last;
    }
    if (bytes > 0) {
        out->nic_bytes_per_s = (double)bytes * 1e9 / (double)(last - first);
        out->recv_ns_per_byte = (double)cpu / (double)bytes;
    }
    spillway__v1__list_workers_response__free_unpacked(ws, NULL);
    return 0;
}
