/* lib/rpc.h - a thin wrapper over the gRPC C core: unary calls and bidirectional streams that move opaque
 * byte payloads (callers pack/unpack protobuf-c themselves). It is not a code generator, not a TLS layer (yet:
 * insecure credentials plus an optional bearer token) and it never prints (gRPC's own log lines go to
 * spw_rpc_set_log_fn's hook). Threads: a server runs its own I/O threads and one thread per open stream;
 * a channel may be used from any number of threads; a stream has at most one sender thread and one receiver
 * thread at a time. Callers need not include any gRPC header. */
#ifndef SPW_LIB_RPC_H
#define SPW_LIB_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* gRPC status codes (the same numbers as grpc_status_code; checked at compile time in lib/rpc.c). */
#define SPW_RPC_STATUSES(X)                                                    \
    X(SPW_RPC_OK,                  0)                                          \
    X(SPW_RPC_CANCELLED,           1)                                          \
    X(SPW_RPC_UNKNOWN,             2)                                          \
    X(SPW_RPC_INVALID_ARGUMENT,    3)                                          \
    X(SPW_RPC_DEADLINE_EXCEEDED,   4)                                          \
    X(SPW_RPC_NOT_FOUND,           5)                                          \
    X(SPW_RPC_ALREADY_EXISTS,      6)                                          \
    X(SPW_RPC_PERMISSION_DENIED,   7)                                          \
    X(SPW_RPC_RESOURCE_EXHAUSTED,  8)                                          \
    X(SPW_RPC_FAILED_PRECONDITION, 9)                                          \
    X(SPW_RPC_ABORTED,             10)                                         \
    X(SPW_RPC_OUT_OF_RANGE,        11)                                         \
    X(SPW_RPC_UNIMPLEMENTED,       12)                                         \
    X(SPW_RPC_INTERNAL,            13)                                         \
    X(SPW_RPC_UNAVAILABLE,         14)                                         \
    X(SPW_RPC_DATA_LOSS,           15)                                         \
    X(SPW_RPC_UNAUTHENTICATED,     16)

enum spw_rpc_status {
#define SPW_RPC_STATUS_ENUM(name, code) name = code,
    SPW_RPC_STATUSES(SPW_RPC_STATUS_ENUM)
#undef SPW_RPC_STATUS_ENUM
};

#define SPW_RPC_DEFAULT_MAX_MESSAGE (64u << 20)  /* gRPC's own receive default is 4 MiB: too small for batches */
#define SPW_RPC_DEFAULT_IO_THREADS  2
#define SPW_RPC_DEFAULT_MAX_STREAMS 64
#define SPW_RPC_MAX_METHODS         32
#define SPW_RPC_MAX_SLOW_CALLS      16
#define SPW_RPC_IDLE_CONNECTION_MS  (5 * 60 * 1000)     /* a server closes a connection idle this long */

struct spw_rpc_server;
struct spw_rpc_channel;
struct spw_rpc_stream;

/* "OK", "UNAVAILABLE", ... for a status code; "?" for anything else. Never NULL. */
const char *spw_rpc_status_name(int status);

/* Take / drop a process-wide reference on the gRPC runtime (grpc_init / grpc_shutdown are refcounted).
 * Servers and channels hold their own reference, so this only keeps the runtime up between objects. Never
 * call it before a fork whose child also uses gRPC (Check tests: CK_NOFORK). */
void spw_rpc_init(void);
void spw_rpc_shutdown(void);

/* Route gRPC's internal log lines (only ERROR unless GRPC_VERBOSITY says otherwise) to fn; NULL drops them,
 * which is the default. severity: 0 debug, 1 info, 2 error. fn may run on any thread, must not call gRPC.
 * Process-wide; call before creating servers or channels. */
typedef void (*spw_rpc_log_fn)(void *ctx, int severity, const char *file, int line, const char *msg);
void spw_rpc_set_log_fn(spw_rpc_log_fn fn, void *ctx);

/* ---- TLS ------------------------------------------------------------------------------------------- */

/* Certificates for gRPC's own TLS (OpenSSL underneath), read once from PEM files. A server needs cert and
 * key, and ca to verify clients when require_client_cert (mutual TLS); a channel needs ca (the roots its
 * server's certificate must chain to), and cert and key to present one of its own. */
struct spw_rpc_tls {
    char *cert_pem, *key_pem, *ca_pem;  /* NUL-terminated PEM, or NULL */
    bool require_client_cert;
};
/* Read the files given (NULL or "" = none; at most 1 MiB each). Returns 0 with *out NULL when none is given
 * (plaintext), 0 with *out set, or a negative code with err naming the file. */
int spw_rpc_tls_load(const char *cert_file, const char *key_file, const char *ca_file, bool require_client_cert,
                     struct spw_rpc_tls **out, char *err, size_t errlen);
