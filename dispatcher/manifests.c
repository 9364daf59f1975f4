/* dispatcher/manifests.c - packed listings kept by key and hash, least recently used evicted past a byte cap
 * (manifests.h). A short array: a dispatcher keeps a listing per distinct dataset its jobs use. */
#include "dispatcher/manifests.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char *key;
    uint64_t hash;
    int64_t samples;
    uint8_t *bytes;
    size_t len;
    int64_t listed_ms, used_ms;
};

struct disp_manifests {
    pthread_mutex_t mu;
    pthread_cond_t listed;          /* a listing in flight ended */
    char *inflight[64];             /* keys being listed now */
    int n_inflight;
    struct entry *e;
    int n, cap;
    size_t bytes, cap_bytes;
    uint64_t listings, served_bytes;
};

int disp_manifests_create(size_t cap_bytes, struct disp_manifests **out)
{
    struct disp_manifests *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->listed, NULL);
    m->cap_bytes = cap_bytes;
    *out = m;
    return 0;
}

static void entry_free(struct entry *e)
{
    free(e->key);
    free(e->bytes);
}

void disp_manifests_destroy(struct disp_manifests *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n; i++)
        entry_free(&m->e[i]);
    free(m->e);
    pthread_cond_destroy(&m->listed);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

bool disp_manifests_fresh(struct disp_manifests *m, const char *key, int64_t since_ms, uint64_t *hash,
                          int64_t *samples)
{
    const struct entry *best = NULL;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n; i++)
        if (m->e[i].listed_ms >= since_ms && !strcmp(m->e[i].key, key) && (!*hash || m->e[i].hash == *hash) &&
            (!best || m->e[i].listed_ms > best->listed_ms))
            best = &m->e[i];
    if (best) {
        *hash = best->hash;
        *samples = best->samples;
    }
    pthread_mutex_unlock(&m->mu);
    return best != NULL;
}

static int inflight_at(const struct disp_manifests *m, const char *key)
{
    for (int i = 0; i < m->n_inflight; i++)
        if (!strcmp(m->inflight[i], key))
            return i;
    return -1;
}

bool disp_manifests_claim(struct disp_manifests *m, const char *key)
{
    bool waited = false;
    pthread_mutex_lock(&m->mu);
    while (inflight_at(m, key) >= 0) {
        waited = true;
        pthread_cond_wait(&m->listed, &m->mu);
    }
    char *k = waited || m->n_inflight == (int)(sizeof m->inflight / sizeof *m->inflight) ? NULL : strdup(key);
    if (k)
        m->inflight[m->n_inflight++] = k;
    pthread_mutex_unlock(&m->mu);
    return !waited;         /* too many in flight, or no memory: it lists, unclaimed (release finds nothing) */
}

void disp_manifests_release(struct disp_manifests *m, const char *key)
{
    pthread_mutex_lock(&m->mu);
    const int i = inflight_at(m, key);
    if (i >= 0) {
        free(m->inflight[i]);
        m->inflight[i] = m->inflight[--m->n_inflight];
    }
    pthread_cond_broadcast(&m->listed);
    pthread_mutex_unlock(&m->mu);
}

static void drop(struct disp_manifests *m, int i)
{
    m->bytes -= m->e[i].len;
    entry_free(&m->e[i]);
    m->e[i] = m->e[--m->n];
}

int disp_manifests_add(struct disp_manifests *m, const char *key, uint64_t hash, int64_t samples, uint8_t *bytes,
                       size_t len, int64_t now_ms)
{
    char *k = strdup(key);
    pthread_mutex_lock(&m->mu);
    m->listings++;
    for (int i = 0; i < m->n; i++)
        if (m->e[i].hash == hash && !strcmp(m->e[i].key, key)) {   /* listed again, unchanged */
            m->e[i].listed_ms = m->e[i].used_ms = now_ms;
            pthread_mutex_unlock(&m->mu);
            free(k);
            free(bytes);
            return 0;
        }
    if (k && m->n == m->cap) {
        const int cap = m->cap ? m->cap * 2 : 8;
        struct entry *grown = realloc(m->e, sizeof *grown * (size_t)cap);
        if (grown)
            m->e = grown, m->cap = cap;
    }
    if (!k || m->n == m->cap) {
        pthread_mutex_unlock(&m->mu);
        free(k);
        free(bytes);
        return -ENOMEM;
    }
    while (m->n > 0 && m->bytes + len > m->cap_bytes) {      /* the least recently used go */
        int lru = 0;
        for (int i = 1; i < m->n; i++)
            if (m->e[i].used_ms < m->e[lru].used_ms)
                lru = i;
        drop(m, lru);
    }
    m->e[m->n++] = (struct entry){.key = k, .hash = hash, .samples = samples, .bytes = bytes, .len = len,
                                  .listed_ms = now_ms, .used_ms = now_ms};
    m->bytes += len;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

int disp_manifests_read(struct disp_manifests *m, const char *key, uint64_t hash, uint64_t offset, size_t max,
                        int64_t now_ms, uint8_t **chunk, size_t *len, uint64_t *total, int64_t *samples)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->n && rc == -ENOENT; i++) {
        struct entry *e = &m->e[i];
        if (e->hash != hash || (key && strcmp(e->key, key)))
            continue;
        if (offset >= e->len) {
            rc = -ERANGE;
            break;
        }
        const size_t n = e->len - offset < max ? e->len - (size_t)offset : max;
        if (!(*chunk = malloc(n))) {
            rc = -ENOMEM;
            break;
        }
        memcpy(*chunk, e->bytes + offset, n);
        *len = n;
        *total = e->len;
        *samples = e->samples;
        e->used_ms = now_ms;
        m->served_bytes += n;
        rc = 0;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

void disp_manifests_counts(struct disp_manifests *m, uint64_t *listings, uint64_t *served_bytes,
                           size_t *kept_bytes)
{
    pthread_mutex_lock(&m->mu);
    *listings = m->listings;
    *served_bytes = m->served_bytes;
    *kept_bytes = m->bytes;
    pthread_mutex_unlock(&m->mu);
}
