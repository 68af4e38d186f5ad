/* check.h - the tiny assertion helper of the unit tests. */
#ifndef GX_TEST_CHECK_H
#define GX_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures;
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            check_failures++;                                                  \
        }                                                                      \
    } while (0)
#define CHECK_DONE(name)                                                       \
    do {                                                                       \
        if (check_failures) {                                                  \
            fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures); \
            return 1;                                                          \
        }                                                                      \
        printf("%s: all checks passed\n", name);                               \
        return 0;                                                              \
    } while (0)

#endif