void spw_rpc_tls_free(struct spw_rpc_tls *t);
/* The TLS settings of channels created without their own (o->tls NULL): a daemon's or a tool's, set once in
 * main before any channel (NULL: plaintext). t must outlive every channel. */
void spw_rpc_set_channel_tls(const struct spw_rpc_tls *t);
const struct spw_rpc_tls *spw_rpc_channel_tls_default(void);
/* A daemon's TLS flags as its two sides: *server (cert and key; client_ca: require clients' certificates
 * signed by it) and *channel (ca: verify the daemons it calls; with cert and key, present them too). NULL
 * where a side stays plaintext. Returns 0 or a negative code with err naming the file or the missing flag. */
int spw_rpc_tls_from_flags(const char *cert, const char *key, const char *ca, const char *client_ca,
                           struct spw_rpc_tls **server, struct spw_rpc_tls **channel, char *err, size_t errlen);

/* What a failed call's status and message may mean for TLS, as a hint to append to it ("" when none): a
 * server that closes the socket on a plaintext caller (it wants TLS) or on a caller without a certificate
 * (mutual TLS), a server certificate the caller's CA does not vouch for. tls: the caller used TLS. */
const char *spw_rpc_tls_hint(int status, const char *msg, bool tls);

/* ---- Server ---------------------------------------------------------------------------------------- */

struct spw_rpc_server_opts {
    const char *listen_addr;   /* "127.0.0.1:0", "[::]:5050", "0.0.0.0:5050" (port 0 = pick one) */
    int io_threads;            /* 0 = SPW_RPC_DEFAULT_IO_THREADS; completion-queue threads running unary handlers */
    size_t max_message_bytes;  /* 0 = SPW_RPC_DEFAULT_MAX_MESSAGE; both directions; bigger -> RESOURCE_EXHAUSTED */
    const char *auth_token;    /* NULL or "" = accept all; else require "authorization: Bearer <token>" */
    const char *worker_token;  /* with auth_token: the workers' own token (methods marked SPW_RPC_CALLER_WORKER
                                  accept it), auth_token then the clients' only; NULL = auth_token is both */
    int max_streams;           /* 0 = SPW_RPC_DEFAULT_MAX_STREAMS; more concurrent streams -> RESOURCE_EXHAUSTED */
    int max_streams_per_peer;  /* 0 = half of max_streams: one peer host's streams beyond it -> RESOURCE_EXHAUSTED
                                  (so one peer cannot lock the others out; likewise half the slow calls) */
    const struct spw_rpc_tls *tls;  /* NULL = plaintext; else cert and key required (must outlive the call) */
};

/* Unary handler. Runs on a server I/O thread, so it must be quick (no blocking I/O). req is valid only during
 * the call. On SPW_RPC_OK it may set *resp to a malloc'd buffer of *resp_len bytes (ownership passes to the
 * wrapper; NULL/0 = empty reply). On any other status it fills msg (NUL-terminated, the details the client
 * sees) and *resp is ignored (freed if set). Returns a SPW_RPC_* status. */
typedef int (*spw_rpc_unary_fn)(void *ctx, const uint8_t *req, size_t req_len, uint8_t **resp, size_t *resp_len,
                                char *msg, size_t msglen);

/* Stream handler. Runs on its own thread for the life of the stream and drives it with spw_rpc_stream_send
 * / _recv (it may hand one direction to a helper thread, which must be done with the stream before the handler
 * returns). When the stream fails (client cancel, deadline, server shutdown) send/recv return negative and
 * the handler should return promptly. The return value (SPW_RPC_*) and msg become the call's status. The
 * wrapper owns st: never cancel it after returning. */
typedef int (*spw_rpc_stream_fn)(void *ctx, struct spw_rpc_stream *st, char *msg, size_t msglen);

/* The peer of the call whose handler runs on this thread, as gRPC names it ("ipv4:10.0.0.7:41234",
 * "ipv6:[::1]:5051"), or "" outside a handler. Valid until the handler returns. */
const char *spw_rpc_current_peer(void);
/* Who the call's token proved its caller to be (SPW_RPC_CALLER_* bits, of those its method accepts), or 0
 * outside a handler. Both bits where one token serves both, or where the server has no token. */
#define SPW_RPC_CALLER_CLIENT 1u
#define SPW_RPC_CALLER_WORKER 2u
unsigned spw_rpc_current_caller(void);
/* Whether the deadline of the unary call whose handler runs on this thread has passed (its caller gave up):
 * a handler that waited (for a lock) checks it before doing the work, so an overloaded server sheds calls
 * nobody waits for instead of collapsing under them. false outside a unary handler or without a deadline. */
bool spw_rpc_current_expired(void);
/* Nanoseconds since the unary call whose handler runs on this thread arrived (its headers), or 0 outside a
 * unary handler: how long it queued before its handler ran, and since. A server's measure of its own lag. */
