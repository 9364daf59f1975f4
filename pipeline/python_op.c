/* pipeline/python_op.c - the "python" op (see python_op.h): a helper process per producing thread, started
 * with posix_spawn (no fork handlers run in a threaded parent), fed up to SPW_PYTHON_OP_MANY_MAX elements
 * per request through a memfd both sides map (a progress word, the inputs, then the outputs) and JSON lines
 * on a socket pair. An element that takes longer than the op's timeout_s, or whose run kills the helper,
 * fails; the helper is replaced for the rest. Thread model: the helper is thread-local; a thread-exit
 * destructor ends it. */
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
#include "pipeline/element.h"
#include "pipeline/value.h"

extern char **environ;

static const char helper_script[] =
#include "pipeline/python_helper.inc"
    ;

#define START_TIMEOUT_MS 60000          /* python and numpy imported, the ready line sent */
#define RETRY_START_MS 5000             /* after a failed start, elements fail at once for this long */
#define MAX_LINE (256 << 10)
#define MIN_MAP ((size_t)1 << 20)
#define HEADER 64                       /* the room's first bytes: the helper's progress (int64) */
#define SOFT_OUTPUT ((size_t)256 << 20) /* past this many bytes of outputs, a reply answers a prefix */
#define RESERVE ((size_t)4 << 30)       /* the room's address range, mapped once so that it never moves; */
#define RESERVE_LOW ((size_t)512 << 20) /* ... or this much under an address-space limit (ulimit -v) */

/* A thread's helper process, and its room: the memfd both map (`reserve` bytes of address range here, of
 * which the memfd's size is usable), which outlives helpers so that inputs staged in it survive a replaced
 * one. */
struct helper {
    pid_t pid;                  /* 0: none running */
    int sock, memfd;
    uint8_t *map;               /* reserve bytes mapped; NULL: no room yet */
    size_t reserve, cap;        /* cap: the memfd's size */
    size_t stage_end;           /* the room's [HEADER, stage_end) holds inputs staged by spw_op_def.stage */
    size_t busy_end;            /* and [HEADER, busy_end) outputs lent to values (borrowed) until the next
                                   micro-batch's stage */
    bool lend;                  /* this run's outputs are lent (cpu_many), not copied out */
    struct spw_element_dest stage;
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
    h->pid = 0, h->sock = -1, h->have = 0;
}

static void room_free(struct helper *h)
{
    if (h->map)
        munmap(h->map, h->reserve);
    if (h->memfd >= 0)
        close(h->memfd);
    h->memfd = -1, h->map = NULL, h->cap = 0;
}

static void helper_destroy(void *p)
{
    helper_stop(p);
    room_free(p);
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

/* Thread pools of numeric libraries a helper would start unless the user sized them: each producing thread
 * has its own helper already, and idle pool threads spinning in sched_yield took a core's worth of time
 * from the producers (seen on 2 cores). */
static char *const one_thread[] = {"OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1"};
#define N_ONE_THREAD (sizeof one_thread / sizeof *one_thread)

/* The helper's environment: ours, with SPILLWAY_PYTHONPATH put before PYTHONPATH and one_thread's where
 * unset. envp and its one new string are malloc'd (free both). */
static char **helper_env(char **extra)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 2 + N_ONE_THREAD, sizeof *envp);
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
    for (size_t i = 0; i < N_ONE_THREAD; i++) {
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(strchr(one_thread[i], '=') - one_thread[i]), one_thread[i]);
        if (!getenv(name))
            envp[k++] = one_thread[i];
    }
    return envp;
}

/* The room, made on first use: a memfd of MIN_MAP bytes mapped with RESERVE (or RESERVE_LOW) bytes of
 * address range. */
static int room_ready(struct helper *h)
{
    if (h->map)
        return 0;
    h->memfd = memfd_create("spillway-python-op", MFD_CLOEXEC);
    if (h->memfd < 0 || ftruncate(h->memfd, (off_t)MIN_MAP) != 0) {
        const int rc = -errno;
        room_free(h);
        return rc;
    }
    h->reserve = RESERVE;
    void *m = mmap(NULL, h->reserve, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, h->memfd, 0);
    if (m == MAP_FAILED && errno == ENOMEM)
        m = mmap(NULL, h->reserve = RESERVE_LOW, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, h->memfd, 0);
    if (m == MAP_FAILED) {
        const int rc = -errno;
        room_free(h);
        return rc;
    }
    h->map = m;
    h->cap = MIN_MAP;
    h->stage_end = HEADER;
    return 0;
}

