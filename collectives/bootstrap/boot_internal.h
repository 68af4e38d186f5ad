/* boot_internal.h - struct gx_boot, shared by boot_net.c and boot_rendezvous.c
 * only. Everything else uses boot.h. */
#ifndef GX_BOOT_INTERNAL_H
#define GX_BOOT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "collectives/bootstrap/boot.h"

struct boot_msg {
    struct boot_msg *next;
    uint64_t comm_id;
    uint64_t tag;
    uint32_t len;
    uint8_t data[];
};

/* Incoming stream from one peer: partial-read state and queued messages. */
struct boot_in {
    int fd;
    bool closed;          /* EOF or error seen */
    bool garbled;         /* closed because it sent something malformed */
    struct boot_msg_header hdr;
    size_t hdr_got;
    struct boot_msg *cur; /* message whose payload is being read */
    size_t data_got;
    struct boot_msg *head, *tail;
};

struct boot_pending {
    struct boot_pending *next;
    struct gx_auth_server auth;
    struct gx_sockaddr addr;
    uint64_t started_ns;
};

struct gx_boot {
    pthread_mutex_t lock;
    atomic_int refcount;
    int rank;
    int size;
    struct gx_auth_key key;
    int listen_fd;
    struct gx_sockaddr listen_addr;
    struct boot_rank_record *records; /* addr_len == 0: not known yet */
    int *out_fd;
    bool *out_eof;    /* out_fd[r] was closed by the acceptor: no longer polled */
    struct boot_in *in;
    struct boot_pending *pending;
    int fail_status;
    int failed_rank;
    int fail_origin;  /* the rank that first detected it (this rank, or an ABORT's origin) */
    char fail_msg[512];
    bool abort_to_forward;
    bool sending_abort;
    bool shut;
    int rdv_fd;       /* rank 0: the file:// rendezvous file, removed at the end */
    char *rdv_path;
    /* Recovery (boot_recover.c): ranks the survivors agreed are gone, the
     * recovery epoch (ABORTs of an older epoch are stale), whether a shrink
     * is running (failures it meets are its own business, not the job's),
     * and a request from another thread to stop waiting (abort, revoke). */
    bool *dead;
    uint64_t msgs_sent, bytes_sent; /* gx_boot_stats */
    uint64_t next_death_check_ns;   /* boot_check_peer_death */
    bool tell_host;                 /* forward_abort: also to this host's ranks */
    uint32_t epoch;
    bool recovering;
    atomic_bool interrupted;
};

/* Allocate the per-rank arrays and the lock (rendezvous fills the rest). */
int boot_alloc(int rank, int size, const char *job_key, struct gx_boot **out);
void boot_free(struct gx_boot *boot);
/* Rank 0 removes the file:// rendezvous file (boot_rendezvous.c). */
void boot_rendezvous_cleanup(struct gx_boot *boot);
/* Internal versions of the public calls, lock held. */
int boot_send_locked(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag,
                     const void *buf, size_t len, uint64_t deadline);
int boot_recv_locked(struct gx_boot *boot, int peer, uint64_t comm_id, uint64_t tag, void *buf,
                     size_t len, uint64_t deadline);
/* Send without failing the boot or logging when the peer is unreachable. */
int boot_send_quiet_locked(struct gx_boot *b, int peer, uint64_t comm_id, uint64_t tag,
                           const void *buf, size_t len, uint64_t deadline);
int boot_progress_locked(struct gx_boot *boot, int wait_ms, int extra_fd, short extra_events);
/* While waiting for `peer`: when it runs on this host and its process has
 * exited without leaving the message waited for, fail the boot naming it
 * (looked at every 50 ms at most): with connections on demand no socket of
 * ours to it may be there to close. Returns the failure or GX_OK. Lock
 * held. */
int boot_check_peer_death(struct gx_boot *b, int peer);
/* End our stream to `peer` on purpose (BOOT_MSG_BYE, then close): a later
 * send connects anew. Best effort. Lock held. */
void boot_say_bye_locked(struct gx_boot *b, int peer, uint64_t deadline);
/* Remember the first failure (status, the rank that caused it, why) and
 * flag it for the ABORT flood (boot_net.c). Lock held. */
void boot_set_failure(struct gx_boot *b, int status, int failed_rank, const char *msg);
const char *boot_op_name(uint64_t tag);
/* One line of a file:// rendezvous file: 0 and the rank and its record
 * (strings terminated) when it is this job's (`job_tag`, hex) and well
 * formed, else -1. Pure: the fuzz target calls it (boot_rendezvous.c). */
int boot_parse_file_line(const char *line, const char *job_tag, int world_size, int *rank,
                         struct boot_rank_record *rec);
/* Our connection to `peer` became readable or broke: read the acceptor's
 * BOOT_MSG_REFUSE, if any, into the failed state (boot_inbound.c). */
void boot_read_refusal(struct gx_boot *b, int peer);

#endif
