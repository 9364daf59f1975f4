/* lib/rpc_client.c - channels, blocking unary calls and client streams over the gRPC C core.
 * Not a retry layer: gRPC's retries are off (callers retry with knowledge of idempotence), and failures
 * come back as statuses. Threads: a channel is shared by any threads; each call and each stream gets its own
 * pluck queue, so a blocking caller drives its own I/O and needs no helper thread. */
#include "lib/rpc_internal.h"

#include <protobuf-c/protobuf-c.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/status.h>
#include <grpc/support/alloc.h>

struct reg_method {
    char *name;    /* must live as long as the channel: gRPC keeps the pointer */
    void *handle;  /* grpc_channel_register_call */
};

struct spw_rpc_channel {
    grpc_channel *ch;
    char *auth;    /* "Bearer <token>" or NULL */
    size_t max_msg;
    pthread_mutex_t mu;  /* guards reg */
    struct reg_method reg[SPW_RPC_MAX_METHODS];
    int nreg;
    bool tls;                   /* speaks TLS */
};

static const struct spw_rpc_tls *default_tls;

void spw_rpc_set_channel_tls(const struct spw_rpc_tls *t)
{
    default_tls = t;
}

const struct spw_rpc_tls *spw_rpc_channel_tls_default(void)
{
    return default_tls;
}

int spw_rpc_channel_create(const char *target, const struct spw_rpc_channel_opts *o, struct spw_rpc_channel **out)
{
    struct spw_rpc_channel *c;
    if (!target || !*target || !out || (o && o->max_message_bytes > INT_MAX))
        return -EINVAL;
    if (!(c = calloc(1, sizeof *c)))
        return -ENOMEM;
    c->max_msg = o && o->max_message_bytes ? o->max_message_bytes : SPW_RPC_DEFAULT_MAX_MESSAGE;
    bool oom;
    c->auth = spw_rpc__bearer(o ? o->auth_token : NULL, &oom);
    if (oom) {
        free(c);
        return -ENOMEM;
    }
    pthread_mutex_init(&c->mu, NULL);
    spw_rpc__ref();

    grpc_arg args[6];
    memset(args, 0, sizeof args);
    for (int i = 0; i < 6; i++)
        args[i].type = GRPC_ARG_INTEGER;
    args[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = (int)c->max_msg;
    args[1].key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    args[1].value.integer = (int)c->max_msg;
    /* Retries would buffer (and keep references to) sent messages until the call commits, which zero-copy
     * sends must not wait on; callers retry themselves. */
    args[2].key = GRPC_ARG_ENABLE_RETRIES;
    args[2].value.integer = 0;
    /* A restarted dispatcher should be found within seconds, not gRPC's default 120 s backoff ceiling. */
    args[3].key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS;
    args[3].value.integer = 2000;
    args[5].key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS;       /* tries at ~0.25, 0.65, 1.3, 2.3 s... */
    args[5].value.integer = 250;
    /* Channels to one target with the same settings share connections (gRPC's global subchannel pool) unless
     * each keeps its own. */
    args[4].key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
    args[4].value.integer = o && o->private_connection;
    grpc_channel_args chargs = {6, args};
    grpc_channel_credentials *creds;
    const struct spw_rpc_tls *tls = o && o->tls ? o->tls : default_tls;
    c->tls = tls != NULL;
    if (tls) {
        grpc_ssl_pem_key_cert_pair pair = {tls->key_pem, tls->cert_pem};
        creds = grpc_ssl_credentials_create(tls->ca_pem, tls->cert_pem ? &pair : NULL, NULL, NULL);
    } else {
        creds = grpc_insecure_credentials_create();
    }
    c->ch = grpc_channel_create(target, creds, &chargs);
    grpc_channel_credentials_release(creds);
    *out = c;
    return 0;
}

bool spw_rpc_channel_tls(const struct spw_rpc_channel *c)
{
    return c->tls;
}

bool spw_rpc_channel_wait_ready(struct spw_rpc_channel *c, int timeout_ms)
{
    const gpr_timespec deadline = spw_rpc__deadline(timeout_ms);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_connectivity_state st;
    /* Each watch polls this queue, which moves the channel's connection attempt along meanwhile. */
    while ((st = grpc_channel_check_connectivity_state(c->ch, 1)) != GRPC_CHANNEL_READY &&
           gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), deadline) < 0) {
        grpc_channel_watch_connectivity_state(c->ch, st, deadline, cq, NULL);
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type != GRPC_OP_COMPLETE || !ev.success)
            break;          /* the deadline passed with no change */
    }
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type != GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
    return st == GRPC_CHANNEL_READY;
}

void spw_rpc_channel_destroy(struct spw_rpc_channel *c)
{
    if (!c)
        return;
    grpc_channel_destroy(c->ch);
    for (int i = 0; i < c->nreg; i++)
        free(c->reg[i].name);
    pthread_mutex_destroy(&c->mu);
    free(c->auth);
    free(c);
    spw_rpc__unref();
}

