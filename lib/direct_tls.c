/* lib/direct_tls.c - OpenSSL contexts for direct data connections (see direct.h, direct_tls.h): the PEMs of
 * lib/rpc.h loaded into an SSL_CTX, peer verification, TLS 1.2+ with kTLS asked for, and the client's cache
 * of one session per worker address. Not the framing or the socket I/O (lib/direct.c).
 * Threads: a context is read-only once made except the session cache, guarded by its mutex. */
#include "lib/direct_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/rpc.h"

#define MAX_SESSIONS 64             /* worker addresses a client keeps a session for; the least used goes */
#define SESSION_ID_CONTEXT "spillway-direct"

struct kept_session {
    char key[280];                  /* "host:port" of the data port */
    SSL_SESSION *s;
    int64_t stored_ms;
};

struct spw_direct_tls {
    SSL_CTX *ctx;
    bool server;
    pthread_mutex_t mu;             /* guards sessions */
    struct kept_session sessions[MAX_SESSIONS];
};

static int key_index = -1;          /* an SSL's ex_data slot for its session key (a malloc'd string) */
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void free_key(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    free(ptr);
}

static void make_key_index(void)
{
    key_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, free_key);
}

/* OpenSSL's reason for the error on top of its queue, or what, into err; returns rc. */
static int ssl_fail(char *err, size_t errlen, int rc, const char *what)
{
    const unsigned long e = ERR_peek_last_error();
    const char *why = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return spw_fail(err, errlen, rc, "data connections' TLS: %s%s%s", what, why ? ": " : "", why ? why : "");
}

/* Every certificate of a PEM into the context's trust store. */
static int load_ca(SSL_CTX *ctx, const char *pem, char *err, size_t errlen)
{
    BIO *in = BIO_new_mem_buf(pem, -1);
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    int n = 0;
    X509 *x;
    while (in && (x = PEM_read_bio_X509(in, NULL, NULL, NULL)) != NULL) {
        n += X509_STORE_add_cert(store, x) == 1;
        X509_free(x);
    }
    BIO_free(in);
    ERR_clear_error();              /* the read past the last certificate */
    return n ? 0 : spw_fail(err, errlen, SPW_EFORMAT, "data connections' TLS: no CA certificate in the CA file");
}

/* The certificate (its chain after it) and the key this side presents. */
static int load_identity(SSL_CTX *ctx, const char *cert_pem, const char *key_pem, char *err, size_t errlen)
{
    BIO *in = BIO_new_mem_buf(cert_pem, -1);
    X509 *leaf = in ? PEM_read_bio_X509(in, NULL, NULL, NULL) : NULL;
    int rc = leaf && SSL_CTX_use_certificate(ctx, leaf) == 1 ? 0 : ssl_fail(err, errlen, SPW_EFORMAT,
                                                                              "the certificate does not load");
    X509_free(leaf);
    X509 *x;
    while (rc == 0 && (x = PEM_read_bio_X509(in, NULL, NULL, NULL)) != NULL)
        if (SSL_CTX_add0_chain_cert(ctx, x) != 1) {
            X509_free(x);
            rc = ssl_fail(err, errlen, SPW_EFORMAT, "the certificate's chain does not load");
        }
    BIO_free(in);
    ERR_clear_error();
    if (rc)
        return rc;
    in = BIO_new_mem_buf(key_pem, -1);
    EVP_PKEY *key = in ? PEM_read_bio_PrivateKey(in, NULL, NULL, NULL) : NULL;
    BIO_free(in);
    if (!key || SSL_CTX_use_PrivateKey(ctx, key) != 1 || SSL_CTX_check_private_key(ctx) != 1)
        rc = ssl_fail(err, errlen, SPW_EFORMAT, "the key does not load or does not match the certificate");
    EVP_PKEY_free(key);
    return rc;
}

/* A client received a session (TLS 1.3: after the handshake, while it reads): keep it for its worker. */
static int new_session(SSL *ssl, SSL_SESSION *s)
{
    struct spw_direct_tls *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    const char *key = SSL_get_ex_data(ssl, key_index);
    if (!t || !key)
        return 0;
    pthread_mutex_lock(&t->mu);
    int slot = 0;
    for (int i = 0; i < MAX_SESSIONS; i++) {
        if (!strcmp(t->sessions[i].key, key)) {
            slot = i;
            break;
        }
        if (t->sessions[i].stored_ms < t->sessions[slot].stored_ms)
            slot = i;
    }
    struct kept_session *k = &t->sessions[slot];
    SSL_SESSION_free(k->s);
    snprintf(k->key, sizeof k->key, "%s", key);
    k->s = s;
    k->stored_ms = spw_now_ms();
    pthread_mutex_unlock(&t->mu);
    return 1;                       /* the reference is ours now */
}

