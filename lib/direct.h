/* lib/direct.h - direct data connections: a worker's element payloads on a TCP connection beside the gRPC
 * stream that authenticated the client (TLS with OpenSSL when the daemons use TLS: kTLS where the kernel has
 * it), read by the client straight into their destinations (one copy, the kernel's; or the decryption's).
 * This is not a general TLS wrapper: OpenSSL is hidden behind spw_direct_tls and spw_direct_conn. The
 * worker's listener hands each accepted connection to the stream holding the one-time
 * ticket it presents (16 random bytes given over that stream, valid 10 s); it reads nothing else from an
 * unticketed peer. A frame is a message: an 8-byte header (magic, length), then its bytes; the receiver checks
 * the length against its cap before it reads or allocates anything, and reads a message into a buffer it
 * keeps (no allocation, no page faults once warm).
 * Threads: a listener runs one acceptor thread and is safe to use from any thread; a connection is used by
 * one thread at a time (each side uses one direction: the worker writes, the client reads; TLS state is not
 * shared between threads); spw_direct_shutdown may be called from any. A spw_direct_tls is thread-safe. */
#ifndef SPW_LIB_DIRECT_H
#define SPW_LIB_DIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SPW_DIRECT_TICKET_BYTES 16
#define SPW_DIRECT_FRAME_HEADER 8
#define SPW_DIRECT_MAX_IOV 30           /* iovecs of one message */

struct spw_direct_listener;
struct spw_direct_conn;             /* a data connection: its socket and, with TLS, its session */
struct spw_direct_tls;              /* TLS settings of one side (OpenSSL's context, a client's sessions) */
struct spw_rpc_tls;

/* TLS for data connections from the same PEMs as the gRPC side (lib/rpc.h). server (a worker): its
 * certificate and key; with t->require_client_cert, clients must present a certificate t->ca_pem signs.
 * Client: the worker's certificate must chain to t->ca_pem and name the host dialled (DNS or IP, as gRPC
 * checks); its own certificate and key are presented when given. TLS 1.2 or later (1.3 preferred), session
 * resumption (server tickets; a client keeps the newest session of each worker address), kTLS where the
 * kernel and OpenSSL have it. Returns 0, or a negative code with err naming what did not load. */
int spw_direct_tls_create(const struct spw_rpc_tls *t, bool server, struct spw_direct_tls **out, char *err,
                          size_t errlen);
void spw_direct_tls_destroy(struct spw_direct_tls *t);     /* after every listener and connection using it */

/* Listen on host:port (port 0: any free port); tls NULL: plaintext, else connections must complete a TLS
 * handshake (then present their ticket inside it); tls must outlive the listener. Returns 0 or -errno with
 * the reason in err. */
int spw_direct_listen(const char *host, int port, const struct spw_direct_tls *tls,
                      struct spw_direct_listener **out, char *err, size_t errlen);
int spw_direct_port(const struct spw_direct_listener *l);
/* A fresh ticket (random); the connection that presents it within 10 s is kept for spw_direct_take.
 * -ENOSPC when too many are outstanding. */
int spw_direct_ticket(struct spw_direct_listener *l, uint8_t ticket[SPW_DIRECT_TICKET_BYTES]);
/* The connection that presented ticket, waiting up to timeout_ms for it: 0 and *out (the caller closes it
 * with spw_direct_close), or -ETIMEDOUT. The ticket is spent either way. */
int spw_direct_take(struct spw_direct_listener *l, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES], int timeout_ms,
                    struct spw_direct_conn **out);
/* Connections refused so far: a failed TLS handshake, no valid ticket within 2 s, or too many waiting. */
int64_t spw_direct_refused(struct spw_direct_listener *l);
void spw_direct_listener_destroy(struct spw_direct_listener *l);

/* Client: connect to the host of addr ("host:port" or "[v6]:port", the worker's gRPC address) on port, with
 * TLS when tls (verifying the worker as spw_direct_tls_create says, resuming its last session when it can),
 * and present ticket. Returns 0 and *out, or -errno (-EPROTO: TLS failed) with the reason in err. */
int spw_direct_connect(const char *addr, int port, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES],
                       const struct spw_direct_tls *tls, int timeout_ms, struct spw_direct_conn **out, char *err,
                       size_t errlen);
/* A plaintext connection on a connected socket fd (taken: spw_direct_close closes it). 0 or -ENOMEM. */
int spw_direct_wrap(int fd, struct spw_direct_conn **out);
/* The socket under c, or -1 for NULL (for tests that write raw bytes on a plaintext connection). */
int spw_direct_fd(const struct spw_direct_conn *c);
/* Close: a TLS connection says close_notify first. Accepts NULL. */
void spw_direct_close(struct spw_direct_conn *c);
/* What protects c, for logs and tests: "plaintext", or e.g. "TLSv1.3 TLS_AES_256_GCM_SHA384 resumed
 * ktls=send" (resumed: an earlier session was resumed; ktls: the directions the kernel encrypts, "none"
 * when OpenSSL or the kernel lacks kTLS). Into buf; returns buf. */
const char *spw_direct_describe(const struct spw_direct_conn *c, char *buf, size_t len);

/* Called while a send or read waits (every 200 ms): true ends it with -ECANCELED. NULL: never. */
typedef bool (*spw_direct_stop_fn)(void *ctx);

/* Send one message, the concatenation of iov[0..n) (n <= SPW_DIRECT_MAX_IOV, under 4 GiB). Returns 0, or
 * -EPIPE / -ECANCELED / -errno (then the connection is unusable). */
int spw_direct_send(struct spw_direct_conn *c, const struct iovec *iov, int n, spw_direct_stop_fn stop, void *ctx);
/* Wait up to timeout_ms for the next message and read its header: 1 and its length in *len (read the bytes
 * with spw_direct_read); 0 at a clean end (the peer closed between messages); -ETIMEDOUT when none began;
 * -EPIPE (the peer closed mid-header); SPW_EFORMAT (bad magic) or SPW_ETOOBIG (over max_len) with the reason
 * in err; -ECANCELED or -errno. */
int spw_direct_next(struct spw_direct_conn *c, int timeout_ms, size_t max_len, size_t *len, spw_direct_stop_fn stop,
                    void *ctx, char *err, size_t errlen);
/* Read exactly n bytes of the current message into dst (NULL: drop them). 0, -EPIPE (the peer closed mid-message),
 * -ECANCELED or -errno. */
int spw_direct_read(struct spw_direct_conn *c, void *dst, size_t n, spw_direct_stop_fn stop, void *ctx);
/* Wake and fail whatever waits on c (another thread may be in a send or read); the owner still closes it. */
void spw_direct_shutdown(struct spw_direct_conn *c);

#endif
