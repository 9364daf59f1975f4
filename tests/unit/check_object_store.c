/* tests/unit/check_object_store.c - pipeline/object_store.c, no server: s3:// paths map to the endpoint's
 * path-style URL or AWS's virtual-hosted one (path-style for dotted buckets) with the key percent-encoded once;
 * the region comes from AWS_REGION, then AWS_DEFAULT_REGION, then us-east-1; credentials make SigV4 settings
 * and their absence an unsigned request; half a key pair, a bad bucket, key, region or endpoint and gs:// are
 * refused naming what is wrong, and no message holds the secret or the token. (Reads against a real
 * S3-compatible server run in tests/integration/s3_shards.sh.) Single-threaded. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check_run.h"
#include "lib/err.h"
#include "pipeline/object_store.h"

#define SECRET "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
#define TOKEN "FwoGZXIvYXdzE-session-token-example"

START_TEST(test_object_store_maps_paths_to_urls)
{
    struct spw_s3_request r;
    char err[512];
    struct spw_s3_env env = {.region = "eu-west-3"};
    ck_assert_int_eq(spw_s3_request_make("s3://my-bucket/train/shard-000.tar", &env, &r, err, sizeof err), 0);
    ck_assert_str_eq(r.url, "https://my-bucket.s3.eu-west-3.amazonaws.com/train/shard-000.tar");
    ck_assert_ptr_null(r.sigv4);                    /* no credentials: unsigned */
    ck_assert_ptr_null(r.token_header);
    spw_s3_request_free(&r);

    env = (struct spw_s3_env){.endpoint_url = "http://127.0.0.1:9000/", .default_region = "ap-south-1"};
    ck_assert_int_eq(spw_s3_request_make("s3://b.with.dots/a b+c/ü.tar", &env, &r, err, sizeof err), 0);
    ck_assert_str_eq(r.url, "http://127.0.0.1:9000/b.with.dots/a%20b%2Bc/%C3%BC.tar");
    spw_s3_request_free(&r);

    env = (struct spw_s3_env){.region = ""};        /* empty is unset: AWS's default */
    ck_assert_int_eq(spw_s3_request_make("s3://b.with.dots/k", &env, &r, err, sizeof err), 0);
    ck_assert_str_eq(r.url, "https://s3.us-east-1.amazonaws.com/b.with.dots/k");
    spw_s3_request_free(&r);
}
END_TEST

START_TEST(test_object_store_signs_with_credentials)
{
    struct spw_s3_request r;
    char err[512];
    const struct spw_s3_env env = {.access_key_id = "AKIDEXAMPLE", .secret_access_key = SECRET,
                                   .session_token = TOKEN, .region = "us-west-2", .default_region = "eu-north-1"};
    ck_assert_int_eq(spw_s3_request_make("s3://bkt/k.tar", &env, &r, err, sizeof err), 0);
    ck_assert_str_eq(r.sigv4, "aws:amz:us-west-2:s3");  /* AWS_REGION wins over AWS_DEFAULT_REGION */
    ck_assert_str_eq(r.access_key_id, "AKIDEXAMPLE");
    ck_assert_str_eq(r.secret_access_key, SECRET);
    ck_assert_str_eq(r.token_header, "x-amz-security-token: " TOKEN);
    spw_s3_request_free(&r);
    ck_assert_ptr_null(r.url);
    ck_assert_ptr_null(r.secret_access_key);
    spw_s3_request_free(NULL);
}
END_TEST

/* path under env is refused with SPW_ESOURCE and a message holding want and neither secret nor token. */
static void refused(const char *path, const struct spw_s3_env *env, const char *want)
{
    struct spw_s3_request r = {0};
    char err[1024] = "";
    ck_assert_int_eq(spw_s3_request_make(path, env, &r, err, sizeof err), SPW_ESOURCE);
    ck_assert_msg(strstr(err, want) != NULL, "\"%s\" does not say \"%s\"", err, want);
    ck_assert_msg(!strstr(err, SECRET) && !strstr(err, TOKEN), "\"%s\" shows a secret", err);
    ck_assert_ptr_null(r.url);
}

START_TEST(test_object_store_refuses_with_the_reason)
{
    const struct spw_s3_env none = {0};
    refused("s3://bkt/k", &(struct spw_s3_env){.access_key_id = "AKID"}, "AWS_SECRET_ACCESS_KEY is not");
    refused("s3://bkt/k", &(struct spw_s3_env){.access_key_id = "AKID", .secret_access_key = ""},
            "AWS_SECRET_ACCESS_KEY is not");
    refused("s3://bkt/k", &(struct spw_s3_env){.secret_access_key = SECRET}, "AWS_ACCESS_KEY_ID is not");
    refused("s3://bkt/k", &(struct spw_s3_env){.session_token = TOKEN}, "AWS_SESSION_TOKEN is set without");
    refused("gs://bkt/k.tar", &none, "AWS_ENDPOINT_URL=https://storage.googleapis.com");
    refused("gs://bkt/k.tar", &none, "s3://bkt/k.tar");
    refused("s3://bkt", &none, "the object key has 0 bytes");
    refused("s3://bkt/", &none, "the object key has 0 bytes");
    refused("s3://b/k", &none, "the bucket name has 1 bytes");
    refused("s3://evil.com:80@x/k", &none, "the bucket name holds ':'");
    refused("s3://bkt/a\nb", &none, "control character");
    refused("s3://bkt/k", &(struct spw_s3_env){.region = "us-east-1.evil.com/"}, "AWS_REGION \"us-east-1.evil");
    refused("s3://bkt/k", &(struct spw_s3_env){.default_region = "EU"}, "AWS_DEFAULT_REGION \"EU\"");
    refused("s3://bkt/k", &(struct spw_s3_env){.endpoint_url = "ftp://h"}, "AWS_ENDPOINT_URL \"ftp://h\"");
    refused("s3://bkt/k", &(struct spw_s3_env){.endpoint_url = "http://h/?x=1"}, "holds a query");
    refused("s3://bkt/k", &(struct spw_s3_env){.access_key_id = "AK:ID", .secret_access_key = SECRET}, "holds ':'");
    refused("s3://bkt/k", &(struct spw_s3_env){.access_key_id = "AKID", .secret_access_key = SECRET "\r\nX: y"},
            "AWS_SECRET_ACCESS_KEY: over");
    char *long_key = malloc(SPW_S3_MAX_KEY + 16);
    ck_assert_ptr_nonnull(long_key);
    memcpy(long_key, "s3://bkt/", 9);
    memset(long_key + 9, 'k', SPW_S3_MAX_KEY + 1);
    long_key[9 + SPW_S3_MAX_KEY + 1] = 0;
    refused(long_key, &none, "outside [1, 1024]");
    free(long_key);
}
END_TEST

START_TEST(test_object_store_tells_object_paths)
{
    ck_assert(spw_object_is_path("s3://b/k"));
    ck_assert(spw_object_is_path("gs://b/k"));
    ck_assert(!spw_object_is_path("/data/s3://b/k"));
    ck_assert(!spw_object_is_path("S3://b/k"));
    ck_assert(!spw_object_is_path("https://b/k"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("object_store");
    TCase *tc = tcase_create("object_store");
    tcase_add_test(tc, test_object_store_maps_paths_to_urls);
    tcase_add_test(tc, test_object_store_signs_with_credentials);
    tcase_add_test(tc, test_object_store_refuses_with_the_reason);
    tcase_add_test(tc, test_object_store_tells_object_paths);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
