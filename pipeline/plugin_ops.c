/* pipeline/plugin_ops.c - C plugin ops (see plugin_ops.h): loading and checking the libraries, and running
 * one op on one element with its per-thread state. Thread model: the table is filled once under
 * pthread_once and only read after; per-thread states live in a thread-local list ended by a key destructor
 * when the thread exits. */
#include "pipeline/plugin_ops.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/err.h"
#include "lib/log.h"
#include "pipeline/value.h"

_Static_assert((int)SPW_PLUGIN_U8 == (int)SPW_DTYPE_U8 && (int)SPW_PLUGIN_F32 == (int)SPW_DTYPE_F32 &&
                   (int)SPW_PLUGIN_F16 == (int)SPW_DTYPE_F16 && (int)SPW_PLUGIN_I64 == (int)SPW_DTYPE_I64,
               "the plugin dtypes are Spillway's");

#define MAX_REFS 1024
#define MAX_OUT_BYTES ((int64_t)1 << 30)

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct spw_plugin_op_ref *refs;
static int n_refs;
static char load_errors[4096];

static void load_error(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void load_error(const char *path, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const size_t o = strlen(load_errors);
    snprintf(load_errors + o, sizeof load_errors - o, "%s: %s\n", path, msg);
    spw_log(SPW_LOG_ERROR, "plugins", "cannot load op plugin path=\"%s\" err=\"%s\"", path, msg);
}

/* [a-z_][a-z0-9_]{0,62} */
static bool valid_name(const char *s)
{
    if (!s || !*s || strlen(s) > 63 || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

/* Why the op's table entry cannot be used, or NULL. */
static const char *bad_op(const struct spw_plugin_op *op, char *why, size_t len)
{
    if (!valid_name(op->name))
        return "an op name that is not [a-z_][a-z0-9_]* (at most 63 characters)";
    if (!op->run || !op->out_shape)
        return snprintf(why, len, "op %s has no run or no out_shape", op->name), why;
    if (op->n_fields < 0 || op->n_fields > SPW_PLUGIN_MAX_FIELDS || (op->n_fields && !op->fields))
        return snprintf(why, len, "op %s: %d fields (0 to %d)", op->name, op->n_fields, SPW_PLUGIN_MAX_FIELDS), why;
    if (!op->thread_init != !op->thread_fini)
        return snprintf(why, len, "op %s: thread_init and thread_fini come together", op->name), why;
    for (int i = 0; i < op->n_fields; i++) {
        const struct spw_plugin_field *f = &op->fields[i];
        if (!valid_name(f->name) || !strcmp(f->name, "op"))
            return snprintf(why, len, "op %s: field %d has no usable name", op->name, i), why;
        for (int k = 0; k < i; k++)
            if (!strcmp(op->fields[k].name, f->name))
                return snprintf(why, len, "op %s: field %s twice", op->name, f->name), why;
        if (f->type != SPW_PLUGIN_INT && f->type != SPW_PLUGIN_NUMBER && f->type != SPW_PLUGIN_BOOL)
            return snprintf(why, len, "op %s: field %s has an unknown type", op->name, f->name), why;
        const bool ranged = f->type != SPW_PLUGIN_BOOL;
        if (ranged && !(f->min <= f->max))
            return snprintf(why, len, "op %s: field %s: min above max", op->name, f->name), why;
        if (!f->required && ranged && !(f->default_value >= f->min && f->default_value <= f->max))
            return snprintf(why, len, "op %s: field %s: its default is outside its range", op->name, f->name), why;
        if (!f->required && f->type == SPW_PLUGIN_INT && f->default_value != floor(f->default_value))
            return snprintf(why, len, "op %s: field %s: an integer with a fractional default", op->name, f->name),
                   why;
    }
    return NULL;
}

static void load_library(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        load_error(path, "%s", dlerror());
        return;
    }
    const struct spw_op_plugin *(*entry)(void) =
        (const struct spw_op_plugin *(*)(void))dlsym(h, "spw_op_plugin");
    const struct spw_op_plugin *p = entry ? entry() : NULL;
    char why[400];
    const char *bad = !entry              ? "exports no spw_op_plugin()"
                      : !p                ? "spw_op_plugin() returned NULL"
                      : p->abi != SPW_OP_PLUGIN_ABI ? (snprintf(why, sizeof why, "built for op plugin ABI %d; this "
                                                                "Spillway loads ABI %d: rebuild it against its "
                                                                "spillway/op_plugin.h", p->abi, SPW_OP_PLUGIN_ABI),
                                                       why)
                      : !valid_name(p->name) ? "a plugin name that is not [a-z_][a-z0-9_]* (at most 63 characters)"
                      : p->n_ops < 1 || p->n_ops > 256 || !p->ops ? "no ops (1 to 256)"
                                                                  : NULL;
    for (int k = 0; !bad && k < n_refs; k++)
        if (!strcmp(refs[k].plugin->name, p->name))
            bad = (snprintf(why, sizeof why, "a plugin named %s is loaded already, from %.200s", p->name, refs[k].path),
                   why);
    for (int i = 0; !bad && i < p->n_ops; i++) {
        bad = bad_op(&p->ops[i], why, sizeof why);
        for (int k = 0; !bad && k < i; k++)
            if (!strcmp(p->ops[k].name, p->ops[i].name))
                bad = (snprintf(why, sizeof why, "op %s twice", p->ops[i].name), why);
    }
    if (!bad && n_refs + p->n_ops > MAX_REFS)
        bad = "more plugin ops than 1024 in all";
    struct spw_plugin_op_ref *more = bad ? NULL : realloc(refs, sizeof *refs * (size_t)(n_refs + p->n_ops));
    if (!bad && !more)
        bad = "out of memory";
    if (bad) {
        load_error(path, "%s", bad);
        dlclose(h);
        return;
    }
    refs = more;
    for (int i = 0; i < p->n_ops; i++) {
        struct spw_plugin_op_ref *r = &refs[n_refs++];
        r->plugin = p;
        r->op = &p->ops[i];
        snprintf(r->name, sizeof r->name, "%s.%s", p->name, p->ops[i].name);
        snprintf(r->path, sizeof r->path, "%s", path);
    }
    spw_log(SPW_LOG_INFO, "plugins", "loaded op plugin name=%s version=\"%s\" ops=%d path=\"%s\"", p->name,
            p->version ? p->version : "", p->n_ops, path);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.so of dir, in name order. */
static void load_folder(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        load_error(dir, "%s", strerror(errno));
        return;
    }
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        const size_t len = strlen(e->d_name);
        if (len > 3 && !strcmp(e->d_name + len - 3, ".so"))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    for (int i = 0; i < n; i++) {
        char path[4200];
        if (names[i]) {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            load_library(path);
        }
        free(names[i]);
    }
}

static void load_all(void)
{
    const char *list = getenv("SPILLWAY_OP_PLUGINS");
    char *copy = list && *list ? strdup(list) : NULL, *save = NULL;
    for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save)) {
        struct stat st;
        if (stat(p, &st) != 0)
            load_error(p, "%s", strerror(errno));
        else if (S_ISDIR(st.st_mode))
            load_folder(p);
        else
            load_library(p);
    }
    free(copy);
}

