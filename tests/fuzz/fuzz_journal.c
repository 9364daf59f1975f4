/* tests/fuzz/fuzz_journal.c - libFuzzer target: the journal reader (lib/journal.c) on the input as a journal
 * file, each record it accepts decoded as a dispatcher update (dispatcher/codec.c) and applied to a fresh
 * state. Single-threaded; the journal lives in a private temporary directory under $TMPDIR (default /tmp). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher/journal_record.h"
#include "dispatcher/state.h"
#include "lib/journal.h"
#include "lib/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], path[96];

static int apply(void *ctx, const uint8_t *rec, size_t len, char *why, size_t whylen)
{
    (void)why, (void)whylen;
    struct disp_update u;
    ProtobufCMessage *m;
    if (disp_update_decode(rec, len, &u, &m) == 0) {
        disp_state_apply(ctx, &u, NULL, 0);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        spw_log_set_level(SPW_LOG_ERROR + 1);  /* every bad tail is cut and logged: not news here */
        const char *tmp = getenv("TMPDIR");    /* a long run: TMPDIR=/dev/shm, where fsync costs nothing */
        snprintf(dir, sizeof dir, "%s/spw-fuzz-journal-XXXXXX", tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof path, "%s/journal", dir);
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    /* Small caps: each execution allocates less, and records reach the caps' refusals. */
    const struct disp_limits lim = {.max_workers = 16, .max_jobs = 8, .history = 8, .max_jobs_per_client = 4,
                                    .max_splits_per_epoch = 4096, .max_world_size = 16};
    struct disp_state *s;
    if (disp_state_create(&lim, &s) != 0)
        return 0;
    struct spw_journal *j;
    char err[256];
    if (spw_journal_open(dir, 0, apply, s, &j, NULL, err, sizeof err) == 0)
        spw_journal_close(j);
    disp_state_destroy(s);
    return 0;
}
