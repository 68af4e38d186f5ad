/*
 * softverbs devices and contexts: the fake softverbs<N> device list,
 * ibv_open_device / ibv_close_device and the device queries.
 *
 * One device instance (struct sv_ctx: a UDP port, a progress thread, the QP
 * and MR tables) per device per process, created by the first
 * ibv_open_device() and shared by every later one until the last
 * ibv_close_device(); each open gets its own struct sv_open (ibv_context,
 * async event fd, command fd). Across processes the device is shared through
 * its UDP port range (sv_internal.h): same LID, same GID, one QP number
 * space. Ports, GIDs and async events are in sv_port.c.
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
static struct sv_ctx *sv_open_list;           /* device instances, for stats */
static struct sv_ctx *sv_hcas[SV_MAX_DEVICES]; /* this process's instances */
static int sv_atexit_done;

/* A child of fork() has no progress thread and shares the parent's sockets:
 * it must not use the parent's device instances. Its ibv_open_device()
 * creates its own (the parent's objects are unusable in the child, as
 * without ibv_fork_init on real hardware). */
static void sv_atfork_child(void)
{
	pthread_mutex_init(&sv_open_lock, NULL);
	for (int i = 0; i < SV_MAX_DEVICES; i++)
		sv_hcas[i] = NULL;
	sv_open_list = NULL;
}

static void sv_devices_init(void)
{
	pthread_atfork(NULL, NULL, sv_atfork_child);
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

/* The process's instance of device idx, created on first use. Called with
 * sv_open_lock held. */
static struct sv_ctx *sv_hca_get(int idx, int *err)
{
	struct sv_ctx *c = sv_hcas[idx];

	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c) {
		*err = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->dev_index = idx;
	c->roce = sv_cfg.roce;
	c->sock = -1;
	*err = sv_net_open(c);
	if (*err) {
		free(c);
		return NULL;
	}
	sv_fault_init(c);
	atomic_store(&c->stop, 0);
	*err = pthread_create(&c->thread, NULL, sv_progress_thread, c);
	if (*err) {
		sv_net_close(c);
		free(c);
		return NULL;
	}
	c->thread_started = 1;
	c->next_open = sv_open_list;
	sv_open_list = c;
	sv_hcas[idx] = c;
	if (sv_cfg.stats && !sv_atexit_done) {
		sv_atexit_done = 1;
		atexit(sv_atexit_stats);
	}
	sv_log(2, "softverbs%d: udp %s:%u (device ports from %u, QPNs 0x%x..)", idx,
	       inet_ntoa((struct in_addr){ .s_addr = c->ip }), c->port, c->base, c->qpn_hi);
	return c;
}

/* Drops the instance when its last context closes (sv_open_lock held);
 * returns it for teardown outside the lock, or NULL. */
static struct sv_ctx *sv_hca_put(struct sv_ctx *c)
{
	if (--c->refs > 0)
		return NULL;
	sv_hcas[c->dev_index] = NULL;
	for (struct sv_ctx **pp = &sv_open_list; *pp; pp = &(*pp)->next_open) {
		if (*pp == c) {
			*pp = c->next_open;
			break;
		}
	}
	return c;
}

static void sv_hca_free(struct sv_ctx *c)
{
	atomic_store(&c->stop, 1);
	if (c->thread_started)
		pthread_join(c->thread, NULL);
	sv_stats_print(c);
	sv_net_close(c);
	free(c->live);
	free(c->mrs);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct sv_open *o;
	struct sv_ctx *c;
	struct ibv_context *ctx;
	int err;

	sv_config_init();
	o = calloc(1, sizeof(*o));
	if (!o) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&o->async_lock, NULL);
	o->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	/* A real context's cmd_fd is its /dev/infiniband/uverbsN; programs dup
	 * it (to share or import the context), so give them a real fd. */
	o->cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (o->async_fd < 0 || o->cmd_fd < 0) {
		err = errno;
		goto err_free;
	}
	pthread_mutex_lock(&sv_open_lock);
	c = sv_hca_get(ibv_get_device_index(device), &err);
	if (!c) {
		pthread_mutex_unlock(&sv_open_lock);
		goto err_free;
	}
	c->refs++;
	o->hca = c;
	pthread_mutex_lock(&c->lock);
	o->next = c->opens;
	c->opens = o;
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&sv_open_lock);

	ctx = &o->vctx.context;
	ctx->device = device;
	ctx->cmd_fd = o->cmd_fd;
	ctx->async_fd = o->async_fd;
	ctx->num_comp_vectors = 1;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->ops.poll_cq = sv_poll_cq;
	ctx->ops.req_notify_cq = sv_req_notify_cq;
	ctx->ops.post_send = sv_post_send;
	ctx->ops.post_recv = sv_post_recv;
	ctx->ops.post_srq_recv = sv_post_srq_recv;
	o->vctx.sz = sizeof(o->vctx);
	o->vctx.query_port = sv_query_port_op;
	o->vctx.create_qp_ex = sv_create_qp_ex;
	o->vctx.query_device_ex = sv_query_device_ex_op;
	return ctx;

err_free:
	if (o->async_fd >= 0)
		close(o->async_fd);
	if (o->cmd_fd >= 0)
		close(o->cmd_fd);
	free(o);
	errno = err;
	return NULL;
}

SV_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct sv_open *o = sv_open_of(ctx);
	struct sv_ctx *c = o->hca, *dead;

	pthread_mutex_lock(&sv_open_lock);
	pthread_mutex_lock(&c->lock);
	for (struct sv_open **pp = &c->opens; *pp; pp = &(*pp)->next) {
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	}
	sv_qp_drop_ctx(c, ctx);
	pthread_mutex_unlock(&c->lock);
	dead = sv_hca_put(c);
	pthread_mutex_unlock(&sv_open_lock);
	if (dead)
		sv_hca_free(dead);
	close(o->async_fd);
	close(o->cmd_fd);
	pthread_mutex_destroy(&o->async_lock);
	free(o);
	return 0;
}

void sv_fill_device_attr(struct sv_ctx *c, struct ibv_device_attr *a)
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
	if (!sv_cfg.no_resize_cq)
		a->device_cap_flags |= IBV_DEVICE_RESIZE_MAX_WR;
	a->max_sge = SV_MAX_SGE;
	a->max_sge_rd = SV_MAX_SGE;
	a->max_cq = 65536;
	a->max_cqe = (int)sv_cfg.max_cqe;
	a->max_mr = 1 << 20;
	a->max_pd = 1 << 16;
	a->max_qp_rd_atom = SV_MAX_RD_ATOM;
	a->max_res_rd_atom = SV_MAX_RD_ATOM * SV_MAX_QP;
	a->max_qp_init_rd_atom = SV_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_GLOB; /* 8-byte CAS and fetch-add, sv_resp.c: done by the
					  * target process with the CPU's own atomics */
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
	full.phys_port_cnt_ex = full.orig_attr.phys_port_cnt;
	memcpy(attr, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}
