/* tests/unit/check_log.c - log lines through the host (spw_set_log_callback, spw_set_log_level over
 * lib/log.c): a callback gets each line's level, component and message and stderr gets nothing; lines below the
 * level never reach it; NULL sends lines to stderr again; a line logged from inside the callback goes to
 * stderr and a callback cannot replace itself; setting a callback waits until no thread is inside the old one;
 * and a real in-process job's skipped sample arrives at the callback as a warn line of the executor. */
#include <spillway/client.h>

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "tests/unit/check_run.h"

/* What the callback saw: the last line's parts and how many lines (a mutex: several threads may log). */
struct seen {
    pthread_mutex_t mu;
    int calls, level;
    char component[64], msg[512];
    int set_rc;                 /* what spw_set_log_callback returned from inside (record_and_replace) */
};

static void record(int level, const char *component, const char *msg, void *user)
{
    struct seen *s = user;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    s->level = level;
    snprintf(s->component, sizeof s->component, "%s", component);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    pthread_mutex_unlock(&s->mu);
}

/* fd 2 into a temporary file from here on (end_capture gives back what was written and restores it). */
static int begin_capture(FILE **tmp)
{
    fflush(stderr);
    *tmp = tmpfile();
    ck_assert_ptr_nonnull(*tmp);
    const int saved = dup(STDERR_FILENO);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fileno(*tmp), STDERR_FILENO), 0);
    return saved;
}

static void end_capture(FILE *tmp, int saved, char *out, size_t cap)
{
    ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
    close(saved);
    rewind(tmp);
    const size_t n = fread(out, 1, cap - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
}

START_TEST(test_log_callback_gets_level_component_and_msg)
{
    struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ck_assert_int_eq(spw_set_log_level(SPW_LOG_INFO), 0);      /* whatever $SPILLWAY_LOG_LEVEL says */
    char err[4096];
    FILE *tmp;
    const int saved = begin_capture(&tmp);
    ck_assert_int_eq(spw_set_log_callback(record, &s), 0);
    spw_log(SPW_LOG_WARN, "executor", "skipped sample=%d path=\"%s\"", 3, "a/3.jpg");
    spw_log(SPW_LOG_ERROR, "client", "cannot reach worker=%d", 7);
    end_capture(tmp, saved, err, sizeof err);
    ck_assert_int_eq(s.calls, 2);
    ck_assert_int_eq(s.level, SPW_LOG_ERROR);
    ck_assert_str_eq(s.component, "client");
    ck_assert_str_eq(s.msg, "cannot reach worker=7");
    ck_assert_msg(err[0] == '\0', "stderr got \"%s\" with a callback set", err);
}
END_TEST

START_TEST(test_log_level_drops_lines_before_the_callback)
{
    struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ck_assert_int_eq(spw_set_log_level(SPW_LOG_INFO), 0);      /* whatever $SPILLWAY_LOG_LEVEL says */
    ck_assert_int_eq(spw_set_log_callback(record, &s), 0);
    ck_assert_int_eq(spw_set_log_level(SPW_LOG_WARN), 0);
    spw_log(SPW_LOG_DEBUG, "client", "debug line");
    spw_log(SPW_LOG_INFO, "client", "info line");
    ck_assert_int_eq(s.calls, 0);
    spw_log(SPW_LOG_WARN, "source", "warn line");
    ck_assert_int_eq(s.calls, 1);
    ck_assert_int_eq(s.level, SPW_LOG_WARN);
    ck_assert_str_eq(s.msg, "warn line");
    ck_assert_int_eq(spw_set_log_level(SPW_LOG_DEBUG), 0);
    spw_log(SPW_LOG_DEBUG, "client", "debug again");
    ck_assert_int_eq(s.calls, 2);
    ck_assert_int_eq(s.level, SPW_LOG_DEBUG);
    ck_assert_int_eq(spw_set_log_level(SPW_LOG_ERROR + 1), -EINVAL);
    ck_assert_int_eq(spw_set_log_level(-1), -EINVAL);
    spw_log(SPW_LOG_DEBUG, "client", "still debug");        /* a refused level changed nothing */
    ck_assert_int_eq(s.calls, 3);
}
END_TEST

START_TEST(test_log_null_callback_restores_stderr)
{
    struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ck_assert_int_eq(spw_set_log_level(SPW_LOG_INFO), 0);      /* whatever $SPILLWAY_LOG_LEVEL says */
    char err[4096];
    FILE *tmp;
    ck_assert_int_eq(spw_set_log_callback(record, &s), 0);
    spw_log(SPW_LOG_WARN, "client", "to the callback");
    ck_assert_int_eq(spw_set_log_callback(NULL, NULL), 0);
    const int saved = begin_capture(&tmp);
    spw_log(SPW_LOG_WARN, "client", "to stderr n=%d", 2);
    end_capture(tmp, saved, err, sizeof err);
    ck_assert_int_eq(s.calls, 1);
    ck_assert_msg(strstr(err, " warn client to stderr n=2\n") != NULL, "stderr: \"%s\"", err);
    ck_assert_ptr_null(strstr(err, "to the callback"));
}
END_TEST

/* Logs a line of its own and tries to replace itself, from inside the callback. */
static void record_and_replace(int level, const char *component, const char *msg, void *user)
{
    struct seen *s = user;
    record(level, component, msg, user);
    spw_log(SPW_LOG_ERROR, "test", "from inside the callback");
    s->set_rc = spw_set_log_callback(NULL, NULL);
}

START_TEST(test_log_inside_the_callback_goes_to_stderr)
{
    struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ck_assert_int_eq(spw_set_log_level(SPW_LOG_INFO), 0);      /* whatever $SPILLWAY_LOG_LEVEL says */
    char err[4096];
    FILE *tmp;
    const int saved = begin_capture(&tmp);
    ck_assert_int_eq(spw_set_log_callback(record_and_replace, &s), 0);
    spw_log(SPW_LOG_INFO, "client", "outer");
    spw_log(SPW_LOG_INFO, "client", "outer again");    /* still the callback: it could not unhook itself */
    end_capture(tmp, saved, err, sizeof err);
    ck_assert_int_eq(s.calls, 2);
    ck_assert_str_eq(s.msg, "outer again");
    ck_assert_int_eq(s.set_rc, -EDEADLK);
    ck_assert_msg(strstr(err, " error test from inside the callback\n") != NULL, "stderr: \"%s\"", err);
    ck_assert_ptr_null(strstr(err, "outer"));
}
END_TEST

/* A slow callback: says it entered, stays 300 ms, says it left. */
struct slow {
    _Atomic int entered, left;
};

static void slow_callback(int level, const char *component, const char *msg, void *user)
{
    struct slow *s = user;
    s->entered = 1;
    nanosleep(&(struct timespec){.tv_nsec = 300 * 1000 * 1000}, NULL);
    s->left = 1;
}

static void *log_one(void *arg)
{
    spw_log(SPW_LOG_WARN, "client", "slow line");
    return arg;
}

START_TEST(test_log_set_callback_waits_for_calls_in_flight)
{
    struct slow s = {0};
    pthread_t t;
    ck_assert_int_eq(spw_set_log_callback(slow_callback, &s), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, log_one, NULL), 0);
    while (!s.entered)
        nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
    ck_assert_int_eq(spw_set_log_callback(NULL, NULL), 0);
    ck_assert_msg(s.left, "spw_set_log_callback returned while a thread was inside the old callback");
    pthread_join(t, NULL);
}
END_TEST

