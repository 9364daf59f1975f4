/* tools/spillctl/ops.c - `spillctl ops`: the op registry's schema (pipeline/op_schema.h), as a table or as
 * JSON. Single-threaded. */
#include "tools/spillctl/ops.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "pipeline/op_schema.h"

int spw_ctl_ops(int json)
{
    char *text = spw_op_schema_json();
    if (!text) {
        fprintf(stderr, "spillctl: out of memory\n");
        return 1;
    }
    if (json) {
        printf("%s\n", text);
        free(text);
        return 0;
    }
    json_t *root = json_loads(text, 0, NULL);
    free(text);
    size_t i, j;
    json_t *op, *f;
    printf("%-24s %-13s %s\n", "OP", "CLASS", "FIELDS (default; * required)");
    json_array_foreach(json_object_get(root, "ops"), i, op) {
        const bool has_fields = json_array_size(json_object_get(op, "fields")) > 0;
        printf(has_fields ? "%-24s %-13s" : "%-24s %s", json_string_value(json_object_get(op, "name")),
               json_string_value(json_object_get(op, "class")));
        json_array_foreach(json_object_get(op, "fields"), j, f) {
            const json_t *dflt = json_object_get(f, "default"), *derived = json_object_get(f, "derived");
            char *v = dflt && !derived ? json_dumps(dflt, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
            printf("%s %s%s%s", j ? "," : "", json_string_value(json_object_get(f, "name")),
                   json_is_true(json_object_get(f, "required")) ? "*" : v || derived ? "=" : "",
                   derived ? json_string_value(derived) : v ? v : "");
            free(v);
        }
        printf("\n");
    }
    json_decref(root);
    return 0;
}
