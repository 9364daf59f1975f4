/* lib/direct.h - direct data connections: a worker's element payloads on a plain TCP connection beside the
 * gRPC stream that authenticated the client, read by the client straight into their destinations (one copy,
 * the kernel's). The worker's listener hands each accepted connection to the stream holding the one-time
 * ticket it presents (16 random bytes given over that stream, valid 10 s); it reads nothing else from an
 * unticketed peer. A frame is a message: an 8-byte header (magic, length), then its bytes; the receiver checks
 * the length against its cap before it reads or allocates anything, and reads a message into a buffer it
 * keeps (no allocation, no page faults once warm).
 * Threads: a listener runs one acceptor thread and is safe to use from any thread; a connection is read by
 * one thread and written by one thread at a time (spw_direct_shutdown may be called from any). */
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

/* Listen on host:port (port 0: any free port). Returns 0 or -errno with the reason in err. */
int spw_direct_listen(const char *host, int port, struct spw_direct_listener **out, char *err, size_t errlen);
int spw_direct_port(const struct spw_direct_listener *l);
/* A fresh ticket (random); the connection that presents it within 10 s is kept for spw_direct_take.
 * -ENOSPC when too many are outstanding. */
int spw_direct_ticket(struct spw_direct_listener *l, uint8_t ticket[SPW_DIRECT_TICKET_BYTES]);
/* The connection that presented ticket, waiting up to timeout_ms for it: 0 and *fd (the caller owns it), or
 * -ETIMEDOUT. The ticket is spent either way. */
int spw_direct_take(struct spw_direct_listener *l, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES], int timeout_ms,
                    int *fd);
/* Connections refused so far: no valid ticket within 2 s, or too many waiting to say one. */
int64_t spw_direct_refused(struct spw_direct_listener *l);
void spw_direct_listener_destroy(struct spw_direct_listener *l);

/* Client: connect to the host of addr ("host:port" or "[v6]:port", the worker's gRPC address) on port and
 * present ticket. Returns 0 and *fd, or -errno with the reason in err. */
int spw_direct_connect(const char *addr, int port, const uint8_t ticket[SPW_DIRECT_TICKET_BYTES], int timeout_ms,
                       int *fd, char *err, size_t errlen);

/* Called while a send or read waits (every 200 ms): true ends it with -ECANCELED. NULL: never. */
typedef bool (*spw_direct_stop_fn)(void *ctx);

/* Send one message, the concatenation of iov[0..n) (n <= SPW_DIRECT_MAX_IOV, under 4 GiB). Returns 0, or
 * -EPIPE / -ECANCELED / -errno (then the connection is unusable). */
int spw_direct_send(int fd, const struct iovec *iov, int n, spw_direct_stop_fn stop, void *ctx);
/* Wait up to timeout_ms for the next message and read its header: 1 and its length in *len (read the bytes
 * with spw_direct_read); 0 at a clean end (the peer closed between messages); -ETIMEDOUT when none began;
 * -EPIPE (the peer closed mid-header); SPW_EFORMAT (bad magic) or SPW_ETOOBIG (over max_len) with the reason
 * in err; -ECANCELED or -errno. */
int spw_direct_next(int fd, int timeout_ms, size_t max_len, size_t *len, spw_direct_stop_fn stop, void *ctx,
                    char *err, size_t errlen);
/* Read exactly n bytes of the current message into dst (NULL: drop them). 0, -EPIPE (the peer closed mid-message),
 * -ECANCELED or -errno. */
int spw_direct_read(int fd, void *dst, size_t n, spw_direct_stop_fn stop, void *ctx);
/* Wake and fail whatever waits on fd (another thread may be in a send or read); the owner still closes it. */
void spw_direct_shutdown(int fd);

#endif
