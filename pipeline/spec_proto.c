/* pipeline/spec_proto.c - spec <-> spillway.v1.Pipeline, through the JSON form: to_proto copies the
 * canonical JSON value field by field, from_proto builds a JSON value from the fields a peer set and
 * hands it to spw_spec__from_json_value. Field names are the same on both sides, so the mapping is one
 * X-macro list per field type. Not a validator. Pure functions; safe from any thread. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* strdup, strnlen, mkstemp: POSIX, not C11 */
#endif
#include "pipeline/spec_proto.h"

#include "lib/err.h"
#include "lib/utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* X(field, FIELD): Op's one-field oneofs opt_<field>, by value type. */
#define OP_INTS(X)                                                                                         \
    X(max_size, MAX_SIZE) X(top, TOP) X(left, LEFT) X(height, HEIGHT) X(width, WIDTH) X(padding, PADDING)   \
    X(bits, BITS) X(num_ops, NUM_OPS) X(magnitude, MAGNITUDE) X(num_magnitude_bins, NUM_MAGNITUDE_BINS)    \
    X(rate, RATE) X(lowpass_filter_width, LOWPASS_FILTER_WIDTH) X(samples, SAMPLES) X(n_fft, N_FFT)         \
    X(hop_length, HOP_LENGTH) X(win_length, WIN_LENGTH) X(sample_rate, SAMPLE_RATE) X(n_mels, N_MELS)     \
    X(freq_mask_param, FREQ_MASK_PARAM) X(time_mask_param, TIME_MASK_PARAM)                               \
    X(num_freq_masks, NUM_FREQ_MASKS) X(num_time_masks, NUM_TIME_MASKS)                                   \
    X(num_output_channels, NUM_OUTPUT_CHANNELS) X(num_mel_bins, NUM_MEL_BINS) X(frames, FRAMES)             \
    X(severity, SEVERITY) X(mixture_width, MIXTURE_WIDTH) X(chain_depth, CHAIN_DEPTH)  \
    X(min_size, MIN_SIZE)
/* JSON null (f_max, top_db) is an absent field */
#define OP_DOUBLES(X)                                                                                      \
    X(p, P) X(angle, ANGLE) X(factor, FACTOR) X(threshold, THRESHOLD) X(rolloff, ROLLOFF) X(power, POWER)  \
    X(f_min, F_MIN) X(f_max, F_MAX) X(eps, EPS) X(top_db, TOP_DB) X(timeout_s, TIMEOUT_S)                 \
    X(sharpness_factor, SHARPNESS_FACTOR) X(frame_length, FRAME_LENGTH) X(frame_shift, FRAME_SHIFT)           \
    X(sample_frequency, SAMPLE_FREQUENCY) X(dither, DITHER) X(preemphasis_coefficient, PREEMPHASIS_COEFFICIENT) \
    X(energy_floor, ENERGY_FLOOR) X(low_freq, LOW_FREQ) X(high_freq, HIGH_FREQ) X(offset, OFFSET)   \
    X(distortion_scale, DISTORTION_SCALE) X(alpha, ALPHA)
#define OP_BOOLS(X)                                                                                        \
    X(antialias, ANTIALIAS) X(pad_if_needed, PAD_IF_NEEDED) X(expand, EXPAND) X(mono, MONO)                \
    X(center, CENTER) X(exif_transpose, EXIF_TRANSPOSE) X(remove_dc_offset, REMOVE_DC_OFFSET)                 \
    X(raw_energy, RAW_ENERGY) X(use_energy, USE_ENERGY) X(htk_compat, HTK_COMPAT) X(snip_edges, SNIP_EDGES)     \
    X(trim, TRIM) X(all_ops, ALL_OPS)
/* X(field, FIELD, name adapter); JSON null (norm) is an absent field */
#define OP_ENUMS(X)                                                                                        \
    X(interpolation, INTERPOLATION, interp_n) X(policy, POLICY, policy_n) X(dtype, DTYPE, dtype_n)         \
    X(window, WINDOW, window_n) X(mel_scale, MEL_SCALE, mel_scale_n) X(norm, NORM, mel_norm_n)             \
    X(stype, STYPE, stype_n) X(output_dtype, OUTPUT_DTYPE, dtype_n) X(padding_mode, PADDING_MODE, pad_mode_n)  \
    X(window_type, WINDOW_TYPE, kaldi_window_n)
/* X(field): repeated double; `value` is handled with value_random */
#define OP_DOUBLE_LISTS(X)                                                                                 \
    X(scale) X(ratio) X(translate) X(shear) X(fill) X(brightness) X(contrast) X(saturation) X(hue) X(mean) \
    X(std) X(sigma) X(radius)

#define OP_CASE(FIELD) SPILLWAY__V1__OP__OPT_##FIELD##_##FIELD

/* int-indexed adapters over the spec.h name functions (one signature for the generic helpers below) */
typedef const char *(*name_fn)(int v);
static const char *op_n(int v) { return spw_op_name((enum spw_op_kind)v); }
static const char *interp_n(int v) { return spw_interp_name((enum spw_interp)v); }
static const char *policy_n(int v) { return spw_aa_policy_name((enum spw_aa_policy)v); }
static const char *dtype_n(int v) { return spw_dtype_name((enum spw_dtype)v); }
static const char *window_n(int v) { return v == 0 ? "hann" : NULL; }
static const char *mel_scale_n(int v) { return spw_mel_scale_name((enum spw_mel_scale)v); }
static const char *mel_norm_n(int v) { return spw_mel_norm_name((enum spw_mel_norm)v); }
static const char *stype_n(int v) { return spw_db_stype_name((enum spw_db_stype)v); }
static const char *pad_mode_n(int v) { return spw_pad_mode_name((enum spw_pad_mode)v); }
static const char *kaldi_window_n(int v) { return spw_kaldi_window_name((enum spw_kaldi_window)v); }
static const char *format_n(int v) { return spw_source_format_name((enum spw_source_format)v); }
static const char *layout_n(int v) { return spw_layout_name((enum spw_layout)v); }
static const char *on_error_n(int v) { return spw_on_error_name((enum spw_on_error)v); }
static const char *field_kind_n(int v) { return spw_sample_field_kind_name((enum spw_sample_field_kind)v); }
static const char *box_format_n(int v) { return spw_box_format_name((enum spw_box_format)v); }

