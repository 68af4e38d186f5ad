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

/* observe.c: the counters, the trace's start, the live communicators. */
struct gx_comm_stats;
/** A communicator is set up (init, split, shrink): start the trace (world
 *  communicator, GX_TRACE; collective: measures clock offsets) and list it
 *  for the metrics file. */
void gx_observe_comm_up(struct gx_comm *c);
/** It is being destroyed: its last figures to the metrics file, then off
 *  the list (the writer stops with the last one). */
void gx_observe_comm_down(struct gx_comm *c);
/** All of gx_comm_stats for `c`. */
void gx_observe_fill(struct gx_comm *c, struct gx_comm_stats *s);
/** The live communicators, under gx_observe_lock(). */
void gx_observe_lock(void);
void gx_observe_unlock(void);
int gx_observe_live(struct gx_comm ***comms);

/* metrics.c: GX_METRICS_FILE. */
/** A communicator came up: start the writer if GX_METRICS_FILE is set. */
void gx_metrics_comm_up(int world_rank, int world_size);
/** Write the file now (when a communicator goes). */
void gx_metrics_write_now(void);
/** Stop the writer (the last communicator went). */
void gx_metrics_stop(void);

#endif
