/*
 * gx_topo.h - the machine as gx sees it: GPUs, NICs, NUMA nodes, the PCIe
 * path class between devices, and the NIC(s) and CPUs chosen for each local
 * rank. Included by gx.h; usable on its own.
 *
 * The topology comes from hwloc (probed, or read from an hwloc XML file given
 * with GX_TOPO_FILE or to gx_topo_load()). The structs here are plain copies:
 * no hwloc type appears in this API. Every struct starts with a `size` field
 * and is filled by a function that takes it as an output parameter; set
 * `size` (the *_INIT macros do) so the struct can grow.
 *
 * Path classes (see docs/topology.md), from nearest to farthest:
 *   PIX   the two devices sit below the same PCIe switch
 *   PXB   below several PCIe switches, without crossing a host bridge
 *   PHB   through a PCIe host bridge (the CPU's root complex)
 *   NODE  between host bridges of the same NUMA node
 *   SYS   across NUMA nodes / sockets (or locality unknown)
 */
#ifndef GX_GX_TOPO_H
#define GX_GX_TOPO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef GX_API
#if defined(__GNUC__)
#define GX_API __attribute__((visibility("default")))
#else
#define GX_API
#endif
#endif

struct gx_topo;

enum gx_topo_path {
    GX_TOPO_PATH_SELF = 0, /**< the same device */
    GX_TOPO_PATH_PIX,
    GX_TOPO_PATH_PXB,
    GX_TOPO_PATH_PHB,
    GX_TOPO_PATH_NODE,
    GX_TOPO_PATH_SYS,
    GX_TOPO_PATH_UNKNOWN, /**< no path information (built without hwloc) */
};

enum gx_topo_kind {
    GX_TOPO_GPU = 0,  /**< NVIDIA GPU (CUDA/NVML OS device, or PCI class 0x0302/0x0300) */
    GX_TOPO_RDMA_NIC, /**< OpenFabrics device, e.g. mlx5_0 */
    GX_TOPO_ETH_NIC,  /**< network interface with no RDMA device */
    GX_TOPO_KIND_COUNT
};

#define GX_TOPO_NAME_MAX 64
#define GX_TOPO_CPUSET_MAX 512

/** One device. Indices are per kind: GPU 0..n-1 in PCI bus order (the order
 *  of nvidia-smi and of CUDA_DEVICE_ORDER=PCI_BUS_ID; a CUDA OS device's own
 *  index wins when hwloc reports one), NICs in name order. */
struct gx_topo_device {
    size_t size;
    enum gx_topo_kind kind;
    int index;                     /**< index within its kind */
    char name[GX_TOPO_NAME_MAX];   /**< "GPU0", "mlx5_0", "eth0" */
    char busid[32];                /**< "0000:17:00.0", "" when not on PCI */
    char netdev[GX_TOPO_NAME_MAX]; /**< network interface ("" if none) */
    unsigned vendor_id, device_id, class_id; /**< PCI ids, 0 when unknown */
    int port_count;                /**< RDMA NIC ports (1 when unknown) */
    double link_gbps;              /**< network link speed in Gb/s, 0 unknown */
    double pci_gbytes;             /**< PCIe link bandwidth in GB/s, 0 unknown */
    int numa_node;                 /**< OS index of the local NUMA node, -1 unknown */
    char cpuset[GX_TOPO_CPUSET_MAX]; /**< local CPUs as a list, "0-7,16-23" */
};
#define GX_TOPO_DEVICE_INIT { .size = sizeof(struct gx_topo_device) }

struct gx_topo_numa {
    size_t size;
    int os_index;                    /**< the kernel's node number */
    unsigned long long memory_bytes; /**< local memory, 0 unknown */
    char cpuset[GX_TOPO_CPUSET_MAX]; /**< "0-7,16-23" */
};
#define GX_TOPO_NUMA_INIT { .size = sizeof(struct gx_topo_numa) }

#define GX_TOPO_MAX_RANK_NICS 8

