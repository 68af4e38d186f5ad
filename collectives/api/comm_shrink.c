/*
 * comm_shrink.c - recovery after a peer failure: gx_comm_shrink (the
 * survivors agree on who is gone and build a communicator without them) and
 * gx_comm_revoke (make every rank's operations on a communicator fail now).
 *
 * Agreement runs over the bootstrap, which stays usable when the data path
 * is broken. A coordinator, the lowest rank this rank believes alive,
 * collects every survivor's suspicion list (waiting until the deadline for
 * each, pinging it meanwhile: a dead rank's connection is refused or reset
 * within a few pings), takes their union plus the ranks that did not
 * answer, and sends the decision to the survivors. A rank whose coordinator
 * turns out to be gone marks it and asks the next one; coordinators only go
 * up, so each receives at most one list from each rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/comm/comm_internal.h"
#include "collectives/transport/xport.h"
#include "common/clock.h"
#include "common/log.h"

/* Shrink messages use a sequence space of their own, far above the
 * communicator's operations, so they never pair with one. */
#define SHRINK_SEQ_BASE (1ull << 40)
enum { SHRINK_SUGGEST = 0, SHRINK_DECIDE = 1, SHRINK_PING = 2 };
#define SHRINK_PING_EVERY_MS 200

struct shrink {
    struct gx_comm *comm;
    uint64_t seq;
    unsigned char *gone; /* comm rank -> 1 when believed gone */
};

static uint64_t shrink_tag(const struct shrink *s, int round)
{
    return BOOT_TAG(s->seq, BOOT_OP_SHRINK, round);
}

/* Wait for `round`'s message from comm rank `r`, pinging it meanwhile.
 * GX_OK, GX_EPEER (it is gone) or GX_ETIMEOUT. */
static int await_from(struct shrink *s, int r, int round, void *buf, size_t len,
                      uint64_t deadline)
{
    struct gx_comm *c = s->comm;
    int peer = c->world_ranks[r];
    uint64_t next_ping = 0;
    for (;;) {
        int rc = gx_boot_try_recv(c->boot, peer, c->comm_id, shrink_tag(s, round), buf, len);
        if (rc == GX_OK)
            return GX_OK;
        if (rc != GX_INPROGRESS)
            return GX_EPEER;
        if (gx_now_ns() >= next_ping) {
            if (gx_boot_ping(c->boot, peer, c->comm_id, shrink_tag(s, SHRINK_PING),
                             SHRINK_PING_EVERY_MS) == GX_EPEER)
                return GX_EPEER;
            next_ping = gx_now_ns() + (uint64_t)SHRINK_PING_EVERY_MS * 1000000u;
        }
        if (gx_ms_left(deadline) == 0)
            return GX_ETIMEOUT;
        gx_boot_progress(c->boot, 20);
    }
}

static void mark_gone(struct shrink *s, int r, const char *why)
{
    if (s->gone[r])
        return;
    s->gone[r] = 1;
    char who[128];
    GX_WARN(GX_SUB_INIT, "shrink of '%s': %s %s", s->comm->name,
            gx_boot_describe(s->comm->boot, s->comm->world_ranks[r], who, sizeof(who)), why);
}

/* The coordinator: gather every survivor's list, decide, tell them. */
static void coordinate(struct shrink *s, uint64_t deadline)
{
    struct gx_comm *c = s->comm;
    unsigned char *theirs = malloc((size_t)c->size);
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank || s->gone[r])
            continue;
        int rc = theirs ? await_from(s, r, SHRINK_SUGGEST, theirs, (size_t)c->size, deadline)
                        : GX_ENOMEM;
        if (rc != GX_OK) {
            mark_gone(s, r, rc == GX_ETIMEOUT ? "did not join the shrink before the deadline"
                                              : "is gone (its connection is closed or refused)");
            continue;
        }
        for (int i = 0; i < c->size; i++)
            if (theirs[i] && i != c->rank)
                mark_gone(s, i, "is gone (reported by another survivor)");
    }
    free(theirs);
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && !s->gone[r])
            (void)gx_boot_send(c->boot, c->world_ranks[r], c->comm_id,
                               shrink_tag(s, SHRINK_DECIDE), s->gone, (size_t)c->size, deadline);
}

