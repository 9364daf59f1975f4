/* tests/unit/check_lib.c - lib/: counter-based RNG, tensors and the .npy writer, error strings, CPU time of
 * named threads, spw_parallel_for. */
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "lib/clock.h"
#include "lib/config.h"
#include "lib/err.h"
#include "lib/parallel.h"
#include "lib/rng.h"
#include "lib/tensor.h"

START_TEST(test_rng_same_key_same_stream)
{
    struct spw_rng a, b;
    spw_rng_init(&a, 7, 3, 12345, 2);
    spw_rng_init(&b, 7, 3, 12345, 2);
    for (int i = 0; i < 1000; i++)
        ck_assert_uint_eq(spw_rng_u32(&a), spw_rng_u32(&b));
}
END_TEST

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The fast normals (xoshiro256** + float Box-Muller in blocks): keyed by their Philox seed stream, the same
 * values however a run is split into calls, and standard normal: the Kolmogorov-Smirnov distance of 400,000
 * draws against the normal CDF under the 1% critical value, the moments, and the shares beyond 3 and 4 as
 * the normal has them. */
START_TEST(test_fastrng_normal_is_standard_normal)
{
    struct spw_rng a, b;
    struct spw_fastrng fa, fb;
    spw_rng_init(&a, 7, 1, 99, 3);
    spw_rng_init(&b, 7, 1, 99, 3);
    spw_fastrng_seed(&fa, &a);
    spw_fastrng_seed(&fb, &b);
    enum { N = 400000 };
    float *z = malloc(sizeof *z * N), *y = malloc(sizeof *y * N);
    double *x = malloc(sizeof *x * N), sum = 0, sq = 0, q4 = 0;
    ck_assert(z && y && x);
    spw_fastrng_normals(&fa, z, N);
    for (int i = 0; i < N; i += 400)        /* in frames of 400, as fbank draws them */
        spw_fastrng_normals(&fb, y + i, 400);
    ck_assert(memcmp(z, y, sizeof *z * N) == 0);
    int beyond_3 = 0, beyond_4 = 0;
    for (int i = 0; i < N; i++) {
        x[i] = z[i];
        ck_assert(isfinite(x[i]) && fabs(x[i]) < 5.8);
        sum += x[i], sq += x[i] * x[i], q4 += x[i] * x[i] * x[i] * x[i];
        beyond_3 += fabs(x[i]) > 3.0;
        beyond_4 += fabs(x[i]) > 4.0;
    }
    const double mean = sum / N, var = sq / N - mean * mean;
    ck_assert_msg(fabs(mean) < 0.006 && fabs(var - 1) < 0.01 && fabs(q4 / N - 3) < 0.06, "mean %g var %g m4 %g",
                  mean, var, q4 / N);
    /* P(|x| > 3) = 2.70e-3 (1080 of N), P(|x| > 4) = 6.33e-5 (25 of N): within 4 standard deviations */
    ck_assert_msg(abs(beyond_3 - 1080) < 4 * 33, "%d beyond 3", beyond_3);
    ck_assert_msg(abs(beyond_4 - 25) < 4 * 5 + 1, "%d beyond 4", beyond_4);
    qsort(x, N, sizeof *x, cmp_double);
    double d = 0;
    for (int i = 0; i < N; i++) {
        const double cdf = 0.5 * erfc(-x[i] / sqrt(2.0));
        const double lo = cdf - (double)i / N, hi = (double)(i + 1) / N - cdf;
        d = fmax(d, fmax(lo, hi));
    }
    ck_assert_msg(d < 1.628 / sqrt((double)N), "KS D = %g", d);
    free(x);
    free(y);
    free(z);
}
END_TEST

START_TEST(test_rng_each_key_part_changes_stream)
{
    struct spw_rng base, r;
    spw_rng_init(&base, 7, 3, 12345, 2);
    uint32_t first = spw_rng_u32(&base);
    uint64_t keys[4][4] = {{8, 3, 12345, 2}, {7, 4, 12345, 2}, {7, 3, 12346, 2}, {7, 3, 12345, 3}};
    for (int k = 0; k < 4; k++) {
        spw_rng_init(&r, keys[k][0], keys[k][1], keys[k][2], (uint32_t)keys[k][3]);
        ck_assert_uint_ne(spw_rng_u32(&r), first);
    }
}
END_TEST

