/*
 * softverbs devices and contexts: the fake softverbs<N> device list,
 * ibv_open_device / ibv_close_device (one UDP port and one progress thread
 * per opened context), device / port / GID / P_Key queries, async events and
 * the mapping between LID / GID and UDP addresses.
 *
 * Addressing: each opened context owns one UDP port on SOFTVERBS_ADDR. In IB
 * mode its LID is that port number and its GID is fe80::<port>:5356:<ipv4>;
 * in RoCE mode the LID is 0 and the GID is the RoCE v2 style IPv4-mapped
 * ::<port>:ffff:<ipv4>. Bytes 8-9 of a GID carry the port, 12-15 the IPv4.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sv_internal.h"

static struct sv_device sv_devices[SV_MAX_DEVICES];
static pthread_mutex_t sv_open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sv_ctx *sv_open_list;
static int sv_atexit_done;

static void sv_devices_init(void)
{
	for (int i = 0; i < SV_MAX_DEVICES; i++) {
		struct ibv_device *d = &sv_devices[i].dev;

		sv_devices[i].index = i;
		d->node_type = IBV_NODE_CA;
		d->transport_type = IBV_TRANSPORT_IB;
		snprintf(d->name, sizeof(d->name), "softverbs%d", i);
		snprintf(d->dev_name, sizeof(d->dev_name), "uverbs%d", i);
		snprintf(d->dev_path, sizeof(d->dev_path),
			 "/sys/class/infiniband_verbs/uverbs%d", i);
		snprintf(d->ibdev_path, sizeof(d->ibdev_path),
			 "/sys/class/infiniband/softverbs%d", i);
	}
}

SV_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct ibv_device **list;

	sv_config_init();
	pthread_once(&once, sv_devices_init);
	list = calloc((size_t)sv_cfg.ndev + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < sv_cfg.ndev; i++)
		list[i] = &sv_devices[i].dev;
	if (num)
		*num = sv_cfg.ndev;
	return list;
}

SV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SV_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

SV_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return SV_CONTAINER_OF(device, struct sv_device, dev)->index;
}

static uint64_t sv_node_guid(int index)
{
	/* locally administered, readable: 5356:0000:0000:00<index> */
	return 0x5356000000000000ull | (uint64_t)(index + 1);
}

SV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return htobe64(sv_node_guid(ibv_get_device_index(device)));
}

static void sv_atexit_stats(void)
{
	pthread_mutex_lock(&sv_open_lock);
	for (struct sv_ctx *c = sv_open_list; c; c = c->next_open)
		sv_stats_print(c);
	pthread_mutex_unlock(&sv_open_lock);
}

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct sv_ctx *c;
	struct ibv_context *ctx;
	int err;

	sv_config_init();
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->async_lock, NULL);
	c->dev_index = ibv_get_device_index(device);
	c->roce = sv_cfg.roce;
	c->sock = -1;
	c->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (c->async_fd < 0) {
		err = errno;
		goto err_free;
	}
	err = sv_net_open(c);
	if (err)
		goto err_close_async;
	sv_fault_init(c);

	ctx = &c->vctx.context;
	ctx->device = device;
	ctx->cmd_fd = -1;
	ctx->async_fd = c->async_fd;
	ctx->num_comp_vectors = 1;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->ops.poll_cq = sv_poll_cq;
	ctx->ops.req_notify_cq = sv_req_notify_cq;
	ctx->ops.post_send = sv_post_send;
	ctx->ops.post_recv = sv_post_recv;
	ctx->ops.post_srq_recv = sv_post_srq_recv;
	c->vctx.sz = sizeof(c->vctx);
	c->vctx.query_port = sv_query_port_op;
	c->vctx.create_qp_ex = sv_create_qp_ex;
	c->vctx.query_device_ex = sv_query_device_ex_op;

	atomic_store(&c->stop, 0);
	err = pthread_create(&c->thread, NULL, sv_progress_thread, c);
	if (err)
		goto err_close_net;
	c->thread_started = 1;

	pthread_mutex_lock(&sv_open_lock);
	c->next_open = sv_open_list;
	sv_open_list = c;
	if (sv_cfg.stats && !sv_atexit_done) {
		sv_atexit_done = 1;
		atexit(sv_atexit_stats);
	}
	pthread_mutex_unlock(&sv_open_lock);
	sv_log(2, "opened %s: udp %s:%u", device->name,
	       inet_ntoa((struct in_addr){ .s_addr = c->ip }), c->port);
	return ctx;

