/* pipeline/combinators.c - random_apply, random_choice, random_order (see combinators.h). Thread-safe: state
 * is per call. */
#include "pipeline/combinators.h"

#include <stdio.h>

#include "lib/err.h"
#include "pipeline/element.h"

int spw_combinator_plan(const struct spw_op_spec *op, struct spw_rng *r, int order[SPW_OP_MAX_NESTED])
{
    const int n = op->n_ops < SPW_OP_MAX_NESTED ? op->n_ops : SPW_OP_MAX_NESTED;
    for (int k = 0; k < n; k++)
        order[k] = k;
    switch (op->kind) {
    case SPW_OP_RANDOM_APPLY:           /* torchvision: the ops unless p < torch.rand(1) */
        return spw_rng_uniform(r) < op->p ? n : 0;
    case SPW_OP_RANDOM_CHOICE: {        /* random.choices(ops, weights=p) */
        double total = 0, acc = 0;
        for (int k = 0; k < n; k++)
            total += op->weights ? op->weights[k] : 1.0;
        const double u = spw_rng_uniform(r) * total;
        int pick = -1;
        for (int k = 0; k < n && pick < 0; k++) {
            const double w = op->weights ? op->weights[k] : 1.0;
            acc += w;
            if (w > 0 && u < acc)
                pick = k;
        }
        for (int k = n - 1; pick < 0 && k >= 0; k--)    /* u rounded up to the total: the last one that can */
            if (!op->weights || op->weights[k] > 0)
                pick = k;
        order[0] = pick < 0 ? 0 : pick;
        return n ? 1 : 0;
    }
    case SPW_OP_RANDOM_ORDER:           /* random.shuffle: every order equally likely */
        for (int k = n - 1; k > 0; k--) {
            const int j = (int)spw_rng_below(r, (uint32_t)k + 1), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        return n;
    default:
        return -1;
    }
}

uint32_t spw_combinator_key(uint32_t parent, int k)
{
    return 0x80000000u | (uint32_t)(spw_mix64(((uint64_t)parent << 8) ^ (uint64_t)(k + 1)) & 0x7fffffffu);
}

void spw_combinator_sub(const struct spw_op_call *c, int k, struct spw_op_call *sub)
{
    *sub = *c;
    sub->op = &c->op->ops[k];
    sub->key = spw_combinator_key(c->key ? c->key : (uint32_t)c->index, k);
    sub->dest = NULL;                   /* not the pipeline's last write */
    spw_element_rng(c->ctx, c->epoch, c->sample, sub->key, &sub->rng);
}

int spw_combinator_run(struct spw_op_call *c, struct spw_value *v)
{
    int order[SPW_OP_MAX_NESTED];
    const int n = spw_combinator_plan(c->op, &c->rng, order);
    if (n < 0) {
        snprintf(c->err, c->errlen, "ops[%d] %s is not a combinator", c->index, spw_op_name(c->op->kind));
        return SPW_EUNSUPPORTED;
    }
    for (int i = 0; i < n; i++) {
        struct spw_op_call sub;
        spw_combinator_sub(c, order[i], &sub);
        const int rc = spw_op_def(sub.op->kind)->cpu(&sub, v);
        if (rc)
            return rc;
    }
    return 0;
}
