/*
 * test_topo_errors.c - bad input gives clear errors: missing / non-XML /
 * CPU-less topology files (named in the message), a GX_IB_HCA list matching
 * nothing (the message lists the NICs found), a GPU index beyond the GPUs.
 * Also: GX_IB_HCA syntax, GX_TOPO_FILE, GX_TOPO_DUMP round trip, device
 * details, bus id lookup, CUDA_VISIBLE_DEVICES mapping, GX_BIND.
 *
 * usage: test_topo_errors FIXTURE_DIR SCRATCH_DIR
 */
#include "gx/gx.h"
#include "topology/hca_filter.h"
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

static const char *dir;

static const char *fixture(const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf), "%s/%s", dir, name);
    return buf;
}

static void expect_load_error(const char *name, const char *words)
{
    struct gx_topo *topo = (struct gx_topo *)0x1;
    const char *path = fixture(name);
    int rc = gx_topo_load(path, &topo);
    CHECK(rc != GX_OK, "%s loaded", name);
    CHECK(topo == (struct gx_topo *)0x1, "%s: output written on failure", name);
    CHECK(strstr(gx_last_error(), path) != NULL, "%s: error does not name the file: %s", name, gx_last_error());
    CHECK(strstr(gx_last_error(), words) != NULL, "%s: error lacks '%s': %s", name, words, gx_last_error());
}

static void test_bad_files(void)
{
    expect_load_error("does-not-exist.xml", "cannot open");
    expect_load_error("bad-not-xml.xml", "not XML");
    expect_load_error("bad-no-cpus.xml", "CPU");
    expect_load_error("gen_topo_fixtures.py", "not XML");
}

static void test_hca_filter(void)
{
    CHECK(gx_topo_hca_filter_match("", "mlx5_0", 1), "empty spec");
    CHECK(gx_topo_hca_filter_match(NULL, "mlx5_0", 1), "NULL spec");
    CHECK(gx_topo_hca_filter_match("mlx5_0:1,mlx5_1", "mlx5_0", 1), "include with port");
    CHECK(!gx_topo_hca_filter_match("mlx5_0:1,mlx5_1", "mlx5_0", 2), "port 2 excluded");
    CHECK(gx_topo_hca_filter_match("mlx5_0:1,mlx5_1", "mlx5_0", 0), "any port");
    CHECK(gx_topo_hca_filter_match("mlx5_0:1,mlx5_1", "mlx5_1", 2), "entry without port");
    CHECK(!gx_topo_hca_filter_match("mlx5_0:1,mlx5_1", "mlx5_2", 1), "not listed");
    CHECK(gx_topo_hca_filter_match("mlx5_1", "mlx5_10", 1), "prefix match");
    CHECK(!gx_topo_hca_filter_match("=mlx5_1", "mlx5_10", 1), "exact match");
    CHECK(gx_topo_hca_filter_match("=mlx5_1", "mlx5_1", 1), "exact match hit");
    CHECK(!gx_topo_hca_filter_match("^mlx5_1", "mlx5_1", 1), "exclude");
    CHECK(!gx_topo_hca_filter_match("^mlx5_1", "mlx5_10", 1), "exclude by prefix");
    CHECK(gx_topo_hca_filter_match("^=mlx5_1", "mlx5_10", 1), "exact exclude spares mlx5_10");
    CHECK(!gx_topo_hca_filter_match("^=mlx5_1", "mlx5_1", 1), "exact exclude");
    CHECK(gx_topo_hca_filter_match("^mlx5_0:1", "mlx5_0", 2), "exclude one port only");
    CHECK(gx_topo_hca_filter_match(" mlx5_0 , mlx5_3", "mlx5_3", 1), "spaces");
}