const struct spw_plugin_op_ref *spw_plugin_find(const char *name)
{
    pthread_once(&load_once, load_all);
    for (int i = 0; name && i < n_refs; i++)
        if (!strcmp(refs[i].name, name))
            return &refs[i];
    return NULL;
}

void spw_plugins_load(const char *list)
{
    setenv("SPILLWAY_OP_PLUGINS", list ? list : "", 1);
    pthread_once(&load_once, load_all);
}

int spw_plugin_count(void)
{
    pthread_once(&load_once, load_all);
    return n_refs;
}

const struct spw_plugin_op_ref *spw_plugin_at(int i)
{
    pthread_once(&load_once, load_all);
    return i >= 0 && i < n_refs ? &refs[i] : NULL;
}

const char *spw_plugin_load_errors(void)
{
    pthread_once(&load_once, load_all);
    return load_errors;
}

/* ---- running ---------------------------------------------------------------------------------------- */

/* One op's state on this thread, for one set of params (a spec freed and another made at the same address
 * with other values does not get the old state). */
struct thread_state {
    const struct spw_plugin_op *op;
    double params[SPW_PLUGIN_MAX_FIELDS];
    void *state;
    struct thread_state *next;
};

static pthread_key_t state_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Thread_local struct thread_state *tl_states;

