/*
 * safe_file.c - see safe_file.h. Used for GX_DEBUG_FILE, the file://
 * rendezvous file and the flight-recorder dumps.
 */
#include "common/safe_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Why `st` is not a file we may use, or NULL when it is. */
static const char *refusal(const struct stat *st)
{
    if (!S_ISREG(st->st_mode))
        return S_ISLNK(st->st_mode) ? "it is a symbolic link" : "it is not a regular file";
    if (st->st_uid != geteuid())
        return "it is owned by another user";
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return "group or others may write it";
    return NULL;
}

static void describe(const char *path, const struct stat *st, const char *why, char *err,
                     size_t errlen)
{
    snprintf(err, errlen, "refusing '%s' (owner uid %u, mode %04o; we are uid %u): %s", path,
             (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777), (unsigned)geteuid(), why);
}

int gx_safe_open(const char *path, int flags, char *err, size_t errlen)
{
    int trunc = flags & O_TRUNC;
    int fd = open(path, (flags & ~O_TRUNC) | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        int saved = errno;
        struct stat st;
        const char *why;
        /* A planted link gives ELOOP; a foreign file in a sticky directory
         * can give EACCES (fs.protected_regular): say whose file it is. */
        if (lstat(path, &st) == 0 && (why = refusal(&st)) != NULL)
            describe(path, &st, why, err, errlen);
        else
            snprintf(err, errlen, "cannot open '%s': %s", path, strerror(saved));
        errno = saved;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int saved = errno;
        snprintf(err, errlen, "cannot stat '%s': %s", path, strerror(saved));
        close(fd);
        errno = saved;
        return -1;
    }
    const char *why = refusal(&st);
    if (why) {
        describe(path, &st, why, err, errlen);
        close(fd);
        errno = EPERM;
        return -1;
    }
    if (trunc && ftruncate(fd, 0) != 0) {
        int saved = errno;
        snprintf(err, errlen, "cannot truncate '%s': %s", path, strerror(saved));
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int gx_safe_unlink(const char *path, int fd)
{
    struct stat have, now;
    if (fstat(fd, &have) != 0 || lstat(path, &now) != 0)
        return -1;
    if (have.st_dev != now.st_dev || have.st_ino != now.st_ino || now.st_uid != geteuid()) {
        errno = ESTALE;
        return -1;
    }
    return unlink(path);
}