/* Registered calls skip a per-call method lookup; past SPW_RPC_MAX_METHODS names, plain calls. */
static grpc_call *create_call(struct spw_rpc_channel *c, const char *method, grpc_completion_queue *cq,
                              gpr_timespec deadline)
{
    void *handle = NULL;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->nreg && !handle; i++)
        if (strcmp(c->reg[i].name, method) == 0)
            handle = c->reg[i].handle;
    if (!handle && c->nreg < SPW_RPC_MAX_METHODS) {
        char *name = strdup(method);
        if (name) {
            handle = grpc_channel_register_call(c->ch, name, NULL, NULL);
            c->reg[c->nreg].name = name;
            c->reg[c->nreg++].handle = handle;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (handle)
        return grpc_channel_create_registered_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, handle, deadline,
                                                   NULL);
    grpc_slice m = grpc_slice_from_copied_string(method);
    grpc_call *call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL, deadline, NULL);
    grpc_slice_unref(m);
    return call;
}

/* The authorization entry for SEND_INITIAL_METADATA; count 0 without a token. */
static size_t auth_metadata(const struct spw_rpc_channel *c, grpc_metadata *md)
{
    memset(md, 0, sizeof *md);
    if (!c->auth)
        return 0;
    md->key = grpc_slice_from_static_string("authorization");
    md->value = grpc_slice_from_static_string(c->auth);
    return 1;
}

static void status_to_msg(grpc_slice details, const char *error_string, char *msg, size_t msglen)
{
    if (GRPC_SLICE_LENGTH(details) > 0 || !error_string)
        spw_rpc__slice_to_msg(details, msg, msglen);
    else if (msg && msglen)
        snprintf(msg, msglen, "%s", error_string);
}

int spw_rpc_call(struct spw_rpc_channel *c, const char *method, const uint8_t *req, size_t len, int timeout_ms,
                 uint8_t **resp, size_t *resp_len, char *msg, size_t msglen)
{
    grpc_completion_queue *cq;
    grpc_call *call;
    grpc_byte_buffer *send_bb, *recv_bb = NULL;
    grpc_metadata auth;
    grpc_metadata_array rimd, trailing;
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    const char *error_string = NULL;
    grpc_op ops[6];
    char tag;
    int ret;

    if (msg && msglen)
        msg[0] = '\0';
    if (!c || !method || method[0] != '/' || (!req && len) || !resp || !resp_len)
        return -EINVAL;
    if (len > c->max_msg) {
        if (msg)
            snprintf(msg, msglen, "%s: request of %zu bytes exceeds the channel's cap of %zu", method, len,
                     c->max_msg);
        return SPW_RPC_RESOURCE_EXHAUSTED;
    }
    cq = grpc_completion_queue_create_for_pluck(NULL);
    if (!(call = create_call(c, method, cq, spw_rpc__deadline(timeout_ms)))) {
        grpc_completion_queue_destroy(cq);
        return -ENOMEM;
    }
    /* A copy: the caller's buffer is const and small requests dominate; replies are not copied twice. */
    grpc_slice body = grpc_slice_from_copied_buffer((const char *)req, len);
    send_bb = grpc_raw_byte_buffer_create(&body, 1);
    grpc_slice_unref(body);
    grpc_metadata_array_init(&rimd);
    grpc_metadata_array_init(&trailing);

    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = auth_metadata(c, &auth);
    ops[0].data.send_initial_metadata.metadata = &auth;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send_bb;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &rimd;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &recv_bb;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    ops[5].data.recv_status_on_client.error_string = &error_string;
    if (grpc_call_start_batch(call, ops, 6, &tag, NULL) != GRPC_CALL_OK) {
        ret = -EIO;
        goto out;
    }
    spw_rpc__pluck(cq, &tag);  /* RECV_STATUS_ON_CLIENT always completes by the deadline */
    ret = (int)status;
    status_to_msg(details, error_string, msg, msglen);
    if (ret == SPW_RPC_OK) {
        if (!recv_bb) {
            ret = SPW_RPC_INTERNAL;
            if (msg)
                snprintf(msg, msglen, "%s: OK status without a reply message", method);
        } else if (spw_rpc__bb_flatten(recv_bb, resp, resp_len) < 0) {
            ret = -ENOMEM;
        }
    }
out:
    if (recv_bb)
        grpc_byte_buffer_destroy(recv_bb);
    grpc_byte_buffer_destroy(send_bb);
    grpc_metadata_array_destroy(&rimd);
    grpc_metadata_array_destroy(&trailing);
    grpc_slice_unref(details);
    gpr_free((void *)error_string);
    grpc_call_unref(call);
    grpc_completion_queue_destroy(cq);
    return ret;
}

