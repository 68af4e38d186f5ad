/*
 * api.h - what the files of the api room share (not installed): building a
 * communicator from another (split, shrink) and the link probe every
 * communicator runs at set-up.
 *
 * Room api/: the public entry points (gx_comm_*, the collectives, the
 * point-to-point calls, gx_barrier) and the orchestration of a
 * communicator's life: init builds the transport, the arena and the probe,
 * finalize and destroy take them down in order, abort and shrink reach
 * every room. It may call every room of collectives/ but ddp/; nothing
 * below calls it (cmake/GxRooms.cmake checks includes and calls).
 */
#ifndef GX_API_INTERNAL_H
#define GX_API_INTERNAL_H

#include <stdint.h>

struct gx_comm;

/** A communicator of `n` of `comm`'s ranks (`members`, ascending by new
 *  rank; this rank is members[new_rank]) with its own transport and arena;
 *  collective over the members (split, shrink). Does not note failures.
 *  (comm_init.c) */
int gx_comm_derive(struct gx_comm *comm, const int *members, int n, int new_rank,
                   uint64_t comm_id, const char *suffix, struct gx_comm **out);

/** Probe the network link between nodes for the cost model (coll_probe.c);
 *  collective: every rank of the communicator calls it at set-up. */
int gx_coll_probe(struct gx_comm *c);

#endif
