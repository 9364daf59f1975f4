/* lib/journal.h - an append-only journal of records in a directory: each record is its length and CRC32C
 * (4 bytes each, little-endian) and its bytes; an append is on disk when spw_journal_append returns (fsync).
 * Opening replays the records in order and cuts a torn tail off (a crash mid-append: the last record,
 * incomplete or bad, with no valid record after it), saying how many bytes it dropped; a bad record with
 * more after it is corruption: refused, or recovered on request (a copy kept). A second process cannot open the same directory (an flock'd LOCK file).
 * spw_journal_compact swaps the whole journal for a shorter one (a snapshot of the state as records)
 * atomically. What the records mean is the caller's. Not thread-safe: the caller serialises. */
#ifndef SPW_LIB_JOURNAL_H
#define SPW_LIB_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define SPW_JOURNAL_MAX_RECORD ((size_t)64 << 20)   /* a length over this is a corrupt header */

struct spw_journal;

/* Called for each record in order while opening; a non-zero return stops the replay and fails the open, the
 * error naming the record and, when fn wrote one into why, the reason. */
typedef int (*spw_journal_record_fn)(void *ctx, const uint8_t *rec, size_t len, char *why, size_t whylen);

struct spw_journal_opened {
    int64_t records;        /* replayed */
    int64_t bytes;          /* of the journal kept */
    int64_t dropped_bytes;  /* of a torn tail, or after a corrupt record, cut off */
    int64_t corrupt_at;     /* the offset of a corrupt record (-1: none) */
    int64_t dropped_records;/* recovered: the corrupt record and the valid ones found after it */
    char copy[4200];        /* recovered: the copy of the whole file kept beside it */
};

#define SPW_JOURNAL_RECOVER 1u  /* on corruption, keep a copy and the records before it, instead of failing */

/* Open (creating dir and the journal when missing) and replay every record through fn (may be NULL). flags:
 * 0 or SPW_JOURNAL_RECOVER. Returns 0, or a negative code with err: -EBUSY when another process holds the
 * directory, -EBADMSG for corruption (the file untouched, err names its offset and record), -errno for I/O,
 * or fn's code. */
int spw_journal_open(const char *dir, unsigned flags, spw_journal_record_fn fn, void *ctx, struct spw_journal **out,
                     struct spw_journal_opened *info, char *err, size_t errlen);
/* Read dir's journal without changing it or taking its lock (a running dispatcher may hold it): each valid
 * record through fn, in order, then what follows them in info: dropped_bytes (a torn tail, or with
 * corrupt_at >= 0 corruption: what --journal-recover would drop). Returns 0, -errno, or fn's code. */
int spw_journal_read(const char *dir, spw_journal_record_fn fn, void *ctx, struct spw_journal_opened *info,
                     char *err, size_t errlen);
/* Append one record and fsync it. Returns 0 or a negative code (-EMSGSIZE over the cap, -errno). On failure
 * nothing of the record is kept (the file is cut back to where it was). */
int spw_journal_append(struct spw_journal *j, const uint8_t *rec, size_t len);
/* The same without the fsync: several records, then one spw_journal_sync (group commit). They are kept in
 * memory until that sync writes them in one go (spw_journal_close writes them unsynced). Returns 0, or
 * -EMSGSIZE / -ENOMEM with nothing kept of the record; the disk's errors come from the sync. */
int spw_journal_write(struct spw_journal *j, const uint8_t *rec, size_t len);
/* fsync what was written since the last sync; on failure those records are cut off (the file is back to the
 * last sync). Returns 0 or -errno. */
int spw_journal_sync(struct spw_journal *j);
/* spw_journal_sync in three steps, for a caller that syncs without holding the lock its other calls need
 * (group commit across threads): _begin writes the batch to the file and says how far the sync will reach
 * (*upto); _file syncs the file, and may run while other threads spw_journal_write (into the next batch)
 * but with no other call on this journal; _end records the outcome (rc 0: durable up to upto; else
 * everything since the last sync is cut off, batches written meanwhile included). _begin returns 0 or -errno
 * (then everything since the last sync is cut off already); _file returns 0 or -errno. */
int spw_journal_sync_begin(struct spw_journal *j, int64_t *upto);
int spw_journal_sync_file(struct spw_journal *j);
void spw_journal_sync_end(struct spw_journal *j, int64_t upto, int rc);
/* Replace the journal with these records (a snapshot): written to a new file, fsynced, renamed over the old
 * one, the directory fsynced; on failure the old journal stays. Returns 0 or a negative code. */
int spw_journal_compact(struct spw_journal *j, const uint8_t *const *recs, const size_t *lens, size_t n);
/* Bytes in the journal now. */
int64_t spw_journal_size(const struct spw_journal *j);
/* Close and release the directory; accepts NULL. */
void spw_journal_close(struct spw_journal *j);
/* CRC32C (Castagnoli) of len bytes, continuing from crc (0 to start). */
uint32_t spw_crc32c(uint32_t crc, const uint8_t *p, size_t len);

#endif
