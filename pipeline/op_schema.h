/* pipeline/op_schema.h - the op registry as a JSON document, for everything outside C that lists ops:
 * `spillctl ops`, the Python Pipeline's methods (their signatures, defaults and docstrings) and the test that
 * holds docs/pipeline.md to the registry. Pure; any thread. */
#ifndef SPW_PIPELINE_OP_SCHEMA_H
#define SPW_PIPELINE_OP_SCHEMA_H

#include "pipeline/op_registry.h"

/* Version of the document's layout; bumped when a key changes meaning. */
#define SPW_OP_SCHEMA_VERSION 1

/* {"schema": 1, "ops": [{"name", "class", "doc", "args": [positional field names], "fields": [{"name",
 * "type" (as docs/pipeline.md writes it), "choices" (enum fields: the names, null for JSON null),
 * "required", "default" (the canonical JSON value; absent when required), "derived" (a default made from
 * other fields, "n_fft / 4"), "min", "max", "min_exclusive"}]}], "plugin_errors": ["path: reason"]}, the
 * built-in ops in the registry's order, then the loaded plugins' (with "plugin", "version" and "path"; their
 * fields have "doc" too). A malloc'd string (free it), or NULL on ENOMEM. */
char *spw_op_schema_json(void);
/* The class's name ("image", "tensor", "wave", ...); NULL if out of range. */
const char *spw_op_class_name(enum spw_op_class cls);

#endif
