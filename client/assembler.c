/* client/assembler.c - the prefetch buffer and the exactly-once ledger (see assembler.h). Batch g of the job
 * belongs to epoch g / per_epoch and has as many places as the in-process executor's batch g (of this rank).
 * Ordered: it holds places [i*B, (i+1)*B) of its epoch, so batches are byte-identical to a local run
 * whatever produced each element. Unordered: each epoch's batches fill in arrival order from a cursor.
 * One mutex guards slots, bitmaps, cursors and the parked list; element copies run outside it. */
#include "client/assembler.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "pipeline/order.h"

#define RING 64                 /* most batches assembled at once */
#define MIN_WINDOW 2

struct slot {
    int64_t gbatch;             /* -1 when free */
    int n_pos, assigned, finished;  /* places; handed out (unordered); done */
    int64_t *samples;           /* manifest index per batch index */
    int64_t *places;            /* the epoch's place per batch index */
    bool *ok;
    struct spw_batch_fill fill; /* allocated at the first placed element */
    bool delivered, shape_error;
};

struct epoch_ledger {           /* one epoch being received */
    int64_t epoch;
    uint8_t *seen;              /* bit per place: claimed */
    uint8_t *given;             /* bit per place: delivered to the trainer (checkpoints) */
    int32_t *split_left;        /* places not yet claimed, per split of this rank */
    int64_t left;
    int64_t fill_batch;         /* unordered: the batch (index in the epoch) arrivals go to next */
    int64_t given_batches;      /* batches of the epoch delivered */
};

struct parked {
    struct parked *next;
    struct asm_ticket t;        /* unordered: gbatch -1 until it gets a place */
    struct spw_value v;
    struct spw_fields *fields;
};

struct assembler {
    struct asm_opts o;
    struct spw_order order;
    struct spw_rank_view view;
    int64_t len, own, places;   /* this rank's epoch: batch places, places its splits hold, both (max) */
    int64_t rank_splits;        /* splits this rank owns per epoch */
    int64_t per_epoch, total;   /* batches per epoch, batches in all (-1 = forever) */
    uint8_t *resume_places;     /* the checkpoint's epoch's delivered places (NULL: none) */
    int B;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* a batch became ready, the window moved, or a failure */
    struct slot slots[RING];
    int window;
    int64_t next_deliver;       /* lowest batch not yet delivered */
    struct epoch_ledger *ledgers;
    int n_ledgers, cap_ledgers;
    int64_t live_epoch;         /* epochs below are complete and delivered */
    struct parked *parked;
    int64_t parked_bytes;
    struct asm_split *acks;
    int n_acks, cap_acks;
    int64_t head_progress_ms;   /* last time the head batch gained a position or moved */
    int fail_rc;
    char errmsg[512];
    void *pool[RING + 4];       /* recycled batch buffers */
    size_t pool_cap[RING + 4];
    int n_pool;
};

static struct slot *slot_of(struct assembler *a, int64_t gb)
{
    return &a->slots[gb % RING];
}

static int64_t gbatch_of(const struct assembler *a, uint64_t epoch, int64_t place)
{
    return (int64_t)epoch * a->per_epoch + place / a->B;
}

static bool bit(const uint8_t *m, int64_t i)
{
    return m[i >> 3] & (1u << (i & 7));
}

static void set_bit(uint8_t *m, int64_t i)
{
    m[i >> 3] |= (uint8_t)(1u << (i & 7));
}

size_t asm_place_bytes(const struct assembler *a)
{
    return (size_t)(a->places + 7) / 8;
}

int64_t asm_batches_per_epoch(const struct assembler *a)
{
    return a->per_epoch;
}

int64_t asm_place_of(const struct assembler *a, int64_t pos)
{
    return spw_rank_view_index(&a->view, pos);
}

int64_t asm_pos_of(const struct assembler *a, int64_t place)
{
    return spw_rank_view_pos(&a->view, place);
}