int spw_rpc_stream_open(struct spw_rpc_channel *c, const char *method, int timeout_ms, struct spw_rpc_stream **out)
{
    struct spw_rpc_stream *st;
    grpc_metadata auth;
    grpc_op op;

    if (!c || !method || method[0] != '/' || !out)
        return -EINVAL;
    if (!(st = calloc(1, sizeof *st)))
        return -ENOMEM;
    spw_rpc__stream_init(st, 1, c->max_msg);
    st->cq = grpc_completion_queue_create_for_pluck(NULL);
    if (!(st->call = create_call(c, method, st->cq, spw_rpc__deadline(timeout_ms)))) {
        grpc_completion_queue_destroy(st->cq);
        grpc_metadata_array_destroy(&st->rimd);
        free(st);
        return -ENOMEM;
    }
    /* Headers go out now (not with the first message) so that a receive-only stream reaches the server. */
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    op.data.send_initial_metadata.count = auth_metadata(c, &auth);
    op.data.send_initial_metadata.metadata = &auth;
    if (grpc_call_start_batch(st->call, &op, 1, &st->tag_imd, NULL) != GRPC_CALL_OK) {
        grpc_call_unref(st->call);
        grpc_completion_queue_destroy(st->cq);
        grpc_metadata_array_destroy(&st->rimd);
        free(st);
        return -EIO;
    }
    st->imd_pending = 1;
    *out = st;
    return 0;
}

int spw_rpc_stream_finish(struct spw_rpc_stream *st, char *msg, size_t msglen)
{
    grpc_metadata_array trailing;
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    const char *error_string = NULL;
    grpc_op op;
    int ret;

    if (msg && msglen)
        msg[0] = '\0';
    if (!st || !st->client)
        return -EINVAL;
    /* The status arrives only after every message has been read. */
    for (;;) {
        uint8_t *m;
        size_t n;
        int r = spw_rpc_stream_recv(st, 0, &m, &n);
        if (r == 1)
            free(m);
        else if (r != -ETIMEDOUT)
            break;
    }
    grpc_metadata_array_init(&trailing);
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op.data.recv_status_on_client.trailing_metadata = &trailing;
    op.data.recv_status_on_client.status = &status;
    op.data.recv_status_on_client.status_details = &details;
    op.data.recv_status_on_client.error_string = &error_string;
    if (grpc_call_start_batch(st->call, &op, 1, &st->tag_status, NULL) == GRPC_CALL_OK) {
        spw_rpc__pluck(st->cq, &st->tag_status);
        ret = (int)status;
        status_to_msg(details, error_string, msg, msglen);
    } else {
        grpc_call_cancel(st->call, NULL);
        ret = SPW_RPC_INTERNAL;
        if (msg)
            snprintf(msg, msglen, "stream: cannot receive the status");
    }
    if (st->imd_pending)
        spw_rpc__pluck(st->cq, &st->tag_imd);
    grpc_metadata_array_destroy(&trailing);
    grpc_metadata_array_destroy(&st->rimd);
    grpc_slice_unref(details);
    gpr_free((void *)error_string);
    grpc_call_unref(st->call);
    grpc_completion_queue_destroy(st->cq);
    free(st);
    return ret;
}

int spw_rpc_call_reply(struct spw_rpc_channel *c, const char *method, const struct ProtobufCMessage *req,
                       int timeout_ms, const struct ProtobufCMessageDescriptor *reply_type,
                       struct ProtobufCMessage **reply, char *msg, size_t msglen)
{
    uint8_t *resp = NULL;
    size_t len = 0;
    *reply = NULL;
    int st = spw_rpc_call_msg(c, method, req, timeout_ms, &resp, &len, msg, msglen);
    if (st == SPW_RPC_OK && !(*reply = protobuf_c_message_unpack(reply_type, NULL, len, resp))) {
        snprintf(msg, msglen, "%s: malformed %s reply (%zu bytes)", method, reply_type->name, len);
        st = SPW_RPC_INTERNAL;
    }
    free(resp);
    return st;
}

int spw_rpc_call_msg(struct spw_rpc_channel *c, const char *method, const struct ProtobufCMessage *req,
                     int timeout_ms, uint8_t **resp, size_t *resp_len, char *msg, size_t msglen)
{
    uint8_t small[512], *buf = small;
    size_t n = protobuf_c_message_get_packed_size(req);
    if (n > sizeof small && !(buf = malloc(n))) {
        snprintf(msg, msglen, "out of memory packing a %zu-byte request", n);
        return SPW_RPC_RESOURCE_EXHAUSTED;
    }
    protobuf_c_message_pack(req, buf);
    int st = spw_rpc_call(c, method, buf, n, timeout_ms, resp, resp_len, msg, msglen);
    if (buf != small)
        free(buf);
    return st;
}
