/*
 * sock.h - small TCP socket helpers shared by the bootstrap and the tcp
 * provider: address parsing, interface selection, non-blocking listen and
 * connect, and whole-buffer I/O with deadlines.
 *
 * The I/O helpers return GX_OK, GX_EPEER (EOF or reset), GX_ETIMEOUT or
 * GX_ESYSTEM and do not log: the caller knows which peer it was talking to
 * and logs once with that context. errno is preserved for GX_ESYSTEM.
 */
#ifndef GX_COMMON_SOCK_H
#define GX_COMMON_SOCK_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct gx_sockaddr {
    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_storage storage;
    } u;
    socklen_t len;
};

/** Parse "HOST:PORT", "[V6]:PORT" or "HOST" (with default_port) and resolve
 *  it. Returns GX_EINVAL with a message naming `what` on failure. */
int gx_sock_resolve(const char *text, int default_port, const char *what,
                    struct gx_sockaddr *out);
/** "1.2.3.4:5678" or "[::1]:5678". */
const char *gx_sock_addr_str(const struct gx_sockaddr *addr, char *buf, size_t len);
int gx_sock_port(const struct gx_sockaddr *addr);
void gx_sock_set_port(struct gx_sockaddr *addr, int port);

/**
 * Choose the local address to listen on and advertise: the first interface
 * that is up and matches GX_SOCKET_IFNAME (prefix list; "^" excludes, "="
 * matches exactly), preferring non-loopback ones when the variable is unset.
 * `ifname` (may be NULL) receives the interface name.
 */
int gx_sock_pick_interface(struct gx_sockaddr *out, char *ifname, size_t ifname_len);
/**
 * Rails: when GX_SOCKET_IFNAME is a list of 2+ entries (not an exclusion),
 * entry `rail` mod its length alone picks the interface (as above) if an
 * interface that is up matches it; otherwise, or with rail < 0, the whole
 * list does. `mask` (may be NULL) receives the interface's netmask.
 */
int gx_sock_pick_rail(int rail, struct gx_sockaddr *out, struct gx_sockaddr *mask, char *ifname,
                      size_t ifname_len);
/** Entries of GX_SOCKET_IFNAME's list (1 when unset, single, or '^'). */
int gx_sock_rail_count(void);
/** True when IPv4 `a` and `b` are in the subnet of `a` with netmask `mask`. */
bool gx_sock_same_subnet(const struct gx_sockaddr *a, const struct gx_sockaddr *mask,
                         const struct gx_sockaddr *b);
/** True if interface name `ifname` passes a NCCL-style filter `spec`. */
bool gx_sock_ifname_matches(const char *spec, const char *ifname);

/** Create a non-blocking listening socket bound to `addr` (port 0 picks one;
 *  the chosen port is written back into `addr`). */
int gx_sock_listen(struct gx_sockaddr *addr, int backlog, int *fd_out);
/** Connect with retries on refusal until `deadline` (a gx_now_ns value). The
 *  socket is returned non-blocking with TCP_NODELAY. */
int gx_sock_connect(const struct gx_sockaddr *addr, uint64_t deadline, int *fd_out);
/** Accept one pending connection (non-blocking): GX_OK with *fd_out, or
 *  GX_ETIMEOUT when none is pending right now. */
int gx_sock_accept(int listen_fd, int *fd_out, struct gx_sockaddr *peer);

int gx_sock_set_nonblocking(int fd);
int gx_sock_set_nodelay(int fd);

/** Write/read exactly `len` bytes before `deadline`. */
int gx_sock_send_all(int fd, const void *buf, size_t len, uint64_t deadline);
int gx_sock_recv_all(int fd, void *buf, size_t len, uint64_t deadline);

/** Fill `buf` with `len` unpredictable bytes (getrandom). */
int gx_random_bytes(void *buf, size_t len);

#endif