static void end_states(void *p)
{
    for (struct thread_state *s = p, *next; s; s = next) {
        next = s->next;
        s->op->thread_fini(s->state);
        free(s);
    }
}

static void make_key(void)
{
    pthread_key_create(&state_key, end_states);
}

/* This thread's state for op with params (made on first use); *state NULL when the op keeps none. */
static int thread_state(const struct spw_plugin_op *op, const double *params, void **state)
{
    *state = NULL;
    if (!op->thread_init)
        return 0;
    const size_t n = (size_t)op->n_fields * sizeof(double);
    for (struct thread_state *s = tl_states; s; s = s->next)
        if (s->op == op && !memcmp(s->params, params, n))
            return *state = s->state, 0;
    struct thread_state *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    pthread_once(&key_once, make_key);
    s->op = op;
    memcpy(s->params, params, n);
    s->state = op->thread_init(params);
    s->next = tl_states;
    tl_states = s;
    pthread_setspecific(state_key, tl_states);
    *state = s->state;
    return 0;
}

static uint64_t random_u64(const struct spw_plugin_call *call)
{
    return spw_rng_u64((struct spw_rng *)call->host);
}

int spw_plugin_op_run(struct spw_op_call *call, struct spw_value *v)
{
    const struct spw_op_spec *op = call->op;
    const struct spw_plugin_op_ref *ref = op->plugin;
    struct spw_rng rng = call->rng;
    struct spw_plugin_call pc = {.params = op->params, .random_u64 = random_u64, .host = &rng};
    char msg[256] = "";
    if (thread_state(ref->op, op->params, &pc.state) != 0)
        return spw_fail(call->err, call->errlen, -ENOMEM, "ops[%d] %s: out of memory", call->index, ref->name);
    struct spw_plugin_array in = {0}, out = {0};
    enum spw_dtype dt;
    spw_value_out_shape(v, SPW_LAYOUT_HWC, &dt, &in.ndim, in.shape);
    in.dtype = (enum spw_plugin_dtype)dt;
    in.data = v->is_tensor ? v->t.data : v->img.data;
    uint8_t *packed = NULL;
    if (!v->is_tensor && v->img.stride != (size_t)v->img.w * (size_t)v->img.c) {     /* padded rows: packed */
        if (!(packed = malloc(spw_value_bytes(v))))
            return spw_fail(call->err, call->errlen, -ENOMEM, "ops[%d] %s: out of memory", call->index, ref->name);
        spw_value_copy_out(v, SPW_LAYOUT_HWC, packed);
        in.data = packed;
    }
    int rc = ref->op->out_shape(&pc, &in, &out, msg, sizeof msg);
    int64_t numel = 1;
    bool shape_ok = rc == 0 && out.ndim >= 1 && out.ndim <= 5 && (unsigned)out.dtype <= SPW_PLUGIN_I64;
    for (int i = 0; shape_ok && i < out.ndim; i++) {
        shape_ok = out.shape[i] >= 0 && out.shape[i] <= MAX_OUT_BYTES;
        numel *= shape_ok ? out.shape[i] : 1;
        shape_ok = shape_ok && numel <= MAX_OUT_BYTES;
    }
    if (rc != 0 || !shape_ok) {
        free(packed);
        return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] %s: %s", call->index, ref->name,
                        rc ? (*msg ? msg : "out_shape refused the element")
                           : "out_shape gave no usable dtype and shape (1 to 5 dimensions, at most 1 GiB)");
    }
    struct spw_value nv;
    if (spw_value_alloc_array(&nv, (enum spw_dtype)out.dtype, out.ndim, out.shape, &out.data) != 0) {
        free(packed);
        return spw_fail(call->err, call->errlen, -ENOMEM, "ops[%d] %s: no memory for its output", call->index,
                        ref->name);
    }
    nv.sample_rate = v->sample_rate;
    rc = ref->op->run(&pc, &in, &out, msg, sizeof msg);
    free(packed);
    if (rc != 0) {
        spw_value_free(&nv);
        return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] %s: %s", call->index, ref->name,
                        *msg ? msg : "failed");
    }
    spw_value_free(v);
    *v = nv;
    return 0;
}