int64_t spw_rpc_current_age_ns(void);
/* The host part of such a peer ("10.0.0.7", "::1") into host. Returns 0, or -EINVAL for a peer that is not
 * an ipv4:/ipv6: address (host gets "") or -ENOSPC. */
int spw_rpc_peer_host(const char *peer, char *host, size_t hostlen);

/* Create a server bound to o->listen_addr (not yet serving; SO_REUSEPORT off, so a taken port fails). On
 * failure returns negative (-EINVAL bad opts; the bind's -errno such as -EADDRINUSE, or -EIO when gRPC gives
 * none; -ENOMEM) and writes a message naming the address and the reason to err. */
int spw_rpc_server_create(const struct spw_rpc_server_opts *o, struct spw_rpc_server **out, char *err,
                          size_t errlen);

/* Register a method ("/spillway.v1.Dispatcher/LeaseSplit") before spw_rpc_server_start. method is copied;
 * ctx is passed to fn and must outlive the server. Returns 0, -EBUSY (started), -EEXIST, -ENOSPC (more than
 * SPW_RPC_MAX_METHODS), -EINVAL. Calls to unregistered methods get UNIMPLEMENTED. */
int spw_rpc_server_add_unary(struct spw_rpc_server *s, const char *method, spw_rpc_unary_fn fn, void *ctx);
int spw_rpc_server_add_stream(struct spw_rpc_server *s, const char *method, spw_rpc_stream_fn fn, void *ctx);
/* A unary method whose handler may block (e.g. list a dataset): each call runs on its own thread, at most
 * SPW_RPC_MAX_SLOW_CALLS at once (more get RESOURCE_EXHAUSTED), so io threads keep serving quick calls.
 * Shutdown waits for running handlers. Same return values as spw_rpc_server_add_unary. */
int spw_rpc_server_add_unary_slow(struct spw_rpc_server *s, const char *method, spw_rpc_unary_fn fn, void *ctx);

/* Which callers' tokens a registered method accepts (SPW_RPC_CALLER_* bits; the default is clients only):
 * meaningful with a worker_token. Before start. Returns 0, -EINVAL, -ENOENT (not registered), -EBUSY. */
int spw_rpc_server_set_callers(struct spw_rpc_server *s, const char *method, unsigned callers);

/* Start serving; writes the bound port (useful with port 0) to *bound_port if not NULL. 0 or -EBUSY/-errno. */
int spw_rpc_server_start(struct spw_rpc_server *s, int *bound_port);

/* Stop accepting calls, let open calls finish for up to deadline_ms, then cancel the rest, and join every
 * thread (a stream handler that ignores its failing stream delays this). Idempotent. */
void spw_rpc_server_shutdown(struct spw_rpc_server *s, int deadline_ms);

/* Shut down (deadline 0) if still running, then free. Accepts NULL. */
void spw_rpc_server_destroy(struct spw_rpc_server *s);
struct spw_prom;
/* The server's calls so far as Prometheus samples: spillway_rpc_requests_total{method, code} and the unary
 * methods' spillway_rpc_request_duration_seconds{method}. Any thread, while the server runs. */
void spw_rpc_server_metrics(struct spw_rpc_server *s, struct spw_prom *p);

/* ---- Client ---------------------------------------------------------------------------------------- */

struct spw_rpc_channel_opts {
    size_t max_message_bytes;  /* 0 = SPW_RPC_DEFAULT_MAX_MESSAGE; both directions */
    const char *auth_token;    /* NULL = send no authorization metadata; copied */
    const struct spw_rpc_tls *tls;  /* NULL = plaintext; else ca required (must outlive the call) */
    bool private_connection;   /* its own TCP connection, not shared with other channels to the target (a
                                  load generator's simulated peers) */
};

/* A channel to "host:port" (connects lazily, reconnects by itself). o may be NULL. Returns 0, -EINVAL,
 * -ENOMEM. Thread-safe; must outlive every call and stream made on it. */
int spw_rpc_channel_create(const char *target, const struct spw_rpc_channel_opts *o, struct spw_rpc_channel **out);
void spw_rpc_channel_destroy(struct spw_rpc_channel *c);
/* Whether the channel speaks TLS (its own settings or the process's default). */
bool spw_rpc_channel_tls(const struct spw_rpc_channel *c);
/* Try to connect c and wait up to timeout_ms for it to be ready (polling meanwhile, which is what moves a
 * reconnect along when no other call on the process's channels is waiting). Returns whether it is. */
bool spw_rpc_channel_wait_ready(struct spw_rpc_channel *c, int timeout_ms);

