/*
 * fakenccl_abi.h - what fakenccl.c declares: the real nccl.h when the build
 * found one (then gx's own declarations in gpudirect/nccl_api.h are checked
 * against it here, at compile time), else the few declarations it needs.
 */
#ifndef GX_FAKENCCL_ABI_H
#define GX_FAKENCCL_ABI_H

#include <stddef.h>

#ifdef GX_FAKENCCL_REAL_HEADER
#include <nccl.h>

#include "gpudirect/nccl_api.h"
/* gx declares NCCL's ABI itself (libgx builds without nccl.h): it must be
 * the real one. */
_Static_assert(sizeof(ncclUniqueId) == sizeof(gx_nccl_uid), "ncclUniqueId size");
#define FK_SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(FK_SAME(ncclSuccess, GX_NCCL_SUCCESS) &&
               FK_SAME(ncclInProgress, GX_NCCL_IN_PROGRESS), "ncclResult_t");
_Static_assert(FK_SAME(ncclInt8, GX_NCCL_INT8) && FK_SAME(ncclUint8, GX_NCCL_UINT8) &&
               FK_SAME(ncclInt32, GX_NCCL_INT32) && FK_SAME(ncclUint32, GX_NCCL_UINT32) &&
               FK_SAME(ncclInt64, GX_NCCL_INT64) && FK_SAME(ncclUint64, GX_NCCL_UINT64) &&
               FK_SAME(ncclFloat16, GX_NCCL_FLOAT16) && FK_SAME(ncclFloat32, GX_NCCL_FLOAT32) &&
               FK_SAME(ncclFloat64, GX_NCCL_FLOAT64) && FK_SAME(ncclBfloat16, GX_NCCL_BFLOAT16),
               "ncclDataType_t");
_Static_assert(FK_SAME(ncclSum, GX_NCCL_SUM) && FK_SAME(ncclProd, GX_NCCL_PROD) &&
               FK_SAME(ncclMax, GX_NCCL_MAX) && FK_SAME(ncclMin, GX_NCCL_MIN) &&
               FK_SAME(ncclAvg, GX_NCCL_AVG), "ncclRedOp_t");
_Static_assert(sizeof(ncclComm_t) == sizeof(gx_nccl_comm_t), "ncclComm_t");
#else
typedef enum {
    ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
    ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7
} ncclResult_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;
typedef int ncclDataType_t;
typedef struct ncclComm *ncclComm_t;
typedef struct CUstream_st *cudaStream_t;
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
#define NCCL_VERSION_CODE 21905 /* what the fake claims without the header */
#endif

#endif
