/*
 * dpdk_proto.c - building and checking dpdk provider frames (pure C, no
 * DPDK: the fuzz target links this file alone).
 */
#include <arpa/inet.h>
#include <string.h>

#include "fabric/dpdk/dpdk_proto.h"

static uint16_t ip_checksum(const uint8_t *p, size_t len)
{
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        sum += (uint32_t)(p[i] << 8 | p[i + 1]);
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

size_t gx_dpdk_put_l2l4(uint8_t *f, const struct gx_dpdk_l2l4 *a, size_t l4_len)
{
    memcpy(f, a->dst_mac, 6);
    memcpy(f + 6, a->src_mac, 6);
    f[12] = 0x08; /* IPv4 */
    f[13] = 0x00;
    uint8_t *ip = f + GX_DPDK_ETH_LEN;
    uint16_t tot = (uint16_t)(GX_DPDK_IP_LEN + GX_DPDK_UDP_LEN + l4_len);
    ip[0] = 0x45; /* version 4, 5 words */
    ip[1] = 0x02; /* DSCP 0, ECN-capable transport (ECT(0)) */
    ip[2] = (uint8_t)(tot >> 8);
    ip[3] = (uint8_t)tot;
    ip[4] = ip[5] = 0;    /* id */
    ip[6] = 0x40;         /* don't fragment */
    ip[7] = 0;
    ip[8] = 64;           /* ttl */
    ip[9] = 17;           /* UDP */
    ip[10] = ip[11] = 0;
    memcpy(ip + 12, &a->src_ip, 4);
    memcpy(ip + 16, &a->dst_ip, 4);
    uint16_t cs = ip_checksum(ip, GX_DPDK_IP_LEN);
    ip[10] = (uint8_t)(cs >> 8);
    ip[11] = (uint8_t)cs;
    uint8_t *udp = ip + GX_DPDK_IP_LEN;
    uint16_t ulen = (uint16_t)(GX_DPDK_UDP_LEN + l4_len);
    udp[0] = (uint8_t)(a->src_port >> 8);
    udp[1] = (uint8_t)a->src_port;
    udp[2] = (uint8_t)(a->dst_port >> 8);
    udp[3] = (uint8_t)a->dst_port;
    udp[4] = (uint8_t)(ulen >> 8);
    udp[5] = (uint8_t)ulen;
    udp[6] = udp[7] = 0; /* no UDP checksum (allowed over IPv4); the FCS covers the link */
    return GX_DPDK_L2L4_LEN;
}

int gx_dpdk_parse(const uint8_t *f, size_t len, uint16_t udp_port, struct gx_dpdk_hdr *hdr,
                  const uint8_t **payload)
{
    if (len < GX_DPDK_L2L4_LEN)
        return len >= 14 && !(f[12] == 0x08 && f[13] == 0x00) ? GX_DPDK_DROP_NOT_GX
                                                              : GX_DPDK_DROP_SHORT;
    if (!(f[12] == 0x08 && f[13] == 0x00))
        return GX_DPDK_DROP_NOT_GX;
    const uint8_t *ip = f + GX_DPDK_ETH_LEN;
    if (ip[9] != 17)
        return GX_DPDK_DROP_NOT_GX;
    const uint8_t *udp = ip + GX_DPDK_IP_LEN;
    if (ip[0] != 0x45)
        return (ip[0] >> 4) == 4 ? GX_DPDK_DROP_NOT_GX : GX_DPDK_DROP_IP; /* IP options: not ours */
    if ((uint16_t)(udp[2] << 8 | udp[3]) != udp_port)
        return GX_DPDK_DROP_NOT_GX;
    size_t tot = (size_t)(ip[2] << 8 | ip[3]);
    if (tot < GX_DPDK_IP_LEN + GX_DPDK_UDP_LEN || GX_DPDK_ETH_LEN + tot > len ||
        (ip[6] & 0x3f) != 0 || ip[7] != 0 || ip_checksum(ip, GX_DPDK_IP_LEN) != 0)
        return GX_DPDK_DROP_IP;
    size_t ulen = (size_t)(udp[4] << 8 | udp[5]);
    if (ulen != tot - GX_DPDK_IP_LEN)
        return GX_DPDK_DROP_UDP;
    size_t l4 = ulen - GX_DPDK_UDP_LEN;
    if (l4 < sizeof(*hdr))
        return l4 >= 4 && memcmp(udp + GX_DPDK_UDP_LEN, "GXDP", 4) == 0 ? GX_DPDK_DROP_SHORT
                                                                        : GX_DPDK_DROP_MAGIC;
    struct gx_dpdk_hdr h;
    memcpy(&h, udp + GX_DPDK_UDP_LEN, sizeof(h));
    if (h.magic != GX_DPDK_MAGIC)
        return GX_DPDK_DROP_MAGIC;
    if (h.version != GX_DPDK_VERSION)
        return GX_DPDK_DROP_VERSION;
    if ((size_t)h.len != l4 - sizeof(h) || h.flags != 0)
        return GX_DPDK_DROP_FIELDS;
    switch (h.type) {
    case GX_DPDK_T_DATA:
        if ((h.op != GX_DPDK_OP_SEND && h.op != GX_DPDK_OP_WRITE_IMM) ||
            h.msg_len > GX_DPDK_MAX_MSG || h.offset > h.msg_len || h.len > h.msg_len - h.offset ||
            gx_dpdk_psn_lt(h.last_psn, h.psn) || h.last_psn - h.psn > (uint32_t)h.msg_len + 1)
            return GX_DPDK_DROP_FIELDS;
        if (h.op == GX_DPDK_OP_WRITE_IMM && h.tag + h.msg_len < h.tag)
            return GX_DPDK_DROP_FIELDS;
        break;
    case GX_DPDK_T_ACK:
        if (h.op != 0 || h.len > GX_DPDK_SACK_MAX_BYTES)
            return GX_DPDK_DROP_FIELDS;
        break;
    case GX_DPDK_T_CLOSE:
        if (h.op != 0 || h.len != 0 || h.status > 0)
            return GX_DPDK_DROP_FIELDS;
        break;
    default:
        return GX_DPDK_DROP_FIELDS;
    }
    *hdr = h;
    *payload = udp + GX_DPDK_UDP_LEN + sizeof(h);
    return 0;
}

const char *gx_dpdk_drop_name(int reason)
{
    static const char *const names[GX_DPDK_DROP_REASONS] = {
        [GX_DPDK_DROP_NOT_GX] = "not_gx",   [GX_DPDK_DROP_SHORT] = "short",
        [GX_DPDK_DROP_IP] = "bad_ip",       [GX_DPDK_DROP_UDP] = "bad_udp",
        [GX_DPDK_DROP_MAGIC] = "bad_magic", [GX_DPDK_DROP_VERSION] = "bad_version",
        [GX_DPDK_DROP_FIELDS] = "bad_fields",
    };
    return reason > 0 && reason < GX_DPDK_DROP_REASONS ? names[reason] : "unknown";
}
