/* lib/direct_tls.h - the OpenSSL side of direct data connections, shared by lib/direct.c and
 * lib/direct_tls.c only: making a connection's SSL from a spw_direct_tls, and saying why TLS failed. Not a
 * public header (nothing outside lib/direct*.c sees OpenSSL through it). Threads: as lib/direct.h. */
#ifndef SPW_LIB_DIRECT_TLS_H
#define SPW_LIB_DIRECT_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "lib/direct.h"

/* A worker's SSL on the accepted socket fd (server side, not yet handshaken). NULL when out of memory. */
SSL *spw_direct_tls_accepting(const struct spw_direct_tls *t, int fd);
/* A client's SSL on the connected socket fd, verifying that the worker's certificate names host (an IP
 * address or a DNS name), resuming the session kept for key ("host:port") when there is one; the sessions
 * the worker sends on it are kept under key. NULL when out of memory. */
SSL *spw_direct_tls_connecting(const struct spw_direct_tls *t, int fd, const char *host, const char *key);
/* Why an SSL call on ssl that returned ret failed, into buf (OpenSSL's reason, or the certificate's
 * verification error); returns buf. */
const char *spw_direct_tls_why(SSL *ssl, int ret, char *buf, size_t len);

#endif
