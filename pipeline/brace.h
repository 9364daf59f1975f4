/* pipeline/brace.h - brace expansion of shard paths as WebDataset's braceexpand writes them:
 * "shard-{000000..000099}.tar" (numeric ranges, zero-padded when an end is), "{train,val}" (lists), nested.
 * Not a glob: '*', '?' and '[' pass through untouched. Pure functions; safe from any thread. */
#ifndef SPW_PIPELINE_BRACE_H
#define SPW_PIPELINE_BRACE_H

#include <stddef.h>
#include <stdint.h>

/* Shards one tar_shards path may name after expansion and globbing. */
#define SPW_BRACE_MAX_ITEMS 100000

/* Expand pattern into *items (n_items strings, in order; free with spw_brace_free). A brace group that is
 * neither a list nor a numeric range ("{}", "{a}", "{1..x}") is kept as literal text, as bash does. More than
 * max_items results is refused before anything is allocated. Returns 0, SPW_ESOURCE (message in err: over
 * the cap, unbalanced range) or -ENOMEM. */
int spw_brace_expand(const char *pattern, int64_t max_items, char ***items, int64_t *n_items, char *err,
                     size_t errlen);
void spw_brace_free(char **items, int64_t n_items);

#endif
