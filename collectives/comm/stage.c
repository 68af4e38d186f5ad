/*
 * stage.c - staging device buffers through pinned host memory for the host
 * algorithms (stage.h). One region per distinct device buffer of a call; a
 * send and a receive buffer that overlap (the in-place forms) share one
 * region, so pointer equality and offsets between them survive.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/stage.h"
#include "common/log.h"
#include "gpudirect/gpudirect.h"
#include "gx/gx.h"

struct stage_region {
    char *dev;          /* device address of the region's start */
    char *host;         /* pinned stand-in */
    size_t len, cap;
    void *fence;        /* stream form: the copy back is queued until this passes */
    bool has_send;      /* holds the send buffer: copied in */
};

struct gx_stage {
    const char *fn;
    struct stage_region r[2];
    int nregions;
    char *recv_dev;     /* the caller's device receive buffer (NULL: host) */
    char *recv_host;    /* its stand-in */
    size_t recv_bytes;
    const size_t *received;
    bool use_stream, finished;
    bool deferred;      /* branch gdr: the engine copies in and back in chunks */
    void *stream;
};

static int query(const char *fn, const char *what, const void *p, size_t bytes, bool *dev)
{
    *dev = false;
    if (!p || !bytes)
        return GX_OK;
    struct gx_gpu_ptr g;
    int rc = gx_gpu_ptr_query(p, &g);
    if (rc != GX_OK)
        return gx_fail(rc, GX_SUB_GPU, "%s: cannot tell whether %s %p is device memory: %s", fn,
                       what, p, gx_last_error());
    if (g.type == GX_GPU_MEM_CUDA && (uintptr_t)p + bytes > g.base + g.size)
        return gx_fail(GX_EINVAL, GX_SUB_GPU, "%s: %s %p + %zu bytes runs past the end of its "
                       "device allocation (%#lx + %zu bytes)", fn, what, p, bytes,
                       (unsigned long)g.base, g.size);
    *dev = g.type == GX_GPU_MEM_CUDA;
    return GX_OK;
}

static char *translate(struct gx_stage *st, const void *p)
{
    for (int i = 0; i < st->nregions; i++) {
        struct stage_region *r = &st->r[i];
        if ((const char *)p >= r->dev && (const char *)p < r->dev + r->len)
            return r->host + ((const char *)p - r->dev);
    }
    return NULL;
}

static void release(struct gx_stage *st, bool reuse)
{
    for (int i = 0; i < st->nregions; i++) {
        if (reuse)
            gx_gpu_pinned_put_after(st->r[i].host, st->r[i].cap, st->r[i].fence);
        /* else: leaked on purpose, the transport may still write into it */
    }
    free(st);
}

static int begin(const char *fn, const void **send, size_t send_bytes, void **recv,
                 size_t recv_bytes, bool use_stream, void *stream, bool defer,
                 struct gx_stage **out);

int gx_stage_begin(const char *fn, const void **send, size_t send_bytes, void **recv,
                   size_t recv_bytes, bool use_stream, void *stream, struct gx_stage **out)
{
    return begin(fn, send, send_bytes, recv, recv_bytes, use_stream, stream, false, out);
}

int gx_stage_begin_deferred(const char *fn, const void **send, size_t send_bytes, void **recv,
                            size_t recv_bytes, struct gx_stage **out)
{
    return begin(fn, send, send_bytes, recv, recv_bytes, false, NULL, true, out);
}

void gx_stage_get_view(const struct gx_stage *st, struct gx_stage_view *v)
{
    memset(v, 0, sizeof(*v));
    for (int i = 0; i < st->nregions; i++) {
        const struct stage_region *g = &st->r[i];
        if (g->has_send) {
            v->in_host = g->host;
            v->in_dev = g->dev;
            v->in_len = g->len;
        }
    }
    v->out_host = st->recv_host;
    v->out_dev = st->recv_dev;
    v->out_len = st->recv_dev ? st->recv_bytes : 0;
}