START_TEST(test_rng_uniform_moments)
{
    struct spw_rng r;
    spw_rng_init(&r, 1, 0, 0, 0);
    double sum = 0, sum2 = 0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = spw_rng_uniform(&r);
        ck_assert(u >= 0.0 && u < 1.0);
        sum += u;
        sum2 += u * u;
    }
    double mean = sum / n, var = sum2 / n - mean * mean;
    ck_assert(fabs(mean - 0.5) < 0.005);
    ck_assert(fabs(var - 1.0 / 12) < 0.002);
}
END_TEST

START_TEST(test_rng_below_is_uniform)
{
    /* chi-square over 14 bins (RandAugment's op count); 99.9% critical value for 13 dof is 34.5 */
    struct spw_rng r;
    spw_rng_init(&r, 99, 0, 0, 0);
    int counts[14] = {0};
    const int n = 140000;
    for (int i = 0; i < n; i++) {
        uint32_t v = spw_rng_below(&r, 14);
        ck_assert_uint_lt(v, 14);
        counts[v]++;
    }
    double chi = 0, e = n / 14.0;
    for (int i = 0; i < 14; i++)
        chi += (counts[i] - e) * (counts[i] - e) / e;
    ck_assert_msg(chi < 34.5, "chi-square %.1f", chi);
}
END_TEST

START_TEST(test_tensor_npy_header_and_data)
{
    struct spw_tensor t;
    int64_t shape[3] = {2, 3, 4};
    ck_assert_int_eq(spw_tensor_alloc(&t, SPW_DTYPE_F32, 3, shape), 0);
    for (int i = 0; i < 24; i++)
        ((float *)t.data)[i] = (float)i * 0.5f;
    char path[] = "/tmp/spw-npy-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(spw_tensor_write_npy(&t, path), 0);
    FILE *f = fopen(path, "rb");
    unsigned char buf[512];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unlink(path);
    ck_assert_uint_eq(n, 128 + 24 * 4);                 /* header padded to 64-byte multiple */
    ck_assert(memcmp(buf, "\x93NUMPY\x01\x00", 8) == 0);
    unsigned hlen = buf[8] | (buf[9] << 8);
    ck_assert_uint_eq(10 + hlen, 128);
    ck_assert(strstr((char *)buf + 10, "'descr': '<f4'") != NULL);
    ck_assert(strstr((char *)buf + 10, "'shape': (2, 3, 4)") != NULL);
    float v;
    memcpy(&v, buf + 128 + 5 * 4, 4);
    ck_assert(v == 2.5f);
    spw_tensor_free(&t);
}
END_TEST

START_TEST(test_tensor_npy_one_dim_shape_has_comma)
{
    struct spw_tensor t;
    int64_t shape[1] = {5};
    ck_assert_int_eq(spw_tensor_alloc(&t, SPW_DTYPE_I64, 1, shape), 0);
    memset(t.data, 0, t.nbytes);
    char path[] = "/tmp/spw-npy-XXXXXX";
    close(mkstemp(path));
    ck_assert_int_eq(spw_tensor_write_npy(&t, path), 0);
    char buf[200] = {0};
    FILE *f = fopen(path, "rb");
    ck_assert_uint_gt(fread(buf, 1, sizeof buf - 1, f), 0);
    fclose(f);
    unlink(path);
    ck_assert(strstr(buf + 10, "'shape': (5,)") != NULL);
    spw_tensor_free(&t);
}
END_TEST

START_TEST(test_tensor_f16_rounding)
{
    ck_assert_uint_eq(spw_f32_to_f16(1.0f), 0x3c00);
    ck_assert_uint_eq(spw_f32_to_f16(-2.0f), 0xc000);
    ck_assert_uint_eq(spw_f32_to_f16(65504.0f), 0x7bff);
    ck_assert_uint_eq(spw_f32_to_f16(1e6f), 0x7c00);              /* overflow -> inf */
    ck_assert_uint_eq(spw_f32_to_f16(5.9604645e-08f), 0x0001);    /* smallest subnormal */
    ck_assert_uint_eq(spw_f32_to_f16(1.0009765625f), 0x3c01);
    ck_assert_uint_eq(spw_f32_to_f16(1.00048828125f), 0x3c00);    /* tie -> even */
}
END_TEST

START_TEST(test_err_strings)
{
    ck_assert_str_eq(spw_strerror(SPW_ESPEC), "invalid pipeline spec");
    ck_assert_str_eq(spw_strerror(0), "success");
    ck_assert(strlen(spw_strerror(-2)) > 0);
}
END_TEST

