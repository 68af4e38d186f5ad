/*
 * gdr.h - GPUDirect RDMA for a collective's device buffers (gdr.c): decide
 * per call whether this rank hands its device buffers to the fabric as they
 * are (no staging), and where they lie, so the engine knows which of its
 * steps touch device memory.
 *
 * Room api/: called by the public collective calls (coll_api.c) and the
 * point-to-point calls (p2p.c) before staging. A local decision: every
 * rank runs the same schedule, so ranks may differ (one GDR, one staged,
 * one host).
 */
#ifndef GX_GDR_PLAN_H
#define GX_GDR_PLAN_H

#include <stdbool.h>
#include <stddef.h>

struct gx_comm;

/** The device ranges the transport takes directly ([lo, hi), NULL: none). */
struct gx_gdr_plan {
    const char *lo[2], *hi[2];
};

/** GX_GDR=off|auto|on. `data_only`: the collective only moves data
 *  (broadcast, all-gather, gather, scatter, all-to-all); the others reduce
 *  on the CPU and always stage. On GX_OK *out says what goes direct
 *  (nothing: stage as before). GX_GDR=on with a device buffer that the
 *  fabric cannot take fails (GX_EUNSUPPORTED naming why); auto logs why
 *  once and stages. */
int gx_gdr_plan(struct gx_comm *comm, const char *fn, bool data_only, const void *send,
                size_t send_bytes, const void *recv, size_t recv_bytes,
                struct gx_gdr_plan *out);

#endif
