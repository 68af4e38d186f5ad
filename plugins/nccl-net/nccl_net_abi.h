/*
 * nccl_net_abi.h - the binary interface NCCL expects of a network plugin, as
 * gx declares it (plugins/nccl-net/).
 *
 * Written for gx from the layouts NCCL documents for its external network
 * plugins (ext-net, versions 8 to 11; NCCL 2.28 in the CUDA 13 toolkit loads
 * v11 first and falls back down to v6). Only what the layout fixes is here:
 * member order and types, the handle size, the pointer-type bits. NCCL's own
 * headers are not needed to build the plugin.
 *
 * Owns: these declarations. Must not touch: gx internals (net_gx.h does).
 */
#ifndef GX_PLUGINS_NCCL_NET_ABI_H
#define GX_PLUGINS_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

/* NCCL's result codes (the values of ncclResult_t). */
typedef enum {
    GXN_NCCL_OK = 0,
    GXN_NCCL_UNHANDLED_CUDA = 1,
    GXN_NCCL_SYSTEM = 2,
    GXN_NCCL_INTERNAL = 3,
    GXN_NCCL_INVALID_ARG = 4,
    GXN_NCCL_INVALID_USAGE = 5,
    GXN_NCCL_REMOTE = 6,
    GXN_NCCL_IN_PROGRESS = 7,
} gxn_result_t;

/* Log levels and subsystems NCCL's logger takes. */
enum { GXN_LOG_WARN = 2, GXN_LOG_INFO = 3, GXN_LOG_TRACE = 5 };
enum { GXN_LOGSYS_INIT = 0x1, GXN_LOGSYS_NET = 0x10 };

typedef void (*gxn_logger_t)(int level, unsigned long flags, const char *file, int line,
                             const char *fmt, ...);
typedef gxn_result_t (*gxn_profiler_cb_t)(void **event, int type, void *parent, int64_t plugin_id,
                                          void *ext);

#define GXN_HANDLE_MAXSIZE 128   /* bytes NCCL exchanges between listen and connect */
#define GXN_MAX_REQUESTS 32      /* outstanding requests NCCL keeps per comm */
#define GXN_PTR_HOST 0x1
#define GXN_PTR_CUDA 0x2
#define GXN_PTR_DMABUF 0x4
#define GXN_MAX_NET_SIZE (1024L * 1024L * 1024L)
#define GXN_MAX_DEVS_PER_NIC 4

enum { GXN_NET_DEVICE_HOST = 0 }; /* no device offload */

/* What connect/accept can hand back for device offload (unused: host only). */
struct gxn_dev_handle {
    int type;
    int version;
    void *handle;
    size_t size;
    int needs_proxy_progress;
};

struct gxn_vprops {
    int ndevs;
    int devs[GXN_MAX_DEVS_PER_NIC];
};

/* Device properties, one layout per version (members only ever appended,
 * except that v8 lacks forceFlush in the middle). */
struct gxn_props_v8 {
    char *name;
    char *pci_path;
    uint64_t guid;
    int ptr_support;
    int reg_is_global;
    int speed_mbps;
    int port;
    float latency;
    int max_comms;
    int max_recvs;
    int net_device_type;
    int net_device_version;
};

struct gxn_props_v9 { /* v9 and v10 */
    char *name;
    char *pci_path;
    uint64_t guid;
    int ptr_support;
    int reg_is_global;
    int force_flush;
    int speed_mbps;
    int port;
    float latency;
    int max_comms;
    int max_recvs;
    int net_device_type;
    int net_device_version;
    struct gxn_vprops vprops;
    size_t max_p2p_bytes;
    size_t max_coll_bytes;
};

struct gxn_props_v11 {
    struct gxn_props_v9 base;
    int max_multi_request_size;
};

struct gxn_comm_config { int traffic_class; };

struct gxn_net_attr; /* v11 setNetAttr hints: accepted and ignored */

typedef struct {
    const char *name;
    gxn_result_t (*init)(gxn_logger_t log);
    gxn_result_t (*devices)(int *ndev);
    gxn_result_t (*get_properties)(int dev, struct gxn_props_v8 *props);
    gxn_result_t (*listen)(int dev, void *handle, void **listen_comm);
    gxn_result_t (*connect)(int dev, void *handle, void **send_comm, struct gxn_dev_handle **dc);
    gxn_result_t (*accept)(void *listen_comm, void **recv_comm, struct gxn_dev_handle **dc);
    gxn_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mh);
    gxn_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                  int fd, void **mh);
    gxn_result_t (*dereg_mr)(void *comm, void *mh);
    gxn_result_t (*isend)(void *send_comm, void *data, int size, int tag, void *mh, void **req);
    gxn_result_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhs,
                          void **req);
    gxn_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhs, void **req);
    gxn_result_t (*test)(void *req, int *done, int *sizes);
    gxn_result_t (*close_send)(void *send_comm);
    gxn_result_t (*close_recv)(void *recv_comm);
    gxn_result_t (*close_listen)(void *listen_comm);
    gxn_result_t (*get_device_mr)(void *comm, void *mh, void **dptr_mh);
    gxn_result_t (*irecv_consumed)(void *recv_comm, int n, void *req);
} gxn_net_v8_t;

