/*
 * gdr_verdict.c - the GPUDirect RDMA decision table (gx_gdr_verdict), with
 * every input injected, so it runs without a GPU, a NIC or hwloc: every
 * path class x GX_NET_GDR_LEVEL x dmabuf support x nvidia-peermem x driver,
 * against an oracle written from docs/verbs.md, plus the explanation text
 * of the rows an operator meets most.
 */
#include <string.h>

#include "check.h"
#include "gpudirect/gpudirect.h"

/* docs/verbs.md, "How GPUDirect RDMA is chosen". */
static enum gx_gdr_method oracle(const struct gx_gdr_inputs *in)
{
    if (!in->driver || !in->level_valid)
        return GX_GDR_NONE;
    bool near_enough = in->path == GX_TOPO_PATH_UNKNOWN ? in->level != GX_TOPO_PATH_SELF
                                                        : in->path <= in->level;
    if (!near_enough)
        return GX_GDR_NONE;
    if (in->dmabuf == 1)
        return GX_GDR_DMABUF;
    return in->peermem ? GX_GDR_PEERMEM : GX_GDR_NONE;
}

static enum gx_gdr_method decide(enum gx_topo_path path, enum gx_topo_path level, int dmabuf,
                                 bool peermem, char *why, size_t len)
{
    struct gx_gdr_inputs in = { .nic = "mlx5_0:1", .driver = true, .driver_why = "-",
                                .level_valid = true, .level = level, .path = path,
                                .dmabuf = dmabuf, .peermem = peermem,
                                .peermem_why = peermem ? "nvidia_peermem module loaded"
                                                       : "no nvidia_peermem module" };
    return gx_gdr_verdict(&in, why, len);
}

int main(void)
{
    char why[320];
    int rows = 0;
    static const int dmabufs[] = { 1, 0, -1 };
    for (int drv = 0; drv <= 1; drv++)
        for (int lv = 0; lv <= 1; lv++)
            for (int level = GX_TOPO_PATH_SELF; level <= GX_TOPO_PATH_SYS; level++)
                for (int path = GX_TOPO_PATH_SELF; path <= GX_TOPO_PATH_UNKNOWN; path++)
                    for (int d = 0; d < 3; d++)
                        for (int pm = 0; pm <= 1; pm++) {
                            struct gx_gdr_inputs in = {
                                .nic = "mlx5_0:1", .driver = drv, .driver_why = "no CUDA driver",
                                .level_valid = lv, .level = (enum gx_topo_path)level,
                                .path = (enum gx_topo_path)path, .dmabuf = dmabufs[d],
                                .peermem = pm, .peermem_why = "peermem checked" };
                            enum gx_gdr_method got = gx_gdr_verdict(&in, why, sizeof(why));
                            CHECK(got == oracle(&in), "driver %d level %s(valid %d) path %s "
                                  "dmabuf %d peermem %d: got %d, want %d (%s)", drv,
                                  gx_gpu_path_name(in.level), lv, gx_gpu_path_name(in.path),
                                  in.dmabuf, pm, got, oracle(&in), why);
                            CHECK(strncmp(why, "mlx5_0:1: ", 10) == 0, "names the NIC: %s", why);
                            rows++;
                        }

    /* The rows operators meet, and what they are told. */
    CHECK(decide(GX_TOPO_PATH_PIX, GX_TOPO_PATH_PXB, 1, false, why, sizeof(why)) ==
              GX_GDR_DMABUF && strstr(why, "dmabuf") && strstr(why, "path PIX"), "%s", why);
    CHECK(decide(GX_TOPO_PATH_PXB, GX_TOPO_PATH_PXB, 0, true, why, sizeof(why)) ==
              GX_GDR_PEERMEM && strstr(why, "nvidia-peermem") && strstr(why, "unsupported"),
          "%s", why);
    CHECK(decide(GX_TOPO_PATH_SYS, GX_TOPO_PATH_PXB, 1, true, why, sizeof(why)) == GX_GDR_NONE &&
              strstr(why, "path is SYS, farther than GX_NET_GDR_LEVEL=PXB"), "%s", why);
    CHECK(decide(GX_TOPO_PATH_PHB, GX_TOPO_PATH_PHB, 1, false, why, sizeof(why)) == GX_GDR_DMABUF,
          "%s", why);
    CHECK(decide(GX_TOPO_PATH_NODE, GX_TOPO_PATH_PHB, 1, false, why, sizeof(why)) == GX_GDR_NONE,
          "%s", why);
    CHECK(decide(GX_TOPO_PATH_UNKNOWN, GX_TOPO_PATH_PXB, 1, false, why, sizeof(why)) ==
              GX_GDR_DMABUF && strstr(why, "path class unknown"), "%s", why);
    CHECK(decide(GX_TOPO_PATH_PIX, GX_TOPO_PATH_SELF, 1, true, why, sizeof(why)) == GX_GDR_NONE &&
              strstr(why, "GX_NET_GDR_LEVEL=LOC"), "%s", why);
    CHECK(decide(GX_TOPO_PATH_PIX, GX_TOPO_PATH_SYS, 0, false, why, sizeof(why)) == GX_GDR_NONE &&
              strstr(why, "ibv_reg_dmabuf_mr EOPNOTSUPP") && strstr(why, "no nvidia_peermem"),
          "%s", why);
    printf("gdr verdict: %d rows of the decision table\n", rows);
    CHECK_DONE("gdr_verdict");
}
