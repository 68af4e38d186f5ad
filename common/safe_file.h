/*
 * safe_file.h - opening files that gx creates or reads in directories other
 * users may write to (/tmp, a shared scratch file system).
 *
 * Owns the one rule every such file follows: never follow a symbolic link,
 * never inherit the descriptor across exec, create with mode 0600, and refuse
 * a file that is not a regular file owned by the calling user or that group or
 * others may write. It logs nothing: callers add what the file is for.
 */
#ifndef GX_COMMON_SAFE_FILE_H
#define GX_COMMON_SAFE_FILE_H

#include <stddef.h>
#include <sys/types.h>

/**
 * Open `path` with open(2) `flags` (O_RDONLY, O_WRONLY or O_RDWR, plus
 * O_CREAT, O_APPEND, O_TRUNC, O_EXCL), adding O_NOFOLLOW and O_CLOEXEC. A
 * created file gets mode 0600. O_TRUNC is applied only after the checks pass,
 * so a refused file is never emptied. Returns the descriptor, or -1 with
 * errno set and `err` holding a sentence that names the path and, for a
 * refused file, its owner uid and mode.
 */
int gx_safe_open(const char *path, int flags, char *err, size_t errlen);

/**
 * Remove `path` only if it is still the file `fd` refers to (same device and
 * inode, still ours). Returns 0, or -1 with errno set.
 */
int gx_safe_unlink(const char *path, int fd);

#endif
