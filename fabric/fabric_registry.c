/*
 * fabric_registry.c - the static provider registry, the stubs that fill a
 * provider's missing ops, the fabric-wide parameters and the generic
 * completion wait with spin-then-back-off.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"
#include "fabric/fabric_provider.h"
#include "gx_build_config.h"
#if GX_HAVE_VERBS
extern const struct gx_fab_provider gx_fab_verbs_provider; /* fabric/verbs/ */
#endif
#if GX_HAVE_DPDK
extern const struct gx_fab_provider gx_fab_dpdk_provider; /* fabric/dpdk/ */
#endif

GX_PARAM_DEFINE(gx_param_fab_queue_depth, "GX_FAB_QUEUE_DEPTH", GX_PARAM_INT, "4096", NULL,
                "Outstanding operations per endpoint queue (sends+writes, and receives) "
                "for the software providers; a post beyond it returns GX_ENOMEM.");
GX_PARAM_DEFINE(gx_param_fab_connect_timeout, "GX_FAB_CONNECT_TIMEOUT", GX_PARAM_INT, "30000",
                NULL, "Deadline in ms for setting up one fabric connection (handshake included).");
GX_PARAM_DEFINE(gx_param_fab_spin, "GX_FAB_POLL_SPIN", GX_PARAM_INT, "2000", NULL,
                "Empty completion polls before a waiting rank starts yielding the CPU.");
GX_PARAM_DEFINE(gx_param_fab_sleep_max, "GX_FAB_POLL_SLEEP_MAX_US", GX_PARAM_INT, "100", NULL,
                "Longest sleep in microseconds between polls of an idle waiting rank.");

static const struct gx_fab_provider *const builtin[] = {
    &gx_fab_shm_provider,
    &gx_fab_tcp_provider,
#if GX_HAVE_VERBS
    &gx_fab_verbs_provider,
#endif
#if GX_HAVE_DPDK
    &gx_fab_dpdk_provider,
#endif
};
#define NBUILTIN (sizeof(builtin) / sizeof(builtin[0]))

/* ---- stubs: the core never tests an op for NULL ------------------------- */
static int stub_probe(struct gx_fab_devinfo *d, int m, int *c) { return GX_EUNSUPPORTED; }
static int stub_domain_open(const struct gx_fab_provider *p, const struct gx_fab_domain_attr *a,
                            struct gx_fab_domain **o) { return GX_EUNSUPPORTED; }
static void stub_domain_close(struct gx_fab_domain *d) {}
static int stub_cq_open(struct gx_fab_domain *d, struct gx_fab_cq **o) { return GX_EUNSUPPORTED; }
static void stub_cq_close(struct gx_fab_cq *c) {}
static int stub_cq_poll(struct gx_fab_cq *c, struct gx_fab_cqe *o, int m) { return GX_EUNSUPPORTED; }
static int stub_mr_reg(struct gx_fab_domain *d, void *a, size_t l, enum gx_fab_mem_type t,
                       unsigned acc, struct gx_fab_mr **o) { return GX_EUNSUPPORTED; }
static int stub_mr_dereg(struct gx_fab_mr *m) { return GX_EUNSUPPORTED; }
static int stub_mr_pack_rkey(const struct gx_fab_mr *m, struct gx_fab_rkey *o) { return GX_EUNSUPPORTED; }
static int stub_listen(struct gx_fab_domain *d, struct gx_fab_cq *c, struct gx_fab_listener **o,
                       struct gx_fab_addr *a) { return GX_EUNSUPPORTED; }
static int stub_accept(struct gx_fab_listener *l, struct gx_fab_ep **o) { return GX_EUNSUPPORTED; }
static void stub_listener_close(struct gx_fab_listener *l) {}
static int stub_connect(struct gx_fab_domain *d, struct gx_fab_cq *c, const struct gx_fab_addr *a,
                        const struct gx_fab_conn_param *p, struct gx_fab_ep **o) { return GX_EUNSUPPORTED; }
static int stub_ep_establish(struct gx_fab_ep *e) { return GX_EUNSUPPORTED; }
static void stub_ep_close(struct gx_fab_ep *e) {}
static int stub_post_send(struct gx_fab_ep *e, const void *b, size_t l, struct gx_fab_mr *m,
                          uint64_t t, uint64_t c) { return GX_EUNSUPPORTED; }
