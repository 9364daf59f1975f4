/* dispatcher/state_snapshot.c - the state as the durable updates that rebuild it (disp_state_snapshot): what
 * a compacted journal holds instead of its history. Pure: reads the state, calls emit. Not thread-safe: the
 * caller holds the state's lock. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "dispatcher/state.h"
#include "dispatcher/state_internal.h"

#define EMIT(u)                                                                                                \
    do {                                                                                                       \
        struct disp_update tmp_ = (u);                                                                         \
        int rc_ = emit(ctx, &tmp_);                                                                            \
        if (rc_)                                                                                               \
            return rc_;                                                                                        \
    } while (0)

static int emit_ended(const struct disp_job_info *e, int (*emit)(void *, struct disp_update *), void *ctx)
{
    const uint32_t flags = (e->finished ? DISP_ENDED_FINISHED : 0) | (e->expired ? DISP_ENDED_EXPIRED : 0) |
                           (e->client_only ? DISP_ENDED_CLIENT_ONLY : 0) |
                           (e->cancelled ? DISP_ENDED_CANCELLED : 0) | (e->closed ? DISP_ENDED_CLOSED : 0);
    EMIT(((struct disp_update){.kind = DISP_RESTORE_ENDED, .job = e->id, .manifest_hash = e->manifest_hash,
                               .n_samples = e->n_samples, .epochs = e->epochs, .split_size = e->split_size,
                               .cut = e->cut, .world_size = e->world_size, .max_workers = e->max_workers,
                               .name = e->name, .client = e->client, .epoch = (uint64_t)e->epoch,
                               .acked = e->acked, .pending = e->pending, .refusals = e->refusals,
                               .flags = flags, .now_ms = e->ended_ms}));
    return 0;
}

/* A job: created at its lowest open epoch (or finished), its acked splits, its clients' incarnations (and
 * which are gone), refusals, hand-back, end. */
static int emit_job(const struct job *j, int (*emit)(void *, struct disp_update *), void *ctx)
{
    const bool all_done = j->ep[0].epoch < 0;       /* every epoch acked: finished when created */
    EMIT(((struct disp_update){.kind = DISP_CREATE_JOB, .job = j->id, .secret = j->secret,
                               .pipeline = j->pipeline, .pipeline_len = j->pipeline_len,
                               .manifest_hash = j->manifest_hash, .n_samples = j->n_samples,
                               .split_size = j->split_size, .epochs = j->epochs, .cut = j->cut,
                               .world_size = j->world_size, .max_workers = j->max_workers, .name = j->name,
                               .client = j->client, .first_epoch = all_done ? j->epochs : j->ep[0].epoch,
                               .now_ms = all_done ? j->ended_ms : j->created_ms}));
    for (int k = 0; k < 2 && !all_done; k++) {
        const struct epoch_splits *e = &j->ep[k];
        for (int64_t i = 0; e->epoch >= 0 && e->acked && i < e->n; i++)
            if (e->state[i] == DISP_SPLIT_ACKED)
                EMIT(((struct disp_update){.kind = DISP_ACK, .job = j->id, .epoch = (uint64_t)e->epoch,
                                           .split = (uint64_t)i, .now_ms = j->created_ms}));
    }
    for (int r = 0; r < j->world_size; r++)
        if (j->clients[r].incarnation)
            EMIT(((struct disp_update){.kind = DISP_CLIENT_HEARTBEAT, .job = j->id, .rank = r,
                                       .incarnation = j->clients[r].incarnation,
                                       .now_ms = j->clients[r].last_heartbeat_ms}));
    for (int r = 0; r < j->world_size; r++)
        if (j->clients[r].incarnation && !j->clients[r].alive)
            EMIT(((struct disp_update){.kind = DISP_CLIENT_EXPIRED, .job = j->id, .rank = r,
                                       .now_ms = j->ended_ms}));
    for (int i = 0; i < j->n_refusals; i++)
        EMIT(((struct disp_update){.kind = DISP_WORKER_REFUSES, .job = j->id, .worker = j->refusals[i].worker,
                                   .reason = j->refusals[i].reason}));
    if (j->client_only)
        EMIT(((struct disp_update){.kind = DISP_CLIENT_ONLY, .job = j->id}));
    if (j->finished && !all_done)
        EMIT(((struct disp_update){.kind = DISP_FINISH_JOB, .job = j->id, .now_ms = j->ended_ms}));
    return 0;
}

int disp_state_snapshot(const struct disp_state *s, int (*emit)(void *ctx, struct disp_update *u), void *ctx)
{
    int rc;
    EMIT(((struct disp_update){.kind = DISP_ID_FLOOR, .worker = s->next_worker, .job = s->next_job}));
    for (int i = 0; i < s->n_workers; i++) {
        const struct worker *w = &s->workers[i];
        EMIT(((struct disp_update){.kind = DISP_REGISTER_WORKER, .worker = w->id, .address = w->address,
                                   .name = w->gpu, .threads = w->threads, .secret = w->secret,
                                   .now_ms = w->last_heartbeat_ms}));
        if (!w->alive)
            EMIT(((struct disp_update){.kind = DISP_WORKER_DEAD, .worker = w->id}));
    }
    for (int i = 0; i < s->n_ended; i++) {
        struct disp_job_info e;
        disp_state_ended_at(s, i, &e);
        if ((rc = emit_ended(&e, emit, ctx)) != 0)
            return rc;
    }
    for (int i = 0; i < s->n_jobs; i++)
        if ((rc = emit_job(&s->jobs[i], emit, ctx)) != 0)
            return rc;
    return 0;
}
