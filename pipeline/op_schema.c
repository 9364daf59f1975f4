/* pipeline/op_schema.c - the op registry as a JSON document (see op_schema.h): built from the table on each
 * call, nothing cached. Pure; any thread. */
#include "pipeline/op_schema.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tensor.h"
#include "pipeline/plugin_ops.h"
#include "pipeline/spec.h"

static const char *const class_names[] = {
    [SPW_OPC_DECODE_IMAGE] = "decode_image", [SPW_OPC_IMAGE] = "image",   [SPW_OPC_TO_TENSOR] = "to_tensor",
    [SPW_OPC_TENSOR] = "tensor",             [SPW_OPC_DECODE_AUDIO] = "decode_audio",
    [SPW_OPC_WAVE] = "wave",                 [SPW_OPC_STFT] = "stft",     [SPW_OPC_SPECTRAL] = "spectral",
    [SPW_OPC_USER] = "user",
};

const char *spw_op_class_name(enum spw_op_class cls)
{
    return (unsigned)cls < sizeof class_names / sizeof *class_names ? class_names[cls] : NULL;
}

/* The field's JSON type as docs/pipeline.md's op tables write it. */
static const char *type_name(enum spw_field_kind k)
{
    switch (k) {
    case SPW_FK_SIZE: return "size";
    case SPW_FK_MAX_SIZE: return "integer or null";
    case SPW_FK_INT:
    case SPW_FK_MAGNITUDE: return "integer";
    case SPW_FK_NUM: return "number";
    case SPW_FK_BOOL: return "boolean";
    case SPW_FK_RANGE: return "[min, max]";
    case SPW_FK_PAIR: return "[x, y]";
    case SPW_FK_SHEAR: return "number, [s] or [x, y]";
    case SPW_FK_FILL: return "fill";
    case SPW_FK_OPT_FILL: return "null or fill";
    case SPW_FK_XY: return "number or [x, y]";
    case SPW_FK_JITTER: return "number or [min, max]";
    case SPW_FK_ERASE_VALUE: return "number, [v], [r, g, b] or \"random\"";
    case SPW_FK_TRIPLE: return "number or 1 or 3 numbers";
    case SPW_FK_OPT_NUM: return "number or null";
    case SPW_FK_INTERP: return "interpolation";
    case SPW_FK_DTYPE:
    case SPW_FK_POLICY:
    case SPW_FK_WINDOW:
    case SPW_FK_MEL_SCALE:
    case SPW_FK_MEL_NORM:
    case SPW_FK_STYPE: return "string";
    case SPW_FK_FUNCTION: return "\"package.module:function\"";
    case SPW_FK_KWARGS: return "object";
    case SPW_FK_SHAPE: return "null or [d, ...]";
    case SPW_FK_ARRAY_DTYPE: return "string or null";
    case SPW_FK_OPS: return "ops";
    case SPW_FK_WEIGHTS: return "null or [w, ...]";
    case SPW_FK_KSIZE: return "odd integer or [kx, ky]";
    case SPW_FK_SIZES: return "integer or [s, ...]";
    case SPW_FK_SIGMA: return "number or [min, max]";
    case SPW_FK_PADDING: return "padding";
    case SPW_FK_PAD_MODE:
    case SPW_FK_KALDI_WINDOW: return "string";
    }
    return NULL;
}

