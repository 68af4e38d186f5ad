/*
 * nccl_api.h - the NCCL API as gx uses it, loaded at run time with dlopen
 * (GX_NCCL_LIB, default libnccl.so.2). The types and constants below are
 * NCCL's ABI (nccl.h since 2.10: ncclResult_t, the data type and reduction
 * enums, the 128-byte unique id); gx declares them itself so it builds
 * without nccl.h. tests/fakenccl is compiled against the real nccl.h, so a
 * mismatch shows there.
 * Private to gpudirect/ (nccl_loader.c, nccl_comm.c); the rest of gx uses
 * gpu_nccl.h.
 */
#ifndef GX_GPUDIRECT_NCCL_API_H
#define GX_GPUDIRECT_NCCL_API_H

#include <stddef.h>

typedef int gx_nccl_result;             /* ncclResult_t */
typedef struct gx_nccl_comm_st *gx_nccl_comm_t; /* ncclComm_t */
typedef struct { char internal[128]; } gx_nccl_uid; /* ncclUniqueId */

#define GX_NCCL_SUCCESS 0
#define GX_NCCL_IN_PROGRESS 7 /* ncclInProgress (2.14+): not an error */

/* ncclDataType_t */
enum { GX_NCCL_INT8 = 0, GX_NCCL_UINT8 = 1, GX_NCCL_INT32 = 2, GX_NCCL_UINT32 = 3,
       GX_NCCL_INT64 = 4, GX_NCCL_UINT64 = 5, GX_NCCL_FLOAT16 = 6, GX_NCCL_FLOAT32 = 7,
       GX_NCCL_FLOAT64 = 8, GX_NCCL_BFLOAT16 = 9 };
/* ncclRedOp_t */
enum { GX_NCCL_SUM = 0, GX_NCCL_PROD = 1, GX_NCCL_MAX = 2, GX_NCCL_MIN = 3, GX_NCCL_AVG = 4 };

/* One row per entry point: field, symbol, return type, arguments. All are
 * required. */
#define GX_NCCL_ENTRY_POINTS(X)                                                         \
    X(get_version, "ncclGetVersion", gx_nccl_result, (int *version))                    \
    X(get_unique_id, "ncclGetUniqueId", gx_nccl_result, (gx_nccl_uid * id))       \
    X(comm_init_rank, "ncclCommInitRank", gx_nccl_result,                               \
      (gx_nccl_comm_t * comm, int nranks, gx_nccl_uid id, int rank))              \
    X(comm_destroy, "ncclCommDestroy", gx_nccl_result, (gx_nccl_comm_t comm))           \
    X(comm_abort, "ncclCommAbort", gx_nccl_result, (gx_nccl_comm_t comm))               \
    X(comm_get_async_error, "ncclCommGetAsyncError", gx_nccl_result,                    \
      (gx_nccl_comm_t comm, gx_nccl_result * r))                                        \
    X(get_error_string, "ncclGetErrorString", const char *, (gx_nccl_result r))         \
    X(all_reduce, "ncclAllReduce", gx_nccl_result,                                      \
      (const void *s, void *r, size_t count, int dt, int op, gx_nccl_comm_t comm,       \
       void *stream))                                                                   \
    X(reduce_scatter, "ncclReduceScatter", gx_nccl_result,                              \
      (const void *s, void *r, size_t recvcount, int dt, int op, gx_nccl_comm_t comm,   \
       void *stream))                                                                   \
    X(all_gather, "ncclAllGather", gx_nccl_result,                                      \
      (const void *s, void *r, size_t sendcount, int dt, gx_nccl_comm_t comm,           \
       void *stream))                                                                   \
    X(broadcast, "ncclBroadcast", gx_nccl_result,                                       \
      (const void *s, void *r, size_t count, int dt, int root, gx_nccl_comm_t comm,     \
       void *stream))                                                                   \
    X(reduce, "ncclReduce", gx_nccl_result,                                             \
      (const void *s, void *r, size_t count, int dt, int op, int root,                  \
       gx_nccl_comm_t comm, void *stream))                                              \
    X(group_start, "ncclGroupStart", gx_nccl_result, (void))                            \
    X(group_end, "ncclGroupEnd", gx_nccl_result, (void))

struct gx_nccl_api {
#define GX_NCCL_FIELD(field, name, ret, args) ret(*field) args;
    GX_NCCL_ENTRY_POINTS(GX_NCCL_FIELD)
#undef GX_NCCL_FIELD
    int version;    /* NCCL_VERSION_CODE, e.g. 22703 */
    char lib[256];  /* what was opened */
};

/** The loaded library with every entry point, or NULL with the reason in
 *  `why` ("no libnccl: <dlerror> (GX_NCCL_LIB=...)", "<lib>: no symbol
 *  ncclX: ..."). Thread-safe; loads once per process. */
const struct gx_nccl_api *gx_nccl_api_get(char *why, size_t why_len);

/** "ncclSystemError (2): <the library's string>". */
const char *gx_nccl_errstr(const struct gx_nccl_api *n, gx_nccl_result r, char *buf,
                           size_t len);

#endif
