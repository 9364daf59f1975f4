/* pipeline/plugin_ops.h - ops from C plugins (spillway/op_plugin.h): the libraries SPILLWAY_OP_PLUGINS lists
 * (':'-separated files, or folders whose *.so are all loaded) are loaded once per process, checked (ABI,
 * names, fields) and kept for its life; a spec names their ops "<plugin>.<op>". Thread model: loading runs
 * once (pthread_once) before any lookup; the loaded table is constant after; a run keeps each op's
 * per-thread state in a thread-local list that the thread's exit ends. */
#ifndef SPW_PIPELINE_PLUGIN_OPS_H
#define SPW_PIPELINE_PLUGIN_OPS_H

#include "pipeline/op_registry.h"
#include "spillway/op_plugin.h"

#define SPW_PLUGIN_MAX_FIELDS 32

/* A loaded op: its plugin, its table entry and its spec name. */
struct spw_plugin_op_ref {
    const struct spw_op_plugin *plugin;
    const struct spw_plugin_op *op;
    char name[130];                     /* "<plugin>.<op>" */
    char path[256];                     /* the library it came from */
};

/* A daemon's --op-plugins flag (its config table's entry; lib/config.h) and its loading: the list becomes
 * SPILLWAY_OP_PLUGINS and is loaded now, each library logged. Call from main before any thread. */
#define SPW_CFG_OP_PLUGINS_ENTRY                                                                               \
    {"op-plugins", "SPILLWAY_OP_PLUGINS", SPW_CFG_STRING, "", 0, 0,                                          \
     "C op plugins to load (':'-separated .so files or folders of them; spillway/op_plugin.h): the ops jobs "  \
     "name as \"<plugin>.<op>\"", 0, 0, 0, 0}
void spw_plugins_load(const char *list);

/* The loaded op called name ("blur.box"), loading the plugins first if no call has yet; NULL if none is. */
const struct spw_plugin_op_ref *spw_plugin_find(const char *name);
/* The loaded ops, in load order (i from 0 to spw_plugin_count() - 1). */
int spw_plugin_count(void);
const struct spw_plugin_op_ref *spw_plugin_at(int i);
/* What could not be loaded, one "path: reason" per line ("" when everything loaded). */
const char *spw_plugin_load_errors(void);

/* The plugin op's run (the registry row's cpu): out_shape, then run into a new value (an image when uint8
 * [h, w, 3], else a tensor). 0, or SPW_EUSER with the plugin's message, or -ENOMEM. */
int spw_plugin_op_run(struct spw_op_call *call, struct spw_value *v);

#endif
