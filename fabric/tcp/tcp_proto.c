/* tcp_proto.c - validation of the tcp provider's frame header. */
#include "fabric/tcp/tcp_proto.h"

#include <string.h>

#include "common/auth.h"
#include "gx/gx.h"

int gx_tcp_hdr_parse(const void *buf, size_t len, struct gx_tcp_hdr *out, const char **why)
{
    struct gx_tcp_hdr h;
    *why = "";
    if (len < sizeof(h))
        return GX_INPROGRESS;
    memcpy(&h, buf, sizeof(h));
    if (h.magic != GX_TCP_MAGIC) {
        *why = "bad magic (not a gx tcp frame)";
        return GX_EPROTO;
    }
    if (h.version != GX_TCP_VERSION) {
        *why = "peer speaks another tcp protocol version";
        return GX_EPROTO;
    }
    if (h.hdr_len != sizeof(h)) {
        *why = "bad header length";
        return GX_EPROTO;
    }
    if (h.op < GX_TCP_OP_SEND || h.op > GX_TCP_OP_NAK) {
        *why = "unknown op";
        return GX_EPROTO;
    }
    if (h.msg_len > GX_TCP_MAX_MSG) {
        *why = "message length out of range";
        return GX_EPROTO;
    }
    if (h.offset > h.msg_len || h.frame_len > h.msg_len - h.offset) {
        *why = "frame exceeds its message";
        return GX_EPROTO;
    }
    if (h.op == GX_TCP_OP_NAK) {
        if (h.msg_len != 0 || h.status >= 0) {
            *why = "malformed NAK";
            return GX_EPROTO;
        }
    } else if (h.status != 0) {
        *why = "status set on a data frame";
        return GX_EPROTO;
    }
    if (h.op == GX_TCP_OP_SEND && (h.raddr | h.rkey_index | h.rkey_cookie) != 0) {
        *why = "remote key fields set on a send";
        return GX_EPROTO;
    }
    if (h.op == GX_TCP_OP_WRITE_IMM && h.raddr + h.msg_len < h.raddr) {
        *why = "remote range wraps around";
        return GX_EPROTO;
    }
    *out = h;
    return GX_OK;
}