int asm_create(const struct asm_opts *o, struct assembler **out)
{
    struct assembler *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->o = *o;
    const int world = o->world_size > 1 ? o->world_size : 1;
    if (spw_rank_view_init(&a->view, o->src->n, world > 1 ? o->rank : 0, world, o->split_size,
                           !o->spec->batch.drop_remainder) != 0 ||
        o->split_size < 1 || o->resume_batches < 0) {
        free(a);
        return -EINVAL;
    }
    a->len = a->view.len;
    a->own = a->view.own;
    a->places = a->own > a->len ? a->own : a->len;
    a->rank_splits = (a->own + o->split_size - 1) / o->split_size;
    a->B = o->spec->batch.size;
    a->per_epoch = o->spec->batch.drop_remainder ? a->len / a->B : (a->len + a->B - 1) / a->B;
    a->total = o->spec->source.epochs > 0 ? o->spec->source.epochs * a->per_epoch : -1;
    if (a->per_epoch < 1 || (a->total >= 0 && o->resume_batches > a->total) ||
        (o->resume_places && o->resume_places_len != asm_place_bytes(a))) {
        free(a);
        return -EINVAL;
    }
    if (o->max_batches > 0 && (a->total < 0 || o->resume_batches + o->max_batches < a->total))
        a->total = o->resume_batches + o->max_batches;
    a->next_deliver = o->resume_batches;
    a->live_epoch = o->resume_batches / a->per_epoch;
    a->window = 4;
    spw_order_init(&a->order, o->src->n, o->spec->source.shuffle, o->spec->source.seed);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    if (o->resume_batches % a->per_epoch) {
        if (!(a->resume_places = calloc(asm_place_bytes(a), 1))) {
            asm_destroy(a);
            return -ENOMEM;
        }
        if (o->resume_places)
            memcpy(a->resume_places, o->resume_places, asm_place_bytes(a));
        else        /* a count alone (an in-process or ordered run): the epoch's first places */
            for (int64_t p = 0; p < o->resume_batches % a->per_epoch * a->B; p++)
                set_bit(a->resume_places, p);
        /* Delivered batches hold B places each (only an epoch's last may hold fewer); ordered ones are the
         * epoch's first places. Anything else is not a checkpoint of this job. */
        const int64_t given = o->resume_batches % a->per_epoch * a->B;
        int64_t count = 0;
        bool prefix = true;
        for (int64_t p = 0; p < a->places; p++) {
            count += bit(a->resume_places, p);
            prefix = prefix && bit(a->resume_places, p) == (p < given);
        }
        if (count != given || (o->ordered && !prefix)) {
            asm_destroy(a);
            return -EINVAL;
        }
    }
    for (int i = 0; i < RING; i++) {
        a->slots[i].gbatch = -1;
        a->slots[i].samples = calloc((size_t)a->B, sizeof(int64_t));
        a->slots[i].places = calloc((size_t)a->B, sizeof(int64_t));
        a->slots[i].ok = calloc((size_t)a->B, sizeof(bool));
        if (!a->slots[i].samples || !a->slots[i].places || !a->slots[i].ok) {
            asm_destroy(a);
            return -ENOMEM;
        }
    }
    a->head_progress_ms = spw_now_ms();
    *out = a;
    return 0;
}

static void value_free_parked(struct parked *p)
{
    spw_value_free(&p->v);
    spw_fields_free(p->fields);
    free(p);
}

void asm_destroy(struct assembler *a)
{
    if (!a)
        return;
    for (int i = 0; i < RING; i++) {
        free(a->slots[i].samples);
        free(a->slots[i].places);
        free(a->slots[i].ok);
        spw_batch_fill_clear(&a->slots[i].fill);
    }
    for (int i = 0; i < a->n_ledgers; i++) {
        free(a->ledgers[i].seen);
        free(a->ledgers[i].given);
        free(a->ledgers[i].split_left);
    }
    free(a->ledgers);
    free(a->resume_places);
    while (a->parked) {
        struct parked *p = a->parked;
        a->parked = p->next;
        value_free_parked(p);
    }
    for (int i = 0; i < a->n_pool; i++)
        spw_batch_buffer_put(a->pool[i], a->pool_cap[i]);
    free(a->acks);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}

