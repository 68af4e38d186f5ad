/*
 * comm_view.h - the narrow view of a communicator for code above the
 * collectives (ddp/): whether it can run an operation and its operation
 * deadline. Everything else ddp/ needs is the public API (gx/gx.h).
 *
 * Owns nothing; implemented in comm.c. Must not grow into a second
 * comm_internal.h: a field ddp/ needs gets an accessor here.
 */
#ifndef GX_COMM_VIEW_H
#define GX_COMM_VIEW_H

struct gx_comm;

/** Check the comm can run an operation (not aborted/finalized/failed);
 *  the error names `op` and the communicator. */
int gx_comm_check_usable(struct gx_comm *c, const char *op);
/** The deadline of the comm's blocking operations, in ms (GX_TIMEOUT). */
int gx_comm_op_timeout_ms(const struct gx_comm *c);

#endif
