/* pipeline/object_store.h - object-store paths to HTTP requests, in one place: "s3://bucket/key" becomes an
 * http(s) URL (the endpoint's path-style URL, or AWS's virtual-hosted one) plus what libcurl needs to sign it
 * with SigV4 (credentials, region, session token) from the AWS_* environment; "gs://" is refused with the way
 * to reach GCS through its S3-compatible API. Not a client: no request is made here. Pure functions over the
 * values given (spw_s3_env_read reads the environment); safe from any thread. */
#ifndef SPW_PIPELINE_OBJECT_STORE_H
#define SPW_PIPELINE_OBJECT_STORE_H

#include <stdbool.h>
#include <stddef.h>

#define SPW_S3_MAX_ENV 4096             /* bytes of one AWS_* value (a session token is about 1 KiB) */
#define SPW_S3_MAX_KEY 1024             /* bytes of an object key, as S3 allows */

/* The AWS_* settings that an s3:// read uses; NULL or "" is unset. Borrowed strings. */
struct spw_s3_env {
    const char *access_key_id;          /* AWS_ACCESS_KEY_ID */
    const char *secret_access_key;      /* AWS_SECRET_ACCESS_KEY: never put in a message */
    const char *session_token;          /* AWS_SESSION_TOKEN: never put in a message */
    const char *region;                 /* AWS_REGION */
    const char *default_region;         /* AWS_DEFAULT_REGION, when AWS_REGION is unset */
    const char *endpoint_url;           /* AWS_ENDPOINT_URL: an S3-compatible store, path-style */
};

/* How to fetch one object: a URL, and when credentials were given, SigV4 settings for libcurl. Owned: free
 * with spw_s3_request_free (which wipes the secret and the token). */
struct spw_s3_request {
    char *url;                          /* http:// or https:// */
    char *sigv4;                        /* CURLOPT_AWS_SIGV4 ("aws:amz:REGION:s3"); NULL: unsigned */
    char *access_key_id, *secret_access_key;
    char *token_header;                 /* "x-amz-security-token: ..."; NULL without a session token */
};

/* Whether path is an object-store path (s3:// or gs://): a name for a request, never a local file. */
bool spw_object_is_path(const char *path);
/* The process's AWS_* variables into env (pointers into the environment: valid while nobody setenv()s). */
void spw_s3_env_read(struct spw_s3_env *env);
/* The request for an s3:// path under env. A gs:// path, a malformed bucket or key, half a key pair (naming
 * the missing variable), an over-long value or an endpoint that is not an http(s) URL is refused: returns
 * SPW_ESOURCE with the reason in err (which never holds the secret or the token), or -ENOMEM; 0 fills *out. */
int spw_s3_request_make(const char *path, const struct spw_s3_env *env, struct spw_s3_request *out, char *err,
                        size_t errlen);
/* Free what spw_s3_request_make filled (the secret and the token are zeroed first); NULL and a zeroed
 * request are fine. */
void spw_s3_request_free(struct spw_s3_request *r);

#endif
