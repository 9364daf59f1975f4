/* lib/security.c - see lib/security.h. Thread model: main thread only, once. */
#include "lib/security.h"

#include <arpa/inet.h>
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
    const char *listen = entry(t, n, "listen"), *client_ca = entry(t, n, "tls-client-ca");
    const bool open = !out->token && !(client_ca && *client_ca);
    if (open && listen && !spw_host_is_loopback(listen) && !(insecure && insecure->i))
        return spw_fail(err, errlen, -EPERM, "listening on %s with no token: anyone who reaches this port could "
                        "run jobs and read their data. Give a token (--auth-token-file) with TLS, listen on "
                        "127.0.0.1 for this machine only, or pass --insecure (SPILLWAY_INSECURE=1) on a network "
                        "you trust", *listen ? listen : "every address");
    if (open)
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

bool spw_host_is_loopback(const char *host)
{
    char buf[64];
    size_t len = host ? strlen(host) : 0;
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']' && len - 2 < sizeof buf) {   /* "[::1]" */
        memcpy(buf, host + 1, len - 2);
        buf[len - 2] = 0;
        host = buf;
    }
    if (!host || !*host)
        return false;
    if (!strcmp(host, "localhost"))
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) != 1)
        return false;   /* a host name other than localhost: whatever it resolves to may be reachable */
    if (IN6_IS_ADDR_LOOPBACK(&a6))
        return true;
    return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
}
