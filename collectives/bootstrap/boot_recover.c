/*
 * boot_recover.c - what gx_comm_shrink and gx_comm_revoke need from the
 * bootstrap: leave the failed state for a new recovery epoch, tell a gone
 * peer from a live one, forget the gone ones, and interrupt a thread that
 * waits inside the bootstrap.
 */
#include <unistd.h>

#include "collectives/bootstrap/boot_internal.h"
#include "common/clock.h"
#include "gx/gx.h"

int gx_boot_recover_begin(struct gx_boot *b, int *failed_rank)
{
    pthread_mutex_lock(&b->lock);
    int rc = GX_OK;
    if (b->shut) {
        rc = GX_EABORTED; /* gx_comm_abort closed everything: nothing to recover */
    } else {
        *failed_rank = b->fail_status != GX_OK ? b->failed_rank : -1;
        b->fail_status = GX_OK;
        b->failed_rank = -1;
        b->fail_msg[0] = '\0';
        b->abort_to_forward = false;
        b->recovering = true;
        b->epoch++;
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

void gx_boot_recover_end(struct gx_boot *b)
{
    pthread_mutex_lock(&b->lock);
    b->recovering = false;
    pthread_mutex_unlock(&b->lock);
}

bool gx_boot_peer_gone(struct gx_boot *b, int peer)
{
    pthread_mutex_lock(&b->lock);
    (void)boot_progress_locked(b, 0, -1, 0);
    bool gone = b->dead[peer] || (b->in[peer].closed && !b->shut);
    pthread_mutex_unlock(&b->lock);
    return gone;
}

int gx_boot_ping(struct gx_boot *b, int peer, uint64_t comm_id, uint64_t tag, int wait_ms)
{
    pthread_mutex_lock(&b->lock);
    int rc = b->dead[peer] ? GX_EPEER
                           : boot_send_quiet_locked(b, peer, comm_id, tag, NULL, 0,
                                                    gx_deadline_after_ms(wait_ms));
    if (rc == GX_OK && b->in[peer].closed)
        rc = GX_EPEER;
    if (rc != GX_OK && rc != GX_ETIMEOUT) {
        rc = GX_EPEER; /* refused or reset: nobody listens there any more */
        if (b->out_fd[peer] >= 0)
            close(b->out_fd[peer]);
        b->out_fd[peer] = -1;
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

void gx_boot_mark_dead(struct gx_boot *b, int peer)
{
    pthread_mutex_lock(&b->lock);
    b->dead[peer] = true;
    if (b->out_fd[peer] >= 0)
        close(b->out_fd[peer]);
    b->out_fd[peer] = -1;
    pthread_mutex_unlock(&b->lock);
}

void gx_boot_interrupt(struct gx_boot *b, bool on)
{
    atomic_store(&b->interrupted, on);
}
