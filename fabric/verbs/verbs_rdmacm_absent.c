/*
 * verbs_rdmacm_absent.c - GX_IB_CM=rdmacm in a build without librdmacm's
 * headers (rdma/rdma_cma.h not found at configure time): the path reports
 * why it is unavailable and a domain refuses to open with it.
 */
#include <stdio.h>

#include "common/log.h"
#include "fabric/verbs/verbs_rdmacm.h"

#define ABSENT "librdmacm missing at build time: rdma/rdma_cma.h was not found " \
               "(apt-get install librdmacm-dev and rebuild)"

int gx_verbs_rdmacm_available(void)
{
    return GX_EUNSUPPORTED;
}

const char *gx_verbs_rdmacm_reason(void)
{
    return ABSENT;
}

int gx_verbs_rdmacm_report(char *out, size_t len)
{
    snprintf(out, len, "rdmacm: not available: %s", ABSENT);
    return GX_OK;
}

int verbs_rdmacm_domain_open(struct verbs_domain *dom)
{
    (void)dom;
    return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "verbs: GX_IB_CM=rdmacm: %s; unset GX_IB_CM "
                   "to use the authenticated TCP side channel (docs/verbs.md)", ABSENT);
}

void verbs_rdmacm_domain_close(struct verbs_domain *dom) { (void)dom; }
int verbs_rdmacm_listen(struct verbs_domain *dom, struct gx_fab_listener *lst,
                        struct verbs_rdmacm_listen **out, uint16_t *port)
{
    (void)dom, (void)lst, (void)out, (void)port;
    return GX_EUNSUPPORTED;
}
void verbs_rdmacm_listen_close(struct verbs_rdmacm_listen *l) { (void)l; }
int verbs_rdmacm_connect_start(struct verbs_ep *ep, uint16_t cm_port)
{
    (void)ep, (void)cm_port;
    return GX_EUNSUPPORTED;
}
int verbs_rdmacm_connect_step(struct verbs_ep *ep)
{
    (void)ep;
    return GX_EUNSUPPORTED;
}
void verbs_rdmacm_pump(struct verbs_domain *dom) { (void)dom; }
int verbs_rdmacm_wait_fd(const struct verbs_domain *dom) { (void)dom; return -1; }
int verbs_rdmacm_accepted(struct verbs_ep *ep)
{
    (void)ep;
    return GX_EUNSUPPORTED;
}
void verbs_rdmacm_ep_release(struct verbs_ep *ep) { (void)ep; }
