/* pipeline/brace.c - brace expansion of shard paths ("shard-{000000..000099}.tar", "{a,b}"), following
 * Python's braceexpand (which WebDataset uses): groups expand left to right, nested groups too, ranges pad
 * when an end has a leading zero. A counting pass with the same walk checks the caps before any result
 * is allocated. Pure functions; safe from any thread. */
#include "pipeline/brace.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

/* Groups expanded along one path (and so the recursion depth), and the bytes of all results: a pattern is
 * at most 4096 bytes, but {1..1}{1..1}... or a long path times a wide range could still cost much. */
#define MAX_GROUPS 32
#define MAX_RESULT_BYTES (64 << 20)

struct group {
    size_t open, close;        /* offsets of '{' and its matching '}' */
    bool range;                /* a numeric range; otherwise a list of top-level comma-separated items */
    long long lo, hi;
    int width;                 /* zero-padding width of range items (0: none) */
};

/* "[+-]digits" of 1 to 18 digits spanning [s, e). */
static bool parse_int(const char *s, const char *e, long long *v)
{
    const char *p = s + (*s == '-' || *s == '+');
    if (p == e || e - p > 18)
        return false;
    for (const char *q = p; q < e; q++)
        if (!isdigit((unsigned char)*q))
            return false;
    *v = strtoll(s, NULL, 10);
    return true;
}

/* True when the range end [s, e) asks for padding, as braceexpand: a leading zero other than "0" or "-0". */
static bool padded(const char *s, const char *e)
{
    const char *p = s + (*s == '-');
    return *p == '0' && e - p > 1;
}

/* Classify the group between s[open] and s[close]: a list (a top-level comma) or a range ("N..M"). */
static bool classify(const char *s, struct group *g)
{
    const char *b = s + g->open + 1, *e = s + g->close;
    int depth = 0;
    for (const char *p = b; p < e; p++) {
        if (*p == '{')
            depth++;
        else if (*p == '}')
            depth--;
        else if (*p == ',' && depth == 0)
            return (g->range = false), true;
    }
    const char *dots = strstr(b, "..");
    if (!dots || dots >= e || !parse_int(b, dots, &g->lo) || !parse_int(dots + 2, e, &g->hi))
        return false;
    g->range = true;
    g->width = 0;
    if (padded(b, dots) || padded(dots + 2, e)) {
        size_t a = (size_t)(dots - b), z = (size_t)(e - dots - 2);
        g->width = (int)(a > z ? a : z);
    }
    return true;
}

/* The first group of s that expands; false when there is none (s is a result). */
static bool first_group(const char *s, struct group *g)
{
    for (size_t i = 0; s[i]; i++) {
        if (s[i] != '{')
            continue;
        int depth = 0;
        size_t j = i;
        for (; s[j]; j++) {
            if (s[j] == '{')
                depth++;
            else if (s[j] == '}' && --depth == 0)
                break;
        }
        if (!s[j])
            continue;                       /* unbalanced: literal '{', look further on */
        g->open = i;
        g->close = j;
        if (classify(s, g))
            return true;
    }
    return false;
}

/* One walk serves both passes: count (items == NULL) or fill items[*n]. */
struct walk {
    char **items;
    int64_t n, max_items, bytes;
    bool over;
};

static int walk(struct walk *w, const char *s, int depth);

/* s with [g->open, g->close] replaced by alt[0..alt_len), walked. */
static int walk_alt(struct walk *w, const char *s, const struct group *g, const char *alt, size_t alt_len,
                    int depth)
{
    size_t head = g->open, tail = strlen(s + g->close + 1);
    char *t = malloc(head + alt_len + tail + 1);
    if (!t)
        return -ENOMEM;
    memcpy(t, s, head);
    memcpy(t + head, alt, alt_len);
    memcpy(t + head + alt_len, s + g->close + 1, tail + 1);
    int rc = walk(w, t, depth + 1);
    free(t);
    return rc;
}

static int walk(struct walk *w, const char *s, int depth)
{
    struct group g;
    if (!first_group(s, &g)) {
        const size_t len = strlen(s);
        if (w->n >= w->max_items || w->bytes + (int64_t)len + 1 > MAX_RESULT_BYTES) {
            w->over = true;
            return SPW_ESOURCE;
        }
        if (w->items && !(w->items[w->n] = strdup(s)))
            return -ENOMEM;
        w->n++;
        w->bytes += (int64_t)len + 1;
        return 0;
    }
    if (depth >= MAX_GROUPS)
        return SPW_ESOURCE;
    int rc = 0;
    if (g.range) {
        const long long step = g.lo <= g.hi ? 1 : -1;
        const unsigned long long span = g.lo <= g.hi ? (unsigned long long)(g.hi - g.lo)
                                                     : (unsigned long long)(g.lo - g.hi);
        if (span >= (unsigned long long)w->max_items) {  /* each item yields at least one result */
            w->over = true;
            return SPW_ESOURCE;
        }
        for (long long v = g.lo;; v += step) {
            char num[48];
            int k = snprintf(num, sizeof num, "%0*lld", g.width, v);
            if ((rc = walk_alt(w, s, &g, num, (size_t)k, depth)) != 0 || v == g.hi)
                break;
        }
        return rc;
    }
    const char *p = s + g.open + 1, *end = s + g.close;
    while (rc == 0) {
        const char *q = p;
        for (int d = 0; q < end && (d > 0 || *q != ','); q++)
            d += *q == '{' ? 1 : *q == '}' ? -1 : 0;
        rc = walk_alt(w, s, &g, p, (size_t)(q - p), depth);
        if (q >= end)
            break;
        p = q + 1;
    }
    return rc;
}

void spw_brace_free(char **items, int64_t n_items)
{
    for (int64_t i = 0; items && i < n_items; i++)
        free(items[i]);
    free(items);
}

int spw_brace_expand(const char *pattern, int64_t max_items, char ***items, int64_t *n_items, char *err,
                     size_t errlen)
{
    struct walk w = {.max_items = max_items};
    int rc = walk(&w, pattern, 0);
    if (rc == SPW_ESOURCE && w.over)
        return spw_fail(err, errlen, SPW_ESOURCE, "source.path: \"%.200s\" expands to more than %lld shards "
                        "(or %d MiB of paths)", pattern, (long long)max_items, MAX_RESULT_BYTES >> 20);
    if (rc == SPW_ESOURCE)
        return spw_fail(err, errlen, SPW_ESOURCE, "source.path: \"%.200s\" nests more than %d brace groups",
                        pattern, MAX_GROUPS);
    if (rc)
        return rc;
    struct walk fill = {.max_items = w.n};
    if (!(fill.items = calloc((size_t)w.n, sizeof *fill.items)))
        return -ENOMEM;
    if ((rc = walk(&fill, pattern, 0)) != 0) {
        spw_brace_free(fill.items, fill.n);
        return rc;
    }
    *items = fill.items;
    *n_items = fill.n;
    return 0;
}