/* ---- proto -> JSON value (from_proto) ------------------------------------------------------------- */

struct jb {
    bool oom;
    bool bad;   /* a double JSON cannot carry (NaN, infinity); message already in err */
    size_t op;  /* index of the op being converted, for that message */
    char *err;
    size_t errlen;
    char list[32];  /* the list it is in, for messages: "ops", "views[1].ops" */
};

static void set(struct jb *b, json_t *obj, const char *key, json_t *v)
{
    if (!v || !obj || json_object_set_new(obj, key, v))
        b->oom = true;
}

/* An enum value a peer sent: its JSON name, or the number as a string (which the validator then names as
 * not one of the allowed values) when this build does not know it. */
static json_t *enum_json(name_fn fn, int v)
{
    char num[16];
    if (fn(v))
        return json_string(fn(v));
    snprintf(num, sizeof(num), "%d", v);
    return json_string(num);
}

static bool utf8_valid(const char *str);

/* source.fields from the peer's list: an object in its order; a name given twice, or text that is not
 * UTF-8, is refused here (an object cannot hold both). */
static json_t *fields_json(struct jb *b, const Spillway__V1__Source *s)
{
    json_t *o = json_object();
    for (size_t k = 0; o && k < s->n_fields && !b->bad; k++) {
        const Spillway__V1__SourceField *f = s->fields[k];
        const char *strs[] = {f->name, f->from, f->key, f->labels_key, f->path};
        bool ok = true;
        for (size_t i = 0; i < 5; i++)
            ok = ok && (!strs[i] || utf8_valid(strs[i]));
        if (!ok || !f->name || json_object_get(o, f->name)) {
            if (b->err && b->errlen)
                snprintf(b->err, b->errlen, "source.fields[%zu]: %s", k, ok ? "a name given twice" : "not valid UTF-8");
            b->bad = true;
            break;
        }
        json_t *fo = json_object();
        if (f->from && f->from[0])
            set(b, fo, "from", json_string(f->from));
        if (f->opt_as_case == SPILLWAY__V1__SOURCE_FIELD__OPT_AS_AS)
            set(b, fo, "as", enum_json(field_kind_n, (int)f->as));
        if (f->key && f->key[0])
            set(b, fo, "key", json_string(f->key));
        if (f->opt_ignore_index_case == SPILLWAY__V1__SOURCE_FIELD__OPT_IGNORE_INDEX_IGNORE_INDEX)
            set(b, fo, "ignore_index", json_integer(f->ignore_index));
        if (f->opt_format_case == SPILLWAY__V1__SOURCE_FIELD__OPT_FORMAT_FORMAT)
            set(b, fo, "format", enum_json(box_format_n, (int)f->format));
        if (f->labels_key && f->labels_key[0])
            set(b, fo, "labels_key", json_string(f->labels_key));
        if (f->path && f->path[0])
            set(b, fo, "path", json_string(f->path));
        if (f->opt_min_size_case == SPILLWAY__V1__SOURCE_FIELD__OPT_MIN_SIZE_MIN_SIZE) {
            if (!isfinite(f->min_size)) {
                if (b->err && b->errlen)
                    snprintf(b->err, b->errlen, "source.fields[%zu].min_size: %g is not a finite number", k,
                             f->min_size);
                b->bad = true;
            }
            set(b, fo, "min_size", json_real(isfinite(f->min_size) ? f->min_size : 0));
        }
        set(b, o, f->name, fo);
    }
    if (!o)
        b->oom = true;
    return o;
}

/* JSON has no NaN or infinity, so a peer's non-finite double is refused here (the one field-level check
 * in this file; the validator never sees such a value). elem < 0: a scalar field. */
static json_t *real_json(struct jb *b, const char *field, long elem, double v)
{
    if (isfinite(v))
        return json_real(v);
    if (!b->bad && b->err && b->errlen) {
        if (elem < 0)
            snprintf(b->err, b->errlen, "%s[%zu].%s: %g is not a finite number", b->list, b->op, field, v);
        else
            snprintf(b->err, b->errlen, "%s[%zu].%s[%ld]: %g is not a finite number", b->list, b->op, field, elem, v);
    }
    b->bad = true;
    return json_null();
}

/* One value is the JSON scalar form, several the array form (see the Op comment in the .proto). */
static json_t *doubles_json(struct jb *b, const char *field, const double *v, size_t n)
{
    if (n == 1)
        return real_json(b, field, -1, v[0]);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, real_json(b, field, (long)i, v[i])))
            b->oom = true;
    return a;
}

static json_t *ints_json(struct jb *b, const int32_t *v, size_t n)
{
    if (n == 1)
        return json_integer(v[0]);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer(v[i])))
            b->oom = true;
    return a;
}

static bool utf8_valid(const char *str);

/* A peer's string as JSON; one that is not UTF-8 is refused here, naming the op. */
static json_t *string_json(struct jb *b, const char *s)
{
    if (!utf8_valid(s ? s : "")) {
        if (!b->bad && b->err && b->errlen)
            snprintf(b->err, b->errlen, "%s[%zu]: a string that is not valid UTF-8", b->list, b->op);
        b->bad = true;
        return json_null();
    }
    return json_string(s ? s : "");
}