static struct epoch_ledger *find_ledger(struct assembler *a, uint64_t epoch)
{
    for (int i = 0; i < a->n_ledgers; i++)
        if (a->ledgers[i].epoch == (int64_t)epoch)
            return &a->ledgers[i];
    return NULL;
}

/* The ledger of an epoch, created on first use; NULL when the epoch is complete (or no memory). The
 * checkpoint's epoch starts with its delivered places claimed and its delivered batches counted. */
static struct epoch_ledger *ledger(struct assembler *a, uint64_t epoch)
{
    if ((int64_t)epoch < a->live_epoch)
        return NULL;
    struct epoch_ledger *found = find_ledger(a, epoch);
    if (found)
        return found;
    if (a->n_ledgers == a->cap_ledgers) {
        int cap = a->cap_ledgers ? 2 * a->cap_ledgers : 4;
        struct epoch_ledger *l = realloc(a->ledgers, (size_t)cap * sizeof *l);
        if (!l)
            return NULL;
        a->ledgers = l;
        a->cap_ledgers = cap;
    }
    struct epoch_ledger *l = &a->ledgers[a->n_ledgers];
    *l = (struct epoch_ledger){.epoch = (int64_t)epoch, .left = a->places};
    l->seen = calloc(asm_place_bytes(a), 1);
    l->given = calloc(asm_place_bytes(a), 1);
    l->split_left = malloc(sizeof(int32_t) * (size_t)(a->rank_splits ? a->rank_splits : 1));
    if (!l->seen || !l->given || !l->split_left) {
        free(l->seen);
        free(l->given);
        free(l->split_left);
        return NULL;
    }
    for (int64_t s = 0; s < a->rank_splits; s++) {
        int64_t left = a->own - s * a->o.split_size;
        l->split_left[s] = (int32_t)(left < a->o.split_size ? left : a->o.split_size);
    }
    if (a->resume_places && (int64_t)epoch == a->o.resume_batches / a->per_epoch) {
        memcpy(l->seen, a->resume_places, asm_place_bytes(a));
        memcpy(l->given, a->resume_places, asm_place_bytes(a));
        l->fill_batch = l->given_batches = a->o.resume_batches % a->per_epoch;
        for (int64_t p = 0; p < a->places; p++)
            if (bit(l->seen, p)) {
                l->left--;
                if (p < a->own)
                    l->split_left[p / a->o.split_size]--;
            }
    }
    a->n_ledgers++;
    return l;
}

/* Drop ledgers of epochs that are fully claimed and whose batches are all delivered. Called with mu held. */
static void retire_ledgers(struct assembler *a)
{
    for (;;) {
        struct epoch_ledger *l = NULL;
        int at = -1;
        for (int i = 0; i < a->n_ledgers; i++)
            if (a->ledgers[i].epoch == a->live_epoch)
                l = &a->ledgers[at = i];
        const bool delivered = a->next_deliver >= (a->live_epoch + 1) * a->per_epoch ||
                               (a->total >= 0 && a->next_deliver >= a->total);
        if (!l || l->left > 0 || !delivered)
            return;
        free(l->seen);
        free(l->given);
        free(l->split_left);
        a->ledgers[at] = a->ledgers[--a->n_ledgers];
        a->live_epoch++;
    }
}

/* Queue an ack of the dispatcher's split `split` of an epoch. Called with mu held. */
static void queue_ack(struct assembler *a, uint64_t epoch, uint64_t split)
{
    if (a->n_acks == a->cap_acks) {
        int cap = a->cap_acks ? 2 * a->cap_acks : 64;
        struct asm_split *n = realloc(a->acks, (size_t)cap * sizeof *n);
        if (!n)
            return;     /* the dispatcher re-leases an unacked split; dedupe drops the copies */
        a->acks = n;
        a->cap_acks = cap;
    }
    a->acks[a->n_acks++] = (struct asm_split){epoch, split};
}

/* Ack this rank's k-th split of an epoch (the dispatcher's split rank + k * world). Called with mu held. */
static void push_ack(struct assembler *a, uint64_t epoch, uint64_t k)
{
    queue_ack(a, epoch, (uint64_t)a->view.rank + k * (uint64_t)a->view.world);
}

