/*
 * softverbs ports: port attributes, the GID and P_Key tables (including
 * rdma-core's private ibv_query_gid_type, which ibv_devinfo and perftest call
 * and which must not reach the real libibverbs with a softverbs context), the
 * mapping between LID / GID + QP number and UDP addresses, and async events
 * (queued per opened context, on its async_fd).
 *
 * Addressing (sv_internal.h): device d of a node owns UDP ports
 * base(d) ... base(d) + SV_NODE_PROCS - 1, base(d) = SOFTVERBS_UDP_PORT +
 * d * SV_NODE_PORTS. IB mode: LID base(d), GID fe80::<base>:5356:<ipv4>.
 * RoCE mode: LID 0, GID ::<base>:ffff:<ipv4> (RoCE v2 style IPv4-mapped).
 * GID bytes 8-9 carry base(d), 12-15 the IPv4 address; QP number
 * (i + 1) << 12 | slot lives on UDP port base(d) + i.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sv_internal.h"

int sv_query_port_op(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *out,
		     size_t len)
{
	struct sv_ctx *c = sv_ctx_of(ctx);
	struct ibv_port_attr a;

	if (port != 1)
		return EINVAL;
	memset(&a, 0, sizeof(a));
	a.state = sv_net_port_down() ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
	a.phys_state = sv_net_port_down() ? 3 /* disabled */ : 5 /* link up */;
	a.max_mtu = IBV_MTU_4096;
	a.active_mtu = c->roce ? IBV_MTU_1024 : IBV_MTU_4096;
	a.gid_tbl_len = 1;
	a.port_cap_flags = c->roce ? 0 : IBV_PORT_SM;
	a.max_msg_sz = SV_MAX_MSG;
	a.pkey_tbl_len = 1;
	a.lid = c->roce ? 0 : c->base;
	a.sm_lid = c->roce ? 0 : 1;
	a.max_vl_num = 1;
	a.subnet_timeout = 18;
	a.active_width = 2;  /* 4x */
	a.active_speed = 32; /* EDR */
	a.link_layer = c->roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
	memcpy(out, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

/* The exported 3-argument entry point binaries still import; the compat
 * struct ends before 'flags'. */
#undef ibv_query_port
SV_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port,
			     struct _compat_ibv_port_attr *attr)
{
	return sv_query_port_op(ctx, port, (struct ibv_port_attr *)(void *)attr,
				offsetof(struct ibv_port_attr, flags));
}

void sv_make_gid(const struct sv_ctx *c, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (!c->roce) {
		gid->raw[0] = 0xfe;
		gid->raw[1] = 0x80;
		gid->raw[10] = 0x53;
		gid->raw[11] = 0x56;
	} else {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
	}
	gid->raw[8] = (uint8_t)(c->base >> 8);
	gid->raw[9] = (uint8_t)c->base;
	memcpy(&gid->raw[12], &c->ip, 4);
}

uint16_t sv_dev_base_port(int dev_index)
{
	return (uint16_t)(sv_cfg.udp_port + dev_index * SV_NODE_PORTS);
}

int sv_addr_from_ah(const struct sv_ctx *c, const struct ibv_ah_attr *ah,
		    uint32_t dqpn, struct sockaddr_in *out)
{
	uint32_t base, idx = dqpn >> SV_QPN_SLOT_BITS;

	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	if (ah->is_global) {
		const uint8_t *g = ah->grh.dgid.raw;

		base = (uint32_t)(g[8] << 8 | g[9]);
		memcpy(&out->sin_addr.s_addr, &g[12], 4);
	} else {
		if (c->roce || ah->dlid == 0 || ah->dlid >= 0xc000)
			return EINVAL; /* RoCE needs a GRH; LIDs are unicast */
		/* LID-routed: the device is on this node's address */
		base = ah->dlid;
		out->sin_addr.s_addr = c->ip;
	}
	if (!base)
		return EINVAL;
	/* A QP number no process of that device can own still goes to the
	 * device, which drops it (no such QP), as an HCA would. */
	if (idx >= 1 && idx <= SV_NODE_PROCS && base + idx - 1 <= 0xffff)
		base += idx - 1;
	out->sin_port = htons((uint16_t)base);
	return 0;
}