static json_t *op_to_json(struct jb *b, const Spillway__V1__Op *op)
{
    json_t *o = json_object();
    if (!o) {
        b->oom = true;
        return NULL;
    }
    if (op->op == SPILLWAY__V1__OP_KIND__OP_KIND_PLUGIN) {
        /* a plugin op: its name and its fields as the JSON spec writes them (the validator checks them
         * against the plugin loaded here) */
        set(b, o, "op", string_json(b, op->opt_name_case == OP_CASE(NAME) ? op->name : ""));
        json_t *params = op->opt_params_case == OP_CASE(PARAMS) && op->params &&
                                 strlen(op->params) <= SPW_OP_MAX_KWARGS_BYTES ? json_loads(op->params, 0, NULL) : NULL;
        const char *key;
        json_t *v;
        json_object_foreach(params, key, v)
            if (strcmp(key, "op") != 0)
                set(b, o, key, json_incref(v));
        json_decref(params);
        return o;
    }
    set(b, o, "op", enum_json(op_n, (int)op->op));
    if (op->n_size)
        set(b, o, "size", ints_json(b, op->size, op->n_size));
    if (op->n_kernel_size)
        set(b, o, "kernel_size", ints_json(b, op->kernel_size, op->n_kernel_size));
    if (op->n_output_shape) {           /* always a list, even of one dimension */
        json_t *a = json_array();
        for (size_t i = 0; a && i < op->n_output_shape; i++)
            if (json_array_append_new(a, json_integer(op->output_shape[i])))
                b->oom = true;
        set(b, o, "output_shape", a);
    }
#define INT_TO_JSON(f, F)                                                                                  \
    if (op->opt_##f##_case == OP_CASE(F))                                                                  \
        set(b, o, #f, json_integer(op->f));
    OP_INTS(INT_TO_JSON)
#undef INT_TO_JSON
    if (op->n_padding_sides)            /* sides that differ: over the scalar form */
        set(b, o, "padding", ints_json(b, op->padding_sides, op->n_padding_sides));
    if (op->n_min_sizes)                /* several: over the scalar form */
        set(b, o, "min_size", ints_json(b, op->min_sizes, op->n_min_sizes));
#define DOUBLE_TO_JSON(f, F)                                                                               \
    if (op->opt_##f##_case == OP_CASE(F))                                                                  \
        set(b, o, #f, real_json(b, #f, -1, op->f));
    OP_DOUBLES(DOUBLE_TO_JSON)
#undef DOUBLE_TO_JSON
#define BOOL_TO_JSON(f, F)                                                                                 \
    if (op->opt_##f##_case == OP_CASE(F))                                                                  \
        set(b, o, #f, json_boolean(op->f));
    OP_BOOLS(BOOL_TO_JSON)
#undef BOOL_TO_JSON
#define ENUM_TO_JSON(f, F, fn)                                                                             \
    if (op->opt_##f##_case == OP_CASE(F))                                                                  \
        set(b, o, #f, enum_json(fn, (int)op->f));
    OP_ENUMS(ENUM_TO_JSON)
#undef ENUM_TO_JSON
#define LIST_TO_JSON(f)                                                                                    \
    if (op->n_##f)                                                                                         \
        set(b, o, #f, doubles_json(b, #f, op->f, op->n_##f));
    OP_DOUBLE_LISTS(LIST_TO_JSON)
#undef LIST_TO_JSON
    /* value_random true is JSON "random" (both it and `value` set is refused before this); false is the
     * same as absent */
    if (op->opt_value_random_case == OP_CASE(VALUE_RANDOM) && op->value_random)
        set(b, o, "value", json_string("random"));
    else if (op->n_value)
        set(b, o, "value", doubles_json(b, "value", op->value, op->n_value));
    if (op->n_weights) {                /* random_choice's p: always a list */
        json_t *a = json_array();
        for (size_t i = 0; a && i < op->n_weights; i++)
            if (json_array_append_new(a, real_json(b, "p", (long)i, op->weights[i])))
                b->oom = true;
        set(b, o, "p", a);
    }
    if (op->n_alpha_xy)                 /* elastic_transform's alpha: a list (aug_mix's is a number) */
        set(b, o, "alpha", doubles_json(b, "alpha", op->alpha_xy, op->n_alpha_xy));
    /* user code: strings a peer sent; kwargs is an object's JSON text (anything else goes to the validator
     * as the string itself, which it refuses as not an object) */
    if (op->opt_function_case == OP_CASE(FUNCTION))
        set(b, o, "function", string_json(b, op->function));
    if (op->opt_kwargs_case == OP_CASE(KWARGS)) {
        json_t *kw = op->kwargs && strlen(op->kwargs) <= SPW_OP_MAX_KWARGS_BYTES ? json_loads(op->kwargs, 0, NULL)
                                                                                  : NULL;
        set(b, o, "kwargs", kw ? kw : string_json(b, op->kwargs));
    }
    return o;
}

/* Well-formed UTF-8, as JSON and proto3 strings require; protobuf-c does not check it on unpack. */
static bool utf8_valid(const char *str)
{
    return spw_utf8_valid((const uint8_t *)str, strlen(str));
}

/* A list of ops as the messages hold them: the pipeline's, or a view's. */
struct op_list {
    Spillway__V1__Op *const *ops;
    size_t n_ops;
};

/* The ops of a list as a JSON array (nested), or NULL (b says why). */
static json_t *op_tree_json(struct jb *b, const struct op_list *msg, size_t *i, int depth);
static json_t *ops_json(struct jb *b, const struct op_list *list)
{
    json_t *ops = json_array();
    for (size_t i = 0; ops && i < list->n_ops && !b->bad;)
        if (json_array_append_new(ops, op_tree_json(b, list, &i, 1)))
            b->oom = true;
    if (!ops)
        b->oom = true;
    return ops;
}

/* msg->ops[*i] and, for a combinator, the ops after it that are its own (Op.children, depth first), as one
 * nested JSON op; *i moves past them. depth: the op's (1 for the pipeline's own); the caps are checked here,
 * before anything is nested, so a peer's list cannot make this recurse deeper than SPW_OP_MAX_DEPTH. */
static json_t *op_tree_json(struct jb *b, const struct op_list *msg, size_t *i, int depth)
{
    const size_t at = (*i)++;           /* < n_ops: the callers see to it */
    const Spillway__V1__Op *op = msg->ops[at];
    b->op = at;
    /* a NULL element cannot come off the wire; treat a hand-built one as an empty object */
    json_t *o = op ? op_to_json(b, op) : json_object();
    if (!op || op->opt_children_case != OP_CASE(CHILDREN))
        return o;
    const size_t left = msg->n_ops - *i;
    if (op->children < 1 || op->children > SPW_OP_MAX_NESTED || (size_t)op->children > left ||
        depth >= SPW_OP_MAX_DEPTH) {
        if (!b->bad && b->err && b->errlen)
            snprintf(b->err, b->errlen, "%s[%zu].children: %d: a combinator has 1 to %d ops, nested at most %d "
                     "deep, and they must follow it (%zu do)", b->list, at, op->children, SPW_OP_MAX_NESTED,
                     SPW_OP_MAX_DEPTH, left);
        b->bad = true;
        return o;
    }
    json_t *a = json_array();
    for (int k = 0; a && k < op->children && !b->bad; k++) {
        if (*i >= msg->n_ops) {         /* its ops' own ops took the ones that were to be its */
            if (b->err && b->errlen)
                snprintf(b->err, b->errlen, "%s[%zu].children: %d, but the list ends after %d of them", b->list, at,
                         op->children, k);
            b->bad = true;
            break;
        }
        if (json_array_append_new(a, op_tree_json(b, msg, i, depth + 1)))
            b->oom = true;
    }
    set(b, o, "ops", a);
    return o;
}

static json_t *pipeline_to_json(struct jb *b, const Spillway__V1__Pipeline *msg)
{
    json_t *root = json_object();
    if (!root) {
        b->oom = true;
        return NULL;
    }
    const Spillway__V1__Source *s = msg->source;
    if (s) {
        json_t *src = json_object();
        if (s->opt_format_case == SPILLWAY__V1__SOURCE__OPT_FORMAT_FORMAT)
            set(b, src, "format", enum_json(format_n, (int)s->format));
        if (s->path && s->path[0] && !utf8_valid(s->path)) {
            if (!b->bad && b->err && b->errlen)
                snprintf(b->err, b->errlen, "source.path: not valid UTF-8");
            b->bad = true;
        } else if (s->path && s->path[0]) {
            set(b, src, "path", json_string(s->path));
        }
        if (s->opt_shuffle_case == SPILLWAY__V1__SOURCE__OPT_SHUFFLE_SHUFFLE)
            set(b, src, "shuffle", json_boolean(s->shuffle));
        if (s->opt_seed_case == SPILLWAY__V1__SOURCE__OPT_SEED_SEED)
            set(b, src, "seed", json_integer((json_int_t)s->seed)); /* > INT64_MAX refused by the caller */
        if (s->opt_epochs_case == SPILLWAY__V1__SOURCE__OPT_EPOCHS_EPOCHS)
            set(b, src, "epochs", json_integer(s->epochs));
        const char *const strs[][2] = {{"label_key", s->label_key}, {"ca_file", s->ca_file},
                                       {"header_file", s->header_file}, {"annotations", s->annotations}};
        for (size_t k = 0; k < sizeof strs / sizeof *strs; k++) {
            if (!strs[k][1] || !strs[k][1][0])
                continue;
            if (!utf8_valid(strs[k][1])) {
                if (!b->bad && b->err && b->errlen)
                    snprintf(b->err, b->errlen, "source.%s: not valid UTF-8", strs[k][0]);
                b->bad = true;
            } else {
                set(b, src, strs[k][0], json_string(strs[k][1]));
            }
        }
        if (s->opt_labels_case == SPILLWAY__V1__SOURCE__OPT_LABELS_LABELS)
            set(b, src, "labels", json_boolean(s->labels));
        if (s->n_fields)
            set(b, src, "fields", fields_json(b, s));
        set(b, root, "source", src);
    }
    /* repeated: empty and absent are the same on the wire */
    set(b, root, "ops", ops_json(b, &(struct op_list){msg->ops, msg->n_ops}));
    if (msg->n_views) {
        json_t *views = json_array();
        for (size_t v = 0; views && v < msg->n_views && !b->bad; v++) {
            const Spillway__V1__View *mv = msg->views[v];
            json_t *view = json_object();
            if (mv && mv->opt_repeat_case == SPILLWAY__V1__VIEW__OPT_REPEAT_REPEAT)
                set(b, view, "repeat", json_integer(mv->repeat));
            snprintf(b->list, sizeof b->list, "views[%zu].ops", v);
            set(b, view, "ops", ops_json(b, &(struct op_list){mv ? mv->ops : NULL, mv ? mv->n_ops : 0}));
            snprintf(b->list, sizeof b->list, "ops");
            if (!view || json_array_append_new(views, view))
                b->oom = true;
        }
        set(b, root, "views", views);
    }
    const Spillway__V1__Batch *bt = msg->batch;
    if (bt) {
        json_t *batch = json_object();
        if (bt->opt_size_case == SPILLWAY__V1__BATCH__OPT_SIZE_SIZE)
            set(b, batch, "size", json_integer(bt->size));
        if (bt->opt_drop_remainder_case == SPILLWAY__V1__BATCH__OPT_DROP_REMAINDER_DROP_REMAINDER)
            set(b, batch, "drop_remainder", json_boolean(bt->drop_remainder));
        if (bt->opt_pad_case == SPILLWAY__V1__BATCH__OPT_PAD_PAD)
            set(b, batch, "pad", json_boolean(bt->pad));
        if (bt->opt_layout_case == SPILLWAY__V1__BATCH__OPT_LAYOUT_LAYOUT)
            set(b, batch, "layout", enum_json(layout_n, (int)bt->layout));
        const Spillway__V1__Mix *m = bt->mix;
        if (m) {
            json_t *mix = json_object();
#define MIX_TO_JSON(f, F)                                                                                  \
    if (m->opt_##f##_case == SPILLWAY__V1__MIX__OPT_##F##_##F && isfinite(m->f)) {                       \
        set(b, mix, #f, json_real(m->f));                                                                  \
    } else if (m->opt_##f##_case == SPILLWAY__V1__MIX__OPT_##F##_##F) {                                  \
        if (!b->bad && b->err && b->errlen)                                                                \
            snprintf(b->err, b->errlen, "batch.mix." #f ": %g is not a finite number", m->f);             \
        b->bad = true;                                                                                     \
    }
            MIX_TO_JSON(mixup_alpha, MIXUP_ALPHA) MIX_TO_JSON(cutmix_alpha, CUTMIX_ALPHA) MIX_TO_JSON(p, P)
            MIX_TO_JSON(switch_prob, SWITCH_PROB)
#undef MIX_TO_JSON
            if (m->opt_num_classes_case == SPILLWAY__V1__MIX__OPT_NUM_CLASSES_NUM_CLASSES)
                set(b, mix, "num_classes", json_integer(m->num_classes));
            set(b, batch, "mix", mix);
        }
        set(b, root, "batch", batch);
    }
    if (msg->opt_on_error_case == SPILLWAY__V1__PIPELINE__OPT_ON_ERROR_ON_ERROR)
        set(b, root, "on_error", enum_json(on_error_n, (int)msg->on_error));
    if (msg->opt_max_pixels_case == SPILLWAY__V1__PIPELINE__OPT_MAX_PIXELS_MAX_PIXELS)
        set(b, root, "max_pixels", json_integer(msg->max_pixels));
    if (msg->opt_max_file_bytes_case == SPILLWAY__V1__PIPELINE__OPT_MAX_FILE_BYTES_MAX_FILE_BYTES)
        set(b, root, "max_file_bytes", json_integer(msg->max_file_bytes));
    if (msg->opt_max_samples_case == SPILLWAY__V1__PIPELINE__OPT_MAX_SAMPLES_MAX_SAMPLES)
        set(b, root, "max_samples", json_integer(msg->max_samples));
    return root;
}

int spw_spec_from_proto(const Spillway__V1__Pipeline *msg, struct spw_pipeline_spec **out, char *err,
                        size_t errlen)
{
    struct jb b = {false, false, 0, err, errlen, "ops"};
    if (!msg) {
        if (err && errlen)
            snprintf(err, errlen, "no pipeline message");
        return SPW_ESPEC;
    }
    /* What the JSON form cannot carry is refused here, in the validator's wording: an op count so large
     * that converting it first would cost memory for nothing, a seed above INT64_MAX, an erasing value
     * that is both "random" and numbers, and (while converting) NaN, infinity or a path that is not UTF-8. */
    if (msg->n_ops > SPW_SPEC_MAX_OPS) {
        if (err && errlen)
            snprintf(err, errlen, "ops: %zu ops, more than the cap of %d", msg->n_ops, SPW_SPEC_MAX_OPS);
        return SPW_ESPEC;
    }
    if (msg->n_views > SPW_VIEWS_MAX) {
        if (err && errlen)
            snprintf(err, errlen, "views: %zu views: give 1 to %d", msg->n_views, SPW_VIEWS_MAX);
        return SPW_ESPEC;
    }
    for (size_t v = 0; v < msg->n_views; v++)
        if (msg->views[v] && msg->views[v]->n_ops > SPW_SPEC_MAX_OPS) {
            if (err && errlen)
                snprintf(err, errlen, "views[%zu].ops: %zu ops, more than the cap of %d", v, msg->views[v]->n_ops,
                         SPW_SPEC_MAX_OPS);
            return SPW_ESPEC;
        }
    if (msg->source && msg->source->opt_seed_case == SPILLWAY__V1__SOURCE__OPT_SEED_SEED &&
        msg->source->seed > (uint64_t)INT64_MAX) {
        if (err && errlen)
            snprintf(err, errlen, "source.seed: %" PRIu64 " is outside [0, %" PRId64 "]", msg->source->seed,
                     INT64_MAX);
        return SPW_ESPEC;
    }
    for (size_t v = 0; v <= msg->n_views; v++) {        /* the ops, then each view's */
        const Spillway__V1__View *mv = v ? msg->views[v - 1] : NULL;
        Spillway__V1__Op *const *ops = v ? (mv ? mv->ops : NULL) : msg->ops;
        const size_t n = v ? (mv ? mv->n_ops : 0) : msg->n_ops;
        for (size_t i = 0; i < n; i++) {
            const Spillway__V1__Op *op = ops[i];
            if (op && op->opt_value_random_case == OP_CASE(VALUE_RANDOM) && op->value_random && op->n_value) {
                if (err && errlen && v)
                    snprintf(err, errlen, "views[%zu].ops[%zu].value: value_random and value are both set", v - 1, i);
                else if (err && errlen)
                    snprintf(err, errlen, "ops[%zu].value: value_random and value are both set", i);
                return SPW_ESPEC;
            }
        }
    }
    json_t *root = pipeline_to_json(&b, msg);
    if (b.oom || b.bad) {
        json_decref(root);
        if (b.bad)
            return SPW_ESPEC;
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = spw_spec__from_json_value(root, out, err, errlen);
    json_decref(root);
    return rc;
}

/* ---- JSON value -> proto (to_proto) --------------------------------------------------------------- */

static int value_of(name_fn fn, const json_t *v, int *out)
{
    const char *s = json_string_value(v);
    for (int i = 0; s && fn(i); i++) {
        if (strcmp(fn(i), s) == 0) {
            *out = i;
            return 0;
        }
    }
    return SPW_EINTERNAL;
}

/* A canonical array (or scalar, for the single-value forms) into a malloc'd list. */
static int doubles_from_json(const json_t *v, double **out, size_t *n)
{
    size_t k = json_is_array(v) ? json_array_size(v) : 1;
    double *d = malloc(k * sizeof(*d));
    if (!d)
        return -ENOMEM;
    for (size_t i = 0; i < k; i++) {
        const json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_number(x)) {
            free(d);
            return SPW_EINTERNAL;
        }
        d[i] = json_number_value(x);
    }
    *out = d, *n = k;
    return 0;
}

static int ints_from_json(const json_t *v, int32_t **out, size_t *n)
{
    size_t k = json_is_array(v) ? json_array_size(v) : 1;
    int32_t *d = malloc(k * sizeof(*d));
    if (!d)
        return -ENOMEM;
    for (size_t i = 0; i < k; i++) {
        const json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(x)) {
            free(d);
            return SPW_EINTERNAL;
        }
        d[i] = (int32_t)json_integer_value(x);
    }
    *out = d, *n = k;
    return 0;
}

static void op_proto_free(Spillway__V1__Op *op)
{
    if (!op)
        return;
    free(op->size);
    free(op->kernel_size);
    free(op->padding_sides);
    free(op->min_sizes);
    free(op->output_shape);
#define LIST_FREE(f) free(op->f);
    OP_DOUBLE_LISTS(LIST_FREE)
#undef LIST_FREE
    free(op->value);
    free(op->weights);
    free(op->alpha_xy);
    if (op->function != protobuf_c_empty_string)
        free(op->function);
    if (op->kwargs != protobuf_c_empty_string)
        free(op->kwargs);
    if (op->name != protobuf_c_empty_string)
        free(op->name);
    if (op->params != protobuf_c_empty_string)
        free(op->params);
    free(op);
}

/* Copy one canonical op object. Every key must map to a proto field: a key left over means spec.c grew
 * a field this file does not know (SPW_EINTERNAL), which the round-trip test catches. */
static int op_from_json(json_t *o, Spillway__V1__Op **out)
{
    Spillway__V1__Op *op = malloc(sizeof(*op));
    if (!op)
        return -ENOMEM;
    spillway__v1__op__init(op);
    size_t used = 0;
    int rc = 0, e;
    json_t *v;
    if (!(v = json_object_get(o, "op"))) {
        rc = SPW_EINTERNAL;
        goto out;
    }
    if (value_of(op_n, v, &e) != 0) {       /* not a built-in op: a plugin's ("<plugin>.<op>") */
        json_t *params = json_deep_copy(o);
        json_object_del(params, "op");
        op->op = SPILLWAY__V1__OP_KIND__OP_KIND_PLUGIN;
        op->name = strdup(json_string_value(v));
        op->params = params ? json_dumps(params, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(params);
        rc = op->name && op->params ? 0 : -ENOMEM;
        op->opt_name_case = OP_CASE(NAME);
        op->opt_params_case = OP_CASE(PARAMS);
        goto out;
    }
    op->op = (Spillway__V1__OpKind)e;
    used++;
    if ((v = json_object_get(o, "size"))) {
        if ((rc = ints_from_json(v, &op->size, &op->n_size)))
            goto out;
        used++;
    }
    if ((v = json_object_get(o, "kernel_size"))) {
        if ((rc = ints_from_json(v, &op->kernel_size, &op->n_kernel_size)))
            goto out;
        used++;
    }
    if ((v = json_object_get(o, "output_shape"))) {     /* null: not declared */
        used++;
        rc = json_is_array(v) ? ints_from_json(v, &op->output_shape, &op->n_output_shape)
             : json_is_null(v) ? 0 : SPW_EINTERNAL;
        if (rc)
            goto out;
    }
#define INT_FROM_JSON(f, F)                                                                                \
    if ((v = json_object_get(o, #f))) {                                                                    \
        used++;                                                                                            \
        if (json_is_integer(v))                                                                            \
            op->opt_##f##_case = OP_CASE(F), op->f = (int32_t)json_integer_value(v);                        \
        else if (json_is_array(v) && !strcmp(#f, "padding")) /* [left, top, right, bottom] */             \
            rc = ints_from_json(v, &op->padding_sides, &op->n_padding_sides);                              \
        else if (json_is_array(v) && !strcmp(#f, "min_size")) /* random_shortest_size's several */       \
            rc = ints_from_json(v, &op->min_sizes, &op->n_min_sizes);                                      \
        else if (!json_is_null(v)) /* null: max_size none */                                              \
            rc = SPW_EINTERNAL;                                                                            \
    }
    OP_INTS(INT_FROM_JSON)
#undef INT_FROM_JSON
#define DOUBLE_FROM_JSON(f, F)                                                                             \
    if ((v = json_object_get(o, #f))) {                                                                    \
        used++;                                                                                            \
        if (json_is_number(v))                                                                             \
            op->opt_##f##_case = OP_CASE(F), op->f = json_number_value(v);                                 \
        else if (json_is_array(v) && !strcmp(#f, "p")) /* random_choice's weights */                     \
            rc = doubles_from_json(v, &op->weights, &op->n_weights);                                       \
        else if (json_is_array(v) && !strcmp(#f, "alpha")) /* elastic_transform's [x, y] */              \
            rc = doubles_from_json(v, &op->alpha_xy, &op->n_alpha_xy);                                     \
        else if (!json_is_null(v))                                                                         \
            rc = SPW_EINTERNAL;                                                                            \
    }
    OP_DOUBLES(DOUBLE_FROM_JSON)
#undef DOUBLE_FROM_JSON
#define BOOL_FROM_JSON(f, F)                                                                               \
    if ((v = json_object_get(o, #f))) {                                                                    \
        used++;                                                                                            \
        op->opt_##f##_case = OP_CASE(F), op->f = json_is_true(v);                                          \
    }
    OP_BOOLS(BOOL_FROM_JSON)
#undef BOOL_FROM_JSON
#define ENUM_FROM_JSON(f, F, fn)                                                                           \
    if ((v = json_object_get(o, #f))) {                                                                    \
        used++;                                                                                            \
        if (value_of(fn, v, &e) == 0)                                                                      \
            op->opt_##f##_case = OP_CASE(F), op->f = e;                                                    \
        else if (!json_is_null(v))                                                                         \
            rc = SPW_EINTERNAL;                                                                            \
    }
    OP_ENUMS(ENUM_FROM_JSON)
#undef ENUM_FROM_JSON
    if (rc)
        goto out;
#define LIST_FROM_JSON(f)                                                                                  \
    if ((v = json_object_get(o, #f))) {  /* null (aug_mix's fill): absent */                             \
        used++;                                                                                            \
        if (!json_is_null(v) && (rc = doubles_from_json(v, &op->f, &op->n_##f)))                           \
            goto out;                                                                                      \
    }
    OP_DOUBLE_LISTS(LIST_FROM_JSON)
#undef LIST_FROM_JSON
    if ((v = json_object_get(o, "function"))) {
        used++;
        if (!json_is_string(v) || !(op->function = strdup(json_string_value(v)))) {
            rc = json_is_string(v) ? -ENOMEM : SPW_EINTERNAL;
            goto out;
        }
        op->opt_function_case = OP_CASE(FUNCTION);
    }
    if ((v = json_object_get(o, "kwargs"))) {
        used++;
        if (!json_is_object(v) || !(op->kwargs = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS))) {
            rc = json_is_object(v) ? -ENOMEM : SPW_EINTERNAL;
            goto out;
        }
        op->opt_kwargs_case = OP_CASE(KWARGS);
    }
    if ((v = json_object_get(o, "ops"))) {    /* its ops: counted here, made by ops_from_json after it */
        used++;
        op->opt_children_case = OP_CASE(CHILDREN);
        op->children = (int32_t)json_array_size(v);
    }
    if ((v = json_object_get(o, "value"))) {
        used++;
        if (json_is_string(v)) {
            op->opt_value_random_case = OP_CASE(VALUE_RANDOM);
            op->value_random = true;
        } else if ((rc = doubles_from_json(v, &op->value, &op->n_value))) {
            goto out;
        }
    }
    if (used != json_object_size(o))
        rc = SPW_EINTERNAL;
out:
    if (rc) {
        op_proto_free(op);
        return rc;
    }
    *out = op;
    return 0;
}

/* The ops of a canonical op list, a combinator's ops (nested in "ops") included. */
static size_t count_ops(const json_t *ops)
{
    size_t n = json_array_size(ops);
    for (size_t i = 0; i < json_array_size(ops); i++)
        n += count_ops(json_object_get(json_array_get(ops, i), "ops"));
    return n;
}

/* Append the ops of a canonical op list to *out (room for count_ops), each combinator followed by its own
 * ops, depth first (Op.children). */
static int ops_append(const json_t *ops, Spillway__V1__Op **out, size_t *n)
{
    for (size_t i = 0; i < json_array_size(ops); i++) {
        json_t *o = json_array_get(ops, i);
        int rc = op_from_json(o, &out[*n]);
        if (rc)
            return rc;
        (*n)++;
        if ((rc = ops_append(json_object_get(o, "ops"), out, n)))
            return rc;
    }
    return 0;
}

/* A canonical op list as a message's flat list into (*out, *n); 0 or -ENOMEM / SPW_EINTERNAL. */
static int ops_from_json(const json_t *ops, Spillway__V1__Op ***out, size_t *n)
{
    const size_t count = count_ops(ops);
    if (count && !(*out = calloc(count, sizeof **out)))
        return -ENOMEM;
    return ops_append(ops, *out, n);
}

/* The canonical views (absent: none) into msg->views. */
static int views_from_json(const json_t *views, Spillway__V1__Pipeline *msg)
{
    const size_t n = json_array_size(views);
    if (n && !(msg->views = calloc(n, sizeof *msg->views)))
        return -ENOMEM;
    for (size_t v = 0; v < n; v++) {
        Spillway__V1__View *mv = msg->views[v] = malloc(sizeof *mv);
        if (!mv)
            return -ENOMEM;
        spillway__v1__view__init(mv);
        msg->n_views++;
        const json_t *jv = json_array_get(views, v);
        mv->opt_repeat_case = SPILLWAY__V1__VIEW__OPT_REPEAT_REPEAT;
        mv->repeat = (int32_t)json_integer_value(json_object_get(jv, "repeat"));
        const int rc = ops_from_json(json_object_get(jv, "ops"), &mv->ops, &mv->n_ops);
        if (rc)
            return rc;
    }
    return 0;
}

/* The spec's fields into src->fields (freed by spw_spec_proto_free, also when this fails half way). */
static int fields_to_proto(const struct spw_source_spec *spec, Spillway__V1__Source *src)
{
    if (!spec->n_fields)
        return 0;
    if (!(src->fields = calloc((size_t)spec->n_fields, sizeof *src->fields)))
        return -ENOMEM;
    for (int k = 0; k < spec->n_fields; k++) {
        const struct spw_sample_field_spec *fs = &spec->fields[k];
        Spillway__V1__SourceField *f = malloc(sizeof *f);
        if (!f)
            return -ENOMEM;
        spillway__v1__source_field__init(f);
        src->fields[src->n_fields++] = f;
        f->opt_as_case = SPILLWAY__V1__SOURCE_FIELD__OPT_AS_AS;
        f->as = (Spillway__V1__FieldKind)fs->kind;
        if (fs->kind == SPW_SAMPLE_FIELD_MASK)
            f->opt_ignore_index_case = SPILLWAY__V1__SOURCE_FIELD__OPT_IGNORE_INDEX_IGNORE_INDEX,
            f->ignore_index = fs->ignore_index;
        if (fs->kind == SPW_SAMPLE_FIELD_BOXES) {
            f->opt_format_case = SPILLWAY__V1__SOURCE_FIELD__OPT_FORMAT_FORMAT;
            f->format = (Spillway__V1__BoxFormat)fs->box_format;
            f->opt_min_size_case = SPILLWAY__V1__SOURCE_FIELD__OPT_MIN_SIZE_MIN_SIZE;
            f->min_size = fs->min_size;
        }
        const char *from[] = {fs->name, fs->from, fs->key, fs->labels_key, fs->path};
        char **to[] = {&f->name, &f->from, &f->key, &f->labels_key, &f->path};
        for (size_t i = 0; i < 5; i++)
            if (from[i] && !(*to[i] = strdup(from[i]))) {
                *to[i] = (char *)protobuf_c_empty_string;
                return -ENOMEM;
            }
    }
    return 0;
}

void spw_spec_proto_free(Spillway__V1__Pipeline *msg)
{
    if (!msg)
        return;
    if (msg->source) {
        if (msg->source->path != protobuf_c_empty_string)
            free(msg->source->path);
        char *strs[] = {msg->source->label_key, msg->source->ca_file, msg->source->header_file,
                        msg->source->annotations};
        for (size_t k = 0; k < sizeof strs / sizeof *strs; k++)
            if (strs[k] != protobuf_c_empty_string)
                free(strs[k]);
        for (size_t k = 0; msg->source->fields && k < msg->source->n_fields; k++) {
            Spillway__V1__SourceField *f = msg->source->fields[k];
            char *fs[] = {f->name, f->from, f->key, f->labels_key, f->path};
            for (size_t i = 0; i < 5; i++)
                if (fs[i] != protobuf_c_empty_string)
                    free(fs[i]);
            free(f);
        }
        free(msg->source->fields);
        free(msg->source);
    }
    for (size_t i = 0; msg->ops && i < msg->n_ops; i++)
        op_proto_free(msg->ops[i]);
    free(msg->ops);
    for (size_t v = 0; msg->views && v < msg->n_views; v++) {
        for (size_t i = 0; msg->views[v]->ops && i < msg->views[v]->n_ops; i++)
            op_proto_free(msg->views[v]->ops[i]);
        free(msg->views[v]->ops);
        free(msg->views[v]);
    }
    free(msg->views);
    if (msg->batch)
        free(msg->batch->mix);
    free(msg->batch);
    free(msg);
}

int spw_spec_to_proto(const struct spw_pipeline_spec *spec, Spillway__V1__Pipeline **out)
{
    int rc = 0, e;
    json_t *root = spw_spec__to_json_value(spec), *v;
    Spillway__V1__Pipeline *msg = malloc(sizeof(*msg));
    Spillway__V1__Source *src = NULL;
    Spillway__V1__Batch *batch = NULL;
    if (!msg) {
        rc = -ENOMEM;
        goto out;
    }
    spillway__v1__pipeline__init(msg);
    /* hung on msg at once so that spw_spec_proto_free(msg) releases whatever was made */
    if ((msg->source = src = malloc(sizeof(*src))))
        spillway__v1__source__init(src);
    if ((msg->batch = batch = malloc(sizeof(*batch))))
        spillway__v1__batch__init(batch);
    if (!root || !src || !batch) {
        rc = -ENOMEM;
        goto out;
    }

    json_t *js = json_object_get(root, "source");
    if (value_of(format_n, json_object_get(js, "format"), &e)) {
        rc = SPW_EINTERNAL;
        goto out;
    }
    src->opt_format_case = SPILLWAY__V1__SOURCE__OPT_FORMAT_FORMAT, src->format = e;
    if (!(src->path = strdup(json_string_value(json_object_get(js, "path"))))) {
        src->path = (char *)protobuf_c_empty_string;
        rc = -ENOMEM;
        goto out;
    }
    src->opt_shuffle_case = SPILLWAY__V1__SOURCE__OPT_SHUFFLE_SHUFFLE;
    src->shuffle = json_is_true(json_object_get(js, "shuffle"));
    src->opt_seed_case = SPILLWAY__V1__SOURCE__OPT_SEED_SEED;
    src->seed = spec->source.seed;
    src->opt_epochs_case = SPILLWAY__V1__SOURCE__OPT_EPOCHS_EPOCHS;
    src->epochs = spec->source.epochs;
    const char *const from[] = {spec->source.label_key, spec->source.ca_file, spec->source.header_file,
                                spec->source.annotations};
    char **to[] = {&src->label_key, &src->ca_file, &src->header_file, &src->annotations};
    for (size_t k = 0; k < sizeof from / sizeof *from; k++)
        if (from[k] && !(*to[k] = strdup(from[k]))) {
            *to[k] = (char *)protobuf_c_empty_string;
            rc = -ENOMEM;
            goto out;
        }
    if (spec->source.no_labels)
        src->opt_labels_case = SPILLWAY__V1__SOURCE__OPT_LABELS_LABELS, src->labels = false;
    if ((rc = fields_to_proto(&spec->source, src)))
        goto out;

    if ((rc = ops_from_json(json_object_get(root, "ops"), &msg->ops, &msg->n_ops)) ||
        (rc = views_from_json(json_object_get(root, "views"), msg)))
        goto out;

    json_t *jbatch = json_object_get(root, "batch");
    batch->opt_size_case = SPILLWAY__V1__BATCH__OPT_SIZE_SIZE, batch->size = spec->batch.size;
    batch->opt_drop_remainder_case = SPILLWAY__V1__BATCH__OPT_DROP_REMAINDER_DROP_REMAINDER;
    batch->drop_remainder = spec->batch.drop_remainder;
    if (spw_media_is_audio(spec->source.media) || spec->batch.pad) {      /* images: only true, as the JSON */
        batch->opt_pad_case = SPILLWAY__V1__BATCH__OPT_PAD_PAD;
        batch->pad = spec->batch.pad;
    }
    if ((v = json_object_get(jbatch, "layout")) && value_of(layout_n, v, &e) == 0)
        batch->opt_layout_case = SPILLWAY__V1__BATCH__OPT_LAYOUT_LAYOUT, batch->layout = e;
    else
        rc = SPW_EINTERNAL;
    const struct spw_mix_spec *ms = &spec->batch.mix;
    if (ms->num_classes) {              /* every field set (defaults explicit), as the rest of the message */
        Spillway__V1__Mix *m = batch->mix = malloc(sizeof *m);
        if (!m) {
            rc = -ENOMEM;
            goto out;
        }
        spillway__v1__mix__init(m);
        m->opt_num_classes_case = SPILLWAY__V1__MIX__OPT_NUM_CLASSES_NUM_CLASSES, m->num_classes = ms->num_classes;
        m->opt_mixup_alpha_case = SPILLWAY__V1__MIX__OPT_MIXUP_ALPHA_MIXUP_ALPHA, m->mixup_alpha = ms->mixup_alpha;
        m->opt_cutmix_alpha_case = SPILLWAY__V1__MIX__OPT_CUTMIX_ALPHA_CUTMIX_ALPHA;
        m->cutmix_alpha = ms->cutmix_alpha;
        m->opt_p_case = SPILLWAY__V1__MIX__OPT_P_P, m->p = ms->p;
        m->opt_switch_prob_case = SPILLWAY__V1__MIX__OPT_SWITCH_PROB_SWITCH_PROB, m->switch_prob = ms->switch_prob;
    }
    if ((v = json_object_get(root, "on_error")) && value_of(on_error_n, v, &e) == 0)
        msg->opt_on_error_case = SPILLWAY__V1__PIPELINE__OPT_ON_ERROR_ON_ERROR, msg->on_error = e;
    else
        rc = SPW_EINTERNAL;
    msg->opt_max_pixels_case = SPILLWAY__V1__PIPELINE__OPT_MAX_PIXELS_MAX_PIXELS;
    msg->max_pixels = spec->max_pixels;
    msg->opt_max_file_bytes_case = SPILLWAY__V1__PIPELINE__OPT_MAX_FILE_BYTES_MAX_FILE_BYTES;
    msg->max_file_bytes = spec->max_file_bytes;
    msg->opt_max_samples_case = SPILLWAY__V1__PIPELINE__OPT_MAX_SAMPLES_MAX_SAMPLES;
    msg->max_samples = spec->max_samples;
out:
    json_decref(root);
    if (rc) {
        spw_spec_proto_free(msg);
        return rc;
    }
    *out = msg;
    return 0;
}