static void test_placement_errors(void)
{
    struct gx_topo *topo;
    if (gx_topo_load(fixture("dgx8.xml"), &topo) != GX_OK) {
        CHECK(0, "dgx8.xml: %s", gx_last_error());
        return;
    }
    struct gx_topo_placement pl[4];
    for (int i = 0; i < 4; i++)
        pl[i] = (struct gx_topo_placement)GX_TOPO_PLACEMENT_INIT;

    int rc = gx_topo_place(topo, 2, NULL, "mlx4", pl);
    CHECK(rc == GX_EINVAL, "filter matching nothing: rc %d", rc);
    CHECK(strstr(gx_last_error(), "mlx5_0, mlx5_1, mlx5_2") && strstr(gx_last_error(), "mlx5_7") &&
              strstr(gx_last_error(), "GX_IB_HCA=mlx4"),
          "error does not list the devices: %s", gx_last_error());
    CHECK(gx_topo_place(topo, 1, NULL, "^mlx5", pl) == GX_EINVAL, "exclude everything");

    int gpus[2] = { 0, 8 };
    rc = gx_topo_place(topo, 2, gpus, "", pl);
    CHECK(rc == GX_EINVAL && strstr(gx_last_error(), "GPU 8") && strstr(gx_last_error(), "8 GPUs"),
          "GPU beyond range: rc %d, %s", rc, gx_last_error());

    /* The filter: mlx5_0 excluded -> GPU0 takes its other PIX NIC mlx5_1. */
    rc = gx_topo_place(topo, 2, NULL, "^=mlx5_0", pl);
    CHECK(rc == GX_OK && strcmp(pl[0].nic_names[0], "mlx5_1") == 0 && pl[0].nic_path == GX_TOPO_PATH_PIX,
          "^=mlx5_0: rank 0 got %s", pl[0].nic_names[0]);
    CHECK(rc == GX_OK && strcmp(pl[1].nic_names[0], "mlx5_2") == 0 && pl[1].nic_path == GX_TOPO_PATH_NODE,
          "^=mlx5_0: rank 1 got %s (%s)", pl[1].nic_names[0], gx_topo_path_name(pl[1].nic_path));
    rc = gx_topo_place(topo, 1, NULL, "mlx5_3:1", pl);
    CHECK(rc == GX_OK && pl[0].nic_count == 1 && strcmp(pl[0].nic_names[0], "mlx5_3") == 0 &&
              pl[0].nic_ports[0] == 1 && pl[0].nic_path == GX_TOPO_PATH_NODE,
          "mlx5_3:1: got %s", pl[0].nic_names[0]);
    CHECK(gx_topo_place(topo, 1, NULL, "mlx5_3:2", pl) == GX_EINVAL, "port 2 does not exist");

    /* Explicit GPUs, including a CPU-only rank (home: NUMA node 0 by the
     * block spread). Ranks 0 and 2 share node 1's NICs; within the node
     * rank positions pair with NIC positions (0 -> mlx5_4.., 1 -> mlx5_5..)
     * among the PIX choices: GPU7 {mlx5_6, mlx5_7} -> mlx5_6, GPU4
     * {mlx5_4, mlx5_5} -> mlx5_5. */
    int mixed[3] = { 7, -1, 4 };
    rc = gx_topo_place(topo, 3, mixed, "", pl);
    CHECK(rc == GX_OK && strcmp(pl[0].nic_names[0], "mlx5_6") == 0 && strcmp(pl[2].nic_names[0], "mlx5_5") == 0 &&
              pl[1].gpu == -1 && pl[1].numa_node == 0 && strcmp(pl[1].nic_names[0], "mlx5_0") == 0,
          "mixed: %s %s %s", pl[0].nic_names[0], pl[1].nic_names[0], pl[2].nic_names[0]);

    /* Internal single-rank API agrees with the table. */
    struct gx_topo_placement one = GX_TOPO_PLACEMENT_INIT;
    rc = gx_topo_place_rank(topo, 5, 8, 5, &one);
    CHECK(rc == GX_OK && strcmp(one.nic_names[0], "mlx5_5") == 0 && strcmp(one.cpuset, "8-15,24-31") == 0 &&
              one.numa_node == 1,
          "place_rank 5/8: %s %s", one.nic_names[0], one.cpuset);
    CHECK(gx_topo_place_rank(topo, 8, 8, 0, &one) == GX_EINVAL, "local rank out of range");

    /* Devices and lookups. */
    struct gx_topo_device d = GX_TOPO_DEVICE_INIT;
    CHECK(gx_topo_device_get(topo, GX_TOPO_RDMA_NIC, 2, &d) == GX_OK && strcmp(d.name, "mlx5_2") == 0 &&
              strcmp(d.netdev, "ibp2s0") == 0 && d.link_gbps == 400 && d.numa_node == 0 &&
              strcmp(d.cpuset, "0-7,16-23") == 0 && d.vendor_id == 0x15b3 && strcmp(d.busid, "0000:0c:00.0") == 0,
          "mlx5_2: %s %s %g %s", d.name, d.netdev, d.link_gbps, d.busid);
    CHECK(gx_topo_device_get(topo, GX_TOPO_GPU, 8, &d) == GX_EINVAL, "GPU 8 does not exist");
    int g = -1;
    CHECK(gx_topo_gpu_by_busid(topo, "00000000:0B:00.0", &g) == GX_OK && g == 3, "busid lookup -> %d", g);
    CHECK(gx_topo_gpu_by_busid(topo, "0000:99:00.0", &g) == GX_EINVAL, "unknown busid");
    unsigned dist = 0;
    CHECK(gx_topo_numa_distance(topo, 0, 1, &dist) == GX_OK && dist == 21, "NUMA distance %u", dist);

    setenv("CUDA_VISIBLE_DEVICES", "6", 1);
    CHECK(gx_topo_gpu_for_rank(topo, 3, &g) == GX_OK && g == 6, "CUDA_VISIBLE_DEVICES=6 -> %d", g);
    setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7", 1);
    CHECK(gx_topo_gpu_for_rank(topo, 1, &g) == GX_OK && g == 5, "CUDA_VISIBLE_DEVICES list -> %d", g);
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    CHECK(gx_topo_gpu_for_rank(topo, 1, &g) == GX_OK && g == -1, "empty CUDA_VISIBLE_DEVICES -> %d", g);
    setenv("CUDA_VISIBLE_DEVICES", "9", 1);
    CHECK(gx_topo_gpu_for_rank(topo, 0, &g) == GX_EINVAL, "CUDA_VISIBLE_DEVICES=9 beyond 8 GPUs");
    unsetenv("CUDA_VISIBLE_DEVICES");
    CHECK(gx_topo_gpu_for_rank(topo, 10, &g) == GX_OK && g == 2, "default 10 mod 8 -> %d", g);
    gx_topo_free(topo);
}

