/*
 * boot.h - the bootstrap network: authenticated TCP connections between the
 * processes of a job, used for rendezvous, for the small exchanges a
 * communicator needs (split, fabric addresses) and as the fallback barrier.
 *
 * One struct gx_boot per process and job; communicators share it (reference
 * counted) and keep their messages apart by comm_id. All calls take the
 * boot's lock, so threads may share it. Every wait has a deadline.
 *
 * Failure handling: when a peer's connection breaks while we need it, or a
 * peer reports a failure, the boot enters the failed state, floods an ABORT
 * message (naming the rank that failed) so ranks waiting elsewhere learn it
 * in O(log n) hops, and every later call fails with the same status.
 *
 * Room bootstrap/ (boot_*.c): owns the job's rendezvous, its authenticated
 * side channel and the failure flood. Must not touch any other room of
 * collectives/: it sits under them all (cmake/GxRooms.cmake).
 */
#ifndef GX_BOOT_H
#define GX_BOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collectives/bootstrap/boot_proto.h"
#include "common/auth.h"
#include "common/sock.h"

struct gx_boot;

struct boot_params {
    const char *init_method; /* "env://", "tcp://h:p", "file:///path" */
    int rank;
    int world_size;
    const char *job_key;
    int init_timeout_ms;
    int listen_fd;           /* inherited master listener (gx-run), or -1 */
    const char *node_id;     /* this process's node identity */
};

/** Rendezvous: every rank learns every rank's record. */
int gx_boot_create(const struct boot_params *params, struct gx_boot **out);
void gx_boot_retain(struct gx_boot *boot);
void gx_boot_release(struct gx_boot *boot);

int gx_boot_rank(const struct gx_boot *boot);
const struct boot_rank_record *gx_boot_record(const struct gx_boot *boot, int rank);
/* Rank 0's random per-job id (all zero if this rank has not learned it). */
void gx_boot_job_id(struct gx_boot *boot, uint8_t out[8]);

/** Send/receive one message to/from a world rank. */
int gx_boot_send(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag,
                 const void *buf, size_t len, uint64_t deadline);
int gx_boot_recv(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag, void *buf,
                 size_t len, uint64_t deadline);
/** Best-effort send: a peer that is gone or does not read is not a failure
 *  of the job (no failed state, nothing logged). Without `connect`, only over
 *  a connection already open (nothing sent otherwise). */
int gx_boot_notify(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag,
                   const void *buf, size_t len, uint64_t deadline, bool connect);
/** Non-blocking receive: GX_INPROGRESS when the message has not arrived. */
int gx_boot_try_recv(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag,
                     void *buf, size_t len);
/** Non-blocking receive of a message with `tag` from whichever rank sent
 *  one first (one poll of the connections); GX_INPROGRESS when none has. */
int gx_boot_try_recv_any(struct gx_boot *boot, uint64_t comm_id, uint64_t tag, void *buf,
                         size_t len, int *peer_out);
/** Service connections for up to `wait_ms` (0 = just poll once). */
int gx_boot_progress(struct gx_boot *boot, int wait_ms);

/** The failed state: GX_OK while healthy. `msg` receives the message. */
int gx_boot_failure(struct gx_boot *boot, char *msg, size_t len);
/** The same, but never waits: GX_OK also while another thread holds the
 *  bootstrap (a gx_barrier waits for its messages with it held, up to the
 *  op deadline). For periodic watches under other locks: the transport's
 *  connection progress must not stop for a barrier's whole wait. */
int gx_boot_failure_peek(struct gx_boot *boot, char *msg, size_t len);
/** Enter the failed state (if not already) and tell the other ranks. */
void gx_boot_fail(struct gx_boot *boot, int status, int failed_rank, const char *msg);
/** Close every connection at once (abort). */
void gx_boot_shutdown(struct gx_boot *boot);

/* Recovery (boot_recover.c), for gx_comm_shrink and gx_comm_revoke. */
/** Leave the failed state and start a new epoch (older ABORTs become stale);
 *  until gx_boot_recover_end() failures met are the caller's, not the job's.
 *  `failed_rank` gets the rank the failed state named (-1: none). */
int gx_boot_recover_begin(struct gx_boot *boot, int *failed_rank);
void gx_boot_recover_end(struct gx_boot *boot);
/** True when the peer is known gone (closed its connection, or marked dead). */
bool gx_boot_peer_gone(struct gx_boot *boot, int peer);
/** Send an empty message with `tag`, quietly (no log, no failed state):
 *  GX_EPEER when the peer is gone (refused, reset, closed), GX_ETIMEOUT when
 *  it did not take the message in time (alive but busy, or stopped).
 *  A dead peer's socket may take one ping before it reports the reset. */
int gx_boot_ping(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag, int wait_ms);
/** The survivors agreed `peer` is gone: never send to it or mind its news. */
void gx_boot_mark_dead(struct gx_boot *boot, int peer);
/** From any thread: make waits inside the bootstrap return GX_EABORTED at
 *  once (on), or stop doing so (off). */
void gx_boot_interrupt(struct gx_boot *boot, bool on);

/** What this process's bootstrap holds and has sent (gx_comm_stats). */
struct boot_stats {
    int sockets;          /* listener, half-open, inbound and outbound streams */
    uint64_t msgs_sent;
    uint64_t bytes_sent;
};
void gx_boot_stats(struct gx_boot *boot, struct boot_stats *out);

/** A short description of a world rank for messages: "rank 3 (host:pid)". */
const char *gx_boot_describe(const struct gx_boot *boot, int rank, char *buf, size_t len);

#endif