/** What one local rank should use. */
struct gx_topo_placement {
    size_t size;
    int local_rank;
    int gpu;                          /**< GPU index, -1 for a CPU-only rank */
    enum gx_topo_kind nic_kind;       /**< GX_TOPO_RDMA_NIC or GX_TOPO_ETH_NIC */
    int nic_count;                    /**< 0 when the machine has no usable NIC */
    int nics[GX_TOPO_MAX_RANK_NICS];  /**< NIC indices (of nic_kind); first is primary */
    int nic_ports[GX_TOPO_MAX_RANK_NICS]; /**< RDMA port to use (1-based; 0 for Ethernet) */
    char nic_names[GX_TOPO_MAX_RANK_NICS][GX_TOPO_NAME_MAX];
    enum gx_topo_path nic_path;       /**< GPU (or NUMA node) to primary NIC */
    int numa_node;                    /**< OS index of the chosen NUMA node, -1 unknown */
    char cpuset[GX_TOPO_CPUSET_MAX];  /**< CPUs to bind to, "" = do not bind */
};
#define GX_TOPO_PLACEMENT_INIT { .size = sizeof(struct gx_topo_placement) }

/**
 * Discover the topology. xml_path NULL: read GX_TOPO_FILE when set, else probe
 * this machine. When GX_TOPO_DUMP is set, the loaded topology is also written
 * there as hwloc XML. Errors name the file (missing, not XML, no CPUs).
 * GX_EUNSUPPORTED when an XML file is given to a build without hwloc.
 */
GX_API int gx_topo_load(const char *xml_path, struct gx_topo **out);
GX_API void gx_topo_free(struct gx_topo *topo);

/** Where the topology came from: "probe", "fallback" or the XML file name. */
GX_API const char *gx_topo_source(const struct gx_topo *topo);
/** Write the topology as hwloc XML (GX_EUNSUPPORTED without hwloc). */
GX_API int gx_topo_export_xml(const struct gx_topo *topo, const char *path);

GX_API int gx_topo_device_count(const struct gx_topo *topo, enum gx_topo_kind kind);
GX_API int gx_topo_device_get(const struct gx_topo *topo, enum gx_topo_kind kind, int index,
                              struct gx_topo_device *out);
/** Path class between two devices. */
GX_API int gx_topo_path_get(const struct gx_topo *topo, enum gx_topo_kind kind_a, int index_a,
                            enum gx_topo_kind kind_b, int index_b, enum gx_topo_path *out);
/** "PIX", "PXB", "PHB", "NODE", "SYS", "X" (self), "?" (unknown). */
GX_API const char *gx_topo_path_name(enum gx_topo_path path);
/** "gpu", "rdma", "eth". */
GX_API const char *gx_topo_kind_name(enum gx_topo_kind kind);

GX_API int gx_topo_numa_count(const struct gx_topo *topo);
GX_API int gx_topo_numa_get(const struct gx_topo *topo, int index, struct gx_topo_numa *out);
/** NUMA distance (relative latency, 10 = local) between nodes by index; 0 when unknown. */
GX_API int gx_topo_numa_distance(const struct gx_topo *topo, int a, int b, unsigned *out);
/** The CPUs of the whole machine as a list. */
GX_API const char *gx_topo_machine_cpuset(const struct gx_topo *topo);

/**
 * Place `local_size` ranks. gpus[r] is rank r's GPU index or -1 for none;
 * gpus == NULL means rank r uses GPU r mod #GPUs (or none on a machine
 * without GPUs). hca_spec filters RDMA NICs like NCCL_IB_HCA
 * ("mlx5_0:1,mlx5_1", "^mlx5_2" excludes, "=mlx5_0" exact names); NULL reads
 * GX_IB_HCA. out must hold local_size entries (each with .size set).
 * Errors: a GPU index beyond the GPUs found; a filter matching no NIC (the
 * message lists the NICs found).
 */
GX_API int gx_topo_place(const struct gx_topo *topo, int local_size, const int *gpus,
                         const char *hca_spec, struct gx_topo_placement *out);

#ifdef __cplusplus
}
#endif

#endif /* GX_GX_TOPO_H */
