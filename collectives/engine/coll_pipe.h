/*
 * coll_pipe.h - the host-staging pipeline for device buffers (coll_pipe.c):
 * a staged collective's input is copied from the device into its pinned
 * stand-in chunk by chunk (GX_GPU_CHUNK) just before the first step that
 * touches each chunk, one chunk ahead while messages are in flight, and
 * each chunk of the result goes back to the device as soon as the last step
 * that writes it is done, while the rest of the exchange goes on.
 *
 * Only copies are added: the messages of the schedule are the same on
 * every rank, so ranks may differ in memory type (a host rank issues the
 * same collective, unchunked). Room engine/.
 */
#ifndef GX_COLL_PIPE_H
#define GX_COLL_PIPE_H

#include <stdbool.h>
#include <stddef.h>

struct coll_op;
struct coll_step;
struct gx_stage;

/** GX_GPU_CHUNK in bytes (0: off: one copy in before, one back after). */
size_t coll_pipe_chunk(void);

/** After the schedule is built: plan the chunks of op->a.pipe's stage. */
int coll_pipe_attach(struct coll_op *op);
void coll_pipe_free(struct coll_op *op);

/** Before step `s` runs: copy in every chunk it touches not yet copied. */
int coll_pipe_before_step(struct coll_op *op, const struct coll_step *s);
/** After a pass: copy back the chunks no later step writes; one more chunk
 *  in while messages are in flight. */
int coll_pipe_after_pass(struct coll_op *op);

/** Totals of this process (tests): chunk copies, those made while a message
 *  of the op was in flight, the largest copy in bytes. */
void coll_pipe_stats(unsigned long long *copies, unsigned long long *overlapped,
                     size_t *largest);

#endif
