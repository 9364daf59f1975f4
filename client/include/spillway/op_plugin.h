/* spillway/op_plugin.h - ops written in C, loaded at run time: a shared library exporting spw_op_plugin(),
 * which returns a table of ops (their fields with types, ranges and defaults, an output-shape rule and a run
 * on one element). Spillway loads the libraries SPILLWAY_OP_PLUGINS lists (files or folders of *.so) in the
 * trainer, the dispatcher and the workers; a pipeline names an op "<plugin>.<op>" with its fields, e.g.
 * {"op": "blur.box", "radius": 2}. The run gets a random stream keyed by (seed, epoch, sample, op index), so
 * its output does not depend on the thread, process or worker it runs on. Versioned: a plugin built for
 * another SPW_OP_PLUGIN_ABI is refused at load, with both numbers said. Needs nothing but the C standard
 * headers. Thread model: run and out_shape are called from many threads at once, each with its own state
 * (thread_init); the tables must be constant. */
#ifndef SPILLWAY_OP_PLUGIN_H
#define SPILLWAY_OP_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPW_OP_PLUGIN_ABI 1

/* An element's type (the values of Spillway's tensors: uint8 images, float tensors). */
enum spw_plugin_dtype { SPW_PLUGIN_U8 = 0, SPW_PLUGIN_F32 = 1, SPW_PLUGIN_F16 = 2, SPW_PLUGIN_I64 = 3 };

enum spw_plugin_field_type { SPW_PLUGIN_INT = 0, SPW_PLUGIN_NUMBER = 1, SPW_PLUGIN_BOOL = 2 };

struct spw_plugin_field {
    const char *name;                   /* [a-z_][a-z0-9_]*, unique in the op */
    enum spw_plugin_field_type type;
    double min, max;                    /* the accepted range, inclusive (ignored for BOOL) */
    double default_value;               /* when the spec leaves it out (unless required) */
    int required;                       /* 1: the spec must give it */
    const char *doc;                    /* one line, for `spillctl ops` */
};

/* One element, C-contiguous: an image is U8 [h, w, 3]; a tensor has the dtype and shape it has. */
struct spw_plugin_array {
    enum spw_plugin_dtype dtype;
    int ndim;                           /* 1 to 5 */
    int64_t shape[5];
    void *data;
};

struct spw_plugin_call {
    const double *params;               /* the op's fields, in its field order (ints and bools as doubles) */
    void *state;                        /* this thread's: what thread_init returned (NULL without one) */
    /* The element's random stream: the same draws wherever the element is made. */
    uint64_t (*random_u64)(const struct spw_plugin_call *call);
    void *host;                         /* Spillway's; leave it alone */
};

struct spw_plugin_op {
    const char *name;                   /* [a-z_][a-z0-9_]*; the spec names it "<plugin>.<name>" */
    const char *doc;                    /* one sentence */
    const struct spw_plugin_field *fields;
    int n_fields;                       /* 0 to 32 */
    /* The output's dtype, ndim and shape for this input (out->data is not set yet). Returns 0, or nonzero
     * with a message in err: the element fails under the pipeline's on_error (an input it does not take). */
    int (*out_shape)(const struct spw_plugin_call *call, const struct spw_plugin_array *in,
                     struct spw_plugin_array *out, char *err, size_t errlen);
    /* Make out (its data allocated by Spillway as out_shape said) from in. 0, or nonzero with err. */
    int (*run)(const struct spw_plugin_call *call, const struct spw_plugin_array *in,
               struct spw_plugin_array *out, char *err, size_t errlen);
    /* Optional per-thread state for this op in one pipeline (scratch buffers, tables from the params):
     * made on a thread's first element, ended when that thread ends. NULL: none. */
    void *(*thread_init)(const double *params);
    void (*thread_fini)(void *state);
};

struct spw_op_plugin {
    int abi;                            /* SPW_OP_PLUGIN_ABI when built */
    const char *name;                   /* [a-z_][a-z0-9_]*: the ops' prefix */
    const char *version;                /* the plugin's own, shown by `spillctl ops` */
    const struct spw_plugin_op *ops;
    int n_ops;
};

/* What a plugin library exports (extern "C", default visibility). */
const struct spw_op_plugin *spw_op_plugin(void);

#ifdef __cplusplus
}
#endif

#endif
