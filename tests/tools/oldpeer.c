/* tests/tools/oldpeer.c - a worker or client the dispatcher should refuse, speaking the raw RPC: one
 * RegisterWorker or CreateJob carrying protocol VERSION (and build "oldpeer"), or (register-as) a
 * RegisterWorker of this protocol claiming worker id ID (0: a new one) with no secret (taking another
 * worker's place), from ADDRESS (default 127.0.0.1:1: a quote or newline in it is a lie too).
 * Or (spec) a CreateJob of this protocol whose pipeline lies about its own structure: KIND views (17 views),
 * repeat (a view repeated 40 times), children (a combinator claiming more ops than follow it, in a view),
 * grey (a one-channel grayscale inside a random_apply), alpha (aug_mix's alpha as a pair).
 * Prints "status=NAME msg=..." so a test can check the refusal.
 *   oldpeer HOST:PORT register|create VERSION [PIPELINE_PATH]
 *   oldpeer HOST:PORT register-as ID [ADDRESS]
 *   oldpeer HOST:PORT spec views|repeat|children|grey|alpha
 * Exit 0 when the call came back with a status, 1 on local failure, 2 on bad arguments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/methods.h"
#include "lib/rpc.h"
#include "lib/version.h"
#include "proto/spillway.pb-c.h"

int main(int argc, char **argv)
{
    const int as = argc >= 4 && !strcmp(argv[2], "register-as"), lie = argc == 4 && !strcmp(argv[2], "spec");
    if (argc < 4 || argc > 5 || (strcmp(argv[2], "register") && strcmp(argv[2], "create") && !as && !lie) ||
        (lie && strcmp(argv[3], "views") && strcmp(argv[3], "repeat") && strcmp(argv[3], "children") &&
         strcmp(argv[3], "grey") && strcmp(argv[3], "alpha"))) {
        fprintf(stderr, "usage: oldpeer HOST:PORT register|create VERSION [PIPELINE_PATH] | register-as ID [ADDRESS]"
                        " | spec views|repeat|children|grey|alpha\n");
        return 2;
    }
    spw_rpc_init();
    struct spw_rpc_channel *ch;
    if (spw_rpc_channel_create(argv[1], NULL, &ch) != 0)
        return 1;
    const uint32_t version = lie ? SPW_PROTOCOL_VERSION : (uint32_t)strtoul(argv[3], NULL, 10);
    Spillway__V1__RegisterWorkerRequest reg = SPILLWAY__V1__REGISTER_WORKER_REQUEST__INIT;
    reg.address = as && argc > 4 ? argv[4] : "127.0.0.1:1";
    reg.threads = 1;
    reg.protocol_version = as ? SPW_PROTOCOL_VERSION : version;
    reg.worker_id = as ? version : 0;
    reg.build = "oldpeer";
    Spillway__V1__Source src = SPILLWAY__V1__SOURCE__INIT;
    src.opt_format_case = SPILLWAY__V1__SOURCE__OPT_FORMAT_FORMAT;
    src.format = SPILLWAY__V1__SOURCE_FORMAT__SOURCE_FORMAT_IMAGE_FOLDER;
    src.path = argc > 4 ? argv[4] : "/nonexistent";
    Spillway__V1__Op decode = SPILLWAY__V1__OP__INIT, *ops[1] = {&decode};
    decode.op = SPILLWAY__V1__OP_KIND__OP_KIND_DECODE_JPEG;
    Spillway__V1__Batch batch = SPILLWAY__V1__BATCH__INIT;
    batch.opt_size_case = SPILLWAY__V1__BATCH__OPT_SIZE_SIZE;
    batch.size = 1;
    Spillway__V1__Pipeline pipe = SPILLWAY__V1__PIPELINE__INIT;
    pipe.source = &src;
    pipe.n_ops = 1;
    pipe.ops = ops;
    pipe.batch = &batch;
    /* the lies: views of one op each (center_crop), or a random_apply claiming 9 ops with 1 after it */
    Spillway__V1__Op crop = SPILLWAY__V1__OP__INIT, apply = SPILLWAY__V1__OP__INIT;
    crop.op = SPILLWAY__V1__OP_KIND__OP_KIND_CENTER_CROP;
    int32_t size[1] = {8};
    crop.n_size = 1, crop.size = size;
    apply.op = SPILLWAY__V1__OP_KIND__OP_KIND_RANDOM_APPLY;
    apply.opt_children_case = SPILLWAY__V1__OP__OPT_CHILDREN_CHILDREN, apply.children = 9;
    Spillway__V1__Op *crop_ops[1] = {&crop}, *lying_ops[2] = {&apply, &crop};
    /* grey: a one-channel grayscale inside a random_apply; alpha: aug_mix's alpha as a pair (elastic's form) */
    Spillway__V1__Op grey_apply = SPILLWAY__V1__OP__INIT, grey = SPILLWAY__V1__OP__INIT, mix = SPILLWAY__V1__OP__INIT;
    grey_apply.op = SPILLWAY__V1__OP_KIND__OP_KIND_RANDOM_APPLY;
    grey_apply.opt_children_case = SPILLWAY__V1__OP__OPT_CHILDREN_CHILDREN, grey_apply.children = 1;
    grey.op = SPILLWAY__V1__OP_KIND__OP_KIND_GRAYSCALE;
    grey.opt_num_output_channels_case = SPILLWAY__V1__OP__OPT_NUM_OUTPUT_CHANNELS_NUM_OUTPUT_CHANNELS;
    grey.num_output_channels = 1;
    double pair[2] = {1, 2};
    mix.op = SPILLWAY__V1__OP_KIND__OP_KIND_AUG_MIX;
    mix.n_alpha_xy = 2, mix.alpha_xy = pair;
    Spillway__V1__Op *grey_ops[3] = {&decode, &grey_apply, &grey}, *mix_ops[2] = {&decode, &mix};
    Spillway__V1__View views[17], *view_ptrs[17];
    for (int v = 0; v < 17; v++) {
        spillway__v1__view__init(&views[v]);
        views[v].n_ops = 1, views[v].ops = crop_ops;
        view_ptrs[v] = &views[v];
    }
    if (lie && (!strcmp(argv[3], "grey") || !strcmp(argv[3], "alpha"))) {
        const int g = !strcmp(argv[3], "grey");
        pipe.n_ops = g ? 3 : 2, pipe.ops = g ? grey_ops : mix_ops;
    } else if (lie) {
        const char *kind = argv[3];
        pipe.views = view_ptrs;
        pipe.n_views = !strcmp(kind, "views") ? 17 : 1;
        if (!strcmp(kind, "repeat"))
            views[0].opt_repeat_case = SPILLWAY__V1__VIEW__OPT_REPEAT_REPEAT, views[0].repeat = 40;
        if (!strcmp(kind, "children"))
            views[0].n_ops = 2, views[0].ops = lying_ops;
    }
    Spillway__V1__CreateJobRequest cj = SPILLWAY__V1__CREATE_JOB_REQUEST__INIT;
    cj.pipeline = &pipe;
    cj.cut = -1;
    cj.incarnation = 1;
    cj.protocol_version = version;
    cj.build = "oldpeer";
    const int create = !strcmp(argv[2], "create") || lie;
    uint8_t *resp = NULL;
    size_t len = 0;
    char msg[512] = "";
    int st = spw_rpc_call_msg(ch, create ? SPW_PATH(CREATE_JOB) : SPW_PATH(REGISTER_WORKER),
                              create ? &cj.base : &reg.base, 10000, &resp, &len, msg, sizeof msg);
    printf("status=%s msg=%s\n", spw_rpc_status_name(st), msg);
    free(resp);
    spw_rpc_channel_destroy(ch);
    spw_rpc_shutdown();
    return 0;
}