/* Set up slot s for batch gb. Called with mu held. */
static void slot_init(struct assembler *a, struct slot *s, int64_t gb)
{
    const int64_t epoch = gb / a->per_epoch, idx = gb % a->per_epoch;
    const int64_t first = idx * a->B, left = a->len - first;
    s->gbatch = gb;
    s->n_pos = (int)(left < a->B ? left : a->B);
    s->assigned = s->finished = 0;
    s->delivered = s->shape_error = false;
    spw_batch_fill_clear(&s->fill);
    s->fill.pad = spw_fill_pad_of(a->o.spec);
    for (int p = 0; p < s->n_pos; p++) {
        s->places[p] = a->o.ordered ? first + p : -1;
        s->samples[p] = a->o.ordered ? spw_order_at(&a->order, (uint64_t)epoch, asm_pos_of(a, first + p)) : -1;
        s->ok[p] = false;
    }
}

static struct slot *slot_for(struct assembler *a, int64_t gb)
{
    struct slot *s = slot_of(a, gb);
    if (s->gbatch != gb)
        slot_init(a, s, gb);
    return s;
}

static bool in_window(const struct assembler *a, int64_t gb)
{
    return gb < a->next_deliver + a->window;
}

/* Unordered: the batch arrivals of epoch l go to now, or -1 past the epoch's last batch (or the job's). */
static int64_t fill_target(const struct assembler *a, const struct epoch_ledger *l)
{
    const int64_t gb = l->epoch * a->per_epoch + l->fill_batch;
    if (l->fill_batch >= a->per_epoch || (a->total >= 0 && gb >= a->total))
        return -1;
    return gb;
}

/* Give ticket t a place in batch gb (in the window). Called with mu held. */
static void assign(struct assembler *a, struct asm_ticket *t, int64_t gb)
{
    struct slot *s = slot_for(a, gb);
    t->gbatch = gb;
    if (a->o.ordered) {
        t->idx = (int)(t->place % a->B);
    } else {
        t->idx = s->assigned++;
        s->samples[t->idx] = t->sample;
        s->places[t->idx] = t->place;
        if (s->assigned == s->n_pos)
            ledger(a, t->epoch)->fill_batch++;
    }
    if (gb == a->next_deliver)
        a->head_progress_ms = spw_now_ms();
}

bool asm_claimed(struct assembler *a, uint64_t epoch, int64_t place)
{
    if (place < 0 || place >= a->places)
        return true;
    pthread_mutex_lock(&a->mu);
    struct epoch_ledger *l = ledger(a, epoch);
    const bool r = !l || bit(l->seen, place);
    pthread_mutex_unlock(&a->mu);
    return r;
}

enum asm_claim asm_claim(struct assembler *a, uint64_t epoch, int64_t pos, struct asm_ticket *t)
{
    return asm_claim_place(a, epoch, asm_place_of(a, pos), t);
}

enum asm_claim asm_claim_place(struct assembler *a, uint64_t epoch, int64_t place, struct asm_ticket *t)
{
    if (place < 0 || place >= a->places)
        return ASM_DUP;
    pthread_mutex_lock(&a->mu);
    enum asm_claim r = ASM_DUP;
    struct epoch_ledger *l = ledger(a, epoch);
    if (!l || bit(l->seen, place))
        goto out;
    set_bit(l->seen, place);
    l->left--;
    if (place < a->own && --l->split_left[place / a->o.split_size] == 0)
        push_ack(a, epoch, (uint64_t)(place / a->o.split_size));
    *t = (struct asm_ticket){.epoch = epoch, .place = place,
                             .sample = spw_order_at(&a->order, epoch, asm_pos_of(a, place)), .gbatch = -1};
    int64_t gb;
    if (a->o.ordered) {
        gb = gbatch_of(a, epoch, place);
        if (place >= a->len || place / a->B >= a->per_epoch || (a->total >= 0 && gb >= a->total))
            gb = -1;
    } else {
        gb = fill_target(a, l);
    }
    if (gb < 0) {
        r = ASM_DROP;
        retire_ledgers(a);
    } else if (!in_window(a, gb)) {
        r = ASM_PARK;
        if (a->o.ordered) {
            t->gbatch = gb;
            t->idx = (int)(place % a->B);
        }
    } else {
        assign(a, t, gb);
        r = ASM_PLACE;
    }
out:
    pthread_mutex_unlock(&a->mu);
    return r;
}

