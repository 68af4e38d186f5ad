/* Unit test of common/safe_file.c in a sticky, world-writable directory like
 * /tmp: created files are 0600; a planted symbolic link, a file of another
 * user (nobody; needs root, else that part is skipped) and a group-writable
 * file are refused with a message naming path, owner and mode; O_TRUNC never
 * empties a refused file; gx_safe_unlink removes only the file it opened. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/safe_file.h"

static char dir[] = "/tmp/gx-safe-file-XXXXXX";

static void plant(const char *name, const char *text, mode_t mode, uid_t uid)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    chmod(p, mode);
    if (uid != (uid_t)-1 && chown(p, uid, (gid_t)-1) != 0)
        perror("chown");
}

static int try_open(const char *name, int flags, char *err, size_t len)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return gx_safe_open(p, flags, err, len);
}

static const char *contents(const char *name)
{
    static char buf[64];
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "r");
    buf[0] = '\0';
    if (f) {
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

int main(void)
{
    CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
    chmod(dir, 01777);
    char err[512], p[256];

    /* Created 0600 whatever the umask. */
    umask(0);
    int fd = try_open("new.log", O_WRONLY | O_CREAT | O_APPEND, err, sizeof(err));
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0600,
          "new file mode %o (%s)", (unsigned)(st.st_mode & 07777), fd < 0 ? err : "");
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC, "descriptor is not close-on-exec");
    close(fd);

    /* A planted symbolic link is not followed, even with O_CREAT. */
    plant("secret", "keep", 0600, (uid_t)-1);
    snprintf(p, sizeof(p), "%s/link", dir);
    CHECK(symlink("secret", p) == 0, "symlink: %s", strerror(errno));
    fd = try_open("link", O_WRONLY | O_CREAT | O_TRUNC, err, sizeof(err));
    CHECK(fd < 0 && strstr(err, "link'") && strstr(err, "symbolic link") &&
          strstr(err, "owner uid"), "symlink: fd %d, '%s'", fd, err);
    CHECK(strcmp(contents("secret"), "keep") == 0, "the link's target changed");

    /* Group- or other-writable: refused, naming the mode, and not emptied. */
    plant("shared", "data", 0666, (uid_t)-1);
    fd = try_open("shared", O_WRONLY | O_CREAT | O_TRUNC, err, sizeof(err));
    CHECK(fd < 0 && strstr(err, "mode 0666") && strstr(err, "group or others may write"),
          "0666 file: fd %d, '%s'", fd, err);
    CHECK(strcmp(contents("shared"), "data") == 0, "a refused file was truncated");

    /* Another user's file, pre-created as an intruder would. */
    if (geteuid() == 0) {
        plant("foreign", "forged", 0644, 65534);
        fd = try_open("foreign", O_RDWR | O_CREAT | O_APPEND, err, sizeof(err));
        CHECK(fd < 0 && strstr(err, "owner uid 65534") && strstr(err, "another user"),
              "foreign file: fd %d, '%s'", fd, err);
        fd = try_open("foreign", O_RDONLY, err, sizeof(err));
        CHECK(fd < 0 && strstr(err, "owner uid 65534"), "foreign file read: fd %d", fd);
    } else {
        printf("safe_file: not root, the foreign-owner case is skipped\n");
    }

    /* A directory or a fifo is not a regular file. */
    snprintf(p, sizeof(p), "%s/fifo", dir);
    mkfifo(p, 0600);
    fd = try_open("fifo", O_RDONLY | O_NONBLOCK, err, sizeof(err));
    CHECK(fd < 0 && strstr(err, "not a regular file"), "fifo: fd %d, '%s'", fd, err);

    /* gx_safe_unlink removes the file it opened, not a replacement. */
    fd = try_open("rdv", O_RDWR | O_CREAT, err, sizeof(err));
    snprintf(p, sizeof(p), "%s/rdv", dir);
    CHECK(fd >= 0 && gx_safe_unlink(p, fd) == 0 && access(p, F_OK) != 0, "unlink own file");
    plant("rdv", "other", 0600, (uid_t)-1);
    CHECK(gx_safe_unlink(p, fd) != 0 && access(p, F_OK) == 0, "unlinked a replacement");
    close(fd);

    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cleanup");
    CHECK_DONE("safe_file");
}
