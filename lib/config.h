/* lib/config.h - a daemon's configuration as one table: {name, env var, type, default, min, max, help}.
 * Precedence: --name=value or --name value flag > SPILLWAY_* environment variable > default. Parsing
 * validates types and ranges with messages naming the flag; --help prints the table. Not thread-safe:
 * parse once in main, then read. */
#ifndef SPW_LIB_CONFIG_H
#define SPW_LIB_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum spw_config_type { SPW_CFG_INT, SPW_CFG_STRING, SPW_CFG_BOOL };

struct spw_config_entry {
    const char *name;           /* flag without dashes: "port" */
    const char *env;            /* "SPILLWAY_PORT" */
    enum spw_config_type type;
    const char *def;            /* default as text ("" = empty string; NULL = unset) */
    int64_t min, max;           /* ints only */
    const char *help;
    int secret;                 /* logged as <set> / <unset>, never the value */
    /* filled by spw_config_parse */
    int64_t i;
    const char *s;              /* points into argv, the environment or def */
    const char *origin;         /* "flag", "env" or "default" */
};

/* Parse argv against table (n entries). Returns 0; 1 when --help or --version was asked (printed to out); negative
 * with a message in err on a bad flag or value. */
int spw_config_parse(struct spw_config_entry *table, int n, int argc, char **argv, const char *usage, FILE *out,
                     char *err, size_t errlen);
/* The entry called name (NULL if none). */
const struct spw_config_entry *spw_config_get(const struct spw_config_entry *table, int n, const char *name);
/* The security flags every daemon's config table has: the tokens (as a file or a value), TLS and --insecure
 * (read them with spw_security_from_config, lib/security.h). */
#define SPW_CFG_SECURITY_ENTRIES                                                                               \
    {"tls-cert", "SPILLWAY_TLS_CERT", SPW_CFG_STRING, "", 0, 0,                                               \
     "PEM certificate (chain) this daemon serves with, and presents when it calls others; TLS on its port", 0, \
     0, 0, 0},                                                                                                 \
    {"tls-key", "SPILLWAY_TLS_KEY", SPW_CFG_STRING, "", 0, 0, "PEM private key of --tls-cert", 0, 0, 0, 0},   \
    {"tls-ca", "SPILLWAY_TLS_CA", SPW_CFG_STRING, "", 0, 0,                                                   \
     "PEM CA the daemons it calls must be signed by (TLS on its own calls)", 0, 0, 0, 0},                      \
    {"tls-client-ca", "SPILLWAY_TLS_CLIENT_CA", SPW_CFG_STRING, "", 0, 0,                                     \
     "mutual TLS: callers must present a certificate signed by this PEM CA", 0, 0, 0, 0},                      \
    {"auth-token-file", "SPILLWAY_AUTH_TOKEN_FILE", SPW_CFG_STRING, NULL, 0, 0,                               \
     "read the token from this file (a Kubernetes Secret mounted as a file) instead of --auth-token", 0, 0,    \
     0, 0},                                                                                                    \
    {"auth-token", "SPILLWAY_AUTH_TOKEN", SPW_CFG_STRING, NULL, 0, 0,                                         \
     "require 'authorization: Bearer TOKEN' on every call and send it on this daemon's own (unset: none)", 1,  \
     0, 0, 0},                                                                                                 \
    {"worker-token-file", "SPILLWAY_WORKER_TOKEN_FILE", SPW_CFG_STRING, NULL, 0, 0,                           \
     "the workers' own token, from a file: workers' calls to the dispatcher (and its calls to them) need it, " \
     "and the --auth-token-file token becomes the clients' only (unset: one token for both)", 0, 0, 0, 0},     \
    {"insecure", "SPILLWAY_INSECURE", SPW_CFG_BOOL, "false", 0, 0,                                            \
     "allow a token without TLS (it travels in the clear), or no token on a non-loopback --listen (anyone "     \
     "reaching the port is served); without this flag such a daemon refuses to start",                          \
     0, 0, 0, 0}

/* The logging flags every daemon has (apply them with spw_log_configure, lib/log.h). */
#define SPW_CFG_LOG_ENTRIES                                                                                    \
    {"log-level", "SPILLWAY_LOG_LEVEL", SPW_CFG_STRING, "info", 0, 0,                                          \
     "lines below this level are dropped: debug, info, warn or error", 0, 0, 0, 0},                            \
    {"log-format", "SPILLWAY_LOG_FORMAT", SPW_CFG_STRING, "text", 0, 0,                                        \
     "text (ts level component message) or json (one object per line: ts, level, component, msg)", 0, 0, 0, 0}

/* The bearer token a daemon or tool should use: `token` as given (flag or env), or the contents of `file`
 * (a Kubernetes Secret mounted as a file; at most 4 KiB, trailing whitespace dropped) into buf. Returns 0
 * with *out NULL (none) or pointing at token or buf; negative with err filled when both are given, the file
 * cannot be read, or it is empty or too big. */
int spw_config_token(const char *token, const char *file, char *buf, size_t buflen, const char **out, char *err,
                     size_t errlen);
/* Log the effective configuration, one key=value per entry, through lib/log. */
void spw_config_log(const struct spw_config_entry *table, int n, const char *component);

#endif
