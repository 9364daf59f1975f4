/* tests/unit/check_journal.c - lib/journal.c on real files: records come back in order after a reopen, a
 * torn tail is cut off (and appends go on after it), a corrupt record with more after it refuses the open
 * (or is recovered on request, a copy kept), a record over the cap is refused, compaction
 * swaps the journal whole, a second opener of the directory is refused, and CRC32C matches its check value. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "lib/journal.h"

static char dir[64], path[96];
static char got[16][64];
static int n_got;

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/spw-journal-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/journal", dir);
    n_got = 0;
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static int collect(void *ctx, const uint8_t *rec, size_t len, char *why, size_t whylen)
{
    (void)ctx, (void)why, (void)whylen;
    ck_assert_int_lt(n_got, 16);
    ck_assert_uint_lt(len, sizeof got[0]);
    memcpy(got[n_got], rec, len);
    got[n_got++][len] = '\0';
    return 0;
}

static struct spw_journal *reopen(struct spw_journal_opened *info)
{
    struct spw_journal *j;
    char err[256];
    n_got = 0;
    ck_assert_msg(spw_journal_open(dir, 0, collect, NULL, &j, info, err, sizeof err) == 0, "%s", err);
    return j;
}

static void append(struct spw_journal *j, const char *s)
{
    ck_assert_int_eq(spw_journal_append(j, (const uint8_t *)s, strlen(s)), 0);
}

static off_t file_size(void)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return st.st_size;
}

START_TEST(test_journal_records_come_back_in_order)
{
    struct spw_journal_opened info;
    struct spw_journal *j = reopen(&info);
    ck_assert_int_eq(info.records, 0);
    append(j, "create job 1");
    append(j, "");
    append(j, "ack 1 0 0");
    ck_assert_int_eq(spw_journal_size(j), 3 * 8 + 12 + 0 + 9);
    spw_journal_close(j);
    j = reopen(&info);
    ck_assert_int_eq(info.records, 3);
    ck_assert_int_eq(info.dropped_bytes, 0);
    ck_assert_str_eq(got[0], "create job 1");
    ck_assert_str_eq(got[1], "");
    ck_assert_str_eq(got[2], "ack 1 0 0");
    append(j, "more");                      /* appends go after the replayed records */
    /* Group commit: written records, one sync, all of them kept; the file takes them at the sync, in one
     * write (the size counts them before). */
    const off_t before = file_size();
    ck_assert_int_eq(spw_journal_write(j, (const uint8_t *)"g1", 2), 0);
    ck_assert_int_eq(spw_journal_write(j, (const uint8_t *)"g2", 2), 0);
    ck_assert_int_eq(file_size(), before);
    ck_assert_int_eq(spw_journal_size(j), before + 2 * (8 + 2));
    ck_assert_int_eq(spw_journal_sync(j), 0);
    ck_assert_int_eq(file_size(), before + 2 * (8 + 2));
    ck_assert_int_eq(spw_journal_sync(j), 0);           /* nothing new: nothing to do */
    /* A batch then an append: the append goes after the batch, both synced. */
    ck_assert_int_eq(spw_journal_write(j, (const uint8_t *)"g3", 2), 0);
    append(j, "after");
    ck_assert_int_eq(file_size(), spw_journal_size(j));
    /* Written, not synced, then closed: on the file, as before batches were kept in memory. */
    ck_assert_int_eq(spw_journal_write(j, (const uint8_t *)"g4", 2), 0);
    spw_journal_close(j);
    j = reopen(&info);
    ck_assert_int_eq(info.records, 9);
    ck_assert_str_eq(got[3], "more");
    ck_assert_str_eq(got[5], "g2");
    ck_assert_str_eq(got[6], "g3");
    ck_assert_str_eq(got[7], "after");
    ck_assert_str_eq(got[8], "g4");
    spw_journal_close(j);
}
END_TEST