static int begin(const char *fn, const void **send, size_t send_bytes, void **recv,
                 size_t recv_bytes, bool use_stream, void *stream, bool defer,
                 struct gx_stage **out)
{
    *out = NULL;
    bool sdev = false, rdev = false;
    const char *s = *send;
    char *r = *recv;
    int rc = query(fn, "sendbuf", s, send_bytes, &sdev);
    if (rc == GX_OK)
        rc = query(fn, "recvbuf", r, recv_bytes, &rdev);
    if (rc != GX_OK)
        return rc;
    if (!sdev && !rdev && !use_stream)
        return GX_OK; /* host memory: the common path allocates nothing */
    struct gx_stage *st = calloc(1, sizeof(*st));
    if (!st)
        return gx_fail(GX_ENOMEM, GX_SUB_GPU, "%s: out of memory", fn);
    st->fn = fn;
    st->deferred = defer;
    st->use_stream = use_stream;
    st->stream = stream;
    /* Regions: the send side, the receive side, merged when they overlap. */
    char *lo[2], *hi[2];
    int n = 0;
    if (sdev) {
        lo[n] = (char *)s;
        hi[n++] = (char *)s + send_bytes;
    }
    if (rdev) {
        if (n && r < hi[0] && lo[0] < r + recv_bytes) {
            lo[0] = r < lo[0] ? r : lo[0];
            hi[0] = r + recv_bytes > hi[0] ? r + recv_bytes : hi[0];
        } else {
            lo[n] = r;
            hi[n++] = r + recv_bytes;
        }
    }
    for (int i = 0; i < n; i++) {
        struct stage_region *g = &st->r[i];
        g->dev = lo[i];
        g->len = (size_t)(hi[i] - lo[i]);
        g->host = gx_gpu_pinned_get(g->len, g->dev, &g->cap);
        if (!g->host) {
            rc = gx_fail(GX_ENOMEM, GX_SUB_GPU, "%s: no pinned staging memory for %zu bytes "
                         "of device memory at %p: %s", fn, g->len, (void *)g->dev,
                         gx_last_error());
            break;
        }
        st->nregions++;
    }
    /* Copy in what the host algorithm reads: a region holding the send
     * buffer (all of it when merged: the in-place forms read the receive
     * buffer's other blocks too). A pure receive region is written only. */
    for (int i = 0; rc == GX_OK && i < st->nregions; i++) {
        struct stage_region *g = &st->r[i];
        bool has_send = sdev && s >= g->dev && s < g->dev + g->len;
        g->has_send = has_send;
        if (has_send && !defer)
            rc = use_stream ? gx_gpu_stream_copy_dtoh(stream, g->host, g->dev, g->len)
                            : gx_gpu_copy_dtoh(g->host, g->dev, g->len);
    }
    if (rc != GX_OK) {
        release(st, true);
        return rc;
    }
    if (rdev) {
        st->recv_dev = r;
        st->recv_host = translate(st, r);
        st->recv_bytes = recv_bytes;
    }
    /* Every pointer that lies in a region moves with it (also one this rank
     * does not use, so in-place tests in the engine still hold). */
    char *ts = s ? translate(st, s) : NULL;
    char *tr = r ? translate(st, r) : NULL;
    if (ts)
        *send = ts;
    if (tr)
        *recv = tr;
    *out = st;
    return GX_OK;
}

void gx_stage_limit_recv(struct gx_stage *st, const size_t *received)
{
    st->received = received;
}

int gx_stage_finish(struct gx_stage *st, int status)
{
    if (st->finished)
        return status;
    st->finished = true;
    if (status != GX_OK || !st->recv_dev || st->use_stream || st->deferred)
        return status; /* the stream form queued its copy back at the call; the
                          engine copied a deferred one back chunk by chunk */
    size_t bytes = st->received && *st->received < st->recv_bytes ? *st->received
                                                                    : st->recv_bytes;
    return bytes ? gx_gpu_copy_htod(st->recv_dev, st->recv_host, bytes) : GX_OK;
}

int gx_stage_stream_out(struct gx_stage *st)
{
    /* The copy back into the device receive buffer fences its region; every
     * other region (a send stand-in the stream's queued copy fills and the
     * exchange reads) gets an event after it all, so no call reuses a
     * stand-in before this stream is past it. */
    int rc = GX_OK;
    for (int i = 0; i < st->nregions; i++) {
        struct stage_region *g = &st->r[i];
        bool has_recv = st->recv_dev && st->recv_bytes && st->recv_dev >= g->dev &&
                        st->recv_dev < g->dev + g->len;
        int r = has_recv ? gx_gpu_stream_copy_htod(st->stream, st->recv_dev, st->recv_host,
                                                   st->recv_bytes, &g->fence)
                         : gx_gpu_stream_fence(st->stream, g->dev, &g->fence);
        if (r != GX_OK && rc == GX_OK)
            rc = r;
    }
    if (rc != GX_OK) /* a stand-in without its fence: let the stream finish with it */
        (void)gx_gpu_stream_wait(st->stream, st->nregions ? st->r[0].dev : NULL);
    return rc;
}

void gx_stage_free(struct gx_stage *st, bool finished)
{
    if (st)
        release(st, finished);
}

int gx_stage_regions(const struct gx_stage *st, struct gx_stage_region_view out[2])
{
    int n = 0;
    for (int i = 0; st && i < st->nregions; i++) {
        const struct stage_region *g = &st->r[i];
        out[n] = (struct gx_stage_region_view){ g->host, g->dev, g->len, false, false };
        out[n].has_recv = st->recv_dev && st->recv_dev >= g->dev && st->recv_dev < g->dev + g->len;
        out[n].has_send = g->has_send;
        n++;
    }
    return n;
}
