/* lib/journal.c - the append-only journal (see journal.h): framing, replay with tail repair, fsync'd appends,
 * atomic compaction, the directory lock. CRC32C with the SSE4.2 instruction (the build's x86-64-v2 baseline
 * has it). Not thread-safe. */
#include "lib/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <nmmintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/failpoint.h"
#include "lib/log.h"

#define HEADER 8

struct spw_journal {
    char *dir, *path;
    int fd, lock_fd;
    int64_t size;           /* written, the batch included */
    int64_t synced;         /* on disk: the journal after a crash */
    uint8_t *batch;         /* spw_journal_write's framed records, written to the file in one go at the sync */
    size_t batch_len, batch_cap;
};

uint32_t spw_crc32c(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c = ~crc;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    for (; len; p++, len--)
        c32 = _mm_crc32_u8(c32, *p);
    return ~c32;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Read exactly n bytes at the current offset: 1, 0 at a clean end of file, -1 at a short read (a torn
 * record) or an error (errno set, else 0). */
static int read_full(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = 0;
            return got ? -1 : 0;
        }
        got += (size_t)r;
    }
    return 1;
}

static int write_full(int fd, const struct iovec *iov, int n)
{
    struct iovec v[2];
    memcpy(v, iov, sizeof *iov * (size_t)n);
    size_t left = 0;
    for (int i = 0; i < n; i++)
        left += v[i].iov_len;
    while (left) {
        ssize_t w = writev(fd, v, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        left -= (size_t)w;
        for (int i = 0; i < n && w; i++) {     /* advance past what was written */
            size_t k = (size_t)w < v[i].iov_len ? (size_t)w : v[i].iov_len;
            v[i].iov_base = (uint8_t *)v[i].iov_base + k;
            v[i].iov_len -= k;
            w -= (ssize_t)k;
        }
    }
    return 0;
}

static int write_record(int fd, const uint8_t *rec, size_t len)
{
    uint8_t h[HEADER];
    put32(h, (uint32_t)len);
    put32(h + 4, spw_crc32c(0, rec, len));
    struct iovec iov[2] = {{h, HEADER}, {(void *)rec, len}};
    return write_full(fd, iov, 2);
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

/* Is there a record with a valid CRC anywhere in buf[0, n)? Empty records are not evidence: a run of zero
 * bytes reads as a chain of them. Counts the records of the chains found (resyncing after each bad byte). */
static int64_t valid_records_in(const uint8_t *buf, size_t n)
{
    int64_t found = 0;
    for (size_t p = 0; p + HEADER < n;) {
        const size_t len = get32(buf + p);
        if (len >= 1 && len <= n - p - HEADER && spw_crc32c(0, buf + p + HEADER, len) == get32(buf + p + 4)) {
            found++;
            p += HEADER + len;
        } else {
            p++;
        }
    }
    return found;
}

/* After a bad record at `at` (its header says len; complete: it ends inside the file): is it the torn tail
 * of a crash mid-append, or corruption? Torn: the file ends inside it, or it is the last record, and no
 * valid record follows. Sets *after to the valid records found after it (in the next 256 MiB). Returns 1
 * torn, 0 corrupt, or -errno. */
static int torn_tail(struct spw_journal *j, int64_t at, int64_t end, size_t len, bool complete, int64_t *after)
{
    *after = 0;
    if (complete && at + HEADER + (int64_t)len == end)
        return 1;               /* the last record: nothing follows it */
    /* A whole bad record with bytes after it: no single append leaves that (count what follows it); an
     * incomplete one: whatever valid record hides in the rest. */
    const int64_t from = complete ? at + HEADER + (int64_t)len : at + 1;
    const size_t n = (size_t)(end - from < ((int64_t)256 << 20) ? end - from : (int64_t)256 << 20);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return -ENOMEM;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(j->fd, buf + got, n - got, from + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(buf);
            return r < 0 ? -errno : -EIO;
        }
        got += (size_t)r;
    }
    *after = valid_records_in(buf, n);
    free(buf);
    return !complete && *after == 0 && end - at <= (int64_t)(HEADER + SPW_JOURNAL_MAX_RECORD);
}

/* Keep a copy of the whole journal beside it (journal.corrupt-UNIXTIME[.N]) before a recovery cuts it. */
static int keep_copy(struct spw_journal *j, char *copy, size_t copylen)
{
    int out = -1;
    for (int i = 0; out < 0 && i < 100; i++) {      /* a name no earlier recovery took */
        char n[16] = "";
        if (i)
            snprintf(n, sizeof n, ".%d", i);
        snprintf(copy, copylen, "%s.corrupt-%lld%s", j->path, (long long)time(NULL), n);
        if ((out = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0 && errno != EEXIST)
            return -errno;
    }
    if (out < 0)
        return -EEXIST;
    uint8_t buf[65536];
    off_t off = 0;
    int rc = 0;
    for (;;) {
        ssize_t r = pread(j->fd, buf, sizeof buf, off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0)
            break;
        struct iovec v = {buf, (size_t)r};
        if ((rc = write_full(out, &v, 1)) != 0)
            break;
        off += r;
    }
    if (rc == 0 && fsync(out) != 0)
        rc = -errno;
    close(out);
    if (rc)
        unlink(copy);
    return rc == 0 ? fsync_dir(j->dir) : rc;
}

#define READ_ONLY (1u << 31)    /* replay's flag for spw_journal_read: say what is there, change nothing */

/* Replay j's file from the start. A torn tail is cut off; corruption (a bad record with more after it)
 * fails the open unless SPW_JOURNAL_RECOVER. Returns 0 or a negative code with err. */
static int replay(struct spw_journal *j, unsigned flags, spw_journal_record_fn fn, void *ctx,
                  struct spw_journal_opened *info, char *err, size_t errlen)
{
    int64_t good = 0;
    uint8_t h[HEADER], *buf = NULL;
    size_t cap = 0, len = 0;
    bool complete = false;
    int rc = 0;
    const char *why = NULL;
    struct stat st;
    if (fstat(j->fd, &st) != 0)
        return spw_fail(err, errlen, -errno, "journal %s: stat: %s", j->path, strerror(errno));
    const int64_t end = st.st_size;
    for (;;) {
        len = 0;
        complete = false;
        int r = read_full(j->fd, h, HEADER);
        if (r == 0)
            break;
        if (r < 0) {
            if (errno) {
                rc = spw_fail(err, errlen, -errno, "journal %s: read: %s", j->path, strerror(errno));
                break;
            }
            why = "a torn record header";
            break;
        }
        len = get32(h);
        complete = len <= SPW_JOURNAL_MAX_RECORD && good + HEADER + (int64_t)len <= end;
        if (len > SPW_JOURNAL_MAX_RECORD) {
            why = "a record length over the cap";
            break;
        }
        if (len + 1 > cap) {
            uint8_t *more = realloc(buf, len + 1);
            if (!more) {
                rc = spw_fail(err, errlen, -ENOMEM, "journal %s: out of memory for a %zu-byte record", j->path, len);
                break;
            }
            buf = more;
            cap = len + 1;
        }
        r = read_full(j->fd, buf, len);
        if (r <= 0 && len) {
            if (r < 0 && errno) {
                rc = spw_fail(err, errlen, -errno, "journal %s: read: %s", j->path, strerror(errno));
                break;
            }
            why = "a torn record";
            break;
        }
        if (spw_crc32c(0, buf, len) != get32(h + 4)) {
            why = "a record whose CRC32C does not match";
            break;
        }
        char refusal[256] = "";
        if (fn && (rc = fn(ctx, buf, len, refusal, sizeof refusal)) != 0) {
            if (err && errlen && !err[0])
                snprintf(err, errlen, "journal %s: record %lld refused%s%s", j->path, (long long)info->records,
                         refusal[0] ? ": " : "", refusal);
            break;
        }
        info->records++;
        good += HEADER + (int64_t)len;
    }
    free(buf);
    if (rc)
        return rc;
    if (why) {
        int64_t after = 0;
        const int torn = torn_tail(j, good, end, len, complete, &after);
        if (torn < 0)
            return spw_fail(err, errlen, torn, "journal %s: reading past record %lld: %s", j->path,
                            (long long)info->records, spw_strerror(torn));
        info->dropped_bytes = end - good;
        if (!torn) {
            info->corrupt_at = good;
            info->dropped_records = 1 + after;
        }
        if (flags & READ_ONLY) {
            info->bytes = good;
            return 0;
        }
        if (!torn) {
            if (!(flags & SPW_JOURNAL_RECOVER))
                return spw_fail(err, errlen, -EBADMSG,
                                "journal %s is corrupt: record %lld at offset %lld fails its check (%s), and %lld "
                                "more bytes (%lld valid records) follow it - not a torn tail. Nothing was changed. "
                                "To start from the %lld records before it, run with --journal-recover (the whole "
                                "file is kept beside it); or restore the directory from a backup",
                                j->path, (long long)info->records, (long long)good, why,
                                (long long)(end - good - HEADER - (complete ? (int64_t)len : 0)), (long long)after,
                                (long long)info->records);
            if ((rc = keep_copy(j, info->copy, sizeof info->copy)) != 0)
                return spw_fail(err, errlen, rc, "journal %s: cannot keep a copy before recovering: %s", j->path,
                                spw_strerror(rc));
            spw_log(SPW_LOG_WARN, "journal", "recovered a corrupt journal path=%s at=%lld record=%lld why=\"%s\" "
                    "kept_records=%lld dropped_bytes=%lld dropped_records=%lld copy=%s", j->path, (long long)good,
                    (long long)info->records, why, (long long)info->records, (long long)info->dropped_bytes,
                    (long long)info->dropped_records, info->copy);
        } else {
            spw_log(SPW_LOG_WARN, "journal", "cut a bad tail off path=%s at=%lld dropped_bytes=%lld why=\"%s\"",
                    j->path, (long long)good, (long long)info->dropped_bytes, why);
        }
        if (ftruncate(j->fd, good) != 0 || fsync(j->fd) != 0)
            return spw_fail(err, errlen, -errno, "journal %s: cannot cut its bad tail: %s", j->path, strerror(errno));
    }
    j->size = j->synced = info->bytes = good;
    lseek(j->fd, good, SEEK_SET);
    return 0;
}

int spw_journal_open(const char *dir, unsigned flags, spw_journal_record_fn fn, void *ctx, struct spw_journal **out,
                     struct spw_journal_opened *info, char *err, size_t errlen)
{
    struct spw_journal_opened none;
    if (!info)
        info = &none;
    memset(info, 0, sizeof *info);
    info->corrupt_at = -1;
    if (err && errlen)
        err[0] = '\0';
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return spw_fail(err, errlen, -errno, "journal directory %s: %s", dir, strerror(errno));
    struct spw_journal *j = calloc(1, sizeof *j);
    if (!j)
        return spw_fail(err, errlen, -ENOMEM, "out of memory");
    j->fd = j->lock_fd = -1;
    char lock[4096];
    int rc = 0;
    j->dir = strdup(dir);
    if (asprintf(&j->path, "%s/journal", dir) < 0)
        j->path = NULL;
    if (!j->dir || !j->path) {
        rc = spw_fail(err, errlen, -ENOMEM, "out of memory");
        goto fail;
    }
    snprintf(lock, sizeof lock, "%s/LOCK", dir);
    if ((j->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
        rc = spw_fail(err, errlen, -errno, "journal lock %s: %s", lock, strerror(errno));
        goto fail;
    }
    if (flock(j->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        char pid[32] = "";
        ssize_t n = pread(j->lock_fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        rc = spw_fail(err, errlen, e == EWOULDBLOCK ? -EBUSY : -e, "%s is in use by another process%s%s%s", dir,
                      *pid ? " (pid " : "", pid, *pid ? ")" : "");
        goto fail;
    }
    char pid[32];
    int plen = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(j->lock_fd, 0) != 0 || pwrite(j->lock_fd, pid, (size_t)plen, 0) != plen) {
        rc = spw_fail(err, errlen, -errno, "journal lock %s: %s", lock, strerror(errno));
        goto fail;
    }
    if ((j->fd = open(j->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) {
        rc = spw_fail(err, errlen, -errno, "journal %s: %s", j->path, strerror(errno));
        goto fail;
    }
    if ((rc = replay(j, flags, fn, ctx, info, err, errlen)) != 0)
        goto fail;
    *out = j;
    return 0;
fail:
    spw_journal_close(j);
    return rc;
}

int spw_journal_read(const char *dir, spw_journal_record_fn fn, void *ctx, struct spw_journal_opened *info,
                     char *err, size_t errlen)
{
    memset(info, 0, sizeof *info);
    info->corrupt_at = -1;
    if (err && errlen)
        err[0] = '\0';
    char path[4200];
    snprintf(path, sizeof path, "%s/journal", dir);
    struct spw_journal j = {.path = path, .fd = open(path, O_RDONLY | O_CLOEXEC), .lock_fd = -1};
    if (j.fd < 0)
        return spw_fail(err, errlen, -errno, "journal %s: %s", path, strerror(errno));
    const int rc = replay(&j, READ_ONLY, fn, ctx, info, err, errlen);
    close(j.fd);
    return rc;
}

/* Cut the file back to `to` bytes (a failed write or sync): it stays a whole number of records. */
/* Back to the last sync: the file cut there, the batch dropped. */
static void cut_back(struct spw_journal *j)
{
    if (ftruncate(j->fd, j->synced) == 0)
        lseek(j->fd, j->synced, SEEK_SET);
    j->size = j->synced;
    j->batch_len = 0;
}

/* A heartbeat's 30-60 acks were as many write calls under the dispatcher's lock; now one per sync. */
int spw_journal_write(struct spw_journal *j, const uint8_t *rec, size_t len)
{
    if (len > SPW_JOURNAL_MAX_RECORD)
        return -EMSGSIZE;
    if (j->batch_len + HEADER + len > j->batch_cap) {
        size_t cap = j->batch_cap ? j->batch_cap : 4096;
        while (cap < j->batch_len + HEADER + len)
            cap *= 2;
        uint8_t *b = realloc(j->batch, cap);
        if (!b)
            return -ENOMEM;
        j->batch = b;
        j->batch_cap = cap;
    }
    uint8_t *h = j->batch + j->batch_len;
    put32(h, (uint32_t)len);
    put32(h + 4, spw_crc32c(0, rec, len));
    memcpy(h + HEADER, rec, len);
    j->batch_len += HEADER + len;
    j->size += HEADER + (int64_t)len;
    return 0;
}

/* The batch into the file (not synced). Returns 0 or -errno, with everything since the last sync cut off. */
static int write_batch(struct spw_journal *j)
{
    if (!j->batch_len)
        return 0;
    struct iovec iov = {j->batch, j->batch_len};
    const int rc = write_full(j->fd, &iov, 1);
    if (rc) {
        cut_back(j);
        return rc;
    }
    j->batch_len = 0;
    return 0;
}

/* Test-only failpoint (tests/integration/restart_matrix.sh): SPILLWAY_FAILPOINT=journal-sync:N:crash kills
 * the process at the Nth sync that has records to sync, before its fdatasync (the records stay in the page
 * cache, as after a process crash); journal-sync:N:lose first cuts them off (as a power loss would);
 * journal-sync:N:eio makes that sync fail with EIO (a full or failing disk). Returns 0 or -EIO. */
static int failpoint_sync(struct spw_journal *j)
{
    char mode[16];
    if (!spw_failpoint("journal-sync", mode, sizeof mode))
        return 0;
    if (!strcmp(mode, "eio")) {
        spw_log(SPW_LOG_WARN, "journal", "failpoint journal-sync: this fsync fails with EIO");
        return -EIO;
    }
    const bool lose = !strcmp(mode, "lose");
    spw_log(SPW_LOG_WARN, "journal", "failpoint journal-sync: killing this process before an fsync%s",
            lose ? ", its unsynced records cut off" : "");
    if (lose && ftruncate(j->fd, j->synced) != 0)
        spw_log(SPW_LOG_WARN, "journal", "failpoint: cannot cut the journal back");
    raise(SIGKILL);
    return 0;
}

int spw_journal_sync_begin(struct spw_journal *j, int64_t *upto)
{
    *upto = j->size;
    return write_batch(j);
}

int spw_journal_sync_file(struct spw_journal *j)
{
    const int failed = failpoint_sync(j);
    return failed ? failed : fdatasync(j->fd) == 0 ? 0 : -errno;
}

void spw_journal_sync_end(struct spw_journal *j, int64_t upto, int rc)
{
    if (rc)
        cut_back(j);
    else if (upto > j->synced)
        j->synced = upto;
}

int spw_journal_sync(struct spw_journal *j)
{
    if (j->synced == j->size)
        return 0;
    int64_t upto;
    int rc = spw_journal_sync_begin(j, &upto);
    if (rc)
        return rc;
    rc = spw_journal_sync_file(j);
    spw_journal_sync_end(j, upto, rc);
    return rc;
}

int spw_journal_append(struct spw_journal *j, const uint8_t *rec, size_t len)
{
    if (len > SPW_JOURNAL_MAX_RECORD)
        return -EMSGSIZE;
    if (j->batch_len)           /* a batch open: the record after it, synced with it */
        return spw_journal_write(j, rec, len) ?: spw_journal_sync(j);
    const int rc = write_record(j->fd, rec, len);
    if (rc) {
        cut_back(j);
        return rc;
    }
    j->size += HEADER + (int64_t)len;
    return spw_journal_sync(j);
}

int spw_journal_compact(struct spw_journal *j, const uint8_t *const *recs, const size_t *lens, size_t n)
{
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.new", j->path) < 0)
        return -ENOMEM;
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), rc = fd < 0 ? -errno : 0;
    int64_t size = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = lens[i] > SPW_JOURNAL_MAX_RECORD ? -EMSGSIZE : write_record(fd, recs[i], lens[i]);
        size += HEADER + (int64_t)lens[i];
    }
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, j->path) != 0)
        rc = -errno;
    if (rc) {
        if (fd >= 0)
            close(fd);
        unlink(tmp);
        free(tmp);
        return rc;
    }
    /* Renamed: the new file is the journal now, whether or not the directory's fsync below succeeds (if it
     * fails, a crash may bring back the old journal, which holds the same state). */
    close(j->fd);
    j->fd = fd;
    j->size = j->synced = size;
    j->batch_len = 0;           /* the state written whole holds what a batch said */
    lseek(j->fd, 0, SEEK_END);
    free(tmp);
    return fsync_dir(j->dir);
}

int64_t spw_journal_size(const struct spw_journal *j)
{
    return j->size;
}

void spw_journal_close(struct spw_journal *j)
{
    if (!j)
        return;
    if (j->fd >= 0) {
        write_batch(j);         /* unsynced, as a write before the batches were */
        close(j->fd);
    }
    if (j->lock_fd >= 0)
        close(j->lock_fd);      /* releases the flock */
    free(j->batch);
    free(j->dir);
    free(j->path);
    free(j);
}
