/* pipeline/shard_io.c - shard bytes by offset from a local file or an http(s) object (shard_io.h). Remote
 * reads are GETs with a Range header on libcurl easy handles kept in a small per-shard pool, so connections
 * (and TLS sessions) are reused across reads and threads; a handle is used by one thread at a time. An s3://
 * path is the same reads on the URL object_store.c maps it to, signed by libcurl (SigV4). */
#include "pipeline/shard_io.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/log.h"
#include "pipeline/object_store.h"

#define POOL 8                          /* idle handles kept per shard (connections to its server) */
#define ERROR_BODY 1024                 /* bytes of an error answer's body kept to find S3's <Code> in */
#define ERROR_TEXT 160                  /* bytes of its <Message> put in an error */

struct spw_shard {
    int fd;                             /* local: the open file; -1 for a URL */
    char *name;                         /* the path or URL it was opened by */
    char *url, *ca_file;
    int64_t size;
    struct curl_slist *headers;
    struct spw_s3_request s3;           /* an s3:// shard's signing settings (sigv4 NULL: unsigned) */
    struct spw_shard_stats *stats;
    pthread_mutex_t mu;
    CURL *pool[POOL];
    int n_pool;
    int warned;                         /* atomic: the reason a range failed was logged */
};

bool spw_shard_is_url(const char *path)
{
    return !strncmp(path, "http://", 7) || !strncmp(path, "https://", 8) || spw_object_is_path(path);
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- one range request ---- */

struct sink {
    CURL *h;
    uint8_t *dst;
    size_t cap, got;
    bool overflow;
    int64_t total;                      /* from Content-Range: bytes A-B/TOTAL (or * /TOTAL); -1 unknown */
    char body[ERROR_BODY + 1];          /* the start of an error answer (S3's XML names its <Code>) */
    size_t body_len;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct sink *s = ctx;
    const size_t len = size * n;
    long status = 0;
    curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200 && status != 206) {   /* an error page is not the shard's bytes: its start says why */
        const size_t keep = len < ERROR_BODY - s->body_len ? len : ERROR_BODY - s->body_len;
        memcpy(s->body + s->body_len, p, keep);
        s->body_len += keep;
        s->body[s->body_len] = 0;
        return len;
    }
    if (len > s->cap - s->got) {        /* more than asked for: never written past the buffer */
        s->overflow = true;
        return 0;
    }
    memcpy(s->dst + s->got, p, len);
    s->got += len;
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ctx)
{
    struct sink *s = ctx;
    const size_t len = size * n;
    char line[256];
    if (len < sizeof line && len > 14 && !strncasecmp(p, "content-range:", 14)) {
        memcpy(line, p, len);
        line[len] = 0;
        const char *slash = strrchr(line, '/');
        char *end;
        long long t = slash ? strtoll(slash + 1, &end, 10) : -1;
        if (slash && end != slash + 1 && t >= 0)
            s->total = t;
    }
    return len;
}

/* The text of <tag>...</tag> in an error body, at most cap bytes, keeping only printable ASCII (a quote
 * becomes '): what an S3 or GCS error names, fit for a log line. "" when absent. */
static void xml_text(const char *body, const char *tag, char *out, size_t cap)
{
    char open[32], close[32];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    out[0] = 0;
    const char *a = strstr(body, open), *b = a ? strstr(a, close) : NULL;
    if (!b)
        return;
    size_t n = 0;
    for (a += strlen(open); a < b && n + 1 < cap; a++)
        if (*a >= 0x20 && *a < 0x7f)
            out[n++] = *a == '"' ? '\'' : *a;
    out[n] = 0;
}

