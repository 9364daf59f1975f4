/* pipeline/python_op.c - the "python" op (see python_op.h): a helper process per producing thread, started
 * with posix_spawn (no fork handlers run in a threaded parent), fed one element at a time through a memfd
 * both sides map (input at 0, output after it) and JSON lines on a socket pair. A reply that does not come
 * within the op's timeout_s, or a helper that dies, fails that element and the helper is replaced on the
 * next one. Thread model: the helper is thread-local; a thread-exit destructor ends it. */
#include "pipeline/python_op.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "pipeline/value.h"

extern char **environ;

static const char helper_script[] =
#include "pipeline/python_helper.inc"
    ;

#define START_TIMEOUT_MS 60000          /* python and numpy imported, the ready line sent */
#define RETRY_START_MS 5000             /* after a failed start, elements fail at once for this long */
#define MAX_LINE (256 << 10)
#define MIN_MAP ((size_t)1 << 20)

struct helper {
    pid_t pid;                  /* 0: none running */
    int sock, memfd;
    uint8_t *map;
    size_t cap;                 /* bytes mapped (the memfd's size) */
    char line[MAX_LINE];
    size_t have;                /* bytes of line read and not yet consumed */
    int64_t failed_start_ms;    /* when a start last failed (0: never) */
    char start_error[512];
};

static pthread_key_t helper_key;
static pthread_once_t helper_once = PTHREAD_ONCE_INIT;
static _Thread_local struct helper *tl_helper;

static void helper_stop(struct helper *h)
{
    if (h->pid > 0) {
        kill(h->pid, SIGKILL);
        while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (h->sock >= 0)
        close(h->sock);
    if (h->map)
        munmap(h->map, h->cap);
    if (h->memfd >= 0)
        close(h->memfd);
    h->pid = 0, h->sock = h->memfd = -1, h->map = NULL, h->cap = h->have = 0;
}

static void helper_destroy(void *p)
{
    helper_stop(p);
    free(p);
}

static void make_key(void)
{
    pthread_key_create(&helper_key, helper_destroy);
}

/* How a helper that is gone ended, reaped: "exit status 3", "signal 11 (Segmentation fault)". */
static void reap(struct helper *h, char *how, size_t len)
{
    int st = 0;
    pid_t r;
    while ((r = waitpid(h->pid, &st, 0)) < 0 && errno == EINTR)
        ;
    if (r == h->pid && WIFSIGNALED(st))
        snprintf(how, len, "signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else if (r == h->pid)
        snprintf(how, len, "exit status %d", WEXITSTATUS(st));
    else
        snprintf(how, len, "an unknown end");
    h->pid = 0;
}

/* One reply line into *out (a new jansson object) within timeout_ms. Returns 0, -ETIMEDOUT, -EPIPE (the
 * helper closed its end: it died) or SPW_EFORMAT (not a JSON object, or longer than MAX_LINE). */
static int read_reply(struct helper *h, int timeout_ms, json_t **out)
{
    const int64_t deadline = spw_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(h->line, '\n', h->have);
        if (nl) {
            *nl = 0;
            *out = json_loads(h->line, 0, NULL);
            const size_t used = (size_t)(nl - h->line) + 1;
            memmove(h->line, nl + 1, h->have - used);
            h->have -= used;
            if (!json_is_object(*out)) {
                json_decref(*out);
                return SPW_EFORMAT;
            }
            return 0;
        }
        if (h->have == sizeof h->line)
            return SPW_EFORMAT;
        const int64_t left = deadline - spw_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {h->sock, POLLIN, 0};
        const int n = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (n < 0 && errno != EINTR)
            return -EPIPE;
        if (n <= 0)
            continue;
        const ssize_t got = read(h->sock, h->line + h->have, sizeof h->line - h->have);
        if (got <= 0 && !(got < 0 && errno == EINTR))
            return -EPIPE;
        h->have += got > 0 ? (size_t)got : 0;
    }
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        const ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -EPIPE;
        buf += n, len -= (size_t)n;
    }
    return 0;
}

/* The helper's environment: ours, with SPILLWAY_PYTHONPATH put before PYTHONPATH. envp and its one new
 * string are malloc'd (free both). */
