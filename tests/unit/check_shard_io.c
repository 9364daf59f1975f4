/* tests/unit/check_shard_io.c - pipeline/shard_io.c without a server: a local shard reads exactly the bytes
 * asked for and refuses reads past its end; URLs are told from paths; a header file that is not one
 * "Name: value" line, or is missing, is refused before any request is made. (Reads over HTTP(S), retries and
 * TLS refusals run against nginx in tests/integration/remote_shards.sh.) Single-threaded. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "lib/err.h"
#include "pipeline/shard_io.h"

static char g_dir[] = "/tmp/spw-shard-XXXXXX";

static void write_file(const char *name, const char *text, size_t len)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    fclose(f);
}

static void remove_dir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_shard_io_local_reads_exactly_and_refuses_past_the_end)
{
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    write_file("s.tar", "0123456789", 10);
    char p[256], err[256];
    snprintf(p, sizeof p, "%s/s.tar", g_dir);
    struct spw_shard *s;
    ck_assert_int_eq(spw_shard_open(p, NULL, NULL, &s, err, sizeof err), 0);
    ck_assert_int_eq(spw_shard_size(s), 10);
    char buf[16] = "";
    ck_assert_int_eq(spw_shard_pread(s, buf, 4, 3), 0);
    ck_assert(!memcmp(buf, "3456", 4));
    ck_assert_int_eq(spw_shard_pread(s, buf, 0, 10), 0);
    ck_assert_int_eq(spw_shard_pread(s, buf, 2, 9), -EIO);
    ck_assert_int_eq(spw_shard_pread(s, buf, 1, -1), -EIO);
    ck_assert_int_eq(spw_shard_pread(s, buf, 1, 11), -EIO);
    spw_shard_close(s);
    snprintf(p, sizeof p, "%s/missing.tar", g_dir);
    ck_assert_int_eq(spw_shard_open(p, NULL, NULL, &s, err, sizeof err), SPW_ESOURCE);
    ck_assert(strstr(err, "missing.tar") != NULL);
    remove_dir();
}
END_TEST

START_TEST(test_shard_io_tells_urls_from_paths)
{
    ck_assert(spw_shard_is_url("http://h/x.tar"));
    ck_assert(spw_shard_is_url("https://h:8443/a/b.tar?X-Amz-Signature=ab"));
    ck_assert(!spw_shard_is_url("/data/http://x.tar"));
    ck_assert(!spw_shard_is_url("ftp://h/x.tar"));
    ck_assert(!spw_shard_is_url("HTTP:/x"));
    ck_assert(spw_shard_is_url("s3://bucket/x.tar"));     /* object stores: never a file name */
    ck_assert(spw_shard_is_url("gs://bucket/x.tar"));
}
END_TEST

START_TEST(test_shard_io_refuses_bad_header_files_before_a_request)
{
    ck_assert_ptr_nonnull(mkdtemp(g_dir));
    const char *bad[] = {"", "no colon here\n", "A: 1\nB: 2\n", "A: 1\r\nB: 2", "A: b\0c"};
    const size_t len[] = {0, 14, 10, 11, 6};
    char p[256], err[256];
    snprintf(p, sizeof p, "%s/h", g_dir);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_file("h", bad[i], len[i]);
        struct spw_http_opts o = {.header_file = p};
        struct spw_shard *s = NULL;
        /* port 1 on loopback: nothing listens, and nothing is asked before the header is checked */
        ck_assert_int_eq(spw_shard_open("http://127.0.0.1:1/x.tar", &o, NULL, &s, err, sizeof err), SPW_ESOURCE);
        ck_assert_msg(strstr(err, "not one \"Name: value\" line") != NULL, "%zu: %s", i, err);
        ck_assert_ptr_null(s);
    }
    char big[SPW_HTTP_MAX_HEADER + 10];
    memset(big, 'a', sizeof big);
    big[1] = ':';
    write_file("h", big, sizeof big);
    struct spw_http_opts o = {.header_file = p};
    struct spw_shard *s = NULL;
    ck_assert_int_eq(spw_shard_open("http://127.0.0.1:1/x.tar", &o, NULL, &s, err, sizeof err), SPW_ESOURCE);
    ck_assert(strstr(err, "over 8192 bytes") != NULL);
    o.header_file = "/nonexistent/header";
    ck_assert_int_eq(spw_shard_open("http://127.0.0.1:1/x.tar", &o, NULL, &s, err, sizeof err), SPW_ESOURCE);
    ck_assert(strstr(err, "/nonexistent/header") != NULL);
    remove_dir();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shard_io");
    TCase *tc = tcase_create("shard_io");
    tcase_add_test(tc, test_shard_io_local_reads_exactly_and_refuses_past_the_end);
    tcase_add_test(tc, test_shard_io_tells_urls_from_paths);
    tcase_add_test(tc, test_shard_io_refuses_bad_header_files_before_a_request);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