static struct spw_config_entry cfg_table(int k)
{
    struct spw_config_entry t[3] = {
        {"port", "SPW_TEST_PORT", SPW_CFG_INT, "5050", 0, 65535, "port", 0, 0, NULL, NULL},
        {"name", "SPW_TEST_NAME", SPW_CFG_STRING, "", 0, 0, "name", 0, 0, NULL, NULL},
        {"verbose", "SPW_TEST_VERBOSE", SPW_CFG_BOOL, "false", 0, 1, "verbose", 0, 0, NULL, NULL},
    };
    return t[k];
}

START_TEST(test_config_flag_over_env_over_default)
{
    struct spw_config_entry t[3] = {cfg_table(0), cfg_table(1), cfg_table(2)};
    char err[256];
    unsetenv("SPW_TEST_PORT");
    setenv("SPW_TEST_NAME", "fromenv", 1);
    char *argv[] = {"d", "--verbose", NULL};
    ck_assert_int_eq(spw_config_parse(t, 3, 2, argv, "usage", stdout, err, sizeof err), 0);
    ck_assert_int_eq(t[0].i, 5050);
    ck_assert_str_eq(t[0].origin, "default");
    ck_assert_str_eq(t[1].s, "fromenv");
    ck_assert_int_eq(t[2].i, 1);
    setenv("SPW_TEST_PORT", "6000", 1);
    char *argv2[] = {"d", "--port=7000", "--name", "x", NULL};
    ck_assert_int_eq(spw_config_parse(t, 3, 4, argv2, "usage", stdout, err, sizeof err), 0);
    ck_assert_int_eq(t[0].i, 7000);
    ck_assert_str_eq(t[1].s, "x");
    char *argv3[] = {"d", NULL};
    ck_assert_int_eq(spw_config_parse(t, 3, 1, argv3, "usage", stdout, err, sizeof err), 0);
    ck_assert_int_eq(t[0].i, 6000);
    ck_assert_str_eq(t[0].origin, "env");
    unsetenv("SPW_TEST_PORT");
    unsetenv("SPW_TEST_NAME");
}
END_TEST

START_TEST(test_config_errors_name_the_flag)
{
    struct spw_config_entry t[3] = {cfg_table(0), cfg_table(1), cfg_table(2)};
    char err[256];
    char *a1[] = {"d", "--port", "70000", NULL};
    ck_assert_int_lt(spw_config_parse(t, 3, 3, a1, "u", stdout, err, sizeof err), 0);
    ck_assert_str_eq(err, "--port: 70000 is outside [0, 65535] (from flag)");
    char *a2[] = {"d", "--prot", "1", NULL};
    ck_assert_int_lt(spw_config_parse(t, 3, 3, a2, "u", stdout, err, sizeof err), 0);
    ck_assert(strstr(err, "unknown option \"--prot\"") != NULL);
    char *a3[] = {"d", "--port", NULL};
    ck_assert_int_lt(spw_config_parse(t, 3, 2, a3, "u", stdout, err, sizeof err), 0);
    ck_assert_str_eq(err, "--port needs a value");
    FILE *devnull = fopen("/dev/null", "w");
    char *a4[] = {"d", "--help", NULL};
    ck_assert_int_eq(spw_config_parse(t, 3, 2, a4, "u", devnull, err, sizeof err), 1);
    fclose(devnull);
}
END_TEST

START_TEST(test_config_token_from_flag_or_file)
{
    char buf[4096], err[256], path[] = "/tmp/spw-token-XXXXXX";
    const char *tok = "x";
    ck_assert_int_eq(spw_config_token(NULL, NULL, buf, sizeof buf, &tok, err, sizeof err), 0);
    ck_assert_ptr_null(tok);
    ck_assert_int_eq(spw_config_token("abc", NULL, buf, sizeof buf, &tok, err, sizeof err), 0);
    ck_assert_str_eq(tok, "abc");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "s3cret \n\n", 9), 9);
    close(fd);
    ck_assert_int_eq(spw_config_token(NULL, path, buf, sizeof buf, &tok, err, sizeof err), 0);
    ck_assert_str_eq(tok, "s3cret");                    /* a Secret's trailing newline is not part of it */
    ck_assert_int_lt(spw_config_token("abc", path, buf, sizeof buf, &tok, err, sizeof err), 0);
    ck_assert_str_eq(err, "give the token or a token file, not both");
    FILE *f = fopen(path, "w");
    fputs("\n", f);
    fclose(f);
    ck_assert_int_lt(spw_config_token(NULL, path, buf, sizeof buf, &tok, err, sizeof err), 0);
    ck_assert(strstr(err, ": empty") != NULL);
    unlink(path);
    ck_assert_int_lt(spw_config_token(NULL, path, buf, sizeof buf, &tok, err, sizeof err), 0);
    ck_assert(strstr(err, "No such file") != NULL);
}
END_TEST

