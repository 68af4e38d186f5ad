/*
 * test_topo_fixtures.c - exact path matrices and placements on the hwloc XML
 * fixtures of tests/fixtures/topo (see its README for the layouts).
 *
 * Matrices are written with one letter per pair: X self, I PIX, B PXB,
 * H PHB, N NODE, S SYS; a row lists the GPUs then the NICs (RDMA, then
 * Ethernet), spaces are ignored. Placements are "NIC[,NIC...]@CPUS" per
 * local rank, ranks separated by spaces, for local sizes 1..8 with rank r on
 * GPU r mod #GPUs. Every expectation was derived by hand from the fixture
 * layout and the rules in topology/topo_place.c, not copied from output.
 *
 * usage: test_topo_fixtures FIXTURE_DIR
 */
#include "gx/gx.h"
#include "topology/topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            failures++;                                                        \
        }                                                                      \
    } while (0)

struct fixture {
    const char *file;
    int gpus, rdma, eth, numa;
    const char *gpu_rows[16]; /* GPU x (GPUs, NICs) */
    const char *place[8];     /* local sizes 1..8 */
};

#define D8N "0-7,16-23"
#define D8S "8-15,24-31"

static const struct fixture fixtures[] = {
    { "dgx8.xml", 8, 8, 1, 2,
      { "XINNSSSS IINNSSSS N", "IXNNSSSS IINNSSSS N", "NNXISSSS NNIISSSS N", "NNIXSSSS NNIISSSS N",
        "SSSSXINN SSSSIINN S", "SSSSIXNN SSSSIINN S", "SSSSNNXI SSSSNNII S", "SSSSNNIX SSSSNNII S" },
      { "mlx5_0,mlx5_1@" D8N,
        "mlx5_0@" D8N " mlx5_1@" D8N,
        "mlx5_0@" D8N " mlx5_1@" D8N " mlx5_2,mlx5_3@" D8N,
        "mlx5_0@" D8N " mlx5_1@" D8N " mlx5_2@" D8N " mlx5_3@" D8N,
        "mlx5_0@" D8N " mlx5_1@" D8N " mlx5_2@" D8N " mlx5_3@" D8N " mlx5_4,mlx5_5@" D8S,
        "mlx5_0@" D8N " mlx5_1@" D8N " mlx5_2@" D8N " mlx5_3@" D8N " mlx5_4@" D8S " mlx5_5@" D8S,
        "mlx5_0@" D8N " mlx5_1@" D8N " mlx5_2@" D8N " mlx5_3@" D8N " mlx5_4@" D8S " mlx5_5@" D8S
        " mlx5_6,mlx5_7@" D8S,
        "mlx5_0@" D8N " mlx5_1@" D8N " mlx5_2@" D8N " mlx5_3@" D8N " mlx5_4@" D8S " mlx5_5@" D8S
        " mlx5_6@" D8S " mlx5_7@" D8S } },
    { "ws4.xml", 4, 2, 0, 1,
      { "XIHH IH", "IXHH IH", "HHXI HI", "HHIX HI" },
      { "mlx5_0@0-15",
        "mlx5_0@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15 mlx5_0@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15 mlx5_0@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15 mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15 mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15" } },
    { "hgx16.xml", 16, 4, 0, 2,
      { "XIBBNNNN SSSSSSSS INSS", "IXBBNNNN SSSSSSSS INSS", "BBXINNNN SSSSSSSS BNSS", "BBIXNNNN SSSSSSSS BNSS",
        "NNNNXIBB SSSSSSSS NISS", "NNNNIXBB SSSSSSSS NISS", "NNNNBBXI SSSSSSSS NBSS", "NNNNBBIX SSSSSSSS NBSS",
        "SSSSSSSS XIBBNNNN SSIN", "SSSSSSSS IXBBNNNN SSIN", "SSSSSSSS BBXINNNN SSBN", "SSSSSSSS BBIXNNNN SSBN",
        "SSSSSSSS NNNNXIBB SSNI", "SSSSSSSS NNNNIXBB SSNI", "SSSSSSSS NNNNBBXI SSNB", "SSSSSSSS NNNNBBIX SSNB" },
      { "mlx5_0@0-15",
        "mlx5_0@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15 mlx5_1@0-15",
        "mlx5_0@0-15 mlx5_0@0-15 mlx5_0@0-15 mlx5_0@0-15 mlx5_1@0-15 mlx5_1@0-15 mlx5_1@0-15 mlx5_1@0-15" } },
    { "vm4.xml", 4, 2, 1, 2,
      { "XHHH HHH", "HXHH HHH", "HHXH HHH", "HHHX HHH" },
      { "mlx5_0,mlx5_1@0-7",
        "mlx5_0@0-7 mlx5_1@0-7",
        "mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7",
        "mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7 mlx5_1@0-7",
        "mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7",
        "mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7 mlx5_1@0-7",
        "mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7",
        "mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7 mlx5_1@0-7 mlx5_0@0-7 mlx5_1@0-7" } },
    { "cpu2s.xml", 0, 2, 1, 2,
      { NULL },
      { "mlx5_0@0-7",
        "mlx5_0@0-7 mlx5_1@8-15",
        "mlx5_0@0-7 mlx5_0@0-7 mlx5_1@8-15",
        "mlx5_0@0-7 mlx5_0@0-7 mlx5_1@8-15 mlx5_1@8-15",
        "mlx5_0@0-7 mlx5_0@0-7 mlx5_0@0-7 mlx5_1@8-15 mlx5_1@8-15",
        "mlx5_0@0-7 mlx5_0@0-7 mlx5_0@0-7 mlx5_1@8-15 mlx5_1@8-15 mlx5_1@8-15",
        "mlx5_0@0-7 mlx5_0@0-7 mlx5_0@0-7 mlx5_0@0-7 mlx5_1@8-15 mlx5_1@8-15 mlx5_1@8-15",
        "mlx5_0@0-7 mlx5_0@0-7 mlx5_0@0-7 mlx5_0@0-7 mlx5_1@8-15 mlx5_1@8-15 mlx5_1@8-15 mlx5_1@8-15" } },
    { "self.xml", 0, 0, 1, 1,
      { NULL },
      { "eth0@0-1", "eth0@0-1 eth0@0-1", "eth0@0-1 eth0@0-1 eth0@0-1", "eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1",
        "eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1", "eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1",
        "eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1",
        "eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1 eth0@0-1" } },
};

