/* tests/unit/fixture_dir.h - a unit test's folder of generated input files: made in a fresh /tmp folder by a
 * Python script of tests/unit/ (Pillow, tarfile, Debian's encoders), removed after the test, and read back
 * whole. Header-only, for Check fixtures (each test's forked process makes and removes its own). */
#ifndef SPW_TESTS_FIXTURE_DIR_H
#define SPW_TESTS_FIXTURE_DIR_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Make root (cap bytes) as /tmp/spw-TAG-XXXXXX and run `python3 SCRIPT root` to fill it. */
static inline void spw_fixture_make(char *root, size_t cap, const char *tag, const char *script)
{
    char cmd[512];
    snprintf(root, cap, "/tmp/spw-%s-XXXXXX", tag);
    ck_assert(mkdtemp(root) != NULL);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s '%s'", script, root);
    ck_assert_int_eq(system(cmd), 0);
}

static inline void spw_fixture_remove(const char *root)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", root);
}

/* The whole file root/name (root NULL: name is the path), malloc'd (one spare byte), its size in *len; fails
 * the test when unreadable. */
static inline uint8_t *spw_fixture_read(const char *root, const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s%s", root ? root : "", root ? "/" : "", name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    ck_assert_uint_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

#endif
