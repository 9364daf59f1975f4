/* client/probe.c - link probes (see probe.h). Each thread asks its worker for far more bytes than it will
 * wait for, receives (without copying: the parts stay gRPC's) until the duration is up or every thread's
 * rate holds still, and cancels; its rate is what arrived in the second half of that time (the first warms
 * the connection up), measured while every worker sends, so contention at the client shows. CPU per byte
 * comes from the receiving threads' own CPU clocks over the same half. */
#include "client/probe.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/methods.h"
#include "lib/rpc.h"
#include "proto/spillway.pb-c.h"

#define PROBE_ASK_BYTES ((int64_t)1 << 30)
#define PROBE_MIN_MS 200        /* never done before this */
#define PROBE_CHECK_MS 50       /* how often a prober checks whether its rate holds still */
#define PROBE_STEADY 0.05       /* ... within this fraction of the previous check's */
#define PROBE_STEADY_MSGS 16    /* ... over at least this many messages (a slow link never: it runs to the end) */
#define PROBE_MAX_MSGS 8192     /* messages kept per prober (8 GiB of ~1 MiB chunks) */

struct probe_shared {
    int n;                              /* probers started */
    int settled;                        /* probers whose rate holds still, or that ended (atomic) */
};

struct prober {
    const char *addr;
    struct probe_shared *shared;
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

static void arrived(struct arrivals *a, int64_t at, size_t len, int64_t cpu)
{
    if (a->n++ == 0) {
        a->first_ns = at;
        a->cpu_first = cpu;
    } else {
        a->bytes_after_first += (int64_t)len;
    }
    a->last_ns = at;
}

struct seen {                   /* one message: when it arrived, its size, the thread's CPU clock then */
    int64_t at, len, cpu;
};

/* The arrivals of seen[0..n) from time `from` on. */
static struct arrivals since(const struct seen *seen, int n, int64_t from)
{
    struct arrivals a = {0};
    for (int i = 0; i < n; i++)
        if (seen[i].at >= from)
            arrived(&a, seen[i].at, (size_t)seen[i].len, seen[i].cpu);
    return a;
}

static double rate_of(const struct arrivals *a)
{
    return a->n >= 2 && a->last_ns > a->first_ns ? (double)a->bytes_after_first * 1e9 / (double)(a->last_ns - a->first_ns)
                                                 : 0;
}

/* Whether the rate over the second half of [t0, now] holds still: enough messages in it, and within
 * PROBE_STEADY of what it was at the previous check (*prev, updated). */
static bool steady(const struct seen *seen, int n, int64_t t0, int64_t now, double *prev)
{
    const struct arrivals late = since(seen, n, t0 + (now - t0) / 2);
    const double r = rate_of(&late), p = *prev;
    *prev = r;
    return late.n >= PROBE_STEADY_MSGS && p > 0 && fabs(r - p) <= PROBE_STEADY * p;
}

static void *prober_main(void *arg)
{
    struct prober *p = arg;
    const struct spw_rpc_channel_opts co = *p->peer;
    struct spw_rpc_channel *ch;
    struct spw_rpc_stream *st;
    bool counted = false;
    if (spw_rpc_channel_create(p->addr, &co, &ch) != 0)
        goto out;
    if (spw_rpc_stream_open(ch, SPW_PATH(PROBE), 0, &st) != 0) {
        spw_rpc_channel_destroy(ch);
        goto out;
    }
    Spillway__V1__ProbeRequest req = SPILLWAY__V1__PROBE_REQUEST__INIT;
    req.bytes = PROBE_ASK_BYTES;
    uint8_t buf[32];
    struct iovec iov = {buf, spillway__v1__probe_request__pack(&req, buf)};
    const int64_t t0 = spw_now_ns(), until = t0 + (int64_t)p->duration_ms * 1000000;
    int64_t next_check = t0 + (int64_t)PROBE_MIN_MS * 1000000;
    double prev = 0;
    /* The first half warms the connection up (HTTP/2 windows grow from 64 KiB): measure the second, or the
     * whole time when too little arrived in the second half (a slow link). Done early once the second
     * half's rate holds still on every worker's stream (a fast link: ~0.2 s instead of duration_ms). */
    struct seen *seen = calloc(PROBE_MAX_MSGS, sizeof *seen);
    int n = 0;
    size_t first_len = 0;
    if (seen && spw_rpc_stream_send(st, &iov, 1) == 0) {
        p->answered = true;
        for (;;) {
            const int64_t now = spw_now_ns();
            if (now >= until || __atomic_load_n(&p->shared->settled, __ATOMIC_ACQUIRE) >= p->shared->n)
                break;
            if (!counted && now >= next_check) {
                next_check = now + (int64_t)PROBE_CHECK_MS * 1000000;
                if (steady(seen, n, t0, now, &prev) || n == PROBE_MAX_MSGS) {
                    __atomic_add_fetch(&p->shared->settled, 1, __ATOMIC_ACQ_REL);
                    counted = true;
                }
            }
            const int64_t step = now + (int64_t)PROBE_CHECK_MS * 1000000;
            const int64_t wake = !counted && next_check < step ? next_check : step < until ? step : until;
            struct spw_rpc_msg *m;
            const int got = spw_rpc_stream_recv_parts(st, (int)((wake - now) / 1000000) + 1, &m);
            if (got == -ETIMEDOUT)
                continue;
            if (got != 1)
                break;
            int parts;
            size_t len;
            spw_rpc_msg_parts(m, &parts, &len);
            spw_rpc_msg_free(m);
            if (n == 0)
                first_len = len;
            if (n < PROBE_MAX_MSGS)
                seen[n++] = (struct seen){.at = spw_now_ns(), .len = (int64_t)len, .cpu = spw_thread_cpu_ns()};
        }
    }
    const int64_t end = n ? seen[n - 1].at : t0;
    const struct arrivals all = since(seen, n, t0), late = since(seen, n, t0 + (end - t0) / 2);
    const struct arrivals *a = late.n >= 3 ? &late : &all;
    if (a->n >= 2) {
        p->bytes = a->bytes_after_first;
        p->start_ns = a->first_ns;
        p->end_ns = a->last_ns;
        p->cpu_ns = seen[n - 1].cpu - a->cpu_first;
    } else if (p->answered) {
        /* At most one message in the whole time: the link carries at most that much per that time. */
        p->bytes = n ? (int64_t)first_len : 1;
        p->start_ns = t0;
        p->end_ns = spw_now_ns();
    }
    free(seen);
    spw_rpc_stream_cancel(st);
    spw_rpc_stream_finish(st, NULL, 0);
    spw_rpc_channel_destroy(ch);
out:
    if (!counted)
        __atomic_add_fetch(&p->shared->settled, 1, __ATOMIC_ACQ_REL);
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
        return -EINVAL;
    }
    Spillway__V1__ListWorkersRequest lw = SPILLWAY__V1__LIST_WORKERS_REQUEST__INIT;
    ProtobufCMessage *reply;
    char msg[256] = "";
    int st = spw_rpc_call_reply(disp, SPW_PATH(LIST_WORKERS), &lw.base, 10000,
                                &spillway__v1__list_workers_response__descriptor, &reply, msg, sizeof msg);
    spw_rpc_channel_destroy(disp);
    Spillway__V1__ListWorkersResponse *ws = (Spillway__V1__ListWorkersResponse *)reply;
    if (!ws) {
        snprintf(err, errlen, "ListWorkers: %s: %s", spw_rpc_status_name(st), msg);
        return st == SPW_RPC_UNAVAILABLE || st == SPW_RPC_DEADLINE_EXCEEDED ? -EAGAIN : -EIO;
    }
    struct prober pr[PROBE_MAX_WORKERS];
    pthread_t tids[PROBE_MAX_WORKERS];
    int started[PROBE_MAX_WORKERS] = {0};
    const int cap = max_workers > 0 && max_workers < PROBE_MAX_WORKERS ? max_workers : PROBE_MAX_WORKERS;
    for (size_t i = 0; i < ws->n_workers && out->n < cap; i++)
        if (ws->workers[i]->alive)
            snprintf(out->addr[out->n++], sizeof out->addr[0], "%s", ws->workers[i]->address);
    struct probe_shared shared = {.n = out->n};
    const int64_t t0 = spw_now_ns();
    for (int k = 0; k < out->n; k++) {
        pr[k] = (struct prober){.addr = out->addr[k], .shared = &shared, .peer = peer, .duration_ms = duration_ms};
        if (!(started[k] = pthread_create(&tids[k], NULL, prober_main, &pr[k]) == 0))
            __atomic_add_fetch(&shared.settled, 1, __ATOMIC_ACQ_REL);
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
    out->seconds = (double)(spw_now_ns() - t0) / 1e9;
    if (bytes > 0) {
        out->nic_bytes_per_s = (double)bytes * 1e9 / (double)(last - first);
        out->recv_ns_per_byte = (double)cpu / (double)bytes;
    }
    spillway__v1__list_workers_response__free_unpacked(ws, NULL);
    return 0;
}
