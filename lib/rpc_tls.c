/* lib/rpc_tls.c - loading the PEM files behind spw_rpc_tls (see rpc.h); the credentials themselves are
 * gRPC's (rpc_server.c, rpc_client.c). Thread-safe (no shared state). */
#include "lib/rpc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "lib/err.h"

#define MAX_PEM ((size_t)1 << 20)

static int read_pem(const char *path, char **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!path || !*path)
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return spw_fail(err, errlen, -errno, "TLS file %s: %s", path, strerror(errno));
    char *buf = malloc(MAX_PEM + 1);
    size_t n = buf ? fread(buf, 1, MAX_PEM + 1, f) : 0;
    fclose(f);
    if (!buf)
        return spw_fail(err, errlen, -ENOMEM, "out of memory");
    if (n > MAX_PEM || !n || !strstr((buf[n] = '\0', buf), "-----BEGIN ")) {
        free(buf);
        return spw_fail(err, errlen, SPW_EFORMAT, "TLS file %s: %s", path,
                        n > MAX_PEM ? "over 1 MiB" : "not a PEM file (no -----BEGIN line)");
    }
    *out = buf;
    return 0;
}

/* The certificate this process presents must be valid now: an expired or not-yet-valid one is refused at
 * start with its dates, not met later as a handshake failure the peer blames on its CA. */
static int check_validity(const char *path, const char *pem, char *err, size_t errlen)
{
    BIO *in = BIO_new_mem_buf(pem, -1);
    X509 *x = in ? PEM_read_bio_X509(in, NULL, NULL, NULL) : NULL;
    BIO_free(in);
    if (!x)
        return spw_fail(err, errlen, SPW_EFORMAT, "TLS certificate %s: no PEM certificate in it", path);
    const ASN1_TIME *after = X509_get0_notAfter(x), *before = X509_get0_notBefore(x);
    const int expired = X509_cmp_current_time(after) < 0, early = X509_cmp_current_time(before) > 0;
    char when[64] = "";
    if (expired || early) {
        BIO *out = BIO_new(BIO_s_mem());
        if (out && ASN1_TIME_print(out, expired ? after : before) == 1) {
            const int n = BIO_read(out, when, (int)sizeof when - 1);
            when[n > 0 ? n : 0] = '\0';
        }
        BIO_free(out);
    }
    X509_free(x);
    if (expired)
        return spw_fail(err, errlen, -EKEYEXPIRED, "TLS certificate %s expired on %s: renew it", path, when);
    if (early)
        return spw_fail(err, errlen, -EKEYREJECTED, "TLS certificate %s is not valid before %s (a clock behind, or "
                        "a certificate issued for later)", path, when);
    return 0;
}

int spw_rpc_tls_load(const char *cert_file, const char *key_file, const char *ca_file, bool require_client_cert,
                     struct spw_rpc_tls **out, char *err, size_t errlen)
{
    *out = NULL;
    const bool any = (cert_file && *cert_file) || (key_file && *key_file) || (ca_file && *ca_file);
    if (!any)
        return require_client_cert ? spw_fail(err, errlen, -EINVAL, "client certificates need TLS (a CA file)") : 0;
    if (!(cert_file && *cert_file) != !(key_file && *key_file))
        return spw_fail(err, errlen, -EINVAL, "a TLS certificate and its key go together: give both or neither");
    struct spw_rpc_tls *t = calloc(1, sizeof *t);
    if (!t)
        return spw_fail(err, errlen, -ENOMEM, "out of memory");
    t->require_client_cert = require_client_cert;
    int rc = read_pem(cert_file, &t->cert_pem, err, errlen);
    if (!rc && t->cert_pem)
        rc = check_validity(cert_file, t->cert_pem, err, errlen);
    if (!rc)
        rc = read_pem(key_file, &t->key_pem, err, errlen);
    if (!rc)
        rc = read_pem(ca_file, &t->ca_pem, err, errlen);
    if (rc) {
        spw_rpc_tls_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void spw_rpc_tls_free(struct spw_rpc_tls *t)
{
    if (!t)
        return;
    free(t->cert_pem);
    if (t->key_pem)
        memset(t->key_pem, 0, strlen(t->key_pem));     /* a private key does not linger in freed memory */
    free(t->key_pem);
    free(t->ca_pem);
    free(t);
}

int spw_rpc_tls_from_flags(const char *cert, const char *key, const char *ca, const char *client_ca,
                           struct spw_rpc_tls **server, struct spw_rpc_tls **channel, char *err, size_t errlen)
{
    *server = *channel = NULL;
    const bool serve = cert && *cert, verify = ca && *ca;
    if (client_ca && *client_ca && !serve)
        return spw_fail(err, errlen, -EINVAL, "--tls-client-ca needs --tls-cert and --tls-key (TLS to verify clients)");
    int rc = serve ? spw_rpc_tls_load(cert, key, client_ca, client_ca && *client_ca, server, err, errlen)
                   : (key && *key ? spw_fail(err, errlen, -EINVAL, "--tls-key without --tls-cert") : 0);
    if (rc == 0 && verify)
        rc = spw_rpc_tls_load(cert, key, ca, false, channel, err, errlen);
    if (rc) {
        spw_rpc_tls_free(*server);
        *server = NULL;
    }
    return rc;
}

const char *spw_rpc_tls_hint(int status, const char *msg, bool tls)
{
    if (msg && strstr(msg, "certificate verify failed"))
        return " (the server's certificate is not signed by the CA given, does not name the address dialed, or "
               "is expired or not yet valid)";
    if (status != SPW_RPC_UNAVAILABLE || !msg || !strstr(msg, "Socket closed"))
        return "";
    return tls ? " (if the server requires client certificates: give one its CA signed, --tls-cert/--tls-key)"
               : " (if the server speaks TLS: give the CA its certificate is signed by, --tls-ca)";
}