/* ": Code (Message)" from an error body (S3's XML), or "" when it names no <Code>. */
static void error_detail(const char *body, char *out, size_t outlen)
{
    char code[64], msg[ERROR_TEXT + 1];
    xml_text(body, "Code", code, sizeof code);
    xml_text(body, "Message", msg, sizeof msg);
    if (!code[0])
        out[0] = 0;
    else if (msg[0])
        snprintf(out, outlen, ": %s (%s)", code, msg);
    else
        snprintf(out, outlen, ": %s", code);
}

static CURL *handle_take(struct spw_shard *s)
{
    pthread_mutex_lock(&s->mu);
    CURL *h = s->n_pool ? s->pool[--s->n_pool] : NULL;
    pthread_mutex_unlock(&s->mu);
    if (h)
        return h;
    if (!(h = curl_easy_init()))
        return NULL;
    curl_easy_setopt(h, CURLOPT_URL, s->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 3L);
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "https");   /* never downgraded by a redirect */
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);            /* a stalled transfer: 30 s without a byte */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 30L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (s->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, s->ca_file);
    if (s->headers)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, s->headers);
    if (s->s3.sigv4) {                  /* libcurl signs each request (and each retry) itself */
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s->s3.sigv4);
        curl_easy_setopt(h, CURLOPT_USERNAME, s->s3.access_key_id);
        curl_easy_setopt(h, CURLOPT_PASSWORD, s->s3.secret_access_key);
    }
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    return h;
}