/* The helper grew the room to `size` bytes: check that it did. */
static int grown(struct helper *h, size_t size)
{
    struct stat st;
    if (size < h->cap || size > h->reserve || fstat(h->memfd, &st) != 0 || (size_t)st.st_size < size)
        return -EINVAL;
    h->cap = size;
    return 0;
}

/* Grow (or make) the shared room to at least `need` bytes. */
static int ensure_room(struct helper *h, size_t need)
{
    int rc = room_ready(h);
    if (rc != 0 || need <= h->cap)
        return rc;
    if (need > h->reserve)
        return -E2BIG;
    size_t cap = h->cap;
    while (cap < need)
        cap *= 2;
    cap = cap < h->reserve ? cap : h->reserve;
    if (ftruncate(h->memfd, (off_t)cap) != 0)
        return -errno;
    h->cap = cap;
    return 0;
}

static int start(struct helper *h, char *err, size_t errlen)
{
    const char *python = getenv("SPILLWAY_PYTHON");
    python = python && *python ? python : "python3";
    int sv[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return spw_fail(err, errlen, SPW_EUSER, "cannot start a Python helper: socketpair: %s", strerror(errno));
    h->sock = sv[0];
    int rc = room_ready(h);
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

/* One element of a request: where its input lies in the shared room and what it is. */
struct item {
    struct spw_op_call *call;
    struct spw_value *v;
    int *rc;
    bool answered;
    size_t at, bytes;               /* its input's offset in the room and size */
    enum spw_dtype dt;
    int ndim;
    int64_t shape[SPW_TENSOR_MAX_DIMS];
};

/* Where the helper says which item it is running (it writes j before item j, and n after the last): read
 * when a reply is late or the helper died, to know whose element it was. */
static int64_t progress(const struct helper *h)
{
    return __atomic_load_n((const int64_t *)h->map, __ATOMIC_ACQUIRE);
}

/* stage's place: the next 64-aligned bytes of the room after what is staged (NULL: no room). */
static void *stage_place(void *opaque, enum spw_dtype dt, int ndim, const int64_t *shape)
{
    struct helper *h = opaque;
    size_t bytes = spw_dtype_size(dt);
    for (int i = 0; i < ndim; i++)
        bytes *= (size_t)shape[i];
    const size_t off = (h->stage_end + 63) & ~(size_t)63;
    if (bytes > SPW_PYTHON_OP_MAX_BYTES || off + bytes > h->reserve / 4 || ensure_room(h, off + bytes + 64) != 0)
        return NULL;
    h->stage_end = off + bytes;
    return h->map + off;
}

const struct spw_element_dest *spw_python_op_stage(const struct spw_op_spec *op)
{
    (void)op;
    struct helper *h = thread_helper();
    if (!h || room_ready(h) != 0)
        return NULL;
    h->stage_end = h->busy_end = HEADER;    /* the last micro-batch's inputs and outputs are gone */
    h->stage = (struct spw_element_dest){stage_place, h, SPW_LAYOUT_HWC};
    return &h->stage;
}

/* The unanswered items' inputs in the room: those that lie there already (staged, or the outputs of an op
 * before lent to them) stay, the others are copied after them and after whatever is lent (each 64-aligned);
 * *out_off: where outputs may start. */
static int put_inputs(struct helper *h, struct item *const *u, int m, size_t *out_off)
{
    size_t end = h->stage_end > h->busy_end ? h->stage_end : h->busy_end;
    bool copy[SPW_PYTHON_OP_MANY_MAX];
    for (int j = 0; j < m; j++) {
        const struct spw_value *v = u[j]->v;
        spw_value_out_shape(v, SPW_LAYOUT_HWC, &u[j]->dt, &u[j]->ndim, u[j]->shape);
        u[j]->bytes = spw_value_bytes(v);
        const uint8_t *data = v->is_tensor ? v->t.data : v->img.data;
        copy[j] = !((v->placed || v->borrowed) && (v->is_tensor || v->img.stride == (size_t)v->img.w * 3) &&
                    h->map && data >= h->map + HEADER && data <= h->map + h->cap &&
                    u[j]->bytes <= (size_t)(h->map + h->cap - data));
        if (!copy[j]) {
            u[j]->at = (size_t)(data - h->map);
            end = u[j]->at + u[j]->bytes > end ? u[j]->at + u[j]->bytes : end;
        }
    }
    size_t off = (end + 63) & ~(size_t)63;
    for (int j = 0; j < m; j++) {
        if (copy[j]) {
            u[j]->at = off;
            off = (off + u[j]->bytes + 63) & ~(size_t)63;
        }
    }
    const int rc = ensure_room(h, off + 64);
    for (int j = 0; j < m && rc == 0; j++)
        if (copy[j])
            spw_value_copy_out(u[j]->v, SPW_LAYOUT_HWC, h->map + u[j]->at);
    *out_off = off;
    return rc;
}

/* The request line for the items u[0..m): a malloc'd string (NULL: no memory). */
static char *request(const struct helper *h, struct item *const *u, int m, size_t out_off, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    const struct spw_op_spec *op = u[0]->call->op;
    fprintf(f, "{\"fn\": \"%s\", \"kwargs\": %s, \"size\": %zu, \"limit\": %zu, \"out_off\": %zu, "
            "\"max\": %zu, \"soft\": %zu, \"items\": [", op->function, op->kwargs ? op->kwargs : "{}", h->cap,
            h->reserve, out_off, SPW_PYTHON_OP_MAX_BYTES, SOFT_OUTPUT);
    for (int j = 0; j < m; j++) {
        struct spw_rng rng = u[j]->call->rng;
        fprintf(f, "%s{\"seed\": %llu, \"at\": %zu, \"dtype\": \"%s\", \"shape\": [", j ? ", " : "",
                (unsigned long long)spw_rng_u64(&rng), u[j]->at, spw_dtype_name(u[j]->dt));
        for (int d = 0; d < u[j]->ndim; d++)
            fprintf(f, "%s%lld", d ? ", " : "", (long long)u[j]->shape[d]);
        fputs("]}", f);
    }
    fputs("]}\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* A reply within timeout_ms of the last item's start: waits in slices of timeout_ms while the helper moves on
 * to the next item. Returns read_reply's result; on -ETIMEDOUT *stuck is the item that took too long. */
static int await_reply(struct helper *h, int timeout_ms, json_t **reply, int64_t *stuck)
{
    int64_t seen = progress(h);
    for (;;) {
        const int rc = read_reply(h, timeout_ms, reply);
        const int64_t now = progress(h);
        if (rc != -ETIMEDOUT || now == seen) {
            *stuck = now;
            return rc;
        }
        seen = now;
    }
}

struct shape_text {
    char s[96];
};

/* "[224, 224, 3]" */
static struct shape_text shape_text(const int64_t *shape, int ndim)
{
    struct shape_text t = {"["};
    for (int i = 0, o = 1; i < ndim; i++)
        o += snprintf(t.s + o, sizeof t.s - (size_t)o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    strncat(t.s, "]", sizeof t.s - strlen(t.s) - 1);
    return t;
}

/* The reply's array for item it, from the shared room at its "at" (the input's place when the function
 * returned its input, changed in place or not), as the element's new value (an image when uint8 [h, w, 3]). */
static int take_output(struct helper *h, struct item *it, const json_t *res)
{
    struct spw_op_call *call = it->call;
    const json_int_t at = json_integer_value(json_object_get(res, "at"));
    enum spw_dtype dt;
    const json_t *shp = json_object_get(res, "shape");
    const size_t ndim = json_array_size(shp);
    int64_t shape[SPW_TENSOR_MAX_DIMS];
    size_t numel = 1;
    if (dtype_of(json_string_value(json_object_get(res, "dtype")), &dt) != 0 || ndim < 1 ||
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
    const struct spw_op_spec *op = call->op;
    bool as_declared = !op->has_out_dtype || dt == op->out_dtype;
    for (size_t i = 0; op->out_ndim && i < (size_t)op->out_ndim; i++)
        as_declared = as_declared && ndim == (size_t)op->out_ndim && shape[i] == op->out_shape[i];
    if (!as_declared)
        return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python %s: returned %s %s where the op "
                        "declares %s %s", call->index, op->function, spw_dtype_name(dt),
                        shape_text(shape, (int)ndim).s, op->has_out_dtype ? spw_dtype_name(op->out_dtype) : "any dtype",
                        op->out_ndim ? shape_text(op->out_shape, op->out_ndim).s : "any shape");
    const size_t bytes = numel * spw_dtype_size(dt);
    if (bytes > SPW_PYTHON_OP_MAX_BYTES || at < HEADER || (size_t)at > h->cap || bytes > h->cap - (size_t)at)
        return spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python: its output of %zu bytes is not in "
                        "the shared memory (%zu bytes)", call->index, bytes, h->cap);
    struct spw_value out;
    void *data;
    if (h->lend) {              /* the value borrows the room until the micro-batch's next stage */
        spw_value_borrow_array(&out, dt, (int)ndim, shape, h->map + at);
        h->busy_end = (size_t)at + bytes > h->busy_end ? (size_t)at + bytes : h->busy_end;
    } else if (spw_value_alloc_array(&out, dt, (int)ndim, shape, &data) == 0) {
        memcpy(data, h->map + at, bytes);
    } else {
        return spw_fail(call->err, call->errlen, -ENOMEM, "ops[%d] python: no memory for its %zu-byte output",
                        call->index, bytes);
    }
    out.sample_rate = it->v->sample_rate;
    spw_value_free(it->v);
    *it->v = out;
    return 0;
}

static void answer(struct item *it, int rc)
{
    *it->rc = rc;
    it->answered = true;
}

/* Every item of u[0..m) fails with rc: "ops[I] python FUNCTION: why". */
static void fail_all(struct item *const *u, int m, int rc, const char *why)
{
    for (int j = 0; j < m; j++)
        answer(u[j], spw_fail(u[j]->call->err, u[j]->call->errlen, rc, "ops[%d] python %s: %s", u[j]->call->index,
                              u[j]->call->op->function, why));
}

/* The helper is running (started when it is not); else every unanswered item fails with why. */
static bool have_helper(struct helper *h, struct item *const *u, int m)
{
    int st;
    if (h->pid > 0 && waitpid(h->pid, &st, WNOHANG) == h->pid) {
        /* it ended between elements (the OOM killer, a kill): not this element's doing - start another */
        spw_log(SPW_LOG_WARN, "python", "a Python op's helper pid=%d ended between elements (%s %d); starting "
                "another", (int)h->pid, WIFSIGNALED(st) ? "signal" : "exit status",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        h->pid = 0;
        helper_stop(h);
    }
    int rc = 0;
    if (h->pid <= 0 && h->failed_start_ms && spw_now_ms() - h->failed_start_ms < RETRY_START_MS) {
        rc = SPW_EUSER;
    } else if (h->pid <= 0) {
        rc = start(h, h->start_error, sizeof h->start_error);
        h->failed_start_ms = rc ? spw_now_ms() : 0;
    }
    if (rc)
        fail_all(u, m, rc, h->start_error);
    return rc == 0;
}

/* The request went wrong on item `stuck` (timed out, the helper died, or the reply was garbled): that item
 * fails with the reason and the helper goes (a new one takes the rest). */
static void lost(struct helper *h, struct item *const *u, int m, int rc, int64_t stuck, double timeout_s)
{
    struct item *it = u[stuck >= 0 && stuck < m ? stuck : 0];
    struct spw_op_call *call = it->call;
    char how[96] = "";
    if (rc == -EPIPE)
        reap(h, how, sizeof how);
    helper_stop(h);
    if (rc == -ETIMEDOUT)
        rc = spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python %s: no result within its timeout_s of "
                      "%g s: the helper was killed (a new one takes the next element)", call->index,
                      call->op->function, timeout_s);
    else if (rc == -EPIPE)
        rc = spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python %s: its helper process died (%s) on "
                      "this element (a new one takes the next)", call->index, call->op->function, how);
    else
        rc = spw_fail(call->err, call->errlen, SPW_EUSER, "ops[%d] python %s: the helper's reply was not "
                      "understood; it was replaced", call->index, call->op->function);
    answer(it, rc);
}

/* One request for the unanswered items u[0..m): answers some of them (all, a prefix when the helper's
 * outputs filled its room, or the one that hung or crashed it). */
static void round_trip(struct helper *h, struct item *const *u, int m)
{
    struct spw_op_call *call = u[0]->call;
    size_t out_off, len;
    int rc = put_inputs(h, u, m, &out_off);
    if (rc != 0) {              /* the room outlives helpers: this one stays */
        char why[160];
        snprintf(why, sizeof why, "cannot place %d elements in shared memory: %s", m, strerror(-rc));
        fail_all(u, m, rc == -ENOMEM ? -ENOMEM : SPW_EUSER, why);
        return;
    }
    __atomic_store_n((int64_t *)h->map, -1, __ATOMIC_RELEASE);
    char *req = request(h, u, m, out_off, &len);
    if (!req) {
        fail_all(u, m, -ENOMEM, "out of memory");
        return;
    }
    rc = write_all(h->sock, req, len);
    free(req);
    json_t *reply = NULL;
    int64_t stuck = 0;
    const double t = call->op->timeout_s > 0 ? call->op->timeout_s : 60;
    if (rc == 0)
        rc = await_reply(h, (int)(t * 1000 < 2e9 ? t * 1000 : 2e9), &reply, &stuck);
    const json_t *results = json_object_get(reply, "results");
    const json_int_t size = json_integer_value(json_object_get(reply, "size"));
    /* the helper only grows the room, and never past its inputs, the soft limit and one output at the cap */
    if (rc == 0 && (json_array_size(results) < 1 || json_array_size(results) > (size_t)m || size < 0 ||
                    (size_t)size > out_off + SOFT_OUTPUT + 2 * SPW_PYTHON_OP_MAX_BYTES || grown(h, (size_t)size) != 0))
        rc = SPW_EFORMAT;
    if (rc != 0) {
        json_decref(reply);
        lost(h, u, m, rc, stuck, t);
        return;
    }
    /* the helper's CPU for these elements counts as the calling thread's (profiles, per-group CPU metrics) */
    spw_thread_cpu_charge((int64_t)json_integer_value(json_object_get(reply, "cpu_ns")));
    for (size_t j = 0; j < json_array_size(results); j++) {
        const json_t *res = json_array_get(results, j);
        struct spw_op_call *c = u[j]->call;
        const char *e = json_string_value(json_object_get(res, "error"));
        answer(u[j], json_is_true(json_object_get(res, "ok")) ? take_output(h, u[j], res)
                     : spw_fail(c->err, c->errlen, SPW_EUSER, "ops[%d] python %s: %s", c->index, c->op->function,
                                e ? e : "failed"));
    }
    json_decref(reply);
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
    helper_destroy(h);
    return rc;
}

/* The op on n elements; with lend, their outputs are borrowed from the room (see python_op.h). */
static void run(struct spw_op_call *calls, struct spw_value *const *vs, int *rcs, int n, bool lend)
{
    struct helper *h = thread_helper();
    if (h)
        h->lend = lend;
    struct item items[SPW_PYTHON_OP_MANY_MAX];
    struct item *u[SPW_PYTHON_OP_MANY_MAX];
    for (int k0 = 0; k0 < n; k0 += SPW_PYTHON_OP_MANY_MAX) {
        const int n1 = n - k0 < SPW_PYTHON_OP_MANY_MAX ? n - k0 : SPW_PYTHON_OP_MANY_MAX;
        for (int k = 0; k < n1; k++)
            items[k] = (struct item){.call = &calls[k0 + k], .v = vs[k0 + k], .rc = &rcs[k0 + k]};
        for (;;) {
            int m = 0;
            for (int k = 0; k < n1; k++)
                if (!items[k].answered)
                    u[m++] = &items[k];
            if (m == 0)
                break;
            if (!h) {
                fail_all(u, m, -ENOMEM, "out of memory");
                break;
            }
            if (have_helper(h, u, m))
                round_trip(h, u, m);
        }
    }
    if (h)
        h->stage_end = HEADER;      /* every staged input has been answered */
}

void spw_python_op_run_many(struct spw_op_call *calls, struct spw_value *const *vs, int *rcs, int n)
{
    run(calls, vs, rcs, n, true);
}

int spw_python_op_run(struct spw_op_call *call, struct spw_value *v)
{
    struct spw_value *vs[1] = {v};
    int rc = 0;
    run(call, vs, &rc, 1, false);
    return rc;
}
