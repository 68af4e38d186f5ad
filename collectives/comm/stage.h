/*
 * stage.h - device buffers in host collectives: detect per call which of a
 * call's buffers are CUDA device memory (gpudirect's query, cached per
 * allocation), stand pinned host buffers in for them, copy the input in
 * before the host algorithm runs and the result back when the request
 * completes (stage.c).
 *
 * Room comm/: used by the public collective calls (api/coll_api.c) and
 * the point-to-point calls (api/p2p.c); the request runs the copy
 * back (request.c). Must not touch: the engine, the algorithms, the
 * transport: they only ever see host memory.
 */
#ifndef GX_STAGE_H
#define GX_STAGE_H

#include <stdbool.h>
#include <stddef.h>

struct gx_stage;

/** Inspect a call's buffers: `*send` (send_bytes read by this rank) and
 *  `*recv` (recv_bytes written). When either is device memory, pinned host
 *  buffers replace them (same offsets between them when they overlap, so an
 *  in-place call stays in place), the device input is copied in, and
 *  *out is the stage to finish; otherwise *out is NULL and nothing changed.
 *  Host and device buffers may be mixed (only the device side is staged).
 *  With `use_stream` the copy in is queued on `stream` (the stand-ins fill
 *  when the stream gets there) and *out is always a stage; the copy back is
 *  then queued with gx_stage_stream_out. `fn` names the call in errors. */
int gx_stage_begin(const char *fn, const void **send, size_t send_bytes, void **recv,
                   size_t recv_bytes, bool use_stream, void *stream, struct gx_stage **out);

/** branch gdr: the same, but nothing is copied: the engine copies the input
 *  in and the result back itself, in chunks (engine/coll_pipe.c), and
 *  gx_stage_finish copies nothing. */
int gx_stage_begin_deferred(const char *fn, const void **send, size_t send_bytes, void **recv,
                            size_t recv_bytes, struct gx_stage **out);

/** Where a stage's copies go: the stand-in holding the send buffer (the
 *  whole region: in-place forms read all of it) and its device original;
 *  the receive buffer's stand-in and device original (NULL/0: host). */
struct gx_stage_view {
    char *in_host;
    const char *in_dev;
    size_t in_len;
    char *out_host;
    char *out_dev;
    size_t out_len;
};
void gx_stage_get_view(const struct gx_stage *st, struct gx_stage_view *v);

/** Stream form: queue the copy back to the device receive buffer on the
 *  stream, after what the caller queued there since (gx's host step). */
int gx_stage_stream_out(struct gx_stage *st);

/** A receive that may deliver fewer bytes than posted: copy back only
 *  *received bytes (read when the stage finishes). */
void gx_stage_limit_recv(struct gx_stage *st, const size_t *received);

/** The operation finished with `status`: on GX_OK copy the result back to
 *  the device buffer (not for the stream form: queued already). Returns
 *  `status`, or the copy's error. Runs once. */
int gx_stage_finish(struct gx_stage *st, int status);

/** branch kernels: the stage's regions for reductions on the GPU. host: the
 *  pinned stand-in, dev: the device buffer it stands in for, has_send /
 *  has_recv: which of the call's buffers it holds. Returns how many (0-2). */
struct gx_stage_region_view {
    char *host, *dev;
    size_t len;
    bool has_send, has_recv;
};
int gx_stage_regions(const struct gx_stage *st, struct gx_stage_region_view out[2]);

/** Free the stage. `finished`: the operation finished, or its stand-ins are
 *  fenced by a stream (they go back to the pool, reused once the fence has
 *  passed); otherwise the transport may still hold them and they are kept
 *  out of reuse. */
void gx_stage_free(struct gx_stage *st, bool finished);

#endif