static void *buffer_take(struct assembler *a, size_t bytes)
{
    const size_t cap = spw_batch_buffer_size(bytes);
    for (int i = 0; i < a->n_pool; i++)
        if (a->pool_cap[i] == cap) {
            void *p = a->pool[i];
            a->pool[i] = a->pool[--a->n_pool];
            a->pool_cap[i] = a->pool_cap[a->n_pool];
            return p;
        }
    return spw_batch_buffer_take(bytes);
}

static void *buffer_take_cb(void *ctx, size_t bytes)
{
    return buffer_take(ctx, bytes);
}

uint8_t *asm_dst(struct assembler *a, const struct asm_ticket *t, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    pthread_mutex_lock(&a->mu);
    struct slot *s = slot_of(a, t->gbatch);
    const bool first = !spw_batch_fill_started(&s->fill);
    uint8_t *dst = s->shape_error ? NULL
                                  : spw_batch_element_place(&s->fill, s->n_pos, t->idx, dt, ndim, shape, buffer_take_cb,
                                                            a, a->errmsg, sizeof a->errmsg);
    s->shape_error = dst == NULL;
    if (first && spw_batch_fill_started(&s->fill)) {
        /* Now that a batch's size is known, the window is what 3/4 of the prefetch budget holds (the rest is
         * for parked elements, see streams.c and job.c). */
        const size_t bytes = spw_batch_fill_bytes(&s->fill, s->n_pos);
        int64_t w = a->o.prefetch_bytes / 4 * 3 / (int64_t)(bytes ? bytes : 1);
        a->window = (int)(w < MIN_WINDOW ? MIN_WINDOW : w > RING ? RING : w);
    }
    pthread_mutex_unlock(&a->mu);
    return dst;
}

static void *place_cb(void *opaque, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    struct asm_place *p = opaque;
    return asm_dst(p->a, p->t, dt, ndim, shape);
}

struct spw_element_dest asm_element_dest(struct assembler *a, const struct asm_ticket *t, struct asm_place *place)
{
    *place = (struct asm_place){a, t};
    return (struct spw_element_dest){place_cb, place, a->o.spec->batch.layout};
}

