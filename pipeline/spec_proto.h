/* pipeline/spec_proto.h - the pipeline spec <-> spillway.v1.Pipeline (proto/spillway.proto).
 * Not a second validator: a received Pipeline is rewritten into the JSON form and checked by the one
 * validator in pipeline/spec.c, so JSON and proto accept exactly the same specs with the same messages.
 * Pure functions; safe from any thread. */
#ifndef SPW_PIPELINE_SPEC_PROTO_H
#define SPW_PIPELINE_SPEC_PROTO_H

#include "pipeline/spec.h"
#include "proto/spillway.pb-c.h"

/* Build a Pipeline carrying every field of a valid spec (defaults made explicit, as spw_spec_to_json).
 * On success *out owns a new message: free it with spw_spec_proto_free (not free_unpacked). Returns 0,
 * -ENOMEM, or SPW_EINTERNAL if spec is not one the parser could have produced. */
int spw_spec_to_proto(const struct spw_pipeline_spec *spec, Spillway__V1__Pipeline **out);
/* Free a message made by spw_spec_to_proto; accepts NULL. */
void spw_spec_proto_free(Spillway__V1__Pipeline *msg);
/* Validate a Pipeline from a peer with the JSON rules (absent fields take the JSON defaults) and build a
 * spec. On success *out owns it (spw_spec_free) and 0 is returned; otherwise SPW_ESPEC (or -ENOMEM) with
 * a message in err naming the field as the JSON spec does ("ops[3].magnitude: 40 is outside [0, 30]"). */
int spw_spec_from_proto(const Spillway__V1__Pipeline *msg, struct spw_pipeline_spec **out, char *err,
                        size_t errlen);

#endif
