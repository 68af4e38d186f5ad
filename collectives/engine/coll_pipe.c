/*
 * coll_pipe.c - chunked copies of a staged collective (coll_pipe.h).
 *
 * Input side: the stand-in region holding the send buffer is copied in in
 * chunk order; a step whose bytes (read or written: an in-place receive
 * must not be overwritten by a late copy) reach chunk c waits until chunks
 * 0..c are in, copied then on the spot. After every pass one more chunk is
 * copied while a message is in flight, so the copy overlaps the network.
 * Output side: for each chunk of the receive stand-in, the last step that
 * writes it (found once, when the op is issued); when every step up to it
 * is done (op->first is past it), the chunk is copied back, possibly while
 * later steps (other chunks) are still exchanging. A chunk no step writes is
 * not copied back. Copies are synchronous driver copies on the thread
 * driving the engine (each at most GX_GPU_CHUNK bytes).
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/stage.h"
#include "collectives/engine/coll_engine.h"
#include "collectives/engine/coll_pipe.h"
#include "collectives/schedule/schedule.h"
#include "collectives/transport/xport.h"
#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_gpu_chunk, "GX_GPU_CHUNK", GX_PARAM_SIZE, "1M", NULL,
                "Device buffers staged through pinned host memory (not GPUDirect) are copied "
                "in and back in chunks of this many bytes, overlapped with the exchange; 0 "
                "copies the whole buffer before and after.");

struct coll_pipe {
    size_t chunk;
    char *in_host;
    const char *in_dev;
    size_t in_len;
    int in_chunks, in_done;     /* chunks [0, in_done) copied in */
    char *out_host;
    char *out_dev;
    size_t out_len;
    int out_chunks, out_next;   /* chunks before out_next are settled */
    int *last_writer;           /* per out chunk: step index, -1 none */
    bool *out_copied;
};

static unsigned long long stat_copies, stat_overlapped;
static size_t stat_largest;

size_t coll_pipe_chunk(void)
{
    size_t v = 0;
    if (gx_param_size(&gx_param_gpu_chunk, &v) != GX_OK)
        return 0;
    return v;
}

void coll_pipe_stats(unsigned long long *copies, unsigned long long *overlapped,
                     size_t *largest)
{
    *copies = __atomic_load_n(&stat_copies, __ATOMIC_RELAXED);
    *overlapped = __atomic_load_n(&stat_overlapped, __ATOMIC_RELAXED);
    *largest = __atomic_load_n(&stat_largest, __ATOMIC_RELAXED);
}

/* Bytes [lo, hi) a step touches through pointer p (0 when p is NULL). */
static size_t step_bytes(const struct coll_op *op, const struct coll_step *s)
{
    switch (s->kind) {
    case CS_SEND:
    case CS_RECV:
    case CS_COPY:
        return s->len;
    case CS_REDUCE:
    case CS_REDUCE3:
    case CS_AVG:
        return s->len * op->a.es;
    default:
        return 0; /* flags, joins */
    }
}

/* Chunk range [c0, c1] of region [base, base+len) hit by [p, p+n); false if none. */
static bool hits(const char *base, size_t len, size_t chunk, const void *p, size_t n, int *c0,
                 int *c1)
{
    if (!p || !n || !base || (const char *)p + n <= base || (const char *)p >= base + len)
        return false;
    size_t lo = (const char *)p > base ? (size_t)((const char *)p - base) : 0;
    size_t hi = (size_t)((const char *)p + n - base);
    if (hi > len)
        hi = len;
    *c0 = (int)(lo / chunk);
    *c1 = (int)((hi - 1) / chunk);
    return true;
}

static bool in_flight(const struct coll_op *op)
{
    int end = op->first + STEP_WINDOW < op->nsteps ? op->first + STEP_WINDOW : op->nsteps;
    for (int i = op->first; i < end; i++)
        if (op->steps[i].state == STEP_POSTED &&
            !__atomic_load_n(&coll_step_xop(op, i)->done, __ATOMIC_ACQUIRE))
            return true;
    return false;
}

