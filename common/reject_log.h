/*
 * reject_log.h - logging of refused incoming connections that an attacker
 * cannot turn into a flood: the first refusal from a source address is logged
 * in full, further ones from that address are counted by reason and logged as
 * one summary line per address every GX_LOG_REJECT_INTERVAL seconds
 * ("rejected 198 connections from 127.0.0.1 in the last 10 s: 66 not a gx
 * handshake, ..."). Owns a small process-wide table of sources.
 */
#ifndef GX_COMMON_REJECT_LOG_H
#define GX_COMMON_REJECT_LOG_H

#include "common/log.h"
#include "common/sock.h"

enum gx_reject_reason {
    GX_REJECT_KEY,      /* wrong job key */
    GX_REJECT_PROTO,    /* not a gx handshake */
    GX_REJECT_PROBE,    /* closed before finishing the handshake (a probe?) */
    GX_REJECT_SILENT,   /* no handshake in time */
    GX_REJECT_CLAIM,    /* authenticated, but a rank or purpose we cannot take */
    GX_REJECT_COUNT
};

/** A refused connection from `from` (NULL: a local socket without an
 *  address) for `why`. The full line (`what` names the listener, e.g.
 *  "bootstrap", the format the details) is logged at warn level only for the
 *  first refusal from that source in an interval; the rest are counted. */
void gx_reject_note(enum gx_subsys sub, const char *what, const struct gx_sockaddr *from,
                    enum gx_reject_reason why, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/** Log the summaries that are due (all of them with `force`, e.g. at exit of
 *  a communicator). Cheap; called from gx_reject_note too. */
void gx_reject_flush(bool force);

#endif
