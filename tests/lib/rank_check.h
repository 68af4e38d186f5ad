/*
 * rank_check.h - the CHECK macro of gx's multi-rank test programs: on a
 * false condition, print "FAIL rank <me> line <n>: <message> [last error:
 * <gx_last_error()>]" and exit 1. The including file defines `me` (this
 * process's rank, -1 before init) and includes gx/gx.h, stdio.h, stdlib.h.
 */
#ifndef GX_TESTS_RANK_CHECK_H
#define GX_TESTS_RANK_CHECK_H

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "FAIL rank %d line %d: ", me, __LINE__);                     \
            fprintf(stderr, __VA_ARGS__);                                                \
            fprintf(stderr, " [last error: %s]\n", gx_last_error());                     \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

#endif