static int copy(struct coll_op *op, void *dst, bool dst_dev, const void *src, bool src_dev,
                size_t n)
{
    int rc = gx_xport_mem_copy(dst, dst_dev, src, src_dev, n);
    if (rc != GX_OK)
        return rc;
    __atomic_fetch_add(&stat_copies, 1, __ATOMIC_RELAXED);
    if (in_flight(op))
        __atomic_fetch_add(&stat_overlapped, 1, __ATOMIC_RELAXED);
    size_t cur = __atomic_load_n(&stat_largest, __ATOMIC_RELAXED);
    while (n > cur && !__atomic_compare_exchange_n(&stat_largest, &cur, n, false,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return GX_OK;
}

int coll_pipe_attach(struct coll_op *op)
{
    struct gx_stage_view v;
    gx_stage_get_view(op->a.pipe, &v);
    struct coll_pipe *p = calloc(1, sizeof(*p));
    if (!p)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "out of memory planning the staging copies");
    size_t chunk = coll_pipe_chunk();
    size_t most = v.in_len > v.out_len ? v.in_len : v.out_len;
    p->chunk = chunk ? chunk : (most ? most : 1);
    p->in_host = v.in_host;
    p->in_dev = v.in_dev;
    p->in_len = v.in_host ? v.in_len : 0;
    p->in_chunks = (int)((p->in_len + p->chunk - 1) / p->chunk);
    p->out_host = v.out_host;
    p->out_dev = v.out_dev;
    p->out_len = v.out_host ? v.out_len : 0;
    p->out_chunks = (int)((p->out_len + p->chunk - 1) / p->chunk);
    if (p->out_chunks) {
        p->last_writer = malloc(sizeof(int) * (size_t)p->out_chunks);
        p->out_copied = calloc((size_t)p->out_chunks, sizeof(bool));
        if (!p->last_writer || !p->out_copied) {
            free(p->last_writer);
            free(p->out_copied);
            free(p);
            return gx_fail(GX_ENOMEM, GX_SUB_COLL, "out of memory planning the staging copies");
        }
        for (int c = 0; c < p->out_chunks; c++)
            p->last_writer[c] = -1;
        for (int i = 0; i < op->nsteps; i++) {
            const struct coll_step *s = &op->steps[i];
            int c0, c1;
            if (s->kind == CS_SEND || !hits(p->out_host, p->out_len, p->chunk, s->dst,
                                            step_bytes(op, s), &c0, &c1))
                continue;
            for (int c = c0; c <= c1; c++)
                p->last_writer[c] = i;
        }
    }
    op->pipe = p;
    return GX_OK;
}

void coll_pipe_free(struct coll_op *op)
{
    struct coll_pipe *p = op->pipe;
    if (!p)
        return;
    free(p->last_writer);
    free(p->out_copied);
    free(p);
    op->pipe = NULL;
}

static int copy_in_upto(struct coll_op *op, int c)
{
    struct coll_pipe *p = op->pipe;
    while (p->in_done <= c && p->in_done < p->in_chunks) {
        size_t off = (size_t)p->in_done * p->chunk;
        size_t n = p->in_len - off < p->chunk ? p->in_len - off : p->chunk;
        int rc = copy(op, p->in_host + off, false, p->in_dev + off, true, n);
        if (rc != GX_OK)
            return rc;
        p->in_done++;
    }
    return GX_OK;
}

int coll_pipe_before_step(struct coll_op *op, const struct coll_step *s)
{
    struct coll_pipe *p = op->pipe;
    if (!p || p->in_done == p->in_chunks)
        return GX_OK;
    size_t n = step_bytes(op, s);
    const void *ptrs[3] = { s->dst, s->src, s->src2 };
    int need = -1;
    for (int k = 0; k < 3; k++) {
        int c0, c1;
        if (hits(p->in_host, p->in_len, p->chunk, ptrs[k], n, &c0, &c1) && c1 > need)
            need = c1;
    }
    return need >= 0 ? copy_in_upto(op, need) : GX_OK;
}

int coll_pipe_after_pass(struct coll_op *op)
{
    struct coll_pipe *p = op->pipe;
    if (!p)
        return GX_OK;
    for (int c = p->out_next; c < p->out_chunks; c++) {
        if (p->out_copied[c])
            continue;
        if (p->last_writer[c] >= op->first)
            continue; /* a step that writes it is not done yet */
        if (p->last_writer[c] >= 0) {
            size_t off = (size_t)c * p->chunk;
            size_t n = p->out_len - off < p->chunk ? p->out_len - off : p->chunk;
            int rc = copy(op, p->out_dev + off, true, p->out_host + off, false, n);
            if (rc != GX_OK)
                return rc;
        }
        p->out_copied[c] = true;
    }
    while (p->out_next < p->out_chunks && p->out_copied[p->out_next])
        p->out_next++;
    /* prefetch: the next input chunk while messages fly */
    if (p->in_done < p->in_chunks && op->first < op->nsteps && in_flight(op))
        return copy_in_upto(op, p->in_done);
    return GX_OK;
}
