/* client/rest_of.c - the rest of an epoch after a world size change (client/rest_of.h): the old ranks' views
 * and delivered places give the positions nobody delivered (pipeline/order.c), which become a source of
 * their own, cut among the new ranks like any epoch. Runs on the creating thread; no shared state. */
#include "client/rest_of.h"

#include <errno.h>
#include <stdlib.h>

#include "lib/err.h"
#include "pipeline/order.h"

/* Batches in rank `rank` of `world`'s epoch of n samples cut in splits of `split` (0: no share). */
static int64_t batches_of(const struct spw_pipeline_spec *spec, int64_t n, int rank, int world, int split)
{
    struct spw_rank_view v;
    if (spw_rank_view_init(&v, n, rank, world, split, !spec->batch.drop_remainder) != 0)
        return 0;
    const int64_t B = spec->batch.size;
    return spec->batch.drop_remainder ? v.len / B : (v.len + B - 1) / B;
}

int rest_of_apply(struct spw_pipeline_spec *spec, struct spw_source *src, const struct spw_job_opts *o,
                  struct rest_of_plan *plan, char *err, size_t errlen)
{
    const int old_world = o->rest_of.world, world = o->world_size > 1 ? o->world_size : 1;
    const int rank = world > 1 ? o->rank : 0;
    const struct spw_checkpoint *c = o->rest_of.ranks;
    const int64_t n = src->n;
    if (old_world < 1 || old_world > 65536 || !c)
        return spw_fail(err, errlen, -EINVAL, "rest_of: %d ranks' checkpoints", old_world);
    if (o->resume.places)
        return spw_fail(err, errlen, -EINVAL, "rest_of: the job resumed is made in order: no places bitmap");
    const int split = c[0].split_size > 0 ? c[0].split_size : SPW_DEFAULT_SPLIT;
    const int64_t pe = batches_of(spec, n, 0, old_world, split);
    if (pe < 1)
        return spw_fail(err, errlen, -EINVAL, "rest_of: %d ranks in splits of %d have no share of %lld samples",
                        old_world, split, (long long)n);
    int64_t epoch = -1, *given = calloc((size_t)old_world, sizeof *given);
    const uint8_t **maps = calloc((size_t)old_world, sizeof *maps);
    size_t *bytes = calloc((size_t)old_world, sizeof *bytes);
    int64_t *pos = malloc(((size_t)n + 1) * sizeof *pos);
    int rc = given && maps && bytes && pos ? 0 : spw_fail(err, errlen, -ENOMEM, "out of memory");
    bool any = false;
    for (int r = 0; rc == 0 && r < old_world; r++) {
        const int64_t e = c[r].batches / pe, b = c[r].batches % pe;
        if (c[r].manifest && c[r].manifest != src->manifest_hash)
            rc = spw_fail(err, errlen, -EINVAL, "rest_of: rank %d's checkpoint was taken on another dataset listing "
                          "(manifest %016llx, this source %016llx)", r, (unsigned long long)c[r].manifest,
                          (unsigned long long)src->manifest_hash);
        else if ((c[r].split_size > 0 ? c[r].split_size : SPW_DEFAULT_SPLIT) != split)
            rc = spw_fail(err, errlen, -EINVAL, "rest_of: rank %d's checkpoint has splits of %d samples, rank 0's %d",
                          r, c[r].split_size, split);
        else if (epoch >= 0 && e != epoch)
            rc = spw_fail(err, errlen, -EINVAL, "rest_of: the ranks' checkpoints are from different epochs (rank 0 "
                          "in %lld, rank %d in %lld): take them at the same step", (long long)epoch, r, (long long)e);
        epoch = e;
        any = any || b > 0;
        given[r] = b * spec->batch.size;
        maps[r] = b > 0 ? c[r].places : NULL;
        bytes[r] = b > 0 ? c[r].places_len : 0;
    }
    int64_t k = 0;
    if (rc == 0 && any && (k = spw_order_rest(n, old_world, split, !spec->batch.drop_remainder, maps, bytes, given,
                                              pos)) < 0)
        rc = spw_fail(err, errlen, (int)k, k == -ENOMEM ? "out of memory" : "rest_of: a checkpoint's places bitmap "
                      "does not fit its rank's share (taken with another world size or batch size?)");
    if (rc == 0 && k > 0 && k < world)
        rc = spw_fail(err, errlen, -EINVAL, "rest_of: epoch %lld has %lld samples left, fewer than the %d ranks: "
                      "resume it on at most %lld", (long long)epoch, (long long)k, world, (long long)k);
    struct spw_order order;
    spw_order_init(&order, n, spec->source.shuffle, spec->source.seed);
    for (int64_t i = 0; rc == 0 && i < k; i++)
        pos[i] = spw_order_at(&order, (uint64_t)epoch, pos[i]);     /* positions -> samples */
    const int new_split = o->split_size > 0 ? o->split_size : split;
    *plan = (struct rest_of_plan){.epoch = epoch, .rest = k, .split = (int)(k / world)};   /* even shares */
    plan->per_epoch_after = batches_of(spec, n, rank, world, new_split);
    plan->next_batch = (epoch + (any ? 1 : 0)) * plan->per_epoch_after;
    if (rc == 0 && k > 0 && (rc = spw_source_take(src, pos, k)) != 0)
        rc = spw_fail(err, errlen, rc, "out of memory");
    if (rc == 0 && k > 0) {
        plan->per_epoch = batches_of(spec, k, rank, world, plan->split);
        plan->first_batch = o->resume.batches > 0 ? o->resume.batches : epoch * plan->per_epoch;
        spec->source.shuffle = false;       /* the positions are in the old epoch's order already */
        spec->source.epochs = epoch + 1;
    }
    free(given), free(maps), free(bytes), free(pos);
    return rc;
}