static int stub_post_recv(struct gx_fab_ep *e, void *b, size_t l, struct gx_fab_mr *m, uint64_t c)
{ return GX_EUNSUPPORTED; }
static int stub_post_write_imm(struct gx_fab_ep *e, const void *b, size_t l, struct gx_fab_mr *m,
                               uint64_t r, const struct gx_fab_rkey *k, uint32_t i, uint64_t c)
{ return GX_EUNSUPPORTED; }
static int stub_post_write(struct gx_fab_ep *e, const void *b, size_t l, struct gx_fab_mr *m,
                           uint64_t r, const struct gx_fab_rkey *k, uint64_t c)
{ return GX_EUNSUPPORTED; }
static int stub_post_read(struct gx_fab_ep *e, void *b, size_t l, struct gx_fab_mr *m, uint64_t r,
                          const struct gx_fab_rkey *k, uint64_t c)
{ return GX_EUNSUPPORTED; }
static int stub_post_atomic(struct gx_fab_ep *e, enum gx_fab_atomic_op op, uint64_t v,
                            uint64_t cmp, uint64_t *res, uint64_t r, const struct gx_fab_rkey *k,
                            uint64_t c)
{ return GX_EUNSUPPORTED; }

static int stub_cq_wait_fds(struct gx_fab_cq *c, struct pollfd *f, int m, int *n)
{ return GX_EUNSUPPORTED; }
static void stub_cq_wait_done(struct gx_fab_cq *c, const struct pollfd *f, int n) {}

static const struct gx_fab_ops stub_ops = {
    .probe = stub_probe,
    .domain_open = stub_domain_open,
    .domain_close = stub_domain_close,
    .cq_open = stub_cq_open,
    .cq_close = stub_cq_close,
    .cq_poll = stub_cq_poll,
    .mr_reg = stub_mr_reg,
    .mr_dereg = stub_mr_dereg,
    .mr_pack_rkey = stub_mr_pack_rkey,
    .listen = stub_listen,
    .accept = stub_accept,
    .listener_close = stub_listener_close,
    .connect = stub_connect,
    .ep_establish = stub_ep_establish,
    .ep_close = stub_ep_close,
    .post_send = stub_post_send,
    .post_recv = stub_post_recv,
    .post_write_imm = stub_post_write_imm,
    .post_write = stub_post_write,
    .post_read = stub_post_read,
    .post_atomic = stub_post_atomic,
    .cq_wait_fds = stub_cq_wait_fds,
    .cq_wait_done = stub_cq_wait_done,
};

#define FILL(field) ops->field = prov_ops->field ? prov_ops->field : stub_ops.field
void gx_fab_fill_ops(struct gx_fab_ops *ops, const struct gx_fab_ops *prov_ops)
{
    FILL(probe);
    FILL(domain_open);
    FILL(domain_close);
    FILL(cq_open);
    FILL(cq_close);
    FILL(cq_poll);
    FILL(mr_reg);
    FILL(mr_dereg);
    FILL(mr_pack_rkey);
    FILL(listen);
    FILL(accept);
    FILL(listener_close);
    FILL(connect);
    FILL(ep_establish);
    FILL(ep_close);
    FILL(post_send);
    FILL(post_recv);
    FILL(post_write_imm);
    FILL(post_write);
    FILL(post_read);
    FILL(post_atomic);
    FILL(cq_wait_fds);
    FILL(cq_wait_done);
}
#undef FILL

const struct gx_fab_provider *gx_fab_provider_at(size_t i)
{
    return i < NBUILTIN ? builtin[i] : NULL;
}

const char *gx_fab_provider_names(void)
{
    static char names[128];
    if (!names[0]) {
        size_t off = 0;
        for (size_t i = 0; i < NBUILTIN; i++)
            off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? "," : "",
                                    builtin[i]->name);
    }
    return names;
}

const struct gx_fab_provider *gx_fab_provider_find(const char *name)
{
    for (size_t i = 0; i < NBUILTIN; i++)
        if (name && strcmp(builtin[i]->name, name) == 0)
            return builtin[i];
    gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "fabric provider '%s' is not built in (built: %s)",
            name ? name : "(null)", gx_fab_provider_names());
    return NULL;
}