int spw_direct_tls_create(const struct spw_rpc_tls *rt, bool server, struct spw_direct_tls **out, char *err,
                          size_t errlen)
{
    *out = NULL;
    if (!rt || (server && (!rt->cert_pem || !rt->key_pem)) || (!server && !rt->ca_pem) ||
        (server && rt->require_client_cert && !rt->ca_pem))
        return spw_fail(err, errlen, -EINVAL, "data connections' TLS: %s", server
                        ? "a worker needs its certificate and key (and a CA when it requires clients' certificates)"
                        : "a client needs the CA its workers' certificates chain to");
    pthread_once(&key_once, make_key_index);
    struct spw_direct_tls *t = calloc(1, sizeof *t);
    if (!t)
        return spw_fail(err, errlen, -ENOMEM, "out of memory");
    t->server = server;
    pthread_mutex_init(&t->mu, NULL);
    int rc = 0;
    t->ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!t->ctx || key_index < 0) {
        rc = ssl_fail(err, errlen, -ENOMEM, "no OpenSSL context");
        goto out;
    }
    SSL_CTX_set_app_data(t->ctx, t);
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    /* kTLS: the kernel encrypts (and, where it can, decrypts) once the handshake is done; without the tls
     * module, or a cipher it takes, OpenSSL quietly does it in user space. An EOF between messages is the
     * peer gone: the framing's lengths catch a truncated message, and the call carries the stream's end. */
    SSL_CTX_set_options(t->ctx, SSL_OP_ENABLE_KTLS | SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (rt->cert_pem && rt->key_pem && (rc = load_identity(t->ctx, rt->cert_pem, rt->key_pem, err, errlen)) != 0)
        goto out;
    if (server) {
        /* Resumed sessions must carry the same context, or OpenSSL refuses them when it verifies clients. */
        SSL_CTX_set_session_id_context(t->ctx, (const unsigned char *)SESSION_ID_CONTEXT,
                                       sizeof SESSION_ID_CONTEXT - 1);
        if (rt->require_client_cert) {
            if ((rc = load_ca(t->ctx, rt->ca_pem, err, errlen)) != 0)
                goto out;
            SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        }
    } else {
        if ((rc = load_ca(t->ctx, rt->ca_pem, err, errlen)) != 0)
            goto out;
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(t->ctx, new_session);
    }
out:
    if (rc) {
        spw_direct_tls_destroy(t);
        return rc;
    }
    *out = t;
    return 0;
}

void spw_direct_tls_destroy(struct spw_direct_tls *t)
{
    if (!t)
        return;
    for (int i = 0; i < MAX_SESSIONS; i++)
        SSL_SESSION_free(t->sessions[i].s);
    SSL_CTX_free(t->ctx);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

SSL *spw_direct_tls_accepting(const struct spw_direct_tls *t, int fd)
{
    SSL *ssl = SSL_new(t->ctx);
    if (ssl && SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        return NULL;
    }
    if (ssl)
        SSL_set_accept_state(ssl);
    return ssl;
}

SSL *spw_direct_tls_connecting(const struct spw_direct_tls *t, int fd, const char *host, const char *key)
{
    SSL *ssl = SSL_new(t->ctx);
    char *k = strdup(key);
    if (!ssl || !k || SSL_set_fd(ssl, fd) != 1 || SSL_set_ex_data(ssl, key_index, k) != 1) {
        free(k);
        SSL_free(ssl);
        return NULL;
    }
    /* The name checked is the host dialled, as gRPC checks it: an IP address against the certificate's IP
     * SANs, a name against its DNS SANs (and sent as SNI). */
    unsigned char ip[16];
    const bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
                   : SSL_set1_host(ssl, host) == 1 && SSL_set_tlsext_host_name(ssl, host) == 1;
    if (!ok) {
        SSL_free(ssl);              /* frees k too */
        return NULL;
    }
    SSL_set_connect_state(ssl);
    struct spw_direct_tls *tt = (struct spw_direct_tls *)t;
    pthread_mutex_lock(&tt->mu);
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (tt->sessions[i].s && !strcmp(tt->sessions[i].key, key)) {
            if (SSL_SESSION_is_resumable(tt->sessions[i].s))
                SSL_set_session(ssl, tt->sessions[i].s);
            break;
        }
    pthread_mutex_unlock(&tt->mu);
    return ssl;
}

const char *spw_direct_tls_why(SSL *ssl, int ret, char *buf, size_t len)
{
    const int e = errno;
    const int kind = SSL_get_error(ssl, ret);
    const long verify = SSL_get_verify_result(ssl);
    const unsigned long q = ERR_peek_last_error();
    if (verify != X509_V_OK && !SSL_is_server(ssl))
        snprintf(buf, len, "the worker's certificate: %s (is it signed by the CA given, and does it name the "
                 "address dialled?)", X509_verify_cert_error_string(verify));
    else if (verify != X509_V_OK)
        snprintf(buf, len, "the client's certificate: %s (not signed by the clients' CA?)",
                 X509_verify_cert_error_string(verify));
    else if (q)
        snprintf(buf, len, "%s", ERR_reason_error_string(q) ? ERR_reason_error_string(q) : "TLS error");
    else if (kind == SSL_ERROR_SYSCALL && e)
        snprintf(buf, len, "%s", strerror(e));
    else if (kind == SSL_ERROR_SYSCALL || kind == SSL_ERROR_ZERO_RETURN)
        snprintf(buf, len, "the peer closed the connection");
    else
        snprintf(buf, len, "TLS error %d", kind);
    ERR_clear_error();
    return buf;
}