START_TEST(test_journal_cuts_a_torn_tail_and_goes_on)
{
    struct spw_journal_opened info;
    struct spw_journal *j = reopen(&info);
    append(j, "one");
    append(j, "two");
    append(j, "three");
    spw_journal_close(j);
    const off_t full = file_size();
    ck_assert_int_eq(truncate(path, full - 2), 0);     /* a crash in the middle of the last append */
    j = reopen(&info);
    ck_assert_int_eq(info.records, 2);
    ck_assert_int_eq(info.dropped_bytes, 8 + 5 - 2);
    ck_assert_int_eq(file_size(), full - 13);
    append(j, "four");
    spw_journal_close(j);
    j = reopen(&info);
    ck_assert_int_eq(info.records, 3);
    ck_assert_str_eq(got[2], "four");
    spw_journal_close(j);
    ck_assert_int_eq(truncate(path, 5), 0);             /* even the first header torn */
    j = reopen(&info);
    ck_assert_int_eq(info.records, 0);
    ck_assert_int_eq(file_size(), 0);
    spw_journal_close(j);
}
END_TEST

static void flip(off_t at)
{
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, "X", 1, at), 1);
    close(fd);
}

static void append_raw(const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_APPEND);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, p, n), (ssize_t)n);
    close(fd);
}

static int count_copies(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '^journal.corrupt-' > %s/n", dir, dir);
    ck_assert_int_ne(system(cmd), -1);
    snprintf(cmd, sizeof cmd, "%s/n", dir);
    FILE *f = fopen(cmd, "r");
    int n = -1;
    ck_assert_int_eq(fscanf(f, "%d", &n), 1);
    fclose(f);
    return n;
}

START_TEST(test_journal_refuses_a_corrupt_middle_record)
{
    struct spw_journal_opened info;
    struct spw_journal *j = reopen(&info);
    append(j, "alpha");
    append(j, "bravo");
    append(j, "charlie");
    spw_journal_close(j);
    const off_t full = file_size();
    flip(8 + 5 + 8 + 2);                            /* a bit flip inside "bravo": corruption */
    char err[512];
    ck_assert_int_eq(spw_journal_open(dir, 0, collect, NULL, &j, &info, err, sizeof err), -EBADMSG);
    ck_assert_msg(strstr(err, "is corrupt: record 1 at offset 13 fails its check") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "(1 valid records) follow it") != NULL, "%s", err);
    ck_assert_int_eq(file_size(), full);            /* nothing changed */
    /* Recovered on request: the records before it, the whole file kept beside it. */
    ck_assert_int_eq(spw_journal_open(dir, SPW_JOURNAL_RECOVER, collect, NULL, &j, &info, err, sizeof err), 0);
    ck_assert_int_eq(info.records, 1);
    ck_assert_str_eq(got[0], "alpha");
    ck_assert_int_eq(info.corrupt_at, 13);
    ck_assert_int_eq(info.dropped_records, 2);
    ck_assert_int_eq(info.dropped_bytes, full - 13);
    ck_assert_int_eq(file_size(), 8 + 5);
    struct stat st;
    ck_assert_int_eq(stat(info.copy, &st), 0);
    ck_assert_int_eq(st.st_size, full);
    append(j, "delta");
    spw_journal_close(j);
    j = reopen(&info);
    ck_assert_int_eq(info.records, 2);
    ck_assert_str_eq(got[1], "delta");
    spw_journal_close(j);
    /* The first record corrupt: refused too (not an empty journal). */
    flip(8 + 1);
    ck_assert_int_eq(spw_journal_open(dir, 0, NULL, NULL, &j, &info, err, sizeof err), -EBADMSG);
    ck_assert_msg(strstr(err, "record 0 at offset 0") != NULL, "%s", err);
    ck_assert_int_eq(spw_journal_open(dir, SPW_JOURNAL_RECOVER, NULL, NULL, &j, &info, err, sizeof err), 0);
    ck_assert_int_eq(info.records, 0);
    ck_assert_int_eq(count_copies(), 2);            /* a second recovery keeps its own copy */
    spw_journal_close(j);
}
END_TEST