/* A thread named spw-test-spin that burns 60 ms of its own CPU, then waits until *arg is set. */
static void *spin_main(void *arg)
{
    pthread_setname_np(pthread_self(), "spw-test-spin");
    const int64_t t0 = spw_thread_cpu_ns();
    volatile uint64_t x = 1;
    while (spw_thread_cpu_ns() - t0 < 60 * 1000000LL)
        x = x * 6364136223846793005ULL + 1;
    while (!__atomic_load_n((int *)arg, __ATOMIC_ACQUIRE))
        usleep(1000);
    return NULL;
}

static void count_index(void *ctx, int i)
{
    __atomic_add_fetch(&((int *)ctx)[i], 1, __ATOMIC_RELAXED);
    usleep(200);        /* long enough that several threads take part */
}

START_TEST(test_parallel_for_each_index_once)
{
    static int seen[1000];
    const int threads[] = {1, 4, 64, 1000};
    for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++) {
        memset(seen, 0, sizeof seen);
        spw_parallel_for(1000, threads[t], count_index, seen);
        for (int i = 0; i < 1000; i++)
            ck_assert_msg(seen[i] == 1, "max_threads %d: index %d run %d times", threads[t], i, seen[i]);
    }
    spw_parallel_for(0, 8, count_index, seen);          /* nothing to do: returns */
    spw_parallel_for(3, 0, count_index, seen);          /* 0 threads: the caller's alone */
    ck_assert_int_eq(seen[0] + seen[1] + seen[2], 6);
}
END_TEST

START_TEST(test_named_threads_cpu)
{
    static const char *const spin[] = {"spw-test-sp"}, *const none[] = {"no-such-thread"};
    pthread_t t;
    int release = 0;
    ck_assert_int_eq(pthread_create(&t, NULL, spin_main, &release), 0);
    int64_t seen = 0;
    for (int i = 0; i < 10000 && seen < 60 * 1000000LL; i++) {   /* up to 10 s on a loaded machine */
        seen = spw_threads_cpu_ns(spin, 1);
        usleep(1000);
    }
    ck_assert_int_ge(seen, 60 * 1000000LL);
    ck_assert_int_lt(seen, 1000 * 1000000LL);                   /* its own CPU only, not the process's */
    ck_assert_int_eq(spw_threads_cpu_ns(none, 1), 0);
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    /* gone with the thread: the kernel may list a joined thread in /proc/self/task for a moment longer (its
     * exit wakes pthread_join before the task is reaped), so give it up to 5 s */
    int64_t after = seen;
    for (int i = 0; i < 5000 && (after = spw_threads_cpu_ns(spin, 1)) != 0; i++)
        usleep(1000);
    ck_assert_int_eq(after, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lib");
    TCase *tc = tcase_create("lib");
    tcase_add_test(tc, test_rng_same_key_same_stream);
    tcase_add_test(tc, test_fastrng_normal_is_standard_normal);
    tcase_add_test(tc, test_rng_each_key_part_changes_stream);
    tcase_add_test(tc, test_rng_uniform_moments);
    tcase_add_test(tc, test_rng_below_is_uniform);
    tcase_add_test(tc, test_tensor_npy_header_and_data);
    tcase_add_test(tc, test_tensor_npy_one_dim_shape_has_comma);
    tcase_add_test(tc, test_tensor_f16_rounding);
    tcase_add_test(tc, test_err_strings);
    tcase_add_test(tc, test_config_flag_over_env_over_default);
    tcase_add_test(tc, test_config_errors_name_the_flag);
    tcase_add_test(tc, test_config_token_from_flag_or_file);
    tcase_add_test(tc, test_named_threads_cpu);
    tcase_add_test(tc, test_parallel_for_each_index_once);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