static char letter(enum gx_topo_path p)
{
    static const char map[] = "XIBHNS?";
    return (unsigned)p < sizeof(map) - 1 ? map[p] : '!';
}

static void check_matrix(const struct gx_topo *topo, const struct fixture *f)
{
    int ng = gx_topo_device_count(topo, GX_TOPO_GPU);
    for (int g = 0; g < ng; g++) {
        char got[128] = "", want[128] = "";
        size_t n = 0;
        for (const char *s = f->gpu_rows[g]; *s; s++)
            if (*s != ' ')
                want[n++] = *s;
        want[n] = '\0';
        n = 0;
        for (int k = 0; k < GX_TOPO_KIND_COUNT; k++)
            for (int j = 0; j < gx_topo_device_count(topo, (enum gx_topo_kind)k); j++) {
                enum gx_topo_path p, back;
                gx_topo_path_get(topo, GX_TOPO_GPU, g, (enum gx_topo_kind)k, j, &p);
                gx_topo_path_get(topo, (enum gx_topo_kind)k, j, GX_TOPO_GPU, g, &back);
                CHECK(p == back, "%s: path GPU%d-%s%d is not symmetric", f->file, g, gx_topo_kind_name(k), j);
                got[n++] = letter(p);
            }
        got[n] = '\0';
        CHECK(strcmp(got, want) == 0, "%s: GPU%d row is %s, expected %s", f->file, g, got, want);
    }
}

static void check_placements(const struct gx_topo *topo, const struct fixture *f)
{
    for (int n = 1; n <= 8; n++) {
        struct gx_topo_placement pl[8];
        for (int r = 0; r < n; r++)
            pl[r] = (struct gx_topo_placement)GX_TOPO_PLACEMENT_INIT;
        int rc = gx_topo_place(topo, n, NULL, "", pl);
        CHECK(rc == GX_OK, "%s: placing %d ranks failed: %s", f->file, n, gx_last_error());
        if (rc != GX_OK)
            continue;
        char got[1024] = "";
        size_t at = 0;
        for (int r = 0; r < n; r++) {
            at += (size_t)snprintf(got + at, sizeof(got) - at, "%s", r ? " " : "");
            for (int i = 0; i < pl[r].nic_count; i++)
                at += (size_t)snprintf(got + at, sizeof(got) - at, "%s%s", i ? "," : "", pl[r].nic_names[i]);
            at += (size_t)snprintf(got + at, sizeof(got) - at, "@%s", pl[r].cpuset);
            CHECK(pl[r].gpu == (f->gpus ? r % f->gpus : -1), "%s n=%d: rank %d GPU %d", f->file, n, r, pl[r].gpu);
        }
        CHECK(strcmp(got, f->place[n - 1]) == 0, "%s: %d ranks placed as\n   %s\n expected\n   %s", f->file, n,
              got, f->place[n - 1]);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
        const struct fixture *f = &fixtures[i];
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", argv[1], f->file);
        struct gx_topo *topo;
        int rc = gx_topo_load(path, &topo);
        CHECK(rc == GX_OK, "loading %s: %s", path, gx_last_error());
        if (rc != GX_OK)
            continue;
        CHECK(gx_topo_device_count(topo, GX_TOPO_GPU) == f->gpus, "%s: %d GPUs", f->file,
              gx_topo_device_count(topo, GX_TOPO_GPU));
        CHECK(gx_topo_device_count(topo, GX_TOPO_RDMA_NIC) == f->rdma, "%s: %d RDMA NICs", f->file,
              gx_topo_device_count(topo, GX_TOPO_RDMA_NIC));
        CHECK(gx_topo_device_count(topo, GX_TOPO_ETH_NIC) == f->eth, "%s: %d Ethernet NICs", f->file,
              gx_topo_device_count(topo, GX_TOPO_ETH_NIC));
        CHECK(gx_topo_numa_count(topo) == f->numa, "%s: %d NUMA nodes", f->file, gx_topo_numa_count(topo));
        if (gx_topo_device_count(topo, GX_TOPO_GPU) == f->gpus)
            check_matrix(topo, f);
        check_placements(topo, f);
        gx_topo_free(topo);
        printf("%-10s %s\n", f->file, failures ? "checked (failures so far)" : "ok");
    }
    return failures ? 1 : 0;
}