/* An enum field's names (JSON null where "none" stands for it), or NULL for other kinds. */
static json_t *choices(enum spw_field_kind k)
{
    const char *const *names;
    size_t n;
    switch (k) {
    case SPW_FK_INTERP: names = spw_interp_names, n = spw_interp_names_n; break;
    case SPW_FK_DTYPE: names = spw_op_dtype_names, n = spw_op_dtype_names_n; break;
    case SPW_FK_ARRAY_DTYPE: names = spw_array_dtype_names, n = spw_array_dtype_names_n; break;
    case SPW_FK_POLICY: names = spw_aa_policy_names, n = spw_aa_policy_names_n; break;
    case SPW_FK_WINDOW: names = spw_window_names, n = spw_window_names_n; break;
    case SPW_FK_MEL_SCALE: names = spw_mel_scale_names, n = spw_mel_scale_names_n; break;
    case SPW_FK_MEL_NORM: names = spw_mel_norm_names, n = spw_mel_norm_names_n; break;
    case SPW_FK_STYPE: names = spw_db_stype_names, n = spw_db_stype_names_n; break;
    case SPW_FK_PAD_MODE: names = spw_pad_mode_names, n = spw_pad_mode_names_n; break;
    case SPW_FK_KALDI_WINDOW: names = spw_kaldi_window_names, n = spw_kaldi_window_names_n; break;
    default: return NULL;
    }
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (names[i])
            json_array_append_new(a, k == SPW_FK_MEL_NORM && !strcmp(names[i], "none") ? json_null()
                                                                                       : json_string(names[i]));
    return a;
}

/* Whether lo/hi bound the field's numbers (the kinds that read numbers against them). */
static bool bounded(enum spw_field_kind k)
{
    switch (k) {
    case SPW_FK_MAX_SIZE: case SPW_FK_INT: case SPW_FK_NUM: case SPW_FK_RANGE: case SPW_FK_PAIR:
    case SPW_FK_SHEAR: case SPW_FK_FILL: case SPW_FK_OPT_FILL: case SPW_FK_XY: case SPW_FK_JITTER: case SPW_FK_ERASE_VALUE: case SPW_FK_TRIPLE:
    case SPW_FK_OPT_NUM: case SPW_FK_KSIZE: case SPW_FK_SIGMA: case SPW_FK_PADDING: case SPW_FK_SIZES:
        return true;
    default: return false;
    }
}

static json_t *bound(enum spw_field_kind k, double v)
{
    return k == SPW_FK_INT || k == SPW_FK_MAX_SIZE || k == SPW_FK_KSIZE || k == SPW_FK_PADDING || k == SPW_FK_SIZES
               ? json_integer((json_int_t)v)
               : json_real(v);
}

static json_t *field_json(const struct spw_op_field *f, const struct spw_op_spec *defaults, bool *oom)
{
    json_t *o = json_object();
    const bool required = f->flags & SPW_F_REQ;
    int e = !o || json_object_set_new(o, "name", json_string(f->name)) ||
            json_object_set_new(o, "type", json_string(type_name(f->kind))) ||
            json_object_set_new(o, "required", json_boolean(required));
    json_t *c = choices(f->kind);
    if (c)
        e |= json_object_set_new(o, "choices", c);
    if (!required && f->derived)
        e |= json_object_set_new(o, "default", json_null()) ||
             json_object_set_new(o, "derived", json_string(f->derived));
    else if (!required)
        e |= json_object_set_new(o, "default", spw_spec__op_field_json(f, defaults));
    if (bounded(f->kind) && isfinite(f->lo))
        e |= json_object_set_new(o, "min", bound(f->kind, f->lo));
    if (bounded(f->kind) && isfinite(f->hi))
        e |= json_object_set_new(o, "max", bound(f->kind, f->hi));
    if (bounded(f->kind) && (f->flags & SPW_F_LO_OPEN))
        e |= json_object_set_new(o, "min_exclusive", json_true());
    if (f->kind == SPW_FK_MAGNITUDE)
        e |= json_object_set_new(o, "min", json_integer(0)) ||
             json_object_set_new(o, "max_derived", json_string("num_magnitude_bins - 1"));
    *oom |= e != 0;
    return o;
}

/* "a b c" -> ["a", "b", "c"] */
static json_t *words(const char *s)
{
    json_t *a = json_array();
    while (a && s && *s) {
        const size_t n = strcspn(s, " ");
        if (n)
            json_array_append_new(a, json_stringn(s, n));
        s += n + (s[n] == ' ');
    }
    return a;
}

