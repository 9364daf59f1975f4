/* dispatcher/profile_ahead.c - workers' profiles asked ahead of CreateJob (see profile_ahead.h). An ask is
 * keyed by the packed pipeline (compared whole, not by a hash); its thread asks the workers through
 * disp_profile_ask and marks it done; the one CreateJob that takes it copies the answers and frees it.
 * Asks left done and untaken past DISP_AHEAD_KEEP_MS are freed by the next start or take. */
#include "dispatcher/profile_ahead.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "pipeline/profile_ask.h"

struct ask {
    bool used, done, taken;
    int64_t done_ms;
    char host[64];                  /* the client host that asked */
    uint8_t *key;                   /* the packed pipeline */
    size_t key_len;
    int n_cuts, n;
    struct spw_profile_ask *asks;   /* n, each with its own copy of the address */
    pthread_t thread;
    struct disp_ahead *owner;
};

struct disp_ahead {
    pthread_mutex_t mu;
    pthread_cond_t cv;              /* an ask is done */
    char *auth_token;
    struct disp_ask how;            /* how.auth_token is auth_token */
    struct ask a[DISP_AHEAD_MAX];
    struct disp_ahead_counts n;     /* running unused: counted when asked */
};

int disp_ahead_create(const struct disp_ask *how, struct disp_ahead **out)
{
    struct disp_ahead *a = calloc(1, sizeof *a);
    if (!a || (how->auth_token && !(a->auth_token = strdup(how->auth_token)))) {
        free(a);
        return -ENOMEM;
    }
    a->how = (struct disp_ask){.auth_token = a->auth_token, .timeout_ms = how->timeout_ms};
    pthread_cond_init(&a->cv, NULL);
    pthread_mutex_init(&a->mu, NULL);
    *out = a;
    return 0;
}

/* Free a slot whose thread has ended (or never started: started false). */
static void drop(struct ask *e, bool started)
{
    if (started)
        pthread_join(e->thread, NULL);
    for (int i = 0; e->asks && i < e->n; i++)
        free((char *)e->asks[i].addr);
    free(e->asks);
    free(e->key);
    memset(e, 0, sizeof *e);
}

/* Free asks done, untaken and older than the keep time. Called with mu held. */
static void sweep(struct disp_ahead *a, int64_t now_ms)
{
    for (int i = 0; i < DISP_AHEAD_MAX; i++)
        if (a->a[i].used && a->a[i].done && !a->a[i].taken && now_ms - a->a[i].done_ms > DISP_AHEAD_KEEP_MS) {
            drop(&a->a[i], true);
            a->n.expired++;
        }
}

/* The untaken ask of this packed pipeline, or NULL. Called with mu held. */
static struct ask *find(struct disp_ahead *a, const uint8_t *key, size_t len)
{
    for (int i = 0; i < DISP_AHEAD_MAX; i++)
        if (a->a[i].used && !a->a[i].taken && a->a[i].key_len == len && !memcmp(a->a[i].key, key, len))
            return &a->a[i];
    return NULL;
}

