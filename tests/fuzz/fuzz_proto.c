/* tests/fuzz/fuzz_proto.c - libFuzzer target: every protobuf message the daemons unpack from a peer
 * (dispatcher requests, stream requests, profile and probe requests, journal records, health checks); the
 * first byte picks which. A CreateJob's pipeline also goes through the spec validator. Single-threaded. */
#include <stdint.h>

#include "pipeline/spec.h"
#include "pipeline/spec_proto.h"
#include "proto/health.pb-c.h"
#include "proto/spillway.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ProtobufCMessageDescriptor *const DESCS[] = {
    &spillway__v1__register_worker_request__descriptor, &spillway__v1__worker_heartbeat_request__descriptor,
    &spillway__v1__create_job_request__descriptor,      &spillway__v1__client_heartbeat_request__descriptor,
    &spillway__v1__lease_split_request__descriptor,     &spillway__v1__describe_job_request__descriptor,
    &spillway__v1__stream_request__descriptor,          &spillway__v1__profile_request__descriptor,
    &spillway__v1__journal_update__descriptor,          &grpc__health__v1__health_check_request__descriptor,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    const ProtobufCMessageDescriptor *d = DESCS[data[0] % (sizeof DESCS / sizeof DESCS[0])];
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, size - 1, data + 1);
    if (!m)
        return 0;
    if (d == &spillway__v1__create_job_request__descriptor) {
        const Spillway__V1__CreateJobRequest *r = (const Spillway__V1__CreateJobRequest *)m;
        struct spw_pipeline_spec *spec;
        char err[512];
        if (r->pipeline && spw_spec_from_proto(r->pipeline, &spec, err, sizeof err) == 0)
            spw_spec_free(spec);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
