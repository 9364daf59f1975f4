/* client/probe.h - measures the links from the workers to this client, as the planner needs them: every
 * alive worker streams padding at once (Worker.Probe) for a short time; the result is each worker's
 * bytes/s, the client's total (its NIC), and the client's CPU per received byte. Not a benchmark.
 * Thread model: probe_links starts and joins one thread per worker. */
#ifndef SPW_CLIENT_PROBE_H
#define SPW_CLIENT_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/rpc.h"

#define PROBE_MAX_WORKERS 64

struct probe_result {
    int n;
    char addr[PROBE_MAX_WORKERS][256];
    double bytes_per_s[PROBE_MAX_WORKERS];  /* 0: the worker did not answer */
    double nic_bytes_per_s;                 /* all of them together at this client */
    double recv_ns_per_byte;                /* this client's CPU per received byte (the receiving threads) */
    double seconds;                         /* how long the probe took */
};

/* Probe the workers the dispatcher lists as alive (the first max_workers of them; 0 = all), for at most
 * duration_ms: less once every stream's rate holds still (a fast link: ~0.2 s). Returns 0 (n may be 0), or
 * with the reason in err: -EAGAIN when the dispatcher does not answer (not up yet, restarting), -EINVAL for
 * a bad address, -EIO when it refuses. */
int probe_links(const char *dispatcher, const struct spw_rpc_channel_opts *peer, int max_workers, int duration_ms,
                struct probe_result *out, char *err, size_t errlen);

#endif
