/*
 * shm_provider.c - the shm provider's domain, completion queue, memory
 * registrations and device probe (one "device": this node's shared memory).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/log.h"
#include "fabric/shm/shm.h"

/* The kernel's boot id tells two processes they share a node. */
static void read_boot_id(uint8_t out[16])
{
    char text[64] = "";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, text, sizeof(text) - 1);
        text[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    memset(out, 0, 16);
    int j = 0;
    for (int i = 0; text[i] && j < 32; i++) {
        char c = text[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            continue;
        out[j / 2] |= (uint8_t)(j % 2 ? v : v << 4);
        j++;
    }
}

static int shm_domain_open(const struct gx_fab_provider *prov, const struct gx_fab_domain_attr *attr,
                           struct gx_fab_domain **out)
{
    struct shm_domain *dom = calloc(1, sizeof(*dom));
    if (!dom)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "shm: out of memory opening a domain");
    gx_auth_key_derive(attr->job_key, &dom->key);
    memcpy(dom->key.job_id, attr->job_id, sizeof(dom->key.job_id));
    gx_fab_mrtab_init(&dom->mrtab);
    read_boot_id(dom->boot_id);
    /* Let peers of this job read our buffers with process_vm_readv even when
     * Yama restricts ptrace to descendants (EINVAL without Yama: harmless). */
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    dom->base.caps = GX_FAB_CAP_RMA; /* the same permission lets one-sided ops write */
    *out = &dom->base;
    return GX_OK;
}

static void shm_domain_close(struct gx_fab_domain *base)
{
    struct shm_domain *dom = (struct shm_domain *)base;
    gx_fab_mrtab_fini(&dom->mrtab);
    free(dom);
}

static int shm_cq_open(struct gx_fab_domain *dom, struct gx_fab_cq **out)
{
    struct shm_cq *cq = calloc(1, sizeof(*cq));
    if (!cq)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "shm: out of memory opening a cq");
    int rc = gx_fab_swcq_init(&cq->sw, dom, shm_ep_progress);
    if (rc != GX_OK) {
        free(cq);
        return rc;
    }
    *out = &cq->sw.base;
    return GX_OK;
}

static void shm_cq_close(struct gx_fab_cq *base)
{
    struct shm_cq *cq = (struct shm_cq *)base;
    gx_fab_swcq_fini(&cq->sw);
    free(cq);
}

static int shm_cq_poll(struct gx_fab_cq *base, struct gx_fab_cqe *out, int max)
{
    return gx_fab_swcq_poll(&((struct shm_cq *)base)->sw, out, max);
}

static int shm_mr_reg(struct gx_fab_domain *base, void *addr, size_t len, enum gx_fab_mem_type type,
                      unsigned access, struct gx_fab_mr **out)
{
    return gx_fab_mrtab_reg(&((struct shm_domain *)base)->mrtab, base, addr, len, type, access, out);
}

static int shm_mr_dereg(struct gx_fab_mr *mr)
{
    return gx_fab_mrtab_dereg(&((struct shm_domain *)mr->dom)->mrtab, mr);
}

static int shm_probe(struct gx_fab_devinfo *devs, int max, int *count)
{
    if (max > 0) {
        memset(&devs[0], 0, sizeof(devs[0]));
        snprintf(devs[0].name, sizeof(devs[0].name), "shm");
        snprintf(devs[0].detail, sizeof(devs[0].detail),
                 "memfd rings, %u B inline, larger payloads by process_vm_readv",
                 (unsigned)SHM_INLINE_MAX);
    }
    *count = 1;
    return GX_OK;
}

const struct gx_fab_provider gx_fab_shm_provider = {
    .name = "shm",
    .description = "shared memory between processes of one node",
    .ops = {
        .probe = shm_probe,
        .domain_open = shm_domain_open,
        .domain_close = shm_domain_close,
        .cq_open = shm_cq_open,
        .cq_close = shm_cq_close,
        .cq_poll = shm_cq_poll,
        .mr_reg = shm_mr_reg,
        .mr_dereg = shm_mr_dereg,
        .mr_pack_rkey = gx_fab_mrtab_pack,
        .listen = shm_listen,
        .accept = shm_accept,
        .listener_close = shm_listener_close,
        .connect = shm_connect,
        .ep_establish = shm_ep_establish,
        .ep_close = shm_ep_close,
        .post_send = shm_post_send,
        .post_recv = shm_post_recv,
        .post_write_imm = shm_post_write_imm,
        .post_write = shm_post_write,
        .post_read = shm_post_read,
        .cq_wait_fds = shm_cq_wait_fds,
        .cq_wait_done = shm_cq_wait_done,
    },
};
