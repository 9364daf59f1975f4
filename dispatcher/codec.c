/* dispatcher/codec.c - messages to bytes, errors to statuses, the unary adapter (see codec.h). Pure. */
#include "dispatcher/codec.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/rpc.h"
#include "proto/spillway.pb-c.h"

uint8_t *disp_pack_keep(const ProtobufCMessage *m, size_t *len)
{
    const size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf)
        *len = protobuf_c_message_pack(m, buf);
    return buf;
}

int disp_status_of(int rc)
{
    switch (rc) {
    case -ENOENT: return SPW_RPC_NOT_FOUND;
    case -ESTALE: return SPW_RPC_FAILED_PRECONDITION;
    case SPW_ETOOBIG: return SPW_RPC_RESOURCE_EXHAUSTED;
    case -ENOMEM: return SPW_RPC_RESOURCE_EXHAUSTED;
    case -EIO: return SPW_RPC_UNAVAILABLE;          /* the journal cannot be written: retry later */
    default: return SPW_RPC_INVALID_ARGUMENT;
    }
}

/* Every allocation of a reply is a block on one list; a block made by disp_reply_later holds fn and p. */
struct reply_block {
    struct reply_block *next;
    void (*fn)(void *);
    void *p;
    max_align_t data[];
};

struct disp_reply {
    ProtobufCMessage *msg;
    struct reply_block *blocks;
    bool failed;
};

static struct reply_block *add_block(struct disp_reply *r, size_t n)
{
    struct reply_block *b = n <= SIZE_MAX - sizeof *b ? calloc(1, sizeof *b + n) : NULL;
    if (!b) {
        r->failed = true;
        return NULL;
    }
    b->next = r->blocks;
    r->blocks = b;
    return b;
}

void *disp_reply_alloc(struct disp_reply *r, size_t n)
{
    struct reply_block *b = add_block(r, n);
    return b ? b->data : NULL;
}

void *disp_reply_new(struct disp_reply *r, const ProtobufCMessageDescriptor *d)
{
    ProtobufCMessage *m = disp_reply_alloc(r, d->sizeof_message);
    if (m) {
        d->message_init(m);
        r->msg = m;
    }
    return m;
}

void *disp_reply_copy(struct disp_reply *r, const void *p, size_t n)
{
    void *c = disp_reply_alloc(r, n);
    if (c && n)
        memcpy(c, p, n);
    return c;
}

char *disp_reply_strdup(struct disp_reply *r, const char *s)
{
    return disp_reply_copy(r, s ? s : "", strlen(s ? s : "") + 1);
}

void disp_reply_later(struct disp_reply *r, void *p, void (*fn)(void *))
{
    if (!p)
        return;
    struct reply_block *b = add_block(r, 0);
    if (!b) {
        fn(p);
        return;
    }
    b->fn = fn;
    b->p = p;
}

int disp_unary(void *svc, const ProtobufCMessageDescriptor *desc, disp_typed_fn fn, const uint8_t *req,
               size_t len, uint8_t **resp, size_t *resp_len, char *msg, size_t msglen)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, req);
    if (!m) {
        snprintf(msg, msglen, "malformed %s (%zu bytes)", desc->short_name, len);
        return SPW_RPC_INVALID_ARGUMENT;
    }
    struct disp_reply reply = {0};
    int status = fn(svc, m, &reply, msg, msglen);
    if (status == SPW_RPC_OK && reply.failed) {
        snprintf(msg, msglen, "out of memory");
        status = SPW_RPC_RESOURCE_EXHAUSTED;
    }
    if (status == SPW_RPC_OK && reply.msg && !(*resp = disp_pack_keep(reply.msg, resp_len))) {
        snprintf(msg, msglen, "out of memory");
        status = SPW_RPC_RESOURCE_EXHAUSTED;
    }
    for (struct reply_block *b = reply.blocks, *next; b; b = next) {
        next = b->next;
        if (b->fn)
            b->fn(b->p);
        free(b);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return status;
}
