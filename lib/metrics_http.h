/* lib/metrics_http.h - a daemon's HTTP port for Prometheus (libmicrohttpd): GET /metrics answers the text
 * exposition a collect callback writes at that moment, GET /healthz "ok"; other paths 404, other methods
 * 405, and no request body is ever read. Bounded: 64 connections (8 per client address), 8 KiB of request
 * per connection, 10 s idle; a flood of bad requests costs this port only. Thread model: one libmicrohttpd
 * thread calls collect, one scrape at a time. */
#ifndef SPW_LIB_METRICS_HTTP_H
#define SPW_LIB_METRICS_HTTP_H

#include <stddef.h>

#include "lib/metrics.h"

struct spw_metrics_http;

/* Write the exposition into p (called on the HTTP thread, once per scrape). */
typedef void (*spw_metrics_collect_fn)(void *ctx, struct spw_prom *p);

/* Serve on listen:port (port 0: any free port; listen NULL or "0.0.0.0": every IPv4 address). Returns 0, or
 * -errno with the reason in err. */
int spw_metrics_http_start(const char *listen, int port, spw_metrics_collect_fn collect, void *ctx,
                           struct spw_metrics_http **out, char *err, size_t errlen);
/* The port it listens on. */
int spw_metrics_http_port(const struct spw_metrics_http *h);
/* Stop serving and free; accepts NULL. */
void spw_metrics_http_stop(struct spw_metrics_http *h);

#endif