/* Agree with the other survivors on s->gone. */
static int agree(struct shrink *s)
{
    struct gx_comm *c = s->comm;
    uint64_t timeout_ms = (uint64_t)c->op_timeout_ms;
    for (;;) {
        int coord = 0;
        while (s->gone[coord])
            coord++;
        if (coord == c->rank) {
            coordinate(s, gx_deadline_after_ms(c->op_timeout_ms));
            return GX_OK;
        }
        uint64_t deadline = gx_deadline_after_ms(c->op_timeout_ms);
        int peer = c->world_ranks[coord];
        int rc = gx_boot_send(c->boot, peer, c->comm_id, shrink_tag(s, SHRINK_SUGGEST), s->gone,
                              (size_t)c->size, deadline);
        /* The coordinator may itself wait up to the deadline for a silent rank. */
        unsigned char *decided = malloc((size_t)c->size);
        if (!decided)
            return gx_fail(GX_ENOMEM, GX_SUB_INIT, "gx_comm_shrink: out of memory");
        if (rc == GX_OK)
            rc = await_from(s, coord, SHRINK_DECIDE, decided, (size_t)c->size,
                            gx_deadline_after_ms((int)(2 * timeout_ms)));
        if (rc != GX_OK) {
            free(decided);
            mark_gone(s, coord, "coordinated the shrink but is gone");
            continue;
        }
        if (decided[c->rank]) {
            free(decided);
            char who[128];
            return gx_fail(GX_EPEER, GX_SUB_INIT, "gx_comm_shrink: the survivors (coordinated by "
                           "%s) count rank %d as gone; it is not a member of their communicator",
                           gx_boot_describe(c->boot, peer, who, sizeof(who)), c->rank);
        }
        memcpy(s->gone, decided, (size_t)c->size);
        free(decided);
        return GX_OK;
    }
}

GX_API int gx_comm_shrink(struct gx_comm *comm, int flags, struct gx_comm **out)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_shrink: comm is NULL");
    if (!out)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_shrink: out is NULL");
    if (flags != 0)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_shrink: flags is %d; no flags are "
                       "defined, pass 0", flags);
    *out = NULL;
    if (atomic_load(&comm->aborted))
        return gx_fail(GX_EABORTED, GX_SUB_INIT, "gx_comm_shrink on '%s': it was aborted "
                       "(gx_comm_abort closes the job's connections; use gx_comm_revoke to "
                       "stop a communicator and shrink it)", comm->name);
    int failed_world = -1;
    int rc = gx_boot_recover_begin(comm->boot, &failed_world);
    if (rc != GX_OK)
        return gx_fail(rc, GX_SUB_INIT, "gx_comm_shrink on '%s': the job's bootstrap was shut "
                       "down by gx_comm_abort", comm->name);
    /* The old communicator is done for: its operations fail, and its
     * failures are no longer news for the job. */
    atomic_store(&comm->shrunk, true);
    gx_comm_set_async_error(comm, GX_EABORTED, "the communicator was shrunk");
    struct shrink s = { .comm = comm, .seq = SHRINK_SEQ_BASE + ++comm->shrinks };
    s.gone = calloc((size_t)comm->size, 1);
    int *members = malloc((size_t)comm->size * sizeof(int));
    if (!s.gone || !members) {
        free(s.gone);
        free(members);
        gx_boot_recover_end(comm->boot);
        return gx_fail(GX_ENOMEM, GX_SUB_INIT, "gx_comm_shrink: out of memory");
    }
    for (int r = 0; r < comm->size; r++) {
        int w = comm->world_ranks[r];
        if (r != comm->rank && (w == failed_world || gx_boot_peer_gone(comm->boot, w)))
            mark_gone(&s, r, "is gone (seen by this rank)");
    }
    uint64_t t0 = gx_now_ns();
    rc = agree(&s);
    int n = 0, new_rank = 0;
    char lost[256] = "";
    for (int r = 0; rc == GX_OK && r < comm->size; r++) {
        if (s.gone[r]) {
            gx_boot_mark_dead(comm->boot, comm->world_ranks[r]);
            size_t used = strlen(lost);
            snprintf(lost + used, sizeof(lost) - used, "%s%d", used ? " " : "", r);
            continue;
        }
        if (r == comm->rank)
            new_rank = n;
        members[n++] = r;
    }
    if (rc == GX_OK) {
        char suffix[16];
        snprintf(suffix, sizeof(suffix), "/s%u", comm->shrinks);
        rc = gx_comm_derive(comm, members, n, new_rank,
                            gx_comm_child_id(comm->comm_id, s.seq, -2), suffix, out);
        if (rc == GX_OK)
            GX_INFO(GX_SUB_INIT, "shrink of '%s': %d of %d ranks remain (gone: %s), rank %d is "
                    "now rank %d, agreed in %.0f ms", comm->name, n, comm->size,
                    lost[0] ? lost : "none", comm->rank, new_rank, (gx_now_ns() - t0) / 1e6);
    }
    gx_boot_recover_end(comm->boot);
    free(s.gone);
    free(members);
    return rc;
}

GX_API int gx_comm_revoke(struct gx_comm *comm)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "gx_comm_revoke: comm is NULL");
    int me = gx_boot_rank(comm->boot);
    char msg[256];
    snprintf(msg, sizeof(msg), "rank %d revoked communicator '%s' (gx_comm_revoke)", me,
             comm->name);
    GX_WARN(GX_SUB_INIT, "%s", msg);
    gx_comm_set_async_error(comm, GX_EABORTED, msg);
    /* Let a thread waiting in the bootstrap go, then tell the other ranks. */
    gx_boot_interrupt(comm->boot, true);
    gx_boot_fail(comm->boot, GX_EABORTED, -1, msg);
    gx_boot_interrupt(comm->boot, false);
    if (comm->xport)
        gx_xport_abort(comm->xport);
    return GX_OK;
}