static char **helper_env(char **extra)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 2, sizeof *envp);
    if (!envp)
        return NULL;
    const char *add = getenv("SPILLWAY_PYTHONPATH"), *old = getenv("PYTHONPATH");
    *extra = NULL;
    if (add && *add) {
        const size_t len = strlen(add) + (old ? strlen(old) : 0) + 16;
        if (!(*extra = malloc(len))) {
            free(envp);
            return NULL;
        }
        snprintf(*extra, len, "PYTHONPATH=%s%s%s", add, old && *old ? ":" : "", old && *old ? old : "");
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!*extra || strncmp(environ[i], "PYTHONPATH=", 11) != 0)
            envp[k++] = environ[i];
    if (*extra)
        envp[k++] = *extra;
    return envp;
}

/* Map the memfd, which is `size` bytes now (we or the helper grew it). */
static int remap(struct helper *h, size_t size)
{
    if (size == h->cap && h->map)
        return 0;
    if (h->map)
        munmap(h->map, h->cap);
    h->map = NULL;
    h->cap = 0;
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, h->memfd, 0);
    if (m == MAP_FAILED)
        return -errno;
    h->map = m;
    h->cap = size;
    return 0;
}

/* Grow (or make) the shared room to at least `need` bytes, mapped. */
static int ensure_room(struct helper *h, size_t need)
{
    if (need <= h->cap && h->map)
        return 0;
    size_t cap = h->cap ? h->cap : MIN_MAP;
    while (cap < need)
        cap *= 2;
    if (ftruncate(h->memfd, (off_t)cap) != 0)
        return -errno;
    return remap(h, cap);
}

static int start(struct helper *h, char *err, size_t errlen)
{
    const char *python = getenv("SPILLWAY_PYTHON");
    python = python && *python ? python : "python3";
    int sv[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return spw_fail(err, errlen, SPW_EUSER, "cannot start a Python helper: socketpair: %s", strerror(errno));
    h->sock = sv[0];
    h->memfd = memfd_create("spillway-python-op", MFD_CLOEXEC);
    int rc = h->memfd < 0 ? -errno : ensure_room(h, MIN_MAP);
    if (rc != 0) {
        close(sv[1]);
        helper_stop(h);
        return spw_fail(err, errlen, rc == -ENOMEM ? -ENOMEM : SPW_EUSER, "cannot make the Python op's shared "
                        "memory: %s", strerror(-rc));
    }
    /* The child's fds 3 and 4 come from copies above them: dup2 of a socket that is fd 4 onto 3 while the
     * memfd is fd 3 would clobber it (seen: a helper mapping its socket). */
    const int child_sock = fcntl(sv[1], F_DUPFD_CLOEXEC, 10), child_mem = fcntl(h->memfd, F_DUPFD_CLOEXEC, 10);
    close(sv[1]);
    sv[1] = child_sock;
    if (child_sock < 0 || child_mem < 0) {
        if (child_sock >= 0)
            close(child_sock);
        if (child_mem >= 0)
            close(child_mem);
        helper_stop(h);
        return spw_fail(err, errlen, SPW_EUSER, "cannot start a Python helper: no file descriptors left");
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, child_sock, 3);
    posix_spawn_file_actions_adddup2(&fa, child_mem, 4);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);      /* users' prints go to our stderr, not our stdout */
    char *extra = NULL, **envp = helper_env(&extra);
    char *argv[] = {(char *)python, "-c", (char *)helper_script, NULL};
    pid_t pid = 0;
    rc = envp ? posix_spawnp(&pid, python, &fa, NULL, argv, envp) : ENOMEM;
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    free(extra);
    close(child_sock);
    close(child_mem);
    if (rc != 0) {
        helper_stop(h);
        return spw_fail(err, errlen, SPW_EUSER, "cannot start the Python helper %s: %s (set SPILLWAY_PYTHON to "
                        "an interpreter with numpy)", python, strerror(rc));
    }
    h->pid = pid;
    json_t *ready = NULL;
    rc = read_reply(h, START_TIMEOUT_MS, &ready);
    if (rc == 0 && json_is_true(json_object_get(ready, "ready"))) {
        json_decref(ready);
        return 0;
    }
    char how[300] = "it answered something else";
    const char *said = json_string_value(json_object_get(ready, "error"));    /* numpy missing, ... */
    if (rc == 0 && said)
        snprintf(how, sizeof how, "%s", said);
    else if (rc == -ETIMEDOUT)
        snprintf(how, sizeof how, "no ready line within %d s", START_TIMEOUT_MS / 1000);
    else if (rc == -EPIPE)
        reap(h, how, sizeof how);
    snprintf(err, errlen, "the Python helper %s did not start: %s", python, how);
    json_decref(ready);
    helper_stop(h);
    return SPW_EUSER;
}