/* Blocking unary call. timeout_ms > 0 is the call's deadline (0 = none; don't). Returns the gRPC status:
 * SPW_RPC_OK with *resp malloc'd (caller frees; empty reply = non-NULL, *resp_len 0); transport failures
 * come back as UNAVAILABLE / DEADLINE_EXCEEDED; msg (may be NULL) gets the status details. Negative only for
 * local misuse (-EINVAL) or -ENOMEM. Thread-safe. */
int spw_rpc_call(struct spw_rpc_channel *c, const char *method, const uint8_t *req, size_t len, int timeout_ms,
                 uint8_t **resp, size_t *resp_len, char *msg, size_t msglen);

/* ---- Streams (client and server share these) ------------------------------------------------------- */

/* spw_rpc_call with a protobuf-c message as the request (packed here; callers unpack the reply). Returns
 * what spw_rpc_call returns, or SPW_RPC_RESOURCE_EXHAUSTED when the request cannot be packed. */
struct ProtobufCMessage;
int spw_rpc_call_msg(struct spw_rpc_channel *c, const char *method, const struct ProtobufCMessage *req,
                     int timeout_ms, uint8_t **resp, size_t *resp_len, char *msg, size_t msglen);
/* spw_rpc_call_msg that also unpacks the reply as `reply_type` into *reply (free with
 * protobuf_c_message_free_unpacked). A reply that does not parse is SPW_RPC_INTERNAL, saying so in msg. */
struct ProtobufCMessageDescriptor;
int spw_rpc_call_reply(struct spw_rpc_channel *c, const char *method, const struct ProtobufCMessage *req,
                       int timeout_ms, const struct ProtobufCMessageDescriptor *reply_type,
                       struct ProtobufCMessage **reply, char *msg, size_t msglen);

/* Open a bidirectional stream (client). timeout_ms > 0 is the whole stream's deadline, 0 = none. Does not
 * wait for the connection: a failure shows up as a negative send/recv and as the status from
 * spw_rpc_stream_finish, which must always be called. Returns 0, -EINVAL, -ENOMEM, -EIO. */
int spw_rpc_stream_open(struct spw_rpc_channel *c, const char *method, int timeout_ms, struct spw_rpc_stream **out);

/* Send one message: the concatenation of iov[0..iovcnt). Parts of 16 KiB or more are sent zero-copy (gRPC
 * references the caller's memory), smaller parts are copied; either way the call blocks until gRPC has
 * finished with the bytes, so the caller may reuse its buffers on return. One sender thread per stream.
 * Returns 0; -EMSGSIZE over the message cap (stream still usable); -ECANCELED when the call has failed or
 * ended (client: see spw_rpc_stream_finish for why); -EPIPE after spw_rpc_stream_close_send. */
int spw_rpc_stream_send(struct spw_rpc_stream *st, const struct iovec *iov, int iovcnt);

/* Receive one message. Returns 1 with *msg malloc'd (caller frees; never NULL), *len set; 0 at the end
 * (server side: the client half-closed; client side: the server finished the call, well or not, and
 * spw_rpc_stream_finish says which); -ECANCELED when the call failed (cancelled, deadline, transport,
 * oversized message); -ETIMEDOUT when timeout_ms > 0 passed first, in which case the receive stays pending
 * and the next call resumes it. timeout_ms 0 = until the call's deadline. One receiver thread per stream; it
 * may run concurrently with the sender. */
int spw_rpc_stream_recv(struct spw_rpc_stream *st, int timeout_ms, uint8_t **msg, size_t *len);

/* Receive one message as it arrived, in parts (gRPC's slices): no copy. Returns as spw_rpc_stream_recv,
 * with *out to free with spw_rpc_msg_free. */
struct spw_rpc_msg;
int spw_rpc_stream_recv_parts(struct spw_rpc_stream *st, int timeout_ms, struct spw_rpc_msg **out);
/* The message's parts in order (valid until spw_rpc_msg_free), their count and total length. */
const struct iovec *spw_rpc_msg_parts(const struct spw_rpc_msg *m, int *n, size_t *len);
void spw_rpc_msg_free(struct spw_rpc_msg *m);
/* Client half-close: no more messages from this side. Called by the sender thread. 0 or -ECANCELED. */
int spw_rpc_stream_close_send(struct spw_rpc_stream *st);

/* Client: discard unread messages until the end, wait for the status, free st. Call it once, after the
 * sender and receiver threads are done with st (to abandon a stream that still streams, cancel first).
 * Returns the status (SPW_RPC_*); msg (may be NULL) gets its details. */
int spw_rpc_stream_finish(struct spw_rpc_stream *st, char *msg, size_t msglen);

/* Cancel the call from either side and any thread, while st is still alive: pending and later send/recv fail
 * with -ECANCELED and the peer sees CANCELLED. */
void spw_rpc_stream_cancel(struct spw_rpc_stream *st);

#endif
