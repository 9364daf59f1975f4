/* lib/security.h - a daemon's security settings from its config table (SPW_CFG_SECURITY_ENTRIES): the
 * clients' token, the workers' own token, TLS for its port and its calls, and the refusal to send or accept
 * a token in the clear, or to open an unauthenticated port to the network, without --insecure. Logs what it
 * decided (never a token). Thread model: call once from main, before any thread starts. */
#ifndef SPW_LIB_SECURITY_H
#define SPW_LIB_SECURITY_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/config.h"
#include "lib/rpc.h"

struct spw_security {
    const char *token;          /* the clients' token (the only one without worker_token); NULL = none */
    const char *worker_token;   /* the workers' own token; NULL = token serves workers too */
    struct spw_rpc_tls *tls_server, *tls_channel;   /* NULL where that side stays plaintext */
    char token_buf[4096], worker_buf[4096];
};

/* Fill *out from the parsed table. Returns 0, or a negative code with err saying what to change: both a
 * token and its file, an unreadable token file, a worker token without a clients' token, a TLS file that
 * does not load, or a token that would travel in the clear (no TLS on the port or on the daemon's calls)
 * without --insecure, or a non-loopback --listen with no token and no mutual TLS (anyone reaching the port
 * could run jobs) without --insecure. component names the daemon in its log lines. */
int spw_security_from_config(const struct spw_config_entry *table, int n, const char *component,
                             struct spw_security *out, char *err, size_t errlen);
/* The token this daemon sends when it calls as a worker (a worker to the dispatcher, the dispatcher to a
 * worker's Profile): the workers' own, else the shared one; NULL = none. */
const char *spw_security_worker_token(const struct spw_security *s);
/* Whether a --listen host only this machine can reach: 127.0.0.0/8, ::1 (bracketed or not), a v4-mapped
 * 127.x, or "localhost". "0.0.0.0", "::", "" and every other address or name are not. */
bool spw_host_is_loopback(const char *host);

#endif
