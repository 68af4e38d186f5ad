/* proc.c - see proc.h. */
#include "common/proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

bool gx_process_gone(pid_t pid)
{
    if (pid <= 0)
        return false;
    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) S ...": the state follows the last ')'. */
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}
