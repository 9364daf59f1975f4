/* tests/unit/check_run.h - the end of every unit test's main(): run a Check suite (forked, as Check
 * does by default) and turn its failures into the exit status. Header-only; no threads of its own. */
#ifndef SPW_TESTS_CHECK_RUN_H
#define SPW_TESTS_CHECK_RUN_H

#include <check.h>

/* Run every test of s, print Check's normal report, free the runner; 1 if any test failed, else 0. */
static inline int spw_check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

#endif