/* A loaded plugin op as the schema lists it: "plugin", "version" and "path" beside the built-in keys. */
static json_t *plugin_op_json(const struct spw_plugin_op_ref *r, bool *oom)
{
    json_t *op = json_object(), *fields = json_array();
    for (int i = 0; fields && i < r->op->n_fields; i++) {
        const struct spw_plugin_field *f = &r->op->fields[i];
        json_t *o = json_object();
        int e = !o || json_object_set_new(o, "name", json_string(f->name)) ||
                json_object_set_new(o, "type", json_string(f->type == SPW_PLUGIN_INT      ? "integer"
                                                           : f->type == SPW_PLUGIN_NUMBER ? "number"
                                                                                          : "boolean")) ||
                json_object_set_new(o, "required", json_boolean(f->required));
        if (!f->required)
            e |= json_object_set_new(o, "default", f->type == SPW_PLUGIN_BOOL ? json_boolean(f->default_value != 0)
                                                   : f->type == SPW_PLUGIN_INT
                                                       ? json_integer((json_int_t)f->default_value)
                                                       : json_real(f->default_value));
        if (f->type != SPW_PLUGIN_BOOL && isfinite(f->min))
            e |= json_object_set_new(o, "min", bound(f->type == SPW_PLUGIN_INT ? SPW_FK_INT : SPW_FK_NUM, f->min));
        if (f->type != SPW_PLUGIN_BOOL && isfinite(f->max))
            e |= json_object_set_new(o, "max", bound(f->type == SPW_PLUGIN_INT ? SPW_FK_INT : SPW_FK_NUM, f->max));
        if (f->doc)
            e |= json_object_set_new(o, "doc", json_string(f->doc));
        *oom |= e != 0 || json_array_append_new(fields, o) != 0;
    }
    *oom |= !op || json_object_set_new(op, "name", json_string(r->name)) ||
            json_object_set_new(op, "class", json_string("user")) ||
            json_object_set_new(op, "doc", json_string(r->op->doc ? r->op->doc : "")) ||
            json_object_set_new(op, "args", json_array()) ||
            json_object_set_new(op, "plugin", json_string(r->plugin->name)) ||
            json_object_set_new(op, "version", json_string(r->plugin->version ? r->plugin->version : "")) ||
            json_object_set_new(op, "path", json_string(r->path)) || json_object_set_new(op, "fields", fields);
    return op;
}

char *spw_op_schema_json(void)
{
    bool oom = false;
    json_t *root = json_object(), *ops = json_array();
    for (int k = 0; root && ops && k < SPW_OP_COUNT; k++) {
        const struct spw_op_def *d = spw_op_def((enum spw_op_kind)k);
        if (d->generic)
            continue;
        struct spw_op_spec defaults = d->defaults;
        defaults.kind = (enum spw_op_kind)k;
        json_t *op = json_object(), *fields = json_array();
        for (const struct spw_op_field *f = d->fields; fields && f->name; f++)
            oom |= json_array_append_new(fields, field_json(f, &defaults, &oom)) != 0;
        oom |= !op || json_object_set_new(op, "name", json_string(d->name)) ||
               json_object_set_new(op, "class", json_string(spw_op_class_name(d->cls))) ||
               json_object_set_new(op, "doc", json_string(d->doc)) ||
               json_object_set_new(op, "args", words(d->args)) || json_object_set_new(op, "fields", fields) ||
               json_array_append_new(ops, op);
    }
    for (int i = 0; ops && i < spw_plugin_count(); i++)
        oom |= json_array_append_new(ops, plugin_op_json(spw_plugin_at(i), &oom)) != 0;
    json_t *errors = json_array();
    const char *e = spw_plugin_load_errors();
    while (errors && *e) {                  /* one line each */
        const size_t n = strcspn(e, "\n");
        oom |= json_array_append_new(errors, json_stringn(e, n)) != 0;
        e += n + (e[n] == '\n');
    }
    oom |= !root || json_object_set_new(root, "schema", json_integer(SPW_OP_SCHEMA_VERSION)) ||
           json_object_set_new(root, "ops", ops) || json_object_set_new(root, "plugin_errors", errors);
    char *text = oom ? NULL : json_dumps(root, JSON_PRESERVE_ORDER | JSON_COMPACT);
    json_decref(root);
    return text;
}