typedef struct {
    const char *name;
    gxn_result_t (*init)(gxn_logger_t log);
    gxn_result_t (*devices)(int *ndev);
    gxn_result_t (*get_properties)(int dev, struct gxn_props_v9 *props);
    gxn_result_t (*listen)(int dev, void *handle, void **listen_comm);
    gxn_result_t (*connect)(int dev, void *handle, void **send_comm, struct gxn_dev_handle **dc);
    gxn_result_t (*accept)(void *listen_comm, void **recv_comm, struct gxn_dev_handle **dc);
    gxn_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mh);
    gxn_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                  int fd, void **mh);
    gxn_result_t (*dereg_mr)(void *comm, void *mh);
    gxn_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mh, void **req);
    gxn_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                          void **mhs, void **req);
    gxn_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhs, void **req);
    gxn_result_t (*test)(void *req, int *done, int *sizes);
    gxn_result_t (*close_send)(void *send_comm);
    gxn_result_t (*close_recv)(void *recv_comm);
    gxn_result_t (*close_listen)(void *listen_comm);
    gxn_result_t (*get_device_mr)(void *comm, void *mh, void **dptr_mh);
    gxn_result_t (*irecv_consumed)(void *recv_comm, int n, void *req);
    gxn_result_t (*make_vdevice)(int *d, struct gxn_vprops *props);
} gxn_net_v9_t;

typedef struct {
    const char *name;
    gxn_result_t (*init)(gxn_logger_t log, gxn_profiler_cb_t prof);
    gxn_result_t (*devices)(int *ndev);
    gxn_result_t (*get_properties)(int dev, struct gxn_props_v9 *props);
    gxn_result_t (*listen)(int dev, void *handle, void **listen_comm);
    gxn_result_t (*connect)(int dev, struct gxn_comm_config *cfg, void *handle, void **send_comm,
                            struct gxn_dev_handle **dc);
    gxn_result_t (*accept)(void *listen_comm, void **recv_comm, struct gxn_dev_handle **dc);
    gxn_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mh);
    gxn_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                  int fd, void **mh);
    gxn_result_t (*dereg_mr)(void *comm, void *mh);
    gxn_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mh,
                          void *phandle, void **req);
    gxn_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                          void **mhs, void **phandles, void **req);
    gxn_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhs, void **req);
    gxn_result_t (*test)(void *req, int *done, int *sizes);
    gxn_result_t (*close_send)(void *send_comm);
    gxn_result_t (*close_recv)(void *recv_comm);
    gxn_result_t (*close_listen)(void *listen_comm);
    gxn_result_t (*get_device_mr)(void *comm, void *mh, void **dptr_mh);
    gxn_result_t (*irecv_consumed)(void *recv_comm, int n, void *req);
    gxn_result_t (*make_vdevice)(int *d, struct gxn_vprops *props);
} gxn_net_v10_t;

typedef struct {
    const char *name;
    gxn_result_t (*init)(void **ctx, uint64_t comm_id, struct gxn_comm_config *cfg,
                         gxn_logger_t log, gxn_profiler_cb_t prof);
    gxn_result_t (*devices)(int *ndev);
    gxn_result_t (*get_properties)(int dev, struct gxn_props_v11 *props);
    gxn_result_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
    gxn_result_t (*connect)(void *ctx, int dev, void *handle, void **send_comm,
                            struct gxn_dev_handle **dc);
    gxn_result_t (*accept)(void *listen_comm, void **recv_comm, struct gxn_dev_handle **dc);
    gxn_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mh);
    gxn_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
                                  int fd, void **mh);
    gxn_result_t (*dereg_mr)(void *comm, void *mh);
    gxn_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mh,
                          void *phandle, void **req);
    gxn_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                          void **mhs, void **phandles, void **req);
    gxn_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhs, void **req);
    gxn_result_t (*test)(void *req, int *done, int *sizes);
    gxn_result_t (*close_send)(void *send_comm);
    gxn_result_t (*close_recv)(void *recv_comm);
    gxn_result_t (*close_listen)(void *listen_comm);
    gxn_result_t (*get_device_mr)(void *comm, void *mh, void **dptr_mh);
    gxn_result_t (*irecv_consumed)(void *recv_comm, int n, void *req);
    gxn_result_t (*make_vdevice)(int *d, struct gxn_vprops *props);
    gxn_result_t (*finalize)(void *ctx);
    gxn_result_t (*set_net_attr)(void *ctx, struct gxn_net_attr *attr);
} gxn_net_v11_t;

#endif
