/* lib/config.c - table-driven daemon configuration (see config.h). Single-threaded use. */
#include "lib/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/log.h"
#include "lib/version.h"

static int set_value(struct spw_config_entry *e, const char *v, const char *origin, char *err, size_t errlen)
{
    e->origin = origin;
    e->s = v;
    if (e->type == SPW_CFG_STRING)
        return 0;
    if (e->type == SPW_CFG_BOOL) {
        if (!v || !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes")) {
            e->i = 1;
            return 0;
        }
        if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no")) {
            e->i = 0;
            return 0;
        }
        snprintf(err, errlen, "--%s: \"%s\" is not a boolean (true/false)", e->name, v);
        return SPW_ESPEC;
    }
    char *end;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || !*v || *end || errno) {
        snprintf(err, errlen, "--%s: \"%s\" is not an integer (from %s)", e->name, v ? v : "", origin);
        return SPW_ESPEC;
    }
    if (x < e->min || x > e->max) {
        snprintf(err, errlen, "--%s: %lld is outside [%lld, %lld] (from %s)", e->name, x, (long long)e->min,
                 (long long)e->max, origin);
        return SPW_ESPEC;
    }
    e->i = x;
    return 0;
}

static void print_help(const struct spw_config_entry *t, int n, const char *usage, FILE *out)
{
    fprintf(out, "%s\n\noptions (flag > environment > default):\n", usage);
    for (int i = 0; i < n; i++) {
        char flag[64];
        snprintf(flag, sizeof flag, "--%s%s", t[i].name, t[i].type == SPW_CFG_BOOL ? "" : " V");
        fprintf(out, "  %-24s %s\n  %-24s env %s, default %s", flag, t[i].help, "", t[i].env,
                t[i].def ? (*t[i].def ? t[i].def : "\"\"") : "(none)");
        if (t[i].type == SPW_CFG_INT)
            fprintf(out, ", range [%lld, %lld]", (long long)t[i].min, (long long)t[i].max);
        fprintf(out, "\n");
    }
    fprintf(out, "  %-24s print this help\n", "--help");
    fprintf(out, "  %-24s print the build and protocol version\n", "--version");
}

int spw_config_parse(struct spw_config_entry *t, int n, int argc, char **argv, const char *usage, FILE *out,
                     char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        const char *env = t[i].env ? getenv(t[i].env) : NULL;
        int rc = env ? set_value(&t[i], env, "env", err, errlen) : 0;
        if (!env && t[i].def)
            rc = set_value(&t[i], t[i].def, "default", err, errlen);
        else if (!env) {
            t[i].s = NULL;
            t[i].origin = "default";
        }
        if (rc)
            return rc;
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            print_help(t, n, usage, out);
            return 1;
        }
        if (!strcmp(arg, "--version")) {
            fprintf(out, "%s\n", spw_version());
            return 1;
        }
        if (strncmp(arg, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument \"%s\" (see --help)", arg);
            return SPW_ESPEC;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        struct spw_config_entry *e = NULL;
        for (int i = 0; i < n; i++)
            if (strlen(t[i].name) == len && !strncmp(t[i].name, name, len))
                e = &t[i];
        if (!e) {
            snprintf(err, errlen, "unknown option \"%s\" (see --help)", arg);
            return SPW_ESPEC;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v && e->type != SPW_CFG_BOOL) {
            if (a + 1 >= argc) {
                snprintf(err, errlen, "--%s needs a value", e->name);
                return SPW_ESPEC;
            }
            v = argv[++a];
        }
        int rc = set_value(e, v, "flag", err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

const struct spw_config_entry *spw_config_get(const struct spw_config_entry *t, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(t[i].name, name))
            return &t[i];
    return NULL;
}

void spw_config_log(const struct spw_config_entry *t, int n, const char *component)
{
    char line[1536];
    size_t off = 0;
    for (int i = 0; i < n && off < sizeof line; i++) {
        if (t[i].secret)
            off += (size_t)snprintf(line + off, sizeof line - off, "%s%s=%s", i ? " " : "", t[i].name,
                                    t[i].s && *t[i].s ? "<set>" : "<unset>");
        else if (t[i].type == SPW_CFG_STRING)
            off += (size_t)snprintf(line + off, sizeof line - off, "%s%s=\"%s\"", i ? " " : "", t[i].name,
                                    t[i].s ? t[i].s : "");
        else
            off += (size_t)snprintf(line + off, sizeof line - off, "%s%s=%lld", i ? " " : "", t[i].name,
                                    (long long)t[i].i);
    }
    spw_log(SPW_LOG_INFO, component, "config %s", line);
}

int spw_config_token(const char *token, const char *file, char *buf, size_t buflen, const char **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    if (token && *token && file && *file)
        return spw_fail(err, errlen, SPW_ESPEC, "give the token or a token file, not both");
    if (!file || !*file) {
        *out = token && *token ? token : NULL;
        return 0;
    }
    FILE *f = fopen(file, "r");
    if (!f)
        return spw_fail(err, errlen, -errno, "token file %s: %s", file, strerror(errno));
    size_t n = fread(buf, 1, buflen, f);
    const int big = n == buflen;
    fclose(f);
    /* Trimmed at both ends (an editor's newline, a pasted space); whitespace inside is refused: a token
     * that no peer could send as the file says would authenticate nobody. */
    size_t from = 0;
    while (n && isspace((unsigned char)buf[n - 1]))
        n--;
    while (from < n && isspace((unsigned char)buf[from]))
        from++;
    if (big || from == n || memchr(buf, '\0', n))
        return spw_fail(err, errlen, SPW_ESPEC, "token file %s: %s", file,
                        big ? "too big (a token is one line)" : from == n ? "empty" : "holds a NUL byte");
    for (size_t i = from; i < n; i++)
        if (isspace((unsigned char)buf[i]) || iscntrl((unsigned char)buf[i]))
            return spw_fail(err, errlen, SPW_ESPEC, "token file %s: the token holds whitespace or a control "
                            "character at byte %zu (a token is one word on one line)", file, i);
    memmove(buf, buf + from, n - from);
    buf[n - from] = '\0';
    *out = buf;
    return 0;
}