static struct helper *thread_helper(void)
{
    if (tl_helper)
        return tl_helper;
    pthread_once(&helper_once, make_key);
    struct helper *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->sock = h->memfd = -1;
    if (pthread_setspecific(helper_key, h) != 0) {
        free(h);
        return NULL;
    }
    return tl_helper = h;
}

/* The dtype a reply names (spw_dtype_name's words); -1 if none. */
static int dtype_of(const char *s, enum spw_dtype *d)
{
    static const enum spw_dtype all[] = {SPW_DTYPE_U8, SPW_DTYPE_F32, SPW_DTYPE_F16, SPW_DTYPE_I64};
    for (size_t i = 0; s && i < sizeof all / sizeof *all; i++)
        if (!strcmp(s, spw_dtype_name(all[i])))
            return *d = all[i], 0;
    return -1;
}

/* The element's bytes into the shared room at 0 (an image's rows packed): its dtype, shape and size. */
static int put_input(struct helper *h, const struct spw_value *v, enum spw_dtype *dt, int *ndim, int64_t *shape,
                     size_t *bytes)
{
    spw_value_out_shape(v, SPW_LAYOUT_HWC, dt, ndim, shape);
    *bytes = spw_value_bytes(v);
    const int rc = ensure_room(h, *bytes + 64);
    if (rc == 0)
        spw_value_copy_out(v, SPW_LAYOUT_HWC, h->map);
    return rc;
}

/* The reply's array, from the shared room at its "at" (0: the input's place, changed in place; else
 * out_off), as the new value (an image when uint8 [h, w, 3]). */
static int take_output(struct spw_op_call *call, struct helper *h, const json_t *reply, size_t out_off,
                       struct spw_value *v)
{
    const json_int_t at = json_integer_value(json_object_get(reply, "at"));
    const json_int_t size = json_integer_value(json_object_get(reply, "size"));
    const size_t off = at == 0 ? 0 : out_off;
    enum spw_dtype dt;
    const json_t *shp = json_object_get(reply, "shape");
    const size_t ndim = json_array_size(shp);
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    size_t numel = 1;
    if (dtype_of(json_string_value(json_object_get(reply, "dtype")), &dt) != 0 || ndim < 1 ||
        ndim > SPW_TENSOR_MAX_DIMS)
        return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python: the helper's reply has no usable "
                        "dtype and shape", call->index);
    for (size_t i = 0; i < ndim; i++) {
        const json_int_t d = json_integer_value(json_array_get(shp, i));
        if (d < 0 || d > (json_int_t)SPW_PYTHON_OP_MAX_BYTES)
            return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python: a dimension of %lld",
                            call->index, (long long)d);
        shape[i] = d;
        numel *= (size_t)d;
    }
    const size_t bytes = numel * spw_dtype_size(dt);
    /* the helper only grows the room, and never past room for an input and an output at the cap */
    const bool in_room = bytes <= SPW_PYTHON_OP_MAX_BYTES && size >= (json_int_t)h->cap &&
                         size <= (json_int_t)(2 * SPW_PYTHON_OP_MAX_BYTES + 64) && remap(h, (size_t)size) == 0 &&
                         off + bytes <= h->cap;
    if (!in_room)
        return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python: its output of %zu bytes is not in "
                        "the shared memory (%zu bytes)", call->index, bytes, h->cap);
    struct spw_value out;
    void *data;
    if (spw_value_alloc_array(&out, dt, (int)ndim, shape, &data) != 0)
        return spw_fail(call->err, call->errlen, -ENOMEM, "ops[%d] python: no memory for its %zu-byte output",
                        call->index, bytes);
    memcpy(data, h->map + off, bytes);
    out.sample_rate = v->sample_rate;
    spw_value_free(v);
    *v = out;
    return 0;
}

int spw_python_op_check(const char *function, char *err, size_t errlen)
{
    struct helper *h = calloc(1, sizeof *h);
    if (!h)
        return spw_fail(err, errlen, -ENOMEM, "out of memory");
    h->sock = h->memfd = -1;
    int rc = start(h, err, errlen);
    char *req = NULL;
    json_t *reply = NULL;
    if (rc == 0 && asprintf(&req, "{\"check\": \"%s\"}\n", function) < 0)
        rc = spw_fail(err, errlen, -ENOMEM, "out of memory");
    if (rc == 0 && (write_all(h->sock, req, strlen(req)) != 0 || read_reply(h, START_TIMEOUT_MS, &reply) != 0))
        rc = spw_fail(err, errlen, SPW_EUSER, "the Python helper did not answer whether %s imports", function);
    if (rc == 0 && !json_is_true(json_object_get(reply, "ok"))) {
        const char *e = json_string_value(json_object_get(reply, "error"));
        rc = spw_fail(err, errlen, SPW_EUSER, "%s", e ? e : "cannot import it");
    }
    free(req);
    json_decref(reply);
    helper_stop(h);
    free(h);
    return rc;
}

