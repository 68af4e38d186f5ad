/*
 * Loads libsoftverbs the way gx's verbs provider does: dlopen() of a path
 * and dlvsym() with libibverbs' symbol versions, then opens a device and
 * queries its port through the resolved entry points.
 *   sv_dlopen_test <path to libsoftverbs.so.0>
 */
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

#define FAIL(...)                             \
	do {                                  \
		fprintf(stderr, "FAIL: ");    \
		fprintf(stderr, __VA_ARGS__); \
		fprintf(stderr, "\n");        \
		return 1;                     \
	} while (0)

static const struct {
	const char *name, *version;
} syms[] = {
	{ "ibv_get_device_list", "IBVERBS_1.1" },  { "ibv_free_device_list", "IBVERBS_1.1" },
	{ "ibv_open_device", "IBVERBS_1.1" },      { "ibv_close_device", "IBVERBS_1.1" },
	{ "ibv_query_port", "IBVERBS_1.1" },       { "ibv_query_gid", "IBVERBS_1.1" },
	{ "ibv_alloc_pd", "IBVERBS_1.1" },         { "ibv_reg_mr", "IBVERBS_1.1" },
	{ "ibv_reg_mr_iova2", "IBVERBS_1.8" },     { "ibv_create_cq", "IBVERBS_1.1" },
	{ "ibv_create_qp", "IBVERBS_1.1" },        { "ibv_modify_qp", "IBVERBS_1.1" },
	{ "ibv_create_comp_channel", "IBVERBS_1.0" }, { "ibv_get_cq_event", "IBVERBS_1.1" },
	{ "ibv_ack_cq_events", "IBVERBS_1.1" },    { "ibv_qp_to_qp_ex", "IBVERBS_1.6" },
	{ "_ibv_query_gid_ex", "IBVERBS_1.11" },   { "ibv_wc_status_str", "IBVERBS_1.1" },
	{ "ibv_reg_dmabuf_mr", "IBVERBS_1.12" },   { "ibv_query_qp_data_in_order", "IBVERBS_1.14" },
};

int main(int argc, char **argv)
{
	struct ibv_device **(*get_list)(int *);
	struct ibv_context *(*open_dev)(struct ibv_device *);
	int (*close_dev)(struct ibv_context *);
	int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *);
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_port_attr pa;
	void *h;
	int n = 0;

	if (argc != 2)
		FAIL("usage: %s <libsoftverbs.so.0>", argv[0]);
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h)
		FAIL("dlopen: %s", dlerror());
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
		if (!dlvsym(h, syms[i].name, syms[i].version))
			FAIL("dlvsym(%s, %s): %s", syms[i].name, syms[i].version, dlerror());
	if (dlsym(h, "sv_progress") || dlsym(h, "sv_cfg"))
		FAIL("internal symbols are exported");
	get_list = (struct ibv_device **(*)(int *))dlvsym(h, "ibv_get_device_list", "IBVERBS_1.1");
	open_dev = (struct ibv_context * (*)(struct ibv_device *))
		dlvsym(h, "ibv_open_device", "IBVERBS_1.1");
	close_dev = (int (*)(struct ibv_context *))dlvsym(h, "ibv_close_device", "IBVERBS_1.1");
	query_port = (int (*)(struct ibv_context *, uint8_t, struct ibv_port_attr *))
		dlvsym(h, "ibv_query_port", "IBVERBS_1.1");
	list = get_list(&n);
	if (!list || n < 1 || strncmp(list[0]->name, "softverbs", 9))
		FAIL("no softverbs device listed");
	ctx = open_dev(list[0]);
	if (!ctx)
		FAIL("open_device");
	memset(&pa, 0, sizeof(pa));
	if (query_port(ctx, 1, &pa) || pa.state != IBV_PORT_ACTIVE)
		FAIL("query_port through the exported entry point");
	/* what the inline ibv_query_port() does first: the extended context op
	 * (called directly here, so this test links nothing from libibverbs) */
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);
	memset(&pa, 0, sizeof(pa));
	if (!vctx || vctx->query_port(ctx, 1, &pa, sizeof(pa)) || pa.state != IBV_PORT_ACTIVE)
		FAIL("query_port through verbs_context");
	if (!verbs_get_ctx_op(ctx, create_qp_ex) || !ctx->ops.poll_cq || !ctx->ops.post_send)
		FAIL("context ops missing");
	close_dev(ctx);
	void (*free_list)(struct ibv_device **) =
		(void (*)(struct ibv_device **))dlvsym(h, "ibv_free_device_list", "IBVERBS_1.1");
	printf("PASS dlopen: %zu versioned symbols, %s port state %s\n",
	       sizeof(syms) / sizeof(syms[0]), list[0]->name, "active");
	free_list(list);
	dlclose(h);
	return 0;
}
