/* lib/security.c - see lib/security.h. Thread model: main thread only, once. */
#include "lib/security.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lib/err.h"
#include "lib/log.h"

static const char *entry(const struct spw_config_entry *t, int n, const char *name)
{
    const struct spw_config_entry *e = spw_config_get(t, n, name);
    return e ? e->s : NULL;
}

int spw_security_from_config(const struct spw_config_entry *t, int n, const char *component,
                             struct spw_security *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int rc = spw_config_token(entry(t, n, "auth-token"), entry(t, n, "auth-token-file"), out->token_buf,
                              sizeof out->token_buf, &out->token, err, errlen);
    if (rc == 0)
        rc = spw_config_token(NULL, entry(t, n, "worker-token-file"), out->worker_buf, sizeof out->worker_buf,
                              &out->worker_token, err, errlen);
    if (rc != 0)
        return rc;
    if (out->worker_token && !out->token)
        return spw_fail(err, errlen, -EINVAL, "--worker-token-file needs the clients' token too "
                        "(--auth-token-file): with no token the clients' calls would go unchecked");
    if (out->worker_token && !strcmp(out->worker_token, out->token))
        return spw_fail(err, errlen, -EINVAL, "--worker-token-file holds the clients' token: give the workers "
                        "a token of their own, or leave the flag out to share one");
    if ((rc = spw_rpc_tls_from_flags(entry(t, n, "tls-cert"), entry(t, n, "tls-key"), entry(t, n, "tls-ca"),
                                     entry(t, n, "tls-client-ca"), &out->tls_server, &out->tls_channel, err,
                                     errlen)) != 0)
        return rc;
    const struct spw_config_entry *insecure = spw_config_get(t, n, "insecure");
    const bool clear = out->token && (!out->tls_server || !out->tls_channel);
    if (clear && !(insecure && insecure->i))
        return spw_fail(err, errlen, -EPERM, "a token would travel in the clear (no TLS %s): serve and call "
                        "with TLS (--tls-cert, --tls-key, --tls-ca), or pass --insecure (SPILLWAY_INSECURE=1) "
                        "on a network you trust", !out->tls_server ? "on this daemon's port" : "on its calls");
    if (!out->token)
        spw_log(SPW_LOG_WARN, component, "no auth token configured: accepting unauthenticated calls");
    else if (!strcmp(spw_config_get(t, n, "auth-token")->origin, "flag"))
        spw_log(SPW_LOG_WARN, component, "the token was given on the command line, where ps shows it to every "
                "user: use --auth-token-file or SPILLWAY_AUTH_TOKEN");
    if (clear)
        spw_log(SPW_LOG_WARN, component, "--insecure: tokens travel unencrypted");
    else if (!out->tls_server)
        spw_log(SPW_LOG_WARN, component, "no TLS certificate configured: calls are unencrypted");
    return 0;
}

const char *spw_security_worker_token(const struct spw_security *s)
{
    return s->worker_token ? s->worker_token : s->token;
}
