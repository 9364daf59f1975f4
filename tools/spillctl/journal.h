/* tools/spillctl/journal.h - `spillctl journal dump DIR`: a dispatcher's journal, record by record, without
 * changing it (journal.c). Single-threaded. */
#ifndef SPW_SPILLCTL_JOURNAL_H
#define SPW_SPILLCTL_JOURNAL_H

/* Print each record of DIR/journal (its offset, kind and set fields; never a secret) to stdout, then whether
 * it ends cleanly, in a torn tail (cut off at the next start) or in corruption (refused at the next start;
 * what --journal-recover would drop). Returns the exit status: 0 clean or torn, 1 corrupt or unreadable. */
int spw_ctl_journal_dump(const char *dir, int json);

#endif