/* asm_done, with the element's fields (taken) kept in its batch when it is in. */
static void done_with(struct assembler *a, const struct asm_ticket *t, bool ok, struct spw_fields *fields)
{
    pthread_mutex_lock(&a->mu);
    struct slot *s = slot_of(a, t->gbatch);
    if (ok && fields && spw_batch_fill_fields(&s->fill, s->n_pos, t->idx, fields) != 0) {
        a->fail_rc = -ENOMEM;   /* not placeable: the batch fails rather than silently missing a field */
        snprintf(a->errmsg, sizeof a->errmsg, "out of memory for an element's fields");
        ok = false;
    } else if (!ok) {
        spw_fields_free(fields);
    }
    s->ok[t->idx] = ok;
    if (++s->finished == s->n_pos)
        pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

void asm_done(struct assembler *a, const struct asm_ticket *t, bool ok)
{
    pthread_mutex_lock(&a->mu);
    struct slot *s = slot_of(a, t->gbatch);
    s->ok[t->idx] = ok;
    if (++s->finished == s->n_pos)
        pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

void asm_park(struct assembler *a, const struct asm_ticket *t, struct spw_value *v, struct spw_fields *fields)
{
    /* kept past the producer's micro-batch: a borrowed value gets its own copy */
    struct parked *p = spw_value_own(v) == 0 ? calloc(1, sizeof *p) : NULL;
    pthread_mutex_lock(&a->mu);
    if (!p) {
        /* Not placeable and not storable: the batch fails rather than silently missing a sample. */
        a->fail_rc = -ENOMEM;
        snprintf(a->errmsg, sizeof a->errmsg, "out of memory parking an element");
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
        spw_value_free(v);
        spw_fields_free(fields);
        return;
    }
    p->t = *t;
    p->v = *v;
    p->fields = fields;
    memset(v, 0, sizeof *v);
    struct parked **tail = &a->parked;      /* FIFO: unordered elements take places in arrival order */
    while (*tail)
        tail = &(*tail)->next;
    *tail = p;
    a->parked_bytes += (int64_t)spw_value_bytes(&p->v);
    pthread_mutex_unlock(&a->mu);
}

/* Copy a value into its ticket's place and finish it (outside the lock); an empty value is a skipped
 * sample. Returns whether the element is in. */
static bool place_value(struct assembler *a, const struct asm_ticket *t, const struct spw_value *v,
                        struct spw_fields *fields, int64_t *delivered)
{
    const bool empty = !v->is_tensor && !v->img.data;
    enum spw_dtype dt;
    int ndim;
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    uint8_t *dst = NULL;
    if (!empty) {
        spw_value_out_shape(v, a->o.spec->batch.layout, &dt, &ndim, shape);
        if ((dst = asm_dst(a, t, dt, ndim, shape)))
            spw_value_copy_out(v, a->o.spec->batch.layout, dst);
    }
    if (dst && delivered)
        __atomic_add_fetch(delivered, 1, __ATOMIC_RELAXED);
    done_with(a, t, dst != NULL, fields);
    return dst != NULL;
}

void asm_finish(struct assembler *a, const struct asm_ticket *t, enum asm_claim c, struct spw_value *v,
                struct spw_fields *fields, bool ok, int64_t *delivered)
{
    if (c == ASM_PARK) {
        if (ok && delivered)
            __atomic_add_fetch(delivered, 1, __ATOMIC_RELAXED);
        asm_park(a, t, v, ok ? fields : NULL);
        if (!ok)
            spw_fields_free(fields);
    } else if (ok && !v->placed) {
        place_value(a, t, v, fields, delivered);
    } else {
        if (ok && delivered)
            __atomic_add_fetch(delivered, 1, __ATOMIC_RELAXED);
        done_with(a, t, ok, fields);
    }
}

/* Place parked elements that the window now reaches. */
static void unpark(struct assembler *a)
{
    struct parked *ready_list = NULL, **ready_tail = &ready_list;
    pthread_mutex_lock(&a->mu);
    for (struct parked **pp = &a->parked; *pp;) {
        struct parked *p = *pp;
        int64_t gb = p->t.gbatch;
        if (!a->o.ordered) {
            struct epoch_ledger *l = ledger(a, p->t.epoch);
            gb = l ? fill_target(a, l) : -1;
            if (gb < 0) {                /* past the last batch: counted, not delivered */
                *pp = p->next;
                a->parked_bytes -= (int64_t)spw_value_bytes(&p->v);
                value_free_parked(p);
                continue;
            }
        }
        if (!in_window(a, gb)) {
            pp = &p->next;
            continue;
        }
        *pp = p->next;
        assign(a, &p->t, gb);
        a->parked_bytes -= (int64_t)spw_value_bytes(&p->v);
        p->next = NULL;
        *ready_tail = p;
        ready_tail = &p->next;
    }
    pthread_mutex_unlock(&a->mu);
    while (ready_list) {
        struct parked *p = ready_list;
        ready_list = p->next;
        place_value(a, &p->t, &p->v, p->fields, NULL);
        p->fields = NULL;
        value_free_parked(p);
    }
}

static bool ready(const struct slot *s, int64_t gb)
{
    return s->gbatch == gb && !s->delivered && s->finished == s->n_pos;
}

/* The batch to deliver next per the mode, or -1. Called with mu held. */
static int64_t pick(struct assembler *a)
{
    if (ready(slot_of(a, a->next_deliver), a->next_deliver))
        return a->next_deliver;
    if (a->o.ordered)
        return -1;
    /* Within the head's epoch only: a checkpoint then says what was delivered with one epoch's bitmap. */
    const int64_t end = (a->next_deliver / a->per_epoch + 1) * a->per_epoch;
    for (int64_t gb = a->next_deliver + 1; gb < a->next_deliver + a->window && gb < end; gb++)
        if ((a->total < 0 || gb < a->total) && ready(slot_of(a, gb), gb))
            return gb;
    return -1;
}

int asm_next(struct assembler *a, int timeout_ms, struct spw_batch **out, char *err, size_t errlen)
{
    struct timespec dl = spw_deadline_in_ms(timeout_ms);
    pthread_mutex_lock(&a->mu);
    int64_t gb;
    int rc = 0;
    for (;;) {
        if (a->fail_rc) {
            rc = a->fail_rc;
            snprintf(err, errlen, "%s", a->errmsg);
            goto out;
        }
        if (a->total >= 0 && a->next_deliver >= a->total) {
            rc = SPW_ECLOSED;
            goto out;
        }
        if ((gb = pick(a)) >= 0)
            break;
        if (pthread_cond_timedwait(&a->cv, &a->mu, &dl) == ETIMEDOUT) {
            rc = -ETIMEDOUT;
            goto out;
        }
    }
    struct slot *s = slot_of(a, gb);
    if (s->shape_error) {
        rc = a->fail_rc = SPW_ESPEC;
        snprintf(err, errlen, "%s", a->errmsg);
        pthread_cond_broadcast(&a->cv);
        goto out;
    }
    s->delivered = true;
    struct epoch_ledger *l = find_ledger(a, (uint64_t)(gb / a->per_epoch));
    if (l) {                    /* it exists: the batch's places were claimed in it */
        for (int p = 0; p < s->n_pos; p++)
            set_bit(l->given, s->places[p]);
        l->given_batches++;
    }
    pthread_mutex_unlock(&a->mu);
    /* The slot is ours: nobody claims a finished batch's positions again. */
    struct spw_batch *b;
    char why[sizeof a->errmsg];
    rc = spw_batch_build(a->o.spec, a->o.src, gb / a->per_epoch, gb % a->per_epoch, s->n_pos, s->samples, s->ok,
                         &s->fill, &b, why, sizeof why);
    pthread_mutex_lock(&a->mu);
    if (rc) {
        /* this call and every later one return it, with the build's own words (padding past its cap, ...) */
        a->fail_rc = rc;
        snprintf(a->errmsg, sizeof a->errmsg, "%s", why);
        snprintf(err, errlen, "%s", why);
        pthread_cond_broadcast(&a->cv);
        goto out;
    }
    while (slot_of(a, a->next_deliver)->gbatch == a->next_deliver && slot_of(a, a->next_deliver)->delivered) {
        slot_of(a, a->next_deliver)->gbatch = -1;
        a->next_deliver++;
        a->head_progress_ms = spw_now_ms();
    }
    retire_ledgers(a);
    pthread_cond_broadcast(&a->cv);
    *out = b;
out:
    pthread_mutex_unlock(&a->mu);
    if (rc == 0)
        unpark(a);
    return rc;
}

void asm_release(struct assembler *a, struct spw_batch *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&a->mu);
    if (b->data_capacity && a->n_pool < RING + 4) {
        a->pool[a->n_pool] = b->tensors[0].data;
        a->pool_cap[a->n_pool++] = b->data_capacity;
        b->tensors[0].data = NULL;
    }
    pthread_mutex_unlock(&a->mu);
    spw_batch_free(b);
}

void asm_fail(struct assembler *a, int rc, const char *msg)
{
    pthread_mutex_lock(&a->mu);
    if (!a->fail_rc) {
        a->fail_rc = rc;
        snprintf(a->errmsg, sizeof a->errmsg, "%s", msg);
    }
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* Whether only this client produces (epoch, place): padding, or an epoch no lease brings any more. */
static bool self_only(const struct assembler *a, uint64_t epoch, int64_t place)
{
    return place >= a->own || epoch < a->o.self_below_epoch;
}

int asm_head_missing(struct assembler *a, uint64_t *epoch, int64_t *places, int cap, int64_t *stalled_ms,
                     int *n_self)
{
    int n = 0;
    *n_self = 0;
    pthread_mutex_lock(&a->mu);
    const int64_t gb = a->next_deliver;
    *stalled_ms = spw_now_ms() - a->head_progress_ms;
    if (a->total >= 0 && gb >= a->total)
        goto out;
    const struct slot *s = slot_for(a, gb);
    *epoch = (uint64_t)(gb / a->per_epoch);
    struct epoch_ledger *l = ledger(a, *epoch);
    if (!l)
        goto out;
    /* Ordered: the batch's own places. Unordered: any unclaimed places of the epoch, as many as the batch
     * still has room for (only when arrivals fill this batch now). Self-only places first. */
    int64_t first = (gb % a->per_epoch) * a->B, end = first + s->n_pos;
    int want = s->n_pos;
    if (!a->o.ordered) {
        if (fill_target(a, l) != gb)
            goto out;
        first = 0;
        end = a->places;
        want = s->n_pos - s->assigned;
    }
    for (int pass = 0; pass < 2; pass++)
        for (int64_t q = first; q < end && n < cap && n < want; q++)
            if (!bit(l->seen, q) && self_only(a, *epoch, q) == (pass == 0)) {
                places[n++] = q;
                *n_self += pass == 0;
            }
out:
    pthread_mutex_unlock(&a->mu);
    return n;
}

int asm_take_acks(struct assembler *a, struct asm_split *out, int cap)
{
    pthread_mutex_lock(&a->mu);
    int n = a->n_acks < cap ? a->n_acks : cap;
    memcpy(out, a->acks, (size_t)n * sizeof *out);
    memmove(a->acks, a->acks + n, (size_t)(a->n_acks - n) * sizeof *out);
    a->n_acks -= n;
    pthread_mutex_unlock(&a->mu);
    return n;
}

void asm_return_acks(struct assembler *a, const struct asm_split *acks, int n)
{
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < n; i++)         /* already the dispatcher's split ids */
        queue_ack(a, acks[i].epoch, acks[i].split);
    pthread_mutex_unlock(&a->mu);
}

void asm_reack(struct assembler *a, uint64_t from_epoch)
{
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < a->n_ledgers; i++) {
        const struct epoch_ledger *l = &a->ledgers[i];
        for (int64_t k = 0; l->epoch >= (int64_t)from_epoch && k < a->rank_splits; k++)
            if (l->split_left[k] == 0)
                push_ack(a, (uint64_t)l->epoch, (uint64_t)k);
    }
    pthread_mutex_unlock(&a->mu);
}