int gx_fab_probe(const struct gx_fab_provider *prov, struct gx_fab_devinfo *devs, int max,
                 int *count)
{
    if (!prov->ops.probe)
        return GX_EUNSUPPORTED;
    return prov->ops.probe(devs, max, count);
}

int gx_fab_domain_open(const struct gx_fab_provider *prov, const struct gx_fab_domain_attr *attr,
                       struct gx_fab_domain **out)
{
    struct gx_fab_domain_attr def = GX_FAB_DOMAIN_ATTR_INIT;
    if (!prov || !out)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "gx_fab_domain_open: NULL provider or out");
    if (!attr)
        attr = &def;
    if (attr->size < sizeof(size_t) || attr->size > sizeof(*attr))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "gx_fab_domain_open: bad attr size %zu",
                       attr->size);
    if (!prov->ops.domain_open)
        return GX_EUNSUPPORTED;
    struct gx_fab_domain *dom = NULL;
    int rc = prov->ops.domain_open(prov, attr, &dom);
    if (rc != GX_OK)
        return rc;
    gx_fab_fill_ops(&dom->ops, &prov->ops);
    dom->prov = prov;
    dom->rank = attr->rank;
    *out = dom;
    return GX_OK;
}

void gx_fab_domain_close(struct gx_fab_domain *dom)
{
    if (dom)
        dom->ops.domain_close(dom);
}

static int param_int_or(const struct gx_param *p, int def, int lo, int hi)
{
    long long v;
    if (gx_param_int(p, &v) != GX_OK || v < lo || v > hi)
        return def;
    return (int)v;
}

int gx_fab_queue_depth(void)
{
    static int depth;
    if (!depth)
        depth = param_int_or(&gx_param_fab_queue_depth, 4096, 16, 1 << 20);
    return depth;
}

int gx_fab_connect_timeout_ms(void)
{
    return param_int_or(&gx_param_fab_connect_timeout, 30000, 1, 1 << 30);
}

const char *gx_fab_op_name(int op)
{
    switch (op) {
    case GX_FAB_OP_SEND: return "send";
    case GX_FAB_OP_WRITE_IMM: return "write_imm";
    case GX_FAB_OP_RECV: return "recv";
    case GX_FAB_OP_WRITE: return "write";
    case GX_FAB_OP_READ: return "read";
    case GX_FAB_OP_ATOMIC: return "atomic";
    default: return "?";
    }
}

int gx_fab_cq_wait(struct gx_fab_cq *cq, struct gx_fab_cqe *out, int max, uint64_t deadline)
{
    static int spin = -1, sleep_max_us = -1;
    if (spin < 0) {
        spin = param_int_or(&gx_param_fab_spin, 2000, 0, 1 << 30);
        sleep_max_us = param_int_or(&gx_param_fab_sleep_max, 100, 1, 1000000);
    }
    long empty = 0;
    long sleep_ns = 1000;
    for (;;) {
        int n = gx_fab_cq_poll(cq, out, max);
        if (n != 0)
            return n;
        empty++;
        if (empty < spin)
            continue;
        /* Timestamps only once spinning is over: keeps the hot loop cheap. */
        if (gx_now_ns() >= deadline)
            return GX_ETIMEOUT;
        if (empty < 2 * spin + 64) {
            sched_yield();
            continue;
        }
        struct timespec ts = { 0, sleep_ns };
        nanosleep(&ts, NULL);
        if (sleep_ns < (long)sleep_max_us * 1000)
            sleep_ns *= 2;
    }
}

void gx_fab_ep_set_name(struct gx_fab_ep *ep, const char *prov, int peer_rank, const char *where)
{
    if (peer_rank >= 0)
        snprintf(ep->name, sizeof(ep->name), "%s endpoint to rank %d (%s)", prov, peer_rank, where);
    else
        snprintf(ep->name, sizeof(ep->name), "%s endpoint to %s", prov, where);
}

void gx_fab_log_ep_failure(const char *prov, const char *ep_name, bool busy, int status,
                           const char *msg)
{
    if (busy || status != GX_EPEER)
        gx_fail(status, GX_SUB_FABRIC, "%s: %s failed: %s", prov, ep_name, msg);
    else
        GX_INFO(GX_SUB_FABRIC, "%s: %s: %s (no operation outstanding)", prov, ep_name, msg);
}
