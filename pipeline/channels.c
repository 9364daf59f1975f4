/* pipeline/channels.c - one-channel outputs (see channels.h): where they start, and the spec's rules for
 * them, read from each op's row in the registry (its fields say which values are per channel). Pure. */
#include "pipeline/channels.h"

#include <stdbool.h>
#include <stdio.h>

#include "pipeline/op_registry.h"

static bool grey1(const struct spw_op_spec *op)
{
    return op->kind == SPW_OP_GRAYSCALE && op->num_output_channels == 1;
}

int spw_out_channels(const struct spw_pipeline_spec *spec, int at)
{
    int channels = 3;
    for (int i = 0; i < at && i < spec->n_ops; i++)
        if (spec->ops[i].kind == SPW_OP_GRAYSCALE)
            channels = spec->ops[i].num_output_channels == 1 ? 1 : 3;
    return channels;
}

/* The name of the first of op's per-channel values whose channels differ, or NULL. */
static const char *uneven(const struct spw_op_spec *op)
{
    const struct spw_op_def *def = spw_op_def(op->kind);
    for (const struct spw_op_field *f = def && !op->plugin ? def->fields : NULL; f && f->name; f++) {
        const double *v = f->kind == SPW_FK_FILL || (f->kind == SPW_FK_OPT_FILL && op->has_fill) ? op->fill
                          : f->kind == SPW_FK_TRIPLE ? (const double *)(const void *)((const char *)op + f->off)
                          : f->kind == SPW_FK_ERASE_VALUE && !op->erase_random_value ? op->erase_value
                                                                                     : NULL;
        if (v && (v[0] != v[1] || v[1] != v[2]))
            return f->name;
    }
    return NULL;
}

/* ops[0, n) at `where` (e.g. "ops", "ops[3].ops"); `after` says whether a one-channel grayscale precedes
 * them; `nested` whether they are a combinator's. */
static int check_list(const struct spw_op_spec *ops, int n, const char *where, bool after, bool nested, char *loc,
                      size_t loclen, char *msg, size_t msglen)
{
    for (int i = 0; i < n; i++) {
        const struct spw_op_spec *op = &ops[i];
        const struct spw_op_def *def = spw_op_def(op->kind);
        const char *name = op->plugin ? "a plugin op" : def->name, *field;
        if (nested && (grey1(op) || (after && op->kind == SPW_OP_GRAYSCALE))) {
            snprintf(loc, loclen, "%s[%d].num_output_channels", where, i);
            return snprintf(msg, msglen, "%d inside a combinator: the output's channels would depend on the "
                            "draw%s", op->num_output_channels, after ? " (the image is one channel here)" : ""), 1;
        }
        if (after && op->kind == SPW_OP_VIEWS) {
            snprintf(loc, loclen, "views");
            return snprintf(msg, msglen, "not supported yet after a grayscale with num_output_channels 1 (use 3)"),
                   1;
        }
        if (after && (op->plugin || def->cls == SPW_OPC_USER || op->kind == SPW_OP_AUG_MIX)) {
            snprintf(loc, loclen, "%s[%d]", where, i);
            return snprintf(msg, msglen, "\"%s\" after a grayscale with num_output_channels 1 is not supported "
                            "(it needs three channels; put it before, or use num_output_channels 3)", name), 1;
        }
        if (after && (field = uneven(op))) {
            snprintf(loc, loclen, "%s[%d].%s", where, i, field);
            return snprintf(msg, msglen, "per-channel values differ on a one-channel image (after a grayscale "
                            "with num_output_channels 1): give one value"), 1;
        }
        if (op->n_ops) {
            char inner[96];
            snprintf(inner, sizeof inner, "%s[%d].ops", where, i);
            if (check_list(op->ops, op->n_ops, inner, after, true, loc, loclen, msg, msglen))
                return 1;
        }
        if (!nested && op->kind == SPW_OP_GRAYSCALE)
            after = grey1(op);
    }
    return 0;
}

int spw_spec_check_channels(const struct spw_pipeline_spec *spec, char *loc, size_t loclen, char *msg,
                            size_t msglen)
{
    if (check_list(spec->ops, spec->n_ops, "ops", false, false, loc, loclen, msg, msglen))
        return 1;
    for (int v = 0; v < spec->n_views; v++) {
        const struct spw_pipeline_spec *vs = spec->views[v].ops;
        for (int i = 0; i < vs->n_ops; i++)
            if (grey1(&vs->ops[i])) {
                snprintf(loc, loclen, "views[%d].ops[%d].num_output_channels", v, i);
                return snprintf(msg, msglen, "1 with views is not supported yet: use 3"), 1;
            }
    }
    return 0;
}