static void test_env_file_and_dump(const char *scratch)
{
    char dump[4096];
    snprintf(dump, sizeof(dump), "%s/dump-hgx16.xml", scratch);
    setenv("GX_TOPO_FILE", fixture("hgx16.xml"), 1);
    setenv("GX_TOPO_DUMP", dump, 1);
    struct gx_topo *a, *b;
    int rc = gx_topo_open(&a);
    CHECK(rc == GX_OK && strstr(gx_topo_source(a), "hgx16.xml"), "GX_TOPO_FILE: %s", gx_last_error());
    unsetenv("GX_TOPO_DUMP");
    unsetenv("GX_TOPO_FILE");
    if (rc != GX_OK)
        return;
    rc = gx_topo_load(dump, &b);
    CHECK(rc == GX_OK, "reloading the dump: %s", gx_last_error());
    if (rc == GX_OK) {
        CHECK(gx_topo_device_count(b, GX_TOPO_GPU) == 16 && gx_topo_device_count(b, GX_TOPO_RDMA_NIC) == 4,
              "dump lost devices");
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 4; j++) {
                enum gx_topo_path p1, p2;
                gx_topo_path_get(a, GX_TOPO_GPU, i, GX_TOPO_RDMA_NIC, j, &p1);
                gx_topo_path_get(b, GX_TOPO_GPU, i, GX_TOPO_RDMA_NIC, j, &p2);
                CHECK(p1 == p2, "dump changed GPU%d-mlx5_%d", i, j);
            }
        gx_topo_free(b);
    }
    gx_topo_free(a);

    setenv("GX_TOPO_FILE", fixture("missing.xml"), 1);
    rc = gx_topo_open(&a);
    CHECK(rc != GX_OK && strstr(gx_last_error(), "missing.xml"), "GX_TOPO_FILE missing: %s", gx_last_error());
    unsetenv("GX_TOPO_FILE");
}

static void test_bind(void)
{
    struct gx_topo_placement pl = GX_TOPO_PLACEMENT_INIT;
    snprintf(pl.cpuset, sizeof(pl.cpuset), "0-1,x");
    CHECK(gx_topo_bind(&pl) == GX_EINVAL, "malformed CPU list accepted");
    setenv("GX_BIND", "none", 1);
    CHECK(gx_topo_bind(&pl) == GX_OK, "GX_BIND=none must not look at the list");
    setenv("GX_BIND", "sometimes", 1);
    CHECK(gx_topo_bind(&pl) == GX_EINVAL, "GX_BIND=sometimes accepted");
    unsetenv("GX_BIND");
    snprintf(pl.cpuset, sizeof(pl.cpuset), "0");
    CHECK(gx_topo_bind(&pl) == GX_OK, "binding to CPU 0: %s", gx_last_error());
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s FIXTURE_DIR SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    setenv("GX_DEBUG", "none", 1);
    test_bad_files();
    test_hca_filter();
    test_placement_errors();
    test_env_file_and_dump(argv[2]);
    test_bind();
    if (failures == 0)
        printf("ok\n");
    return failures ? 1 : 0;
}
