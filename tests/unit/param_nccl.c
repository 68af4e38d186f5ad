/*
 * param_nccl.c - NCCL_* variables with a GX_* equivalent (test
 * unit.param_nccl): read when the GX_* one is unset, translated where the
 * forms differ (NCCL_DEBUG=INFO, NCCL_NET=IB), never over a GX_* value;
 * the others ignored with a warning naming the GX_* variable; the notices
 * said once; every one of them in docs/api.md's table.
 *
 * Usage: param_nccl <path to docs/api.md>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/param.h"
#include "gx/gx.h"

static int fails;
#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                         \
            printf(__VA_ARGS__);                                                \
            printf("\n");                                                       \
            fails++;                                                            \
        }                                                                       \
    } while (0)

static const char *text(const char *gx)
{
    const struct gx_param *p = gx_param_find(gx);
    return p ? gx_param_text(p) : "(no such parameter)";
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    static char buf[1 << 18];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s docs/api.md\n", argv[0]);
        return 2;
    }
    char logpath[] = "/tmp/gx-param-nccl-XXXXXX";
    int fd = mkstemp(logpath);
    if (fd < 0)
        return 1;
    close(fd);
    unlink(logpath); /* gx creates it */
    setenv("GX_DEBUG_FILE", logpath, 1);
    unsetenv("GX_SOCKET_IFNAME");
    unsetenv("GX_DEBUG");
    unsetenv("GX_NET");
    unsetenv("GX_ALGO");
    unsetenv("GX_IB_TIMEOUT");

    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    CHECK(strcmp(text("GX_SOCKET_IFNAME"), "lo") == 0, "NCCL_SOCKET_IFNAME read: %s",
          text("GX_SOCKET_IFNAME"));
    setenv("NCCL_DEBUG", "WARN", 1);
    CHECK(strcmp(text("GX_DEBUG"), "warn") == 0, "NCCL_DEBUG=WARN -> warn: %s", text("GX_DEBUG"));
    setenv("NCCL_NET", "IB", 1);
    CHECK(strcmp(text("GX_NET"), "verbs") == 0, "NCCL_NET=IB -> verbs: %s", text("GX_NET"));
    setenv("NCCL_NET", "gx", 1);
    CHECK(strcmp(text("GX_NET"), "auto") == 0, "NCCL_NET=gx is not a gx provider: %s",
          text("GX_NET"));
    setenv("NCCL_ALGO", "Ring", 1);
    CHECK(strcmp(text("GX_ALGO"), "auto") == 0, "NCCL_ALGO is not read: %s", text("GX_ALGO"));
    /* A GX_* value wins. */
    setenv("GX_SOCKET_IFNAME", "eth9", 1);
    CHECK(strcmp(text("GX_SOCKET_IFNAME"), "eth9") == 0, "GX_* wins: %s",
          text("GX_SOCKET_IFNAME"));
    unsetenv("GX_SOCKET_IFNAME");
    /* A malformed NCCL_* value is reported under both names. */
    setenv("NCCL_IB_TIMEOUT", "soon", 1);
    long long v = 0;
    CHECK(gx_param_int(gx_param_find("GX_IB_TIMEOUT"), &v) == GX_EINVAL, "bad value refused");
    CHECK(strstr(gx_last_error(), "GX_IB_TIMEOUT (read from NCCL_IB_TIMEOUT)='soon'") != NULL,
          "error names both: %s", gx_last_error());
    unsetenv("NCCL_IB_TIMEOUT");

    gx_param_check_environment();
    gx_param_check_environment(); /* notices are said once */
    const char *log = slurp(logpath);
    CHECK(log != NULL, "no log file %s", logpath);
    if (log) {
        printf("%s", log);
        CHECK(count(log, "note: reading NCCL_SOCKET_IFNAME=lo as GX_SOCKET_IFNAME=lo") == 1,
              "one notice for NCCL_SOCKET_IFNAME");
        CHECK(count(log, "NCCL_ALGO is set but gx does not read it") == 1 &&
                  strstr(log, "set GX_ALGO") != NULL,
              "one warning naming GX_ALGO");
        CHECK(count(log, "NCCL_NET=gx is not read") == 1, "NCCL_NET=gx warned about");
    }
    unlink(logpath);

    /* docs/api.md lists every one of them with its GX_* variable. */
    const char *doc = slurp(argv[1]);
    CHECK(doc != NULL, "cannot read %s", argv[1]);
    const char *nccl, *gx;
    bool read;
    for (size_t i = 0; doc && gx_param_nccl_at(i, &nccl, &gx, &read) == 0; i++) {
        char row[128];
        snprintf(row, sizeof(row), "| `%s` | `%s` |", nccl, gx);
        CHECK(strstr(doc, row) != NULL, "docs/api.md lacks the row %s", row);
        CHECK(gx_param_find(gx) != NULL, "%s maps to %s, which gx does not define", nccl, gx);
    }
    if (fails)
        return 1;
    printf("NCCL_* variables: read, translated, warned about, documented\n");
    return 0;
}