static void *ask_main(void *arg)
{
    struct ask *e = arg;
    struct disp_ahead *a = e->owner;
    Spillway__V1__Pipeline *pipe = spillway__v1__pipeline__unpack(NULL, e->key_len, e->key);
    if (pipe) {
        disp_profile_ask(e->asks, e->n, pipe, e->n_cuts, &a->how);
        spillway__v1__pipeline__free_unpacked(pipe, NULL);
    }
    pthread_mutex_lock(&a->mu);
    e->done = true;
    e->done_ms = spw_now_ms();
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

static uint8_t *pack(const Spillway__V1__Pipeline *pipe, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(&pipe->base);
    uint8_t *p = malloc(*len ? *len : 1);
    if (p)
        protobuf_c_message_pack(&pipe->base, p);
    return p;
}

/* Room for host's new ask: a free slot, or the host's oldest ended and untaken ask dropped when it holds its
 * share; NULL with *rc set when there is none. Called with mu held. */
static struct ask *room(struct disp_ahead *a, const char *host, int *rc)
{
    struct ask *free_slot = NULL, *oldest = NULL;
    int mine = 0;
    for (int i = 0; i < DISP_AHEAD_MAX; i++) {
        struct ask *e = &a->a[i];
        if (!e->used) {
            free_slot = free_slot ? free_slot : e;
        } else if (!strcmp(e->host, host)) {
            mine++;
            if (e->done && !e->taken && (!oldest || e->done_ms < oldest->done_ms))
                oldest = e;
        }
    }
    if (mine >= DISP_AHEAD_PER_HOST) {
        if (!oldest)
            return *rc = -EAGAIN, NULL;
        drop(oldest, true);
        a->n.expired++;
        return oldest;
    }
    if (!free_slot)
        *rc = -EBUSY;
    return free_slot;
}

int disp_ahead_start(struct disp_ahead *a, const char *host, const Spillway__V1__Pipeline *pipe, int n_cuts,
                     char *const *addrs, int n, int64_t now_ms)
{
    if (protobuf_c_message_get_packed_size(&pipe->base) > DISP_AHEAD_MAX_PIPELINE_BYTES) {
        pthread_mutex_lock(&a->mu);
        a->n.refused++;
        pthread_mutex_unlock(&a->mu);
        return -E2BIG;
    }
    size_t len;
    uint8_t *key = pack(pipe, &len);
    if (!key)
        return -ENOMEM;
    if (n > SPW_PLAN_MAX_WORKERS)
        n = SPW_PLAN_MAX_WORKERS;
    int rc = 0;
    pthread_mutex_lock(&a->mu);
    sweep(a, now_ms);
    struct ask *e = find(a, key, len);
    if (!e && !(e = room(a, host, &rc))) {
        a->n.refused++;
    } else if (!e->used) {
        *e = (struct ask){.used = true, .key = key, .key_len = len, .n_cuts = n_cuts, .n = n, .owner = a,
                          .asks = calloc((size_t)n + 1, sizeof *e->asks)};
        snprintf(e->host, sizeof e->host, "%s", host);
        key = NULL;
        for (int i = 0; e->asks && i < n; i++)
            if (!(e->asks[i].addr = strdup(addrs[i]))) {
                e->n = i;
                rc = -ENOMEM;
                break;
            } else {
                e->asks[i].ask = true;
            }
        if (!e->asks || rc || pthread_create(&e->thread, NULL, ask_main, e) != 0) {
            drop(e, false);
            rc = -ENOMEM;
        } else {
            a->n.started++;
        }
    }
    pthread_mutex_unlock(&a->mu);
    free(key);
    return rc;
}

int disp_ahead_take(struct disp_ahead *a, const Spillway__V1__Pipeline *pipe, int n_cuts, char *const *addrs, int n,
                    bool *asked, struct disp_profiles *known, int timeout_ms, int64_t now_ms)
{
    size_t len;
    uint8_t *key = pack(pipe, &len);
    if (!key)
        return -ENOENT;
    const struct timespec until = spw_deadline_in_ms(timeout_ms);
    int added = -ENOENT;
    pthread_mutex_lock(&a->mu);
    sweep(a, now_ms);
    struct ask *e = find(a, key, len);
    if (e && e->n_cuts == n_cuts) {
        e->taken = true;
        while (!e->done && pthread_cond_timedwait(&a->cv, &a->mu, &until) != ETIMEDOUT) {
        }
        if (!e->done) {
            e->taken = false;           /* swept once it ends */
        } else {
            added = 0;
            for (int i = 0; i < n; i++)
                for (int j = 0; j < e->n; j++) {
                    const struct spw_profile_ask *q = &e->asks[j];
                    if (strcmp(q->addr, addrs[i]) != 0)
                        continue;
                    asked[i] = true;
                    if (q->rc || known->n >= DISP_PROFILES_MAX || strlen(addrs[i]) >= sizeof known->addr[0])
                        break;
                    if (known->n == 0)
                        memcpy(known->bytes, q->bytes, sizeof(double) * (size_t)n_cuts);
                    snprintf(known->addr[known->n], sizeof known->addr[0], "%s", addrs[i]);
                    known->w[known->n++] = q->w;
                    added++;
                    break;
                }
            drop(e, true);
            a->n.taken++;
        }
    }
    pthread_mutex_unlock(&a->mu);
    free(key);
    return added;
}

int disp_ahead_running(struct disp_ahead *a)
{
    int n = 0;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < DISP_AHEAD_MAX; i++)
        n += a->a[i].used && !a->a[i].done;
    pthread_mutex_unlock(&a->mu);
    return n;
}

void disp_ahead_counts(struct disp_ahead *a, struct disp_ahead_counts *out)
{
    pthread_mutex_lock(&a->mu);
    *out = a->n;
    pthread_mutex_unlock(&a->mu);
    out->running = disp_ahead_running(a);
}

void disp_ahead_destroy(struct disp_ahead *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < DISP_AHEAD_MAX; i++)
        while (a->a[i].used && !a->a[i].done)
            pthread_cond_wait(&a->cv, &a->mu);
    for (int i = 0; i < DISP_AHEAD_MAX; i++)
        if (a->a[i].used)
            drop(&a->a[i], true);
    pthread_mutex_unlock(&a->mu);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    free(a->auth_token);
    free(a);
}
