/*
 * algorithms.h - the collective algorithms: each builds the schedule of one
 * collective (op->a holds the arguments, op->comm the communicator) with
 * the builder of engine/schedule.h and nothing else.
 *
 * Owns: one file per algorithm family (ring, rd, rhd, tree/chain, dbtree,
 * bcast, linear). Must not touch: the engine that runs schedules
 * (coll_engine.h), the transport (transport/), the arena's internals.
 * The rule is checked at configure time (cmake/GxRooms.cmake).
 */
#ifndef GX_COLL_ALGORITHMS_H
#define GX_COLL_ALGORITHMS_H

#include "collectives/engine/schedule.h"

/* Algorithms: build the schedule of op (args in op->a, comm in op->comm). */
int ring_allreduce_build(struct coll_op *op);
int ring_reduce_scatter_build(struct coll_op *op);
int ring_allgather_build(struct coll_op *op);
int rd_allreduce_build(struct coll_op *op);
int rhd_allreduce_build(struct coll_op *op);
int tree_allreduce_build(struct coll_op *op);
int dbtree_allreduce_build(struct coll_op *op);
int tree_reduce_build(struct coll_op *op);
int chain_reduce_build(struct coll_op *op);
int tree_bcast_build(struct coll_op *op);
int chain_bcast_build(struct coll_op *op);
int linear_gather_build(struct coll_op *op);
int linear_scatter_build(struct coll_op *op);
int linear_alltoall_build(struct coll_op *op);

#endif