int spw_python_op_run(struct spw_op_call *call, struct spw_value *v)
{
    const struct spw_op_spec *op = call->op;
    struct helper *h = thread_helper();
    if (!h)
        return spw_fail(call->err, call->errlen, -ENOMEM, "ops[%d] python: out of memory", call->index);
    int st;
    if (h->pid > 0 && waitpid(h->pid, &st, WNOHANG) == h->pid) {
        /* it ended between elements (the OOM killer, a kill): not this element's doing - start another */
        spw_log(SPW_LOG_WARN, "python", "a Python op's helper pid=%d ended between elements (%s %d); starting "
                "another", (int)h->pid, WIFSIGNALED(st) ? "signal" : "exit status",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        h->pid = 0;
        helper_stop(h);
    }
    if (h->pid <= 0 && h->failed_start_ms && spw_now_ms() - h->failed_start_ms < RETRY_START_MS)
        return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python %s: %s", call->index, op->function,
                        h->start_error);
    if (h->pid <= 0) {
        const int rc = start(h, h->start_error, sizeof h->start_error);
        if (rc != 0) {
            h->failed_start_ms = spw_now_ms();
            return spw_fail(call->err, call->errlen, rc, "ops[%d] python %s: %s", call->index, op->function,
                            h->start_error);
        }
        h->failed_start_ms = 0;
    }
    enum spw_dtype dt;
    int ndim;
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    size_t in_bytes;
    int rc = put_input(h, v, &dt, &ndim, shape, &in_bytes);
    if (rc != 0) {
        helper_stop(h);
        return spw_fail(call->err, call->errlen, rc == -ENOMEM ? -ENOMEM : SPW_EUSER, "ops[%d] python: cannot "
                        "place a %zu-byte element in shared memory: %s", call->index, in_bytes, strerror(-rc));
    }
    const size_t out_off = (in_bytes + 63) & ~(size_t)63;
    char dims[160] = "";
    for (int i = 0, o = 0; i < ndim; i++)
        o += snprintf(dims + o, sizeof dims - (size_t)o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    struct spw_rng rng = call->rng;
    const unsigned long long seed = spw_rng_u64(&rng);
    char *req = NULL;
    const int len = asprintf(&req, "{\"fn\": \"%s\", \"kwargs\": %s, \"seed\": %llu, \"dtype\": \"%s\", "
                             "\"shape\": [%s], \"size\": %zu, \"out_off\": %zu, \"max\": %zu}\n",
                             op->function, op->kwargs ? op->kwargs : "{}", seed, spw_dtype_name(dt), dims, h->cap,
                             out_off, out_off + SPW_PYTHON_OP_MAX_BYTES);
    if (len < 0)
        return spw_fail(call->err, call->errlen, -ENOMEM, "ops[%d] python: out of memory", call->index);
    rc = write_all(h->sock, req, (size_t)len);
    free(req);
    json_t *reply = NULL;
    const double t = op->timeout_s > 0 ? op->timeout_s : 60;
    if (rc == 0)
        rc = read_reply(h, (int)(t * 1000 < 2e9 ? t * 1000 : 2e9), &reply);
    if (rc != 0) {
        char how[96] = "";
        if (rc == -EPIPE)
            reap(h, how, sizeof how);
        helper_stop(h);
        if (rc == -ETIMEDOUT)
            return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python %s: no result within its "
                            "timeout_s of %g s: the helper was killed (a new one takes the next element)",
                            call->index, op->function, t);
        if (rc == -EPIPE)
            return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python %s: its helper process died (%s) "
                            "on this element (a new one takes the next)", call->index, op->function, how);
        return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python %s: the helper's reply was not "
                        "understood; it was replaced", call->index, op->function);
    }
    /* the helper's CPU for this element counts as the calling thread's (profiles, per-group CPU metrics) */
    spw_thread_cpu_charge((int64_t)json_integer_value(json_object_get(reply, "cpu_ns")));
    if (!json_is_true(json_object_get(reply, "ok"))) {
        const char *e = json_string_value(json_object_get(reply, "error"));
        rc = spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python %s: %s", call->index, op->function,
                      e ? e : "failed");
    } else {
        rc = take_output(call, h, reply, out_off, v);
    }
    json_decref(reply);
    return rc;
}
