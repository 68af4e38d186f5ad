/*
 * fabric_mesh.h - connect one endpoint to every other rank of a group.
 *
 * Owns: turning "I am rank r of n, here is an all-gather" into n-1 established
 * endpoints. The caller (a communicator) injects its bootstrap all-gather, so
 * this layer never depends on the bootstrap. Each rank listens, the listener
 * addresses are all-gathered, rank r connects to every lower rank and accepts
 * from every higher one, driving both in one non-blocking loop until the
 * deadline; on timeout the error lists the ranks that never connected.
 */
#ifndef GX_FABRIC_FABRIC_MESH_H
#define GX_FABRIC_FABRIC_MESH_H

#include <stddef.h>

#include "fabric/fabric.h"

/** Gather `len` bytes from every rank into `all` (rank i's at i*len), the
 *  same on every rank. Returns GX_OK or a GX_E* status. */
typedef int (*gx_fab_allgather_fn)(void *ctx, const void *mine, void *all, size_t len);

struct gx_fab_mesh_attr {
    size_t size;                   /* sizeof(struct gx_fab_mesh_attr) */
    int rank;
    int nranks;
    gx_fab_allgather_fn allgather;
    void *allgather_ctx;
    int timeout_ms;                /* 0 = GX_FAB_CONNECT_TIMEOUT */
    const unsigned char *peers;    /* NULL = all; else peers[i] != 0 selects rank i
                                      (must be symmetric across ranks) */
    int (*watch)(void *ctx);       /* NULL, or called every few ms while connections
                                      are pending: a status other than GX_OK (already
                                      recorded with gx_fail) stops the mesh at once,
                                      e.g. because a peer died */
    void *watch_ctx;
};
#define GX_FAB_MESH_ATTR_INIT \
    { sizeof(struct gx_fab_mesh_attr), -1, 0, NULL, NULL, 0, NULL, NULL, NULL }

struct gx_fab_mesh;

/** Collective over the group: every rank calls it with the same nranks. The
 *  endpoints are bound to `cq`. */
int gx_fab_mesh_create(struct gx_fab_domain *dom, struct gx_fab_cq *cq,
                       const struct gx_fab_mesh_attr *attr, struct gx_fab_mesh **out);
/** The endpoint to `peer`, or NULL for self, an unselected or invalid rank. */
struct gx_fab_ep *gx_fab_mesh_ep(const struct gx_fab_mesh *mesh, int peer);
/** Close every endpoint (their outstanding ops are flushed into the cq). */
void gx_fab_mesh_destroy(struct gx_fab_mesh *mesh);

#endif