err_close_net:
	sv_net_close(c);
err_close_async:
	close(c->async_fd);
err_free:
	free(c);
	errno = err;
	return NULL;
}

SV_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct sv_ctx *c = sv_ctx_of(ctx);

	pthread_mutex_lock(&sv_open_lock);
	for (struct sv_ctx **pp = &sv_open_list; *pp; pp = &(*pp)->next_open) {
		if (*pp == c) {
			*pp = c->next_open;
			break;
		}
	}
	pthread_mutex_unlock(&sv_open_lock);
	atomic_store(&c->stop, 1);
	if (c->thread_started)
		pthread_join(c->thread, NULL);
	sv_stats_print(c);
	sv_net_close(c);
	close(c->async_fd);
	free(c->live);
	free(c->mrs);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return 0;
}

static void sv_fill_device_attr(struct sv_ctx *c, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "softverbs-1.0");
	a->node_guid = htobe64(sv_node_guid(c->dev_index));
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = 1ull << 40;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = 0x5356;
	a->vendor_part_id = 1;
	a->hw_ver = 1;
	a->max_qp = SV_MAX_QP;
	a->max_qp_wr = SV_MAX_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN |
			      IBV_DEVICE_CHANGE_PHY_PORT;
	a->max_sge = SV_MAX_SGE;
	a->max_sge_rd = SV_MAX_SGE;
	a->max_cq = 65536;
	a->max_cqe = SV_MAX_CQE;
	a->max_mr = 1 << 20;
	a->max_pd = 1 << 16;
	a->max_qp_rd_atom = SV_MAX_RD_ATOM;
	a->max_res_rd_atom = SV_MAX_RD_ATOM * SV_MAX_QP;
	a->max_qp_init_rd_atom = SV_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_NONE;
	a->max_srq = 4096;
	a->max_srq_wr = SV_MAX_SRQ_WR;
	a->max_srq_sge = SV_MAX_SGE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 16;
	a->phys_port_cnt = 1;
}

SV_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	sv_fill_device_attr(sv_ctx_of(ctx), attr);
	return 0;
}

int sv_query_device_ex_op(struct ibv_context *ctx,
			  const struct ibv_query_device_ex_input *in,
			  struct ibv_device_attr_ex *attr, size_t len)
{
	struct ibv_device_attr_ex full;

	if (in && in->comp_mask)
		return EINVAL;
	memset(&full, 0, sizeof(full));
	sv_fill_device_attr(sv_ctx_of(ctx), &full.orig_attr);
	full.max_dm_size = 0;
	memcpy(attr, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}

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
	a.lid = c->roce ? 0 : c->port;
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
	gid->raw[8] = (uint8_t)(c->port >> 8);
	gid->raw[9] = (uint8_t)c->port;
	memcpy(&gid->raw[12], &c->ip, 4);
}

int sv_addr_from_ah(const struct sv_ctx *c, const struct ibv_ah_attr *ah,
		    struct sockaddr_in *out)
{
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	if (ah->is_global) {
		const uint8_t *g = ah->grh.dgid.raw;

		out->sin_port = htons((uint16_t)(g[8] << 8 | g[9]));
		memcpy(&out->sin_addr.s_addr, &g[12], 4);
		if (!out->sin_port)
			return EINVAL;
		return 0;
	}
	if (c->roce || ah->dlid == 0 || ah->dlid >= 0xc000)
		return EINVAL; /* RoCE needs a GRH; LIDs are unicast ports */
	/* LID-routed: the peer is a port on this node's address */
	out->sin_port = htons(ah->dlid);
	out->sin_addr.s_addr = c->ip;
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
void sv_async_event(struct sv_ctx *c, enum ibv_event_type type, void *elem)
{
	struct ibv_async_event *e;
	uint64_t one = 1;

	pthread_mutex_lock(&c->async_lock);
	if (c->aq_count == sizeof(c->aq) / sizeof(c->aq[0])) {
		pthread_mutex_unlock(&c->async_lock);
		sv_log(1, "async event queue full, dropping %s", ibv_event_type_str(type));
		return;
	}
	e = &c->aq[(c->aq_head + c->aq_count) % (sizeof(c->aq) / sizeof(c->aq[0]))];
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
	c->aq_count++;
	pthread_mutex_unlock(&c->async_lock);
	if (write(c->async_fd, &one, sizeof(one)) != sizeof(one))
		sv_log(1, "async event fd write failed: %m");
}

SV_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
	struct sv_ctx *c = sv_ctx_of(ctx);
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
