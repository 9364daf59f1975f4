/* pipeline/object_store.c - s3:// and gs:// paths to request settings (object_store.h). Path-style URLs on
 * an endpoint (what S3-compatible stores serve), virtual-hosted ones on AWS. No I/O but getenv; no state. */
#include "pipeline/object_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

#define DEFAULT_REGION "us-east-1"     /* AWS's own default when no region is set */
#define MAX_BUCKET 255                  /* S3 allows 63; legacy and S3-compatible names run longer */
#define MAX_REGION 64

bool spw_object_is_path(const char *path)
{
    return !strncmp(path, "s3://", 5) || !strncmp(path, "gs://", 5);
}

static const char *set(const char *v)
{
    return v && v[0] ? v : NULL;
}

void spw_s3_env_read(struct spw_s3_env *env)
{
    *env = (struct spw_s3_env){
        .access_key_id = getenv("AWS_ACCESS_KEY_ID"),
        .secret_access_key = getenv("AWS_SECRET_ACCESS_KEY"),
        .session_token = getenv("AWS_SESSION_TOKEN"),
        .region = getenv("AWS_REGION"),
        .default_region = getenv("AWS_DEFAULT_REGION"),
        .endpoint_url = getenv("AWS_ENDPOINT_URL"),
    };
}

static bool bucket_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == '_';
}

/* Unreserved in RFC 3986, which SigV4's canonical URI leaves as is; '/' separates the key's segments. */
static bool plain_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~' || c == '/';
}

/* key percent-encoded once (as SigV4 signs S3 paths), into a new string; NULL when out of memory. */
static char *encode_key(const char *key, size_t len)
{
    char *out = malloc(3 * len + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)key[i];
        if (plain_char(c))
            *o++ = (char)c;
        else
            o += sprintf(o, "%%%02X", c);
    }
    *o = 0;
    return out;
}

/* Any byte a URL or a header line must not carry raw. */
static bool has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