START_TEST(test_journal_a_bad_last_record_or_header_is_a_torn_tail)
{
    struct spw_journal_opened info;
    struct spw_journal *j = reopen(&info);
    append(j, "alpha");
    append(j, "bravo");
    spw_journal_close(j);
    flip(8 + 5 + 8 + 2);                            /* the last record bad, nothing after it: torn */
    j = reopen(&info);
    ck_assert_int_eq(info.records, 1);
    ck_assert_int_eq(info.corrupt_at, -1);
    ck_assert_int_eq(file_size(), 8 + 5);
    spw_journal_close(j);
    /* A header claiming more than the cap, at the end: torn, not an allocation. */
    const uint8_t bad[8] = {0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0};
    append_raw(bad, 8);
    j = reopen(&info);
    ck_assert_int_eq(info.records, 1);
    ck_assert_int_eq(info.dropped_bytes, 8);
    uint8_t *big = calloc(1, SPW_JOURNAL_MAX_RECORD + 1);
    ck_assert_int_eq(spw_journal_append(j, big, SPW_JOURNAL_MAX_RECORD + 1), -EMSGSIZE);
    free(big);
    ck_assert_int_eq(file_size(), 8 + 5);
    append(j, "charlie");
    spw_journal_close(j);
    /* ... but a bad length with a valid record after it is corruption. */
    flip(3);                                        /* the first length: charlie is found after it */
    char err[512];
    ck_assert_int_eq(spw_journal_open(dir, 0, NULL, NULL, &j, &info, err, sizeof err), -EBADMSG);
    ck_assert_int_eq(count_copies(), 0);
}
END_TEST

START_TEST(test_journal_compaction_swaps_it_whole)
{
    struct spw_journal_opened info;
    struct spw_journal *j = reopen(&info);
    for (int i = 0; i < 10; i++)
        append(j, "an update");
    const uint8_t *recs[2] = {(const uint8_t *)"snapshot", (const uint8_t *)"tail"};
    const size_t lens[2] = {8, 4};
    ck_assert_int_eq(spw_journal_compact(j, recs, lens, 2), 0);
    ck_assert_int_eq(spw_journal_size(j), 8 + 8 + 8 + 4);
    append(j, "after");
    spw_journal_close(j);
    j = reopen(&info);
    ck_assert_int_eq(info.records, 3);
    ck_assert_str_eq(got[0], "snapshot");
    ck_assert_str_eq(got[1], "tail");
    ck_assert_str_eq(got[2], "after");
    spw_journal_close(j);
}
END_TEST

static int refuse_second(void *ctx, const uint8_t *rec, size_t len, char *why, size_t whylen)
{
    (void)rec;
    (void)len;
    if (++*(int *)ctx != 2)
        return 0;
    snprintf(why, whylen, "not wanted");
    return -EINVAL;
}

START_TEST(test_journal_one_owner_and_replay_errors_fail_the_open)
{
    struct spw_journal_opened info;
    struct spw_journal *j = reopen(&info), *j2 = NULL;
    append(j, "a");
    append(j, "b");
    char err[256];
    ck_assert_int_eq(spw_journal_open(dir, 0, NULL, NULL, &j2, NULL, err, sizeof err), -EBUSY);
    ck_assert_ptr_nonnull(strstr(err, "is in use by another process (pid "));
    spw_journal_close(j);
    int seen = 0;
    ck_assert_int_eq(spw_journal_open(dir, 0, refuse_second, &seen, &j2, NULL, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "record 1 refused: not wanted"));
    ck_assert_int_eq(spw_journal_open(dir, 0, NULL, NULL, &j2, &info, err, sizeof err), 0);   /* released */
    ck_assert_int_eq(info.records, 2);
    spw_journal_close(j2);
}
END_TEST

START_TEST(test_journal_crc32c_check_value)
{
    ck_assert_uint_eq(spw_crc32c(0, (const uint8_t *)"123456789", 9), 0xE3069283u);
    const uint8_t *s = (const uint8_t *)"123456789";
    ck_assert_uint_eq(spw_crc32c(spw_crc32c(0, s, 4), s + 4, 5), 0xE3069283u);   /* in pieces */
    ck_assert_uint_eq(spw_crc32c(0, NULL, 0), 0);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("journal");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_journal_records_come_back_in_order);
    tcase_add_test(tc, test_journal_cuts_a_torn_tail_and_goes_on);
    tcase_add_test(tc, test_journal_refuses_a_corrupt_middle_record);
    tcase_add_test(tc, test_journal_a_bad_last_record_or_header_is_a_torn_tail);
    tcase_add_test(tc, test_journal_compaction_swaps_it_whole);
    tcase_add_test(tc, test_journal_one_owner_and_replay_errors_fail_the_open);
    tcase_add_test(tc, test_journal_crc32c_check_value);
    suite_add_tcase(su, tc);
    return spw_check_run(su);
}
