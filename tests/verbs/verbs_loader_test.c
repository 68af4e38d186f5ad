/*
 * verbs_loader_test.c - loading libibverbs and choosing a port, one forked
 * process per case (the library is loaded once per process):
 *   missing_lib   GX_IBVERBS_LIB names no file: provider unavailable, reason given
 *   system_lib    the host's libibverbs (kernel without RDMA: ENOSYS) = no devices
 *   no_devices    softverbs with SOFTVERBS_NDEV=0: zero devices, not an error
 *   probe_ib      softverbs IB port: ACTIVE, 4x EDR = 100 Gb/s
 *   roce_gid      RoCE: the IPv4-mapped GID of the interface is chosen; a forced
 *                 GX_IB_GID_INDEX that does not exist is refused
 *   hca_filter    GX_IB_HCA include/exclude and an explicit device
 *   gpudirect     memory type of host memory, peermem detection from a
 *                 fixture /proc, GX_NET_GDR_LEVEL, device registration refused
 *                 with the reason, and the gx-info report
 * `verbs_loader_test --gpu` registers device memory and needs a GPU: it
 * skips with 77 on CI.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "fabric/verbs/verbs.h"
#include "gpudirect/gpudirect.h"

static const char *sv;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, " (last error: %s)\n", gx_last_error());                      \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static const struct gx_fab_provider *verbs(void)
{
    const struct gx_fab_provider *p = gx_fab_provider_find("verbs");
    CHECK(p != NULL, "verbs provider not built in");
    return p;
}

static int open_dom(const char *device, struct gx_fab_domain **dom)
{
    struct gx_fab_domain_attr a = GX_FAB_DOMAIN_ATTR_INIT;
    a.device = device;
    a.rank = 0;
    return gx_fab_domain_open(verbs(), &a, dom);
}

static int c_missing_lib(void)
{
    setenv("GX_IBVERBS_LIB", "/nonexistent/libibverbs.so.1", 1);
    struct gx_fab_devinfo d[4];
    int n = -1;
    CHECK(gx_fab_probe(verbs(), d, 4, &n) == GX_EUNSUPPORTED, "probe");
    CHECK(strstr(gx_verbs_unavailable_reason(), "cannot load"), "%s",
          gx_verbs_unavailable_reason());
    struct gx_fab_domain *dom;
    CHECK(open_dom(NULL, &dom) == GX_EUNSUPPORTED, "domain open");
    return 0;
}

static int c_system_lib(void)
{
    unsetenv("GX_IBVERBS_LIB");
    struct gx_fab_devinfo d[4];
    int n = -1;
    int rc = gx_fab_probe(verbs(), d, 4, &n);
    if (rc == GX_EUNSUPPORTED) {
        fprintf(stderr, "system_lib: no libibverbs here (%s)\n", gx_verbs_unavailable_reason());
        return 0;
    }
    CHECK(rc == GX_OK, "probe: %s", gx_strerror(rc));
    fprintf(stderr, "system_lib: %d device port(s) through the host's libibverbs\n", n);
    if (n == 0) {
        struct gx_fab_domain *dom;
        CHECK(open_dom(NULL, &dom) == GX_EUNSUPPORTED, "domain open without devices");
        CHECK(strstr(gx_last_error(), "no RDMA devices"), "reason");
    }
    return 0;
}

static int c_no_devices(void)
{
    setenv("GX_IBVERBS_LIB", sv, 1);
    setenv("SOFTVERBS_NDEV", "0", 1);
    struct gx_fab_devinfo d[4];
    int n = -1;
    CHECK(gx_fab_probe(verbs(), d, 4, &n) == GX_OK && n == 0, "probe: n=%d", n);
    struct gx_fab_domain *dom;
    CHECK(open_dom(NULL, &dom) == GX_EUNSUPPORTED, "domain open");
    return 0;
}

static int c_probe_ib(void)
{
    setenv("GX_IBVERBS_LIB", sv, 1);
    struct gx_fab_devinfo d[4];
    int n = -1;
    CHECK(gx_fab_probe(verbs(), d, 4, &n) == GX_OK && n == 1, "probe n=%d", n);
    fprintf(stderr, "probe_ib: %s %s %.0f Gb/s\n", d[0].name, d[0].detail,
            (double)d[0].link_bps * 8 / 1e9);
    CHECK(strcmp(d[0].name, "softverbs0:1") == 0, "%s", d[0].name);
    CHECK(strstr(d[0].detail, "InfiniBand 4x EDR") && strstr(d[0].detail, "ACTIVE"), "%s",
          d[0].detail);
    CHECK(d[0].link_bps == 12500000000ull, "%llu", (unsigned long long)d[0].link_bps);
    struct gx_fab_domain *dom;
    CHECK(open_dom(NULL, &dom) == GX_OK, "open");
    struct verbs_domain *vd = (struct verbs_domain *)dom;
    CHECK(strstr(vd->port.gid_why, "LID routing"), "%s", vd->port.gid_why);
    gx_fab_domain_close(dom);
    return 0;
}

static int c_roce_gid(void)
{
    setenv("GX_IBVERBS_LIB", sv, 1);
    setenv("SOFTVERBS_LINK", "roce", 1);
    struct gx_fab_domain *dom;
    CHECK(open_dom(NULL, &dom) == GX_OK, "open");
    struct verbs_domain *vd = (struct verbs_domain *)dom;
    fprintf(stderr, "roce_gid: GID[%d]: %s\n", vd->port.gid_index, vd->port.gid_why);
    CHECK(strcmp(vd->port.gid_why, "RoCE v2 IPv4-mapped, the interface's address") == 0, "%s",
          vd->port.gid_why);
    CHECK(vd->port.attr.link_layer == IBV_LINK_LAYER_ETHERNET, "link layer");
    gx_fab_domain_close(dom);
    setenv("GX_IB_GID_INDEX", "3", 1);
    CHECK(open_dom(NULL, &dom) == GX_EINVAL, "forced missing GID index accepted");
    CHECK(strstr(gx_last_error(), "GX_IB_GID_INDEX"), "reason");
    setenv("GX_IB_GID_INDEX", "0", 1);
    CHECK(open_dom(NULL, &dom) == GX_OK, "forced GID 0");
    CHECK(strstr(((struct verbs_domain *)dom)->port.gid_why, "GX_IB_GID_INDEX=0"), "forced why");
    gx_fab_domain_close(dom);
    return 0;
}

static int c_hca_filter(void)
{
    setenv("GX_IBVERBS_LIB", sv, 1);
    setenv("SOFTVERBS_NDEV", "2", 1);
    struct gx_fab_domain *dom;
    setenv("GX_IB_HCA", "^=softverbs0", 1);
    CHECK(open_dom(NULL, &dom) == GX_OK, "exclude");
    CHECK(strcmp(((struct verbs_domain *)dom)->port.dev, "softverbs1") == 0, "picked %s",
          ((struct verbs_domain *)dom)->port.dev);
    gx_fab_domain_close(dom);
    setenv("GX_IB_HCA", "=mlx5_0", 1);
    CHECK(open_dom(NULL, &dom) == GX_EUNSUPPORTED, "nothing matches");
    CHECK(strstr(gx_last_error(), "GX_IB_HCA"), "reason names GX_IB_HCA");
    unsetenv("GX_IB_HCA");
    CHECK(open_dom("softverbs1:1", &dom) == GX_OK, "explicit device");
    CHECK(strcmp(((struct verbs_domain *)dom)->port.dev, "softverbs1") == 0, "explicit");
    gx_fab_domain_close(dom);
    CHECK(open_dom("softverbs0:2", &dom) == GX_EUNSUPPORTED, "port 2 does not exist");
    return 0;
}

static int c_gpudirect(void)
{
    setenv("GX_IBVERBS_LIB", sv, 1);
    char *host = malloc(64), why[512];
    CHECK(gx_gpu_mem_type(host) == GX_GPU_MEM_HOST, "host memory");
    bool drv = gx_gpu_driver_available(why, sizeof(why));
    fprintf(stderr, "gpudirect: driver: %s\n", why);
    /* peermem from a fixture /proc and /sys */
    char root[] = "/tmp/gx-gdr-XXXXXX";
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    char path[600];
    snprintf(path, sizeof(path), "%s/proc", root);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/proc/modules", root);
    FILE *f = fopen(path, "w");
    fprintf(f, "nvidia 1 0 - Live 0x0\n");
    fclose(f);
    setenv("GX_GDR_SYSFS_ROOT", root, 1);
    CHECK(!gx_gpu_peermem_loaded(why, sizeof(why)) && strstr(why, "modprobe"), "%s", why);
    f = fopen(path, "a");
    fprintf(f, "nvidia_peermem 16384 0 - Live 0x0\n");
    fclose(f);
    CHECK(gx_gpu_peermem_loaded(why, sizeof(why)), "%s", why);
    unlink(path);
    snprintf(path, sizeof(path), "%s/proc", root);
    rmdir(path);
    rmdir(root);
    enum gx_topo_path lvl;
    setenv("GX_NET_GDR_LEVEL", "SYS", 1);
    CHECK(gx_gpu_gdr_level(&lvl) == GX_OK && lvl == GX_TOPO_PATH_SYS, "SYS");
    setenv("GX_NET_GDR_LEVEL", "sideways", 1);
    CHECK(gx_gpu_gdr_level(&lvl) == GX_EINVAL, "bad level");
    unsetenv("GX_NET_GDR_LEVEL");
    struct gx_gdr_nic nic = { "softverbs0:1", 0, GX_TOPO_PATH_SYS };
    enum gx_gdr_method m = gx_gdr_decide(&nic, why, sizeof(why));
    fprintf(stderr, "gpudirect: %s\n", why);
    CHECK(m == GX_GDR_NONE, "usable without GPU?");
    CHECK(drv ? strstr(why, "farther than GX_NET_GDR_LEVEL=PXB") != NULL
              : strstr(why, "not usable") != NULL, "%s", why);
    /* device memory registration through the provider: refused with why */
    struct gx_fab_domain *dom;
    CHECK(open_dom(NULL, &dom) == GX_OK, "open");
    struct gx_fab_mr *mr;
    int rc = gx_fab_mr_reg(dom, host, 64, GX_FAB_MEM_CUDA, GX_FAB_ACCESS_REMOTE_WRITE, &mr);
    CHECK(rc == GX_EUNSUPPORTED, "device registration: %s", gx_strerror(rc));
    CHECK(strstr(gx_last_error(), "GPUDirect RDMA"), "reason");
    CHECK(((struct verbs_domain *)dom)->dmabuf == 0, "softverbs has no dmabuf: probe said %d",
          ((struct verbs_domain *)dom)->dmabuf);
    gx_fab_domain_close(dom);
    char report[2048];
    gx_verbs_gdr_report(report, sizeof(report));
    fprintf(stderr, "gx-info GPUDirect report:\n%s", report);
    CHECK(strstr(report, "softverbs0:1: GPUDirect RDMA"), "report");
    if (!drv)
        CHECK(strstr(report, "no libcuda") || strstr(report, "no GPU") ||
                  strstr(report, "cuInit failed"), "report why");
    free(host);
    return 0;
}

static int gpu_registration(void)
{
    char why[256];
    if (!gx_gpu_driver_available(why, sizeof(why))) {
        printf("skipping GPU registration test: %s\n", why);
        return 77;
    }
    printf("a GPU is present (%s) but this test has no device allocator yet: skipping\n", why);
    return 77;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--gpu") == 0)
        return gpu_registration();
    if (argc < 2 || access(argv[1], R_OK) != 0) {
        printf("usage: %s SOFTVERBS_LIB (softverbs not built: skipping)\n", argv[0]);
        return 77;
    }
    sv = argv[1];
    static const struct {
        const char *name;
        int (*fn)(void);
    } cases[] = {
        { "missing_lib", c_missing_lib }, { "system_lib", c_system_lib },
        { "no_devices", c_no_devices },   { "probe_ib", c_probe_ib },
        { "roce_gid", c_roce_gid },       { "hca_filter", c_hca_filter },
        { "gpudirect", c_gpudirect },
    };
    int fails = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(30);
            _exit(cases[i].fn());
        }
        int st = 0;
        waitpid(pid, &st, 0);
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        printf("verbs loader %s: %s\n", cases[i].name, ok ? "PASS" : "FAIL");
        fails += !ok;
    }
    return fails ? 1 : 0;
}
