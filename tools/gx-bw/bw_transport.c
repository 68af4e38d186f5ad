/* bw_transport.c - see bw_transport.h. */
#include "bw_transport.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/sock.h"

int bw_transport_open(struct bw_transport *t, const char *provider, const char *device, int rank,
                      size_t len, int server, const char *job_key)
{
    memset(t, 0, sizeof(*t));
    const struct gx_fab_provider *prov = gx_fab_provider_find(provider);
    if (!prov)
        return GX_EUNSUPPORTED;
    struct gx_fab_domain_attr attr = GX_FAB_DOMAIN_ATTR_INIT;
    attr.job_key = job_key;
    attr.rank = rank;
    attr.device = device && *device ? device : NULL;
    int rc = gx_fab_domain_open(prov, &attr, &t->dom);
    if (rc != GX_OK)
        return rc;
    if ((rc = gx_fab_cq_open(t->dom, &t->cq)) != GX_OK)
        return rc;
    t->buf_len = len ? len : 1;
    /* Page-aligned and touched, so page faults stay out of the timing. */
    if (posix_memalign((void **)&t->sbuf, 4096, t->buf_len) ||
        posix_memalign((void **)&t->rbuf, 4096, t->buf_len))
        return GX_ENOMEM;
    memset(t->sbuf, 0x5a, t->buf_len);
    memset(t->rbuf, 0, t->buf_len);
    if ((rc = gx_fab_mr_reg(t->dom, t->sbuf, t->buf_len, GX_FAB_MEM_HOST, GX_FAB_ACCESS_LOCAL,
                            &t->smr)) != GX_OK)
        return rc;
    if ((rc = gx_fab_mr_reg(t->dom, t->rbuf, t->buf_len, GX_FAB_MEM_HOST,
                            GX_FAB_ACCESS_LOCAL | GX_FAB_ACCESS_REMOTE_WRITE, &t->rmr)) != GX_OK)
        return rc;
    if ((rc = gx_fab_mr_pack_rkey(t->rmr, &t->mine.rkey)) != GX_OK)
        return rc;
    t->mine.base = (uint64_t)(uintptr_t)t->rbuf;
    if (server && (rc = gx_fab_listen(t->dom, t->cq, &t->lst, &t->mine.addr)) != GX_OK)
        return rc;
    return GX_OK;
}

int bw_transport_connect(struct bw_transport *t, const struct bw_card *peer, int server,
                         int timeout_ms)
{
    t->peer = *peer;
    uint64_t deadline = gx_deadline_after_ms(timeout_ms);
    int rc;
    if (server) {
        while ((rc = gx_fab_accept(t->lst, &t->ep)) == GX_INPROGRESS)
            if (gx_now_ns() > deadline)
                return gx_fail(GX_ETIMEOUT, GX_SUB_TOOL, "gx-bw: no fabric connection from the "
                               "client within %d ms", timeout_ms);
        return rc;
    }
    struct gx_fab_conn_param p = GX_FAB_CONN_PARAM_INIT;
    p.peer_rank = 0;
    p.timeout_ms = timeout_ms;
    if ((rc = gx_fab_connect(t->dom, t->cq, &peer->addr, &p, &t->ep)) != GX_OK)
        return rc;
    while ((rc = gx_fab_ep_establish(t->ep)) == GX_INPROGRESS)
        ;
    return rc;
}

void bw_transport_close(struct bw_transport *t)
{
    gx_fab_ep_close(t->ep);
    gx_fab_listener_close(t->lst);
    if (t->smr)
        gx_fab_mr_dereg(t->smr);
    if (t->rmr)
        gx_fab_mr_dereg(t->rmr);
    gx_fab_cq_close(t->cq);
    gx_fab_domain_close(t->dom);
    free(t->sbuf);
    free(t->rbuf);
    memset(t, 0, sizeof(*t));
}

/* The default provider: verbs when it is built and finds an active device. */
const char *bw_default_provider(void)
{
    const struct gx_fab_provider *prov;
    for (size_t i = 0; (prov = gx_fab_provider_at(i)) != NULL; i++) {
        struct gx_fab_devinfo dev[4];
        int n = 0;
        if (strcmp(prov->name, "verbs") != 0 || gx_fab_probe(prov, dev, 4, &n) != GX_OK)
            continue;
        for (int k = 0; k < n && k < 4; k++)
            if (dev[k].link_bps > 0) /* probe lists inactive ports too, at 0 */
                return "verbs";
    }
    return "tcp";
}

/* One attempt, as perftest makes: a client with no server fails at once. */
int bw_connect_once(const char *host, long long port, int *fd_out)
{
    char service[16];
    snprintf(service, sizeof(service), "%lld", port);
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
    int gai = getaddrinfo(host, service, &hints, &res);
    if (gai != 0) {
        fprintf(stderr, "gx-bw: Couldn't connect to %s:%lld: %s\n", host, port, gai_strerror(gai));
        return -1;
    }
    int err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        struct timeval tv = { .tv_sec = 10 };
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            freeaddrinfo(res);
            gx_sock_set_nodelay(fd);
            *fd_out = fd;
            return 0;
        }
        err = errno;
        close(fd);
    }
    freeaddrinfo(res);
    fprintf(stderr, "gx-bw: Couldn't connect to %s:%lld: %s (is \"gx-bw -p %lld\" running there "
            "as the server?)\n", host, port, strerror(err), port);
    return -1;
}

