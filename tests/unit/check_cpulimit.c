/* tests/unit/check_cpulimit.c - lib/cpulimit.c on fake cgroup trees in a temporary folder: v1 and v2
 * quotas, the smallest along the path winning, "max" and -1 meaning none, and the live limit being at
 * least a fraction of a CPU and at most the online CPUs; the run delay of a thread that shares its one CPU
 * with a spinning thread grows by about half the time they share it. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/cpulimit.h"

static char root[64];

static void put(const char *rel, const char *text)
{
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    snprintf(root, sizeof root, "/tmp/spw-cg-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(test_cpulimit_v1_smallest_quota_on_the_path)
{
    put("cpu/cpu.cfs_quota_us", "-1\n");
    put("cpu/cpu.cfs_period_us", "100000\n");
    put("cpu/pods/cpu.cfs_quota_us", "150000\n");      /* 1.5 CPUs for the parent */
    put("cpu/pods/cpu.cfs_period_us", "100000\n");
    put("cpu/pods/w1/cpu.cfs_quota_us", "45000\n");    /* 0.45 for this one */
    put("cpu/pods/w1/cpu.cfs_period_us", "100000\n");
    put("cpu/pods/w2/cpu.cfs_quota_us", "-1\n");
    put("cpu/pods/w2/cpu.cfs_period_us", "100000\n");
    ck_assert_double_eq_tol(spw_cgroup_quota("12:memory:/x\n4:cpu,cpuacct:/pods/w1\n", root), 0.45, 1e-9);
    ck_assert_double_eq_tol(spw_cgroup_quota("4:cpuacct,cpu:/pods/w2\n", root), 1.5, 1e-9);   /* the parent's */
    ck_assert_double_eq_tol(spw_cgroup_quota("4:cpu:/\n", root), 0, 1e-12);                       /* none */
    ck_assert_double_eq_tol(spw_cgroup_quota("4:cpuset:/pods/w1\n", root), 0, 1e-12);   /* not the cpu controller */
}
END_TEST

START_TEST(test_cpulimit_v2_cpu_max)
{
    put("cpu.max", "max 100000\n");
    put("k8s/cpu.max", "200000 100000\n");
    put("k8s/pod/cpu.max", "max 100000\n");
    put("k8s/pod/ctr/cpu.max", "25000 50000\n");
    ck_assert_double_eq_tol(spw_cgroup_quota("0::/k8s/pod/ctr\n", root), 0.5, 1e-9);
    ck_assert_double_eq_tol(spw_cgroup_quota("0::/k8s/pod\n", root), 2.0, 1e-9);
    ck_assert_double_eq_tol(spw_cgroup_quota("0::/\n", root), 0, 1e-12);
    ck_assert_double_eq_tol(spw_cgroup_quota("0::/nowhere\n", root), 0, 1e-12);
    ck_assert_double_eq_tol(spw_cgroup_quota("", root), 0, 1e-12);
    ck_assert_double_eq_tol(spw_cgroup_quota("garbage without colons\n", root), 0, 1e-12);
}
END_TEST

START_TEST(test_cpulimit_live)
{
    const double c = spw_cpu_limit();
    ck_assert(c >= 0.01 && c <= (double)sysconf(_SC_NPROCESSORS_ONLN));
}
END_TEST

START_TEST(test_schedstat_text)
{
    ck_assert_int_eq(spw_schedstat_run_delay("1234 5678 9\n"), 5678);
    ck_assert_int_eq(spw_schedstat_run_delay("0 0 1"), 0);
    ck_assert_int_eq(spw_schedstat_run_delay(""), -1);
    ck_assert_int_eq(spw_schedstat_run_delay("12"), -1);
    ck_assert_int_eq(spw_schedstat_run_delay("x 1 2"), -1);
    ck_assert_int_eq(spw_schedstat_run_delay("1 99999999999999999999999 2"), -1);
}
END_TEST

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static volatile int spinning;

static void *spin(void *cpu_set)
{
    pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), cpu_set);
    while (spinning)
        ;
    return NULL;
}

/* This thread and a spinning one on the first CPU of this thread's affinity for `seconds`; the run delay of
 * this thread at the start and at the end into *before / *after (either may be NULL). */
static void share_a_cpu(double seconds, int64_t *before, int64_t *after)
{
    cpu_set_t one, mine;
    ck_assert_int_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mine)) {
            CPU_SET(c, &one);
            break;
        }
    ck_assert_int_eq(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    spinning = 1;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, spin, &one), 0);
    if (before)
        *before = spw_thread_run_delay_ns();
    const double t0 = now_s();
    while (now_s() - t0 < seconds)
        ;
    if (after)
        *after = spw_thread_run_delay_ns();
    spinning = 0;
    pthread_join(t, NULL);
}

/* Two threads spinning on one CPU for 0.6 s: each waits about half of it. */
START_TEST(test_run_delay_live)
{
    const int64_t first = spw_thread_run_delay_ns();
    if (first < 0) {        /* a kernel without schedstat: it says so every time, and the thread is unharmed */
        ck_assert_int_eq(spw_thread_run_delay_ns(), -1);
        fprintf(stderr, "check_cpulimit: no /proc/thread-self/schedstat here; the live run delay not measured\n");
        return;
    }
    int64_t before, after;
    share_a_cpu(0.6, &before, &after);
    ck_assert(before >= first);
    ck_assert_msg(after - before >= 100000000, "run delay grew %lld ns sharing a CPU for 0.6 s",
                  (long long)(after - before));
    ck_assert_msg(after - before <= 600000000, "run delay grew %lld ns in 0.6 s", (long long)(after - before));
}
END_TEST

/* A forked child reads its own thread's run delay, not the parent's thread's through an inherited descriptor:
 * the parent's grows while it shares a CPU with a spinner, the child's (which sleeps) stays near 0. */
START_TEST(test_run_delay_after_fork)
{
    if (spw_thread_run_delay_ns() < 0)
        return;             /* no schedstat: test_run_delay_live says so */
    share_a_cpu(0.4, NULL, NULL);       /* the parent's thread waits for its CPU about half of this */
    const int64_t parent = spw_thread_run_delay_ns();
    ck_assert(parent >= 50000000);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    const pid_t pid = fork();
    if (pid == 0) {
        const int64_t child = spw_thread_run_delay_ns();
        _exit(write(fds[1], &child, sizeof child) == sizeof child ? 0 : 1);
    }
    int64_t child = -1;
    ck_assert_int_eq(read(fds[0], &child, sizeof child), (ssize_t)sizeof child);
    int status;
    waitpid(pid, &status, 0);
    close(fds[0]);
    close(fds[1]);
    ck_assert_msg(child >= 0 && child < parent / 2, "the child read %lld ns, the parent's thread %lld",
                  (long long)child, (long long)parent);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpulimit");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_cpulimit_v1_smallest_quota_on_the_path);
    tcase_add_test(tc, test_cpulimit_v2_cpu_max);
    tcase_add_test(tc, test_cpulimit_live);
    tcase_add_test(tc, test_schedstat_text);
    tcase_add_test(tc, test_run_delay_live);
    tcase_add_test(tc, test_run_delay_after_fork);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