bool asm_wait_window(struct assembler *a, uint64_t epoch, int64_t place, int timeout_ms)
{
    struct timespec dl = spw_deadline_in_ms(timeout_ms);
    pthread_mutex_lock(&a->mu);
    bool ok;
    for (;;) {
        int64_t gb = place < a->len ? gbatch_of(a, epoch, place) : -1;
        if (!a->o.ordered) {
            struct epoch_ledger *l = ledger(a, epoch);
            gb = l ? fill_target(a, l) : -1;
        }
        ok = gb < 0 || in_window(a, gb);
        if (ok || a->fail_rc || pthread_cond_timedwait(&a->cv, &a->mu, &dl) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&a->mu);
    return ok;
}

void asm_progress(struct assembler *a, int64_t *total, int64_t *delivered, int64_t *parked_bytes)
{
    pthread_mutex_lock(&a->mu);
    *total = a->total;
    *delivered = a->next_deliver;
    *parked_bytes = a->parked_bytes;
    pthread_mutex_unlock(&a->mu);
}

void asm_checkpoint(struct assembler *a, int64_t *batches, uint8_t *places)
{
    pthread_mutex_lock(&a->mu);
    const int64_t epoch = a->next_deliver / a->per_epoch;
    const struct epoch_ledger *l = ledger(a, (uint64_t)epoch);     /* made here if nothing came yet */
    *batches = epoch * a->per_epoch + (l ? l->given_batches : 0);
    if (l)
        memcpy(places, l->given, asm_place_bytes(a));
    else
        memset(places, 0, asm_place_bytes(a));
    pthread_mutex_unlock(&a->mu);
}
