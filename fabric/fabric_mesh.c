/*
 * fabric_mesh.c - all-to-all endpoint set-up over an injected all-gather
 * (see fabric_mesh.h).
 */
#include "fabric/fabric_mesh.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"

/* How often a pending mesh asks its watcher whether a peer has died. */
#define MESH_WATCH_NS 5000000ull

struct gx_fab_mesh {
    int rank;
    int nranks;
    struct gx_fab_ep **eps;
};

/* What each rank publishes: its provider's name, so a rank that picked
 * another provider is named instead of failing obscurely, and its address. */
struct mesh_card {
    char prov[16];
    struct gx_fab_addr addr;
};

static bool selected(const struct gx_fab_mesh_attr *a, int peer)
{
    return peer != a->rank && (!a->peers || a->peers[peer]);
}

int gx_fab_mesh_create(struct gx_fab_domain *dom, struct gx_fab_cq *cq,
                       const struct gx_fab_mesh_attr *attr, struct gx_fab_mesh **out)
{
    if (!dom || !cq || !attr || !out || !attr->allgather || attr->nranks < 1 || attr->rank < 0 ||
        attr->rank >= attr->nranks)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "mesh: invalid arguments (rank %d of %d)",
                       attr ? attr->rank : -1, attr ? attr->nranks : 0);
    if (dom->rank < 0)
        dom->rank = attr->rank;
    else if (dom->rank != attr->rank)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "mesh: domain opened for rank %d, mesh for %d",
                       dom->rank, attr->rank);
    int n = attr->nranks, me = attr->rank;
    struct gx_fab_mesh *m = calloc(1, sizeof(*m));
    struct mesh_card *cards = calloc((size_t)n, sizeof(*cards));
    if (!m || !cards || !(m->eps = calloc((size_t)n, sizeof(*m->eps)))) {
        free(m);
        free(cards);
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "mesh: out of memory for %d ranks", n);
    }
    m->rank = me;
    m->nranks = n;
    struct gx_fab_listener *lst = NULL;
    struct mesh_card mine;
    memset(&mine, 0, sizeof(mine));
    snprintf(mine.prov, sizeof(mine.prov), "%s", dom->prov->name);
    int rc = gx_fab_listen(dom, cq, &lst, &mine.addr);
    if (rc != GX_OK)
        goto err_free;
    rc = attr->allgather(attr->allgather_ctx, &mine, cards, sizeof(mine));
    if (rc != GX_OK) {
        gx_fail(rc, GX_SUB_FABRIC, "mesh: all-gather of endpoint addresses failed: %s",
                gx_strerror(rc));
        goto err_close;
    }
    for (int i = 0; i < n; i++) {
        if (selected(attr, i) && strncmp(cards[i].prov, mine.prov, sizeof(mine.prov)) != 0) {
            rc = gx_fail(GX_EMISMATCH, GX_SUB_FABRIC, "mesh: rank %d uses fabric provider "
                         "'%.16s', this rank (%d) uses '%s'", i, cards[i].prov, me, mine.prov);
            goto err_close;
        }
    }
    int timeout = attr->timeout_ms > 0 ? attr->timeout_ms : gx_fab_connect_timeout_ms();
    uint64_t deadline = gx_deadline_after_ms(timeout);
    int pending = 0;
    for (int i = 0; i < n; i++) {
        if (!selected(attr, i))
            continue;
        pending++;
        if (i > me)
            continue; /* they connect to us */
        struct gx_fab_conn_param p = GX_FAB_CONN_PARAM_INIT;
        p.peer_rank = i;
        p.timeout_ms = timeout;
        rc = gx_fab_connect(dom, cq, &cards[i].addr, &p, &m->eps[i]);
        if (rc != GX_OK)
            goto err_close;
    }
    unsigned char *up = calloc((size_t)n, 1);
    if (!up) {
        rc = gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "mesh: out of memory");
        goto err_close;
    }
    long idle = 0;
    uint64_t next_watch = 0;
    while (pending > 0) {
        bool moved = false;
        for (int i = 0; i < me; i++) {
            if (!m->eps[i] || up[i])
                continue;
            rc = gx_fab_ep_establish(m->eps[i]);
            if (rc == GX_OK) {
                up[i] = 1;
                pending--;
                moved = true;
            } else if (rc != GX_INPROGRESS) {
                free(up);
                goto err_close;
            }
        }
        struct gx_fab_ep *ep = NULL;
        rc = gx_fab_accept(lst, &ep);
        if (rc == GX_OK) {
            int r = ep->peer_rank;
            if (r <= me || r >= n || !selected(attr, r) || m->eps[r]) {
                GX_WARN(GX_SUB_FABRIC, "mesh: rank %d: dropped an unexpected connection from "
                        "rank %d", me, r);
                gx_fab_ep_close(ep);
            } else {
                m->eps[r] = ep;
                up[r] = 1;
                pending--;
                moved = true;
            }
        } else if (rc != GX_INPROGRESS) {
            free(up);
            goto err_close;
        }
        if (pending == 0)
            break;
        if (attr->watch && gx_now_ns() >= next_watch) {
            next_watch = gx_now_ns() + MESH_WATCH_NS;
            rc = attr->watch(attr->watch_ctx);
            if (rc != GX_OK) {
                free(up);
                goto err_close;
            }
        }
        if (gx_now_ns() > deadline) {
            char missing[256] = "";
            size_t off = 0;
            for (int i = 0; i < n && off < sizeof(missing) - 16; i++)
                if (selected(attr, i) && !up[i])
                    off += (size_t)snprintf(missing + off, sizeof(missing) - off, "%s%d",
                                            off ? "," : "", i);
            free(up);
            rc = gx_fail(GX_ETIMEOUT, GX_SUB_FABRIC, "mesh: rank %d: no %s connection with "
                         "rank(s) %s within %d ms", me, mine.prov, missing, timeout);
            goto err_close;
        }
        if (!moved && ++idle > 100) {
            struct timespec ts = { 0, 200000 };
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
    free(up);
    gx_fab_listener_close(lst);
    free(cards);
    GX_INFO(GX_SUB_FABRIC, "mesh: rank %d connected to its %d peers over %s", me,
            attr->peers ? -1 : n - 1, mine.prov);
    *out = m;
    return GX_OK;

err_close:
    gx_fab_listener_close(lst);
err_free:
    for (int i = 0; i < n; i++)
        gx_fab_ep_close(m->eps[i]);
    free(m->eps);
    free(m);
    free(cards);
    return rc;
}

struct gx_fab_ep *gx_fab_mesh_ep(const struct gx_fab_mesh *m, int peer)
{
    if (!m || peer < 0 || peer >= m->nranks)
        return NULL;
    return m->eps[peer];
}

void gx_fab_mesh_destroy(struct gx_fab_mesh *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->nranks; i++)
        gx_fab_ep_close(m->eps[i]);
    free(m->eps);
    free(m);
}