static void handle_give(struct spw_shard *s, CURL *h)
{
    pthread_mutex_lock(&s->mu);
    if (s->n_pool < POOL) {
        s->pool[s->n_pool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    curl_easy_cleanup(h);
}

static bool retryable(CURLcode cc, long status)
{
    if (cc == CURLE_OK)
        return status >= 500 || status == 429;
    switch (cc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_TOO_MANY_REDIRECTS:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_WRITE_ERROR:             /* the body ran past what was asked for */
        return false;
    default:
        return true;                    /* refused, reset, timed out, cut short: the server may be back */
    }
}

static void add_stat(int64_t *counter, int64_t v)
{
    __atomic_add_fetch(counter, v, __ATOMIC_RELAXED);
}

/* GET bytes [off, off + len) (len 1 at off 0 learns the size too). Returns 0, or -EIO / -ENOMEM with the
 * last reason in why. */
static int get_range(struct spw_shard *s, uint8_t *dst, size_t len, int64_t off, int64_t *total, char *why,
                     size_t whylen)
{
    CURL *h = handle_take(s);
    if (!h)
        return -ENOMEM;
    char range[64];
    snprintf(range, sizeof range, "%" PRId64 "-%" PRId64, off, off + (int64_t)len - 1);
    curl_easy_setopt(h, CURLOPT_RANGE, range);
    char errbuf[CURL_ERROR_SIZE];
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    int rc = -EIO;
    for (int attempt = 0; attempt < SPW_HTTP_TRIES; attempt++) {
        if (attempt) {
            add_stat(&s->stats->retries, 1);
            struct timespec t = {.tv_sec = 0, .tv_nsec = 100000000L << (attempt - 1)};
            while (t.tv_nsec >= 1000000000L) {
                t.tv_sec++;
                t.tv_nsec -= 1000000000L;
            }
            nanosleep(&t, NULL);
        }
        struct sink sk = {.h = h, .dst = dst, .cap = len, .total = -1};
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &sk);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, &sk);
        errbuf[0] = 0;
        CURLcode cc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        add_stat(&s->stats->requests, 1);
        add_stat(&s->stats->bytes, (int64_t)sk.got);
        /* a range past the end comes short: the server sends what there is (S3: "bytes 0-0/1" for 0-1) */
        const bool to_end = sk.total >= 0 && sk.got < len && off + (int64_t)sk.got == sk.total;
        if (cc == CURLE_OK && status == 206 && (sk.got == len || to_end)) {
            *total = sk.total;
            rc = 0;
            break;
        }
        if (cc == CURLE_OK && status == 200 && off == 0 && !sk.overflow) {
            *total = (int64_t)sk.got;   /* no ranges, but the whole object fit in what was asked for */
            rc = 0;
            break;
        }
        if (cc == CURLE_OK && status == 416 && sk.total == 0 && off == 0) {
            *total = 0;                 /* an empty object has no byte 0 */
            rc = 0;
            break;
        }
        if (cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CACERT_BADFILE)
            snprintf(why, whylen, "TLS: %s (the server's certificate is not signed by %s)", errbuf[0] ? errbuf :
                     curl_easy_strerror(cc), s->ca_file ? s->ca_file : "the system's CAs: give source.ca_file");
        else if (cc != CURLE_OK && !sk.overflow)
            snprintf(why, whylen, "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
        else if (sk.overflow || status == 200)
            snprintf(why, whylen, "the server answered %ld without honouring the Range header (bytes %s)", status,
                     range);
        else {
            char detail[64 + ERROR_TEXT + 8];
            error_detail(sk.body, detail, sizeof detail);
            snprintf(why, whylen, "HTTP %ld for bytes %s%s", status, range, detail);
        }
        if (!retryable(cc, status) || sk.overflow)
            break;
    }
    handle_give(s, h);
    return rc;
}

/* ---- opening ---- */

static int read_header_file(const char *path, struct curl_slist **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return spw_fail(err, errlen, SPW_ESOURCE, "source.header_file \"%s\": %s", path, strerror(errno));
    char buf[SPW_HTTP_MAX_HEADER + 2];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    if (n > SPW_HTTP_MAX_HEADER)
        return spw_fail(err, errlen, SPW_ESOURCE, "source.header_file \"%s\": over %d bytes", path,
                        SPW_HTTP_MAX_HEADER);
    buf[n] = 0;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = 0;
    if (!n || memchr(buf, '\n', n) || memchr(buf, '\r', n) || !strchr(buf, ':') || strlen(buf) != n)
        return spw_fail(err, errlen, SPW_ESOURCE, "source.header_file \"%s\": not one \"Name: value\" line",
                        path);
    if (!(*out = curl_slist_append(NULL, buf)))
        return -ENOMEM;
    return 0;
}

int spw_shard_open(const char *path, const struct spw_http_opts *o, struct spw_shard_stats *stats,
                   struct spw_shard **out, char *err, size_t errlen)
{
    static struct spw_shard_stats nowhere;
    struct spw_shard *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->fd = -1;
    s->stats = stats ? stats : &nowhere;
    pthread_mutex_init(&s->mu, NULL);
    int rc = 0;
    if (!(s->name = strdup(path))) {
        rc = -ENOMEM;
        goto out;
    }
    if (!spw_shard_is_url(path)) {
        struct stat st;
        if ((s->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(s->fd, &st) != 0)
            rc = spw_fail(err, errlen, SPW_ESOURCE, "cannot open shard \"%s\": %s", path, strerror(errno));
        else
            s->size = st.st_size;
        goto out;
    }
    pthread_once(&curl_once, curl_init);
    if (spw_object_is_path(path)) {     /* s3://: its URL and signing, read from this process's AWS_* */
        struct spw_s3_env env;
        spw_s3_env_read(&env);
        if ((rc = spw_s3_request_make(path, &env, &s->s3, err, errlen)) != 0)
            goto out;
        static int logged;              /* once a process: how its s3:// reads go (never the secret) */
        if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
            spw_log(SPW_LOG_INFO, "source", "s3 shards signed=%s session_token=%s first_url=\"%s\"",
                    s->s3.sigv4 ? s->s3.sigv4 : "no (AWS_ACCESS_KEY_ID unset)", s->s3.token_header ? "yes" : "no",
                    s->s3.url);
    }
    if (!(s->url = strdup(s->s3.url ? s->s3.url : path)) ||
        (o && o->ca_file && !(s->ca_file = strdup(o->ca_file)))) {
        rc = -ENOMEM;
        goto out;
    }
    if (o && o->header_file && (rc = read_header_file(o->header_file, &s->headers, err, errlen)) != 0)
        goto out;
    /* SigV4 for S3 signs the payload's hash, given in a header: UNSIGNED-PAYLOAD for a GET (libcurl 7.88 signs
     * whatever this header says; later ones add it themselves unless it is here). */
    const char *signing[] = {s->s3.sigv4 ? "x-amz-content-sha256: UNSIGNED-PAYLOAD" : NULL, s->s3.token_header};
    for (size_t k = 0; k < sizeof signing / sizeof *signing; k++) {
        struct curl_slist *grown = signing[k] ? curl_slist_append(s->headers, signing[k]) : s->headers;
        if (signing[k] && !grown) {
            rc = -ENOMEM;
            goto out;
        }
        s->headers = grown;
    }
    /* The size from the first range's Content-Range. Two bytes, not one: s3rver (the test's S3) takes the end
     * of "bytes=0-0" for no end and sends the whole object. */
    uint8_t first[2];
    char why[CURL_ERROR_SIZE + 256] = "";
    int64_t total = -1;
    if ((rc = get_range(s, first, sizeof first, 0, &total, why, sizeof why)) != 0 || total < 0)
        rc = rc == -ENOMEM ? rc : spw_fail(err, errlen, SPW_ESOURCE, "shard \"%s\"%s%s%s: %s", path,
                                           s->s3.url ? " (" : "", s->s3.url ? s->s3.url : "", s->s3.url ? ")" : "",
                                           why[0] ? why : "no Content-Range in the answer (no Range support?)");
    else
        s->size = total;
out:
    if (rc) {
        spw_shard_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

const char *spw_shard_name(const struct spw_shard *s)
{
    return s->name;
}

int64_t spw_shard_size(const struct spw_shard *s)
{
    return s->size;
}

size_t spw_shard_read_size(const struct spw_shard *s)
{
    return s->fd >= 0 ? (size_t)64 << 10 : (size_t)1 << 20;
}

int spw_shard_pread(struct spw_shard *s, void *buf, size_t len, int64_t off)
{
    if (off < 0 || (uint64_t)off > (uint64_t)s->size || len > (uint64_t)(s->size - off))
        return -EIO;
    if (!len)
        return 0;
    if (s->fd >= 0) {
        size_t got = 0;
        while (got < len) {
            ssize_t r = pread(s->fd, (uint8_t *)buf + got, len - got, off + (int64_t)got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return r < 0 ? -errno : -EIO;
            got += (size_t)r;
        }
        return 0;
    }
    char why[CURL_ERROR_SIZE + 256] = "";
    int64_t total;
    int rc = get_range(s, buf, len, off, &total, why, sizeof why);
    if (rc == 0 && total >= 0 && total != s->size) {
        snprintf(why, sizeof why, "its size changed from %lld to %lld bytes since it was listed",
                 (long long)s->size, (long long)total);
        rc = -EIO;
    }
    if (rc == -EIO && !__atomic_exchange_n(&s->warned, 1, __ATOMIC_RELAXED))
        spw_log(SPW_LOG_WARN, "source", "shard read failed url=\"%s\" why=\"%s\" tries=%d", s->url, why,
                SPW_HTTP_TRIES);
    return rc;
}

void spw_shard_close(struct spw_shard *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        close(s->fd);
    for (int i = 0; i < s->n_pool; i++)
        curl_easy_cleanup(s->pool[i]);
    for (struct curl_slist *l = s->headers; l; l = l->next)
        explicit_bzero(l->data, strlen(l->data));   /* a bearer or session token */
    curl_slist_free_all(s->headers);
    spw_s3_request_free(&s->s3);
    pthread_mutex_destroy(&s->mu);
    free(s->name);
    free(s->url);
    free(s->ca_file);
    free(s);
}
