/*
 * fakenccl.c - a stand-in libnccl for tests (GX_NCCL_LIB), never installed.
 * Built against the real nccl.h when the build found one (so the ABI of
 * what it exports is NCCL's), else against the one declaration it needs.
 * Today gx only reports NCCL's version (gx-info); this exports just that.
 */
#ifdef GX_FAKENCCL_REAL_HEADER
#include <nccl.h>
#else
typedef enum { ncclSuccess = 0, ncclInvalidArgument = 4 } ncclResult_t;
#define NCCL_VERSION_CODE 21905 /* what the fake claims without the header */
ncclResult_t ncclGetVersion(int *version);
#endif

__attribute__((visibility("default"))) ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