START_TEST(test_log_a_jobs_skipped_sample_reaches_the_callback)
{
    char root[] = "/tmp/spw-log-XXXXXX", cmd[1024], json[768], err[512];
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/a && for i in 0 1 2; do cp tests/data/fixtures/rgb420.jpg %s/a/$i.jpg; done && "
             "echo 'not a jpeg' > %s/a/1.jpg", root, root, root);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(json, sizeof json,
             "{\"source\": {\"format\": \"image_folder\", \"path\": \"%s\", \"epochs\": 1, \"shuffle\": false},"
             " \"ops\": [{\"op\": \"decode_jpeg\"}, {\"op\": \"center_crop\", \"size\": 8}],"
             " \"batch\": {\"size\": 1}, \"on_error\": \"skip\"}", root);
    struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ck_assert_int_eq(spw_set_log_level(SPW_LOG_INFO), 0);      /* whatever $SPILLWAY_LOG_LEVEL says */
    ck_assert_int_eq(spw_set_log_callback(record, &s), 0);
    struct spw_job_opts o;
    spw_job_opts_init(&o);
    o.local_cores = 2;
    struct spw_job *job = NULL;
    ck_assert_msg(spw_job_create_json(json, &o, &job, err, sizeof err) == 0, "%s", err);
    struct spw_batch *b;
    int batches = 0;
    while (spw_job_next(job, &b) == 0) {
        batches++;
        spw_job_release(job, b);
    }
    spw_job_destroy(job);
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(batches, 2);
    ck_assert_int_eq(s.calls, 1);       /* the default level (info): nothing else of an in-process job */
    ck_assert_int_eq(s.level, SPW_LOG_WARN);
    ck_assert_str_eq(s.component, "executor");
    char want[256];
    snprintf(want, sizeof want, "skipped sample=1 path=\"%s/a/1.jpg\"", root);
    ck_assert_msg(strstr(s.msg, want) == s.msg, "msg \"%s\", wanted it to start with %s", s.msg, want);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_log_callback_gets_level_component_and_msg);
    tcase_add_test(tc, test_log_level_drops_lines_before_the_callback);
    tcase_add_test(tc, test_log_null_callback_restores_stderr);
    tcase_add_test(tc, test_log_inside_the_callback_goes_to_stderr);
    tcase_add_test(tc, test_log_set_callback_waits_for_calls_in_flight);
    tcase_add_test(tc, test_log_a_jobs_skipped_sample_reaches_the_callback);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
