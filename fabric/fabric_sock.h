/*
 * fabric_sock.h - authenticated TCP side-channel helpers shared by providers
 * (tcp data streams, the verbs connection-manager channel).
 *
 * Owns: the listener address blob layout both providers publish (each with
 * its own magic and version), listener socket creation, the acceptor's table
 * of pending connections driven by the job-key state machine (common/auth.h),
 * and the connector's non-blocking TCP connect steps. Each helper takes the
 * provider's name ("tcp", "verbs") and logs with it as the prefix, so the
 * messages read as they did when every provider had its own copy.
 * Not here: what a provider sends after the handshake, or how it turns an
 * authenticated socket into an endpoint.
 * Must not touch: anything above the fabric layer.
 */
#ifndef GX_FABRIC_FABRIC_SOCK_H
#define GX_FABRIC_FABRIC_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/sock.h"
#include "fabric/fabric.h"

/* ---------------------------------------------------------------------------
 * Listener address blob. Providers keep their own struct (their wire format);
 * it must have exactly this layout, which they check with
 * GX_FAB_SOCK_ADDR_LAYOUT_CHECK.
 * ------------------------------------------------------------------------ */
struct gx_fab_sock_addr {
    uint32_t magic;
    uint16_t version;
    uint16_t family; /* AF_INET or AF_INET6 */
    uint16_t port;   /* host order */
    uint16_t reserved;
    uint8_t ip[16];
};
_Static_assert(sizeof(struct gx_fab_sock_addr) == 28, "socket address blob layout");

#define GX_FAB_SOCK_ADDR_LAYOUT_CHECK(type)                                                  \
    _Static_assert(sizeof(type) == sizeof(struct gx_fab_sock_addr) &&                       \
                       offsetof(type, magic) == offsetof(struct gx_fab_sock_addr, magic) &&  \
                       offsetof(type, version) == offsetof(struct gx_fab_sock_addr, version) && \
                       offsetof(type, family) == offsetof(struct gx_fab_sock_addr, family) && \
                       offsetof(type, port) == offsetof(struct gx_fab_sock_addr, port) &&    \
                       offsetof(type, ip) == offsetof(struct gx_fab_sock_addr, ip),          \
                   #type " must have the layout of struct gx_fab_sock_addr")

/** Pack `sa` into a blob carrying `magic` and `version`. */
void gx_fab_sock_addr_pack(const struct gx_sockaddr *sa, uint32_t magic, uint16_t version,
                           struct gx_fab_addr *out);
/** Unpack a blob of this provider (`magic`, `version`). GX_EINVAL, logged
 *  with the `prov` prefix, for another provider's or a malformed blob. */
int gx_fab_sock_addr_unpack(const char *prov, const struct gx_fab_addr *in, uint32_t magic,
                            uint16_t version, struct gx_sockaddr *sa);

/** Listen on `local` (any port) and pack the address to publish. *fd_out is
 *  the non-blocking listening socket. GX_ESYSTEM (logged, naming `ifname`)
 *  when the socket cannot be created. */
int gx_fab_sock_listen(const char *prov, const struct gx_sockaddr *local, const char *ifname,
                       uint32_t magic, uint16_t version, int *fd_out, struct gx_fab_addr *addr_out);

/** Make room for element `n` of a growing array (capacity doubles from 8).
 *  GX_ENOMEM, logged as "<prov>: out of memory accepting". */
int gx_fab_sock_grow(const char *prov, void **arr, int *cap, int n, size_t elem);

/* ---------------------------------------------------------------------------
 * Acceptor: pending (accepted, not yet authenticated or set up) connections.
 * A provider's entry type starts with a struct gx_fab_sock_half; the table
 * holds entries of `elem` bytes, and moves them when one is removed.
 * ------------------------------------------------------------------------ */
struct gx_fab_sock_half {
    int fd;
    struct gx_auth_server auth;
    uint64_t deadline; /* gx_fab_connect_timeout_ms() after the accept */
    struct gx_sockaddr from;
};

struct gx_fab_sock_pending {
    void *v;
    size_t elem; /* sizeof the provider's entry */
    int n, cap;
};

static inline void gx_fab_sock_pending_init(struct gx_fab_sock_pending *t, size_t elem)
{
    t->v = NULL;
    t->elem = elem;
    t->n = t->cap = 0;
}

static inline struct gx_fab_sock_half *gx_fab_sock_pending_at(const struct gx_fab_sock_pending *t,
                                                              int i)
{
    return (struct gx_fab_sock_half *)((char *)t->v + (size_t)i * t->elem);
}

/** Remove entry `i` (the last one takes its place); closes nothing. */
void gx_fab_sock_pending_remove(struct gx_fab_sock_pending *t, int i);
/** Free the table's memory; closes nothing. */
void gx_fab_sock_pending_free(struct gx_fab_sock_pending *t);

/** Accept every connection waiting on `listen_fd`, send each its challenge
 *  and add it to `t` as a zeroed entry with fd, auth, deadline and from
 *  set. GX_OK when none is left waiting; GX_ESYSTEM or GX_ENOMEM (logged). */
int gx_fab_sock_accept_new(const char *prov, int listen_fd, const struct gx_auth_key *key,
                           struct gx_fab_sock_pending *t);

/** Advance one pending connection's acceptor handshake. GX_INPROGRESS: not
 *  finished (the deadline is the caller's to check); GX_OK: the peer proved
 *  the job key and asked for `purpose`; anything else: refused, logged as a
 *  warning ("... is not a <purpose_what>" for another purpose), and the
 *  caller drops the connection. */
int gx_fab_sock_half_auth(const char *prov, struct gx_fab_sock_half *h,
                          const struct gx_auth_key *key, enum gx_auth_purpose purpose,
                          const char *purpose_what);

/** True, with a warning "<prov>: dropped connection from <addr>: <what>
 *  within <timeout> ms", once `h` is past its deadline. */
bool gx_fab_sock_half_expired(const char *prov, const struct gx_fab_sock_half *h,
                              const char *what);

/* ---------------------------------------------------------------------------
 * Connector: a non-blocking TCP connect, retried while the peer refuses.
 * ------------------------------------------------------------------------ */

/** The deadline a connect gets: param->timeout_ms, or the fabric default. */
uint64_t gx_fab_sock_connect_deadline(const struct gx_fab_conn_param *param);

/** Open a socket (non-blocking, TCP_NODELAY) and start connecting it to
 *  `peer` (`name` names it in errors). GX_OK with *fd connecting;
 *  GX_INPROGRESS with *fd = -1 when refused right away (retry until the
 *  deadline); else an error, logged. */
int gx_fab_sock_connect_start(const char *prov, const struct gx_sockaddr *peer, const char *name,
                              int *fd);
/** The same with the socket bound to `src` (its address, any port) first,
 *  so the connection leaves from that interface; NULL: the kernel's choice. */
int gx_fab_sock_connect_start_from(const char *prov, const struct gx_sockaddr *src,
                                   const struct gx_sockaddr *peer, const char *name, int *fd);

/** Check a connect started by gx_fab_sock_connect_start(). GX_OK once
 *  connected; GX_INPROGRESS while still connecting, or with *fd closed and
 *  set to -1 when refused (not listening yet: retry until the deadline);
 *  else an error, logged, with *fd closed and set to -1. */
int gx_fab_sock_connect_check(const char *prov, int *fd, const char *name);

#endif
