/* status.c - status names, version and datatype helpers of the public API. */
#include "common/log.h"
#include "gx/gx.h"
#include "gx_build_config.h"

GX_API const char *gx_strerror(int status)
{
    switch (status) {
    case GX_OK: return "GX_OK (success)";
    case GX_EINVAL: return "GX_EINVAL (invalid argument)";
    case GX_ESTATE: return "GX_ESTATE (call not allowed in this state)";
    case GX_ETRUNCATE: return "GX_ETRUNCATE (receive buffer smaller than the message)";
    case GX_EMISMATCH: return "GX_EMISMATCH (ranks called different operations)";
    case GX_ESYSTEM: return "GX_ESYSTEM (system call failed)";
    case GX_ENOMEM: return "GX_ENOMEM (out of memory or resources)";
    case GX_EPEER: return "GX_EPEER (peer failure)";
    case GX_EPROTO: return "GX_EPROTO (malformed or foreign message from a peer)";
    case GX_EAUTH: return "GX_EAUTH (wrong job key)";
    case GX_ECONNECT: return "GX_ECONNECT (could not reach a peer)";
    case GX_ETIMEOUT: return "GX_ETIMEOUT (deadline passed)";
    case GX_EABORTED: return "GX_EABORTED (communicator aborted)";
    case GX_EUNSUPPORTED: return "GX_EUNSUPPORTED (not supported)";
    }
    if (GX_IS_CALLER_ERROR(status))
        return "caller error";
    if (GX_IS_PEER_ERROR(status))
        return "peer error";
    return "unknown status";
}

GX_API const char *gx_last_error(void)
{
    return gx_last_error_text();
}

GX_API const char *gx_version(void)
{
    return GX_VERSION_STRING;
}

GX_API size_t gx_datatype_size(enum gx_datatype dtype)
{
    static const size_t sizes[GX_DATATYPE_COUNT] = { 1, 1, 4, 4, 8, 8, 2, 2, 4, 8 };
    return (unsigned)dtype < GX_DATATYPE_COUNT ? sizes[dtype] : 0;
}

GX_API const char *gx_datatype_name(enum gx_datatype dtype)
{
    static const char *const names[GX_DATATYPE_COUNT] = {
        "int8", "uint8", "int32", "uint32", "int64", "uint64",
        "float16", "bfloat16", "float32", "float64",
    };
    return (unsigned)dtype < GX_DATATYPE_COUNT ? names[dtype] : "?";
}

GX_API const char *gx_redop_name(enum gx_redop op)
{
    static const char *const names[GX_REDOP_COUNT] = { "sum", "prod", "min", "max", "avg" };
    if (op == GX_REPLACE)
        return "replace";
    return (unsigned)op < GX_REDOP_COUNT ? names[op] : "?";
}