SV_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index,
			    union ibv_gid *gid)
{
	if (port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	sv_make_gid(sv_ctx_of(ctx), gid);
	return 0;
}

SV_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port,
				uint32_t index, struct ibv_gid_entry *entry,
				uint32_t flags, size_t entry_size)
{
	struct sv_ctx *c = sv_ctx_of(ctx);
	struct ibv_gid_entry e;

	if (flags || port != 1 || entry_size < sizeof(e))
		return EINVAL;
	if (index != 0)
		return ENODATA;
	memset(&e, 0, sizeof(e));
	sv_make_gid(c, &e.gid);
	e.gid_index = 0;
	e.port_num = 1;
	e.gid_type = c->roce ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_IB;
	memcpy(entry, &e, sizeof(e));
	return 0;
}

/* rdma-core's private helper (enum ibv_gid_type_sysfs: 0 IB / RoCE v1,
 * 1 RoCE v2); rdma-core reads sysfs, which softverbs does not have. */
SV_EXPORT int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port,
				 unsigned int index, int *type)
{
	struct sv_ctx *c = sv_ctx_of(ctx);

	if (port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*type = c->roce ? 1 : 0;
	return 0;
}

SV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx,
				       struct ibv_gid_entry *entries,
				       size_t max_entries, uint32_t flags,
				       size_t entry_size)
{
	int ret;

	if (max_entries < 1)
		return -EINVAL;
	ret = _ibv_query_gid_ex(ctx, 1, 0, entries, flags, entry_size);
	return ret ? -ret : 1;
}

SV_EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index,
			     __be16 *pkey)
{
	if (port != 1 || index != 0) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xffff);
	return 0;
}

SV_EXPORT int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey)
{
	if (port == 1 && (be16toh(pkey) & 0x7fff) == 0x7fff)
		return 0;
	errno = ENOENT;
	return -1;
}

/* ---- async events: an eventfd counts queued events ---------------------- */
static void sv_async_push(struct sv_open *o, enum ibv_event_type type, void *elem)
{
	const unsigned cap = sizeof(o->aq) / sizeof(o->aq[0]);
	struct ibv_async_event *e;
	uint64_t one = 1;

	pthread_mutex_lock(&o->async_lock);
	if (o->aq_count == cap) {
		pthread_mutex_unlock(&o->async_lock);
		sv_log(1, "async event queue full, dropping %s", ibv_event_type_str(type));
		return;
	}
	e = &o->aq[(o->aq_head + o->aq_count) % cap];
	memset(e, 0, sizeof(*e));
	e->event_type = type;
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		e->element.cq = elem;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		e->element.srq = elem;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
		e->element.port_num = 1;
		break;
	default:
		e->element.qp = elem;
		break;
	}
	o->aq_count++;
	pthread_mutex_unlock(&o->async_lock);
	if (write(o->async_fd, &one, sizeof(one)) != sizeof(one))
		sv_log(1, "async event fd write failed: %m");
}

/* An event goes to the context that created its object; port events to
 * every context of the device. Called with the device lock held. */
void sv_async_event(struct sv_ctx *c, enum ibv_event_type type, void *elem)
{
	struct ibv_context *owner;

	switch (type) {
	case IBV_EVENT_CQ_ERR:
		owner = ((struct ibv_cq *)elem)->context;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		owner = ((struct ibv_srq *)elem)->context;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_DEVICE_FATAL:
		for (struct sv_open *o = c->opens; o; o = o->next)
			sv_async_push(o, type, elem);
		return;
	default:
		owner = ((struct ibv_qp *)elem)->context;
		break;
	}
	sv_async_push(sv_open_of(owner), type, elem);
}

SV_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
	struct sv_open *c = sv_open_of(ctx);
	uint64_t v;

	if (read(c->async_fd, &v, sizeof(v)) != sizeof(v))
		return -1; /* errno from read (EAGAIN when non-blocking) */
	pthread_mutex_lock(&c->async_lock);
	if (!c->aq_count) {
		pthread_mutex_unlock(&c->async_lock);
		errno = EAGAIN;
		return -1;
	}
	*event = c->aq[c->aq_head];
	c->aq_head = (c->aq_head + 1) % (sizeof(c->aq) / sizeof(c->aq[0]));
	c->aq_count--;
	pthread_mutex_unlock(&c->async_lock);
	return 0;
}

SV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event; /* destroy does not wait for async event acks (see docs) */
}
