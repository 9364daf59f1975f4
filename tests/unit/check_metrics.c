/* tests/unit/check_metrics.c - lib/metrics.c and lib/metrics_http.c: the exposition text exactly (HELP and
 * TYPE lines, label values with quotes, backslashes and newlines escaped, integers without a decimal point,
 * NaN and infinities as Prometheus spells them), histograms cumulative with _sum in seconds and _count equal
 * to the +Inf bucket, the process series; and the HTTP port over a real socket: /metrics, /healthz, 404,
 * 405 (a body never read), a request line over the memory cap refused, port 0 choosing a free port. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "lib/metrics.h"
#include "lib/metrics_http.h"

START_TEST(test_metrics_exposition_text)
{
    struct spw_prom p;
    spw_prom_init(&p);
    spw_prom_family(&p, "spillway_x_total", "counter", "a help\\with\nnewline");
    const struct spw_label l[] = {{"job_id", "7"}, {"path", "a\"b\\c\nd"}};
    spw_prom_sample(&p, "spillway_x_total", l, 2, 42);
    spw_prom_gauge(&p, "spillway_g", "g", 0.25);
    spw_prom_sample(&p, "spillway_g", NULL, 0, NAN);
    spw_prom_sample(&p, "spillway_g", NULL, 0, -INFINITY);
    ck_assert(!p.oom);
    ck_assert_str_eq(p.buf, "# HELP spillway_x_total a help\\\\with\\nnewline\n"
                            "# TYPE spillway_x_total counter\n"
                            "spillway_x_total{job_id=\"7\",path=\"a\\\"b\\\\c\\nd\"} 42\n"
                            "# HELP spillway_g g\n"
                            "# TYPE spillway_g gauge\n"
                            "spillway_g 0.25\n"
                            "spillway_g NaN\n"
                            "spillway_g -Inf\n");
    spw_prom_free(&p);
}
END_TEST

START_TEST(test_metrics_histogram_is_cumulative)
{
    struct spw_hist h;
    memset(&h, 0, sizeof h);
    spw_hist_observe(&h, 50000);            /* 50 us: the first bucket (0.0001) */
    spw_hist_observe(&h, 2000000);          /* 2 ms: le 0.0025 */
    spw_hist_observe(&h, 2000000);
    spw_hist_observe(&h, 30000000000LL);    /* 30 s: only +Inf */
    struct spw_prom p;
    spw_prom_init(&p);
    spw_prom_family(&p, "spillway_d_seconds", "histogram", "d");
    const struct spw_label l[] = {{"method", "M"}};
    spw_prom_hist(&p, "spillway_d_seconds", l, 1, &h);
    ck_assert_ptr_nonnull(strstr(p.buf, "spillway_d_seconds_bucket{method=\"M\",le=\"0.0001\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(p.buf, "spillway_d_seconds_bucket{method=\"M\",le=\"0.001\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(p.buf, "spillway_d_seconds_bucket{method=\"M\",le=\"0.0025\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(p.buf, "spillway_d_seconds_bucket{method=\"M\",le=\"10\"} 3\n"));
    ck_assert_ptr_nonnull(strstr(p.buf, "spillway_d_seconds_bucket{method=\"M\",le=\"+Inf\"} 4\n"));
    ck_assert_ptr_nonnull(strstr(p.buf, "spillway_d_seconds_sum{method=\"M\"} 30.00405\n"));
    ck_assert_ptr_nonnull(strstr(p.buf, "spillway_d_seconds_count{method=\"M\"} 4\n"));
    spw_prom_free(&p);
}
END_TEST

START_TEST(test_metrics_process_series)
{
    struct spw_prom p;
    spw_prom_init(&p);
    spw_prom_process(&p, "test");
    ck_assert_ptr_nonnull(strstr(p.buf, "spillway_build_info{component=\"test\",version=\""));
    ck_assert_ptr_nonnull(strstr(p.buf, "\nprocess_cpu_seconds_total "));
    ck_assert_ptr_nonnull(strstr(p.buf, "\nprocess_resident_memory_bytes "));
    ck_assert_ptr_nonnull(strstr(p.buf, "\nprocess_open_fds "));
    spw_prom_free(&p);
}
END_TEST

static int g_scrapes;

static void collect(void *ctx, struct spw_prom *p)
{
    g_scrapes++;
    spw_prom_gauge(p, "spillway_test_value", "a value", *(const double *)ctx);
}

/* One request on a fresh connection; the reply (headers and body) into out. */
static void request(int port, const char *req, size_t req_len, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    for (size_t off = 0; off < req_len;) {
        ssize_t n = send(fd, req + off, req_len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break;      /* the server may close on a request it refuses */
        off += (size_t)n;
    }
    size_t got = 0;
    ssize_t n;
    while (got + 1 < cap && (n = recv(fd, out + got, cap - 1 - got, 0)) > 0)
        got += (size_t)n;
    out[got] = 0;
    close(fd);
}

START_TEST(test_metrics_http_port)
{
    static double value = 12.5;
    struct spw_metrics_http *h;
    char err[256], buf[65536];
    ck_assert_msg(spw_metrics_http_start("127.0.0.1", 0, collect, &value, &h, err, sizeof err) == 0, "%s", err);
    const int port = spw_metrics_http_port(h);
    ck_assert_int_gt(port, 0);
    const char *get = "GET /metrics HTTP/1.0\r\n\r\n";
    request(port, get, strlen(get), buf, sizeof buf);
    ck_assert_msg(strncmp(buf, "HTTP/1.0 200", 12) == 0 || strncmp(buf, "HTTP/1.1 200", 12) == 0, "%s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "text/plain; version=0.0.4"));
    ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\n# HELP spillway_test_value a value\n"));
    ck_assert_ptr_nonnull(strstr(buf, "spillway_test_value 12.5\n"));
    ck_assert_int_eq(g_scrapes, 1);
    const char *health = "GET /healthz HTTP/1.0\r\n\r\n";
    request(port, health, strlen(health), buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, " 200 "));
    ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\nok\n"));
    const char *other = "GET /secrets HTTP/1.0\r\n\r\n";
    request(port, other, strlen(other), buf, sizeof buf);
    ck_assert_msg(strstr(buf, " 404 ") != NULL, "%s", buf);
    const char *post = "POST /metrics HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello";
    request(port, post, strlen(post), buf, sizeof buf);
    ck_assert_msg(strstr(buf, " 405 ") != NULL && strstr(buf, "Allow: GET, HEAD"), "%s", buf);
    /* a header bigger than a connection's memory: refused, never collected */
    char *big = malloc(40000);
    ck_assert_ptr_nonnull(big);
    int n = snprintf(big, 40000, "GET /metrics HTTP/1.0\r\nX-Big: ");
    memset(big + n, 'a', 30000);
    memcpy(big + n + 30000, "\r\n\r\n", 5);
    request(port, big, strlen(big), buf, sizeof buf);
    free(big);
    ck_assert_msg(strstr(buf, " 200 ") == NULL, "%s", buf);
    ck_assert_int_eq(g_scrapes, 1);
    /* the port is taken: a second server on it is refused with the reason */
    struct spw_metrics_http *h2;
    ck_assert_int_lt(spw_metrics_http_start("127.0.0.1", port, collect, &value, &h2, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cannot listen on 127.0.0.1:") != NULL, "%s", err);
    ck_assert_int_eq(spw_metrics_http_start("not-an-address", 0, collect, &value, &h2, err, sizeof err), -EINVAL);
    spw_metrics_http_stop(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, test_metrics_exposition_text);
    tcase_add_test(tc, test_metrics_histogram_is_cumulative);
    tcase_add_test(tc, test_metrics_process_series);
    tcase_add_test(tc, test_metrics_http_port);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