int spw_s3_request_make(const char *path, const struct spw_s3_env *env, struct spw_s3_request *out, char *err,
                        size_t errlen)
{
    if (!strncmp(path, "gs://", 5))
        return spw_fail(err, errlen, SPW_ESOURCE, "\"%.300s\": gs:// is not read directly: use GCS's S3-compatible "
                        "XML API, with AWS_ENDPOINT_URL=https://storage.googleapis.com, an HMAC key in "
                        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and the path written s3://%.300s", path,
                        path + 5);
    if (strncmp(path, "s3://", 5))
        return spw_fail(err, errlen, SPW_ESOURCE, "\"%.300s\" is not an s3:// path", path);
    const char *bucket = path + 5, *slash = strchr(bucket, '/');
    const size_t bucket_len = slash ? (size_t)(slash - bucket) : strlen(bucket);
    if (bucket_len < 3 || bucket_len > MAX_BUCKET || bucket[0] == '.' || bucket[bucket_len - 1] == '.')
        return spw_fail(err, errlen, SPW_ESOURCE, "\"%.300s\": the bucket name has %zu bytes, outside [3, %d], or "
                        "starts or ends with '.'", path, bucket_len, MAX_BUCKET);
    for (size_t i = 0; i < bucket_len; i++)
        if (!bucket_char(bucket[i]))
            return spw_fail(err, errlen, SPW_ESOURCE, "\"%.300s\": the bucket name holds '%c' (0x%02x): only "
                            "letters, digits, '.', '-' and '_'", path, bucket[i] >= 0x20 ? bucket[i] : '?',
                            (unsigned char)bucket[i]);
    const char *key = slash ? slash + 1 : "";
    const size_t key_len = strlen(key);
    if (key_len == 0 || key_len > SPW_S3_MAX_KEY)
        return spw_fail(err, errlen, SPW_ESOURCE, "\"%.300s\": the object key has %zu bytes, outside [1, %d] "
                        "(write s3://BUCKET/KEY)", path, key_len, SPW_S3_MAX_KEY);
    if (has_control(key))
        return spw_fail(err, errlen, SPW_ESOURCE, "\"%.300s\": the object key holds a control character", path);

    const char *id = set(env->access_key_id), *secret = set(env->secret_access_key);
    const char *token = set(env->session_token), *endpoint = set(env->endpoint_url);
    const char *region = set(env->region) ? env->region : set(env->default_region) ? env->default_region
                                                                                    : DEFAULT_REGION;
    const char *region_var = set(env->region) ? "AWS_REGION" : "AWS_DEFAULT_REGION";
    if (id && !secret)
        return spw_fail(err, errlen, SPW_ESOURCE, "\"%.300s\": AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY "
                        "is not: set both, or neither for unsigned requests (public buckets)", path);
    if (secret && !id)
        return spw_fail(err, errlen, SPW_ESOURCE, "\"%.300s\": AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID "
                        "is not: set both, or neither for unsigned requests (public buckets)", path);
    if (token && !id)
        return spw_fail(err, errlen, SPW_ESOURCE, "\"%.300s\": AWS_SESSION_TOKEN is set without AWS_ACCESS_KEY_ID "
                        "and AWS_SECRET_ACCESS_KEY (a session token comes with its key pair)", path);
    static const struct {
        const char *name;
        size_t offset;
    } vars[] = {
        {"AWS_ACCESS_KEY_ID", offsetof(struct spw_s3_env, access_key_id)},
        {"AWS_SECRET_ACCESS_KEY", offsetof(struct spw_s3_env, secret_access_key)},
        {"AWS_SESSION_TOKEN", offsetof(struct spw_s3_env, session_token)},
        {"AWS_ENDPOINT_URL", offsetof(struct spw_s3_env, endpoint_url)},
    };
    for (size_t k = 0; k < sizeof vars / sizeof *vars; k++) {
        const char *v = *(const char *const *)((const char *)env + vars[k].offset);
        if (v && (strlen(v) > SPW_S3_MAX_ENV || has_control(v)))
            return spw_fail(err, errlen, SPW_ESOURCE, "%s: over %d bytes or holds a control character", vars[k].name,
                            SPW_S3_MAX_ENV);
    }
    if (id && strchr(id, ':'))
        return spw_fail(err, errlen, SPW_ESOURCE, "AWS_ACCESS_KEY_ID holds ':' (key ids are letters and digits)");
    const size_t region_len = strlen(region);
    if (region_len > MAX_REGION || strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != region_len)
        return spw_fail(err, errlen, SPW_ESOURCE, "%s \"%.64s\": not a region name (lower-case letters, digits and "
                        "'-', e.g. us-east-1)", region_var, region);
    size_t endpoint_len = 0;
    if (endpoint) {
        if (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8))
            return spw_fail(err, errlen, SPW_ESOURCE, "AWS_ENDPOINT_URL \"%.200s\": not an http:// or https:// URL",
                            endpoint);
        if (strpbrk(endpoint, "?# "))
            return spw_fail(err, errlen, SPW_ESOURCE, "AWS_ENDPOINT_URL \"%.200s\": holds a query, a fragment or a "
                            "space (give scheme://host[:port][/prefix])", endpoint);
        endpoint_len = strlen(endpoint);
        while (endpoint_len && endpoint[endpoint_len - 1] == '/')
            endpoint_len--;
    }

    struct spw_s3_request r = {0};
    char *ekey = encode_key(key, key_len);
    int rc = -ENOMEM, n;
    if (!ekey)
        goto out;
    /* AWS: virtual-hosted style, except for a dotted bucket, which its wildcard certificate (*.s3.REGION...)
     * does not cover: that one goes path-style, as the AWS SDKs do. */
    if (endpoint)
        n = asprintf(&r.url, "%.*s/%.*s/%s", (int)endpoint_len, endpoint, (int)bucket_len, bucket, ekey);
    else if (memchr(bucket, '.', bucket_len))
        n = asprintf(&r.url, "https://s3.%s.amazonaws.com/%.*s/%s", region, (int)bucket_len, bucket, ekey);
    else
        n = asprintf(&r.url, "https://%.*s.s3.%s.amazonaws.com/%s", (int)bucket_len, bucket, region, ekey);
    if (n < 0) {
        r.url = NULL;
        goto out;
    }
    if (id) {
        if (asprintf(&r.sigv4, "aws:amz:%s:s3", region) < 0) {
            r.sigv4 = NULL;
            goto out;
        }
        if (!(r.access_key_id = strdup(id)) || !(r.secret_access_key = strdup(secret)))
            goto out;
        if (token && asprintf(&r.token_header, "x-amz-security-token: %s", token) < 0) {
            r.token_header = NULL;
            goto out;
        }
    }
    rc = 0;
out:
    free(ekey);
    if (rc) {
        spw_s3_request_free(&r);
        return rc;
    }
    *out = r;
    return 0;
}

static void wipe_free(char *s)
{
    if (s)
        explicit_bzero(s, strlen(s));
    free(s);
}

void spw_s3_request_free(struct spw_s3_request *r)
{
    if (!r)
        return;
    free(r->url);
    free(r->sigv4);
    free(r->access_key_id);
    wipe_free(r->secret_access_key);
    wipe_free(r->token_header);
    *r = (struct spw_s3_request){0};
}
