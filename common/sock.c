/* sock.c - TCP socket helpers (see sock.h). */
#include "common/sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"
#include "gx/gx.h"

GX_PARAM_DEFINE(gx_param_socket_ifname, "GX_SOCKET_IFNAME", GX_PARAM_STRING, "", NULL,
                "Network interfaces for bootstrap and tcp traffic: comma list of name "
                "prefixes ('eth,ens'); '^' excludes ('^docker,lo'); '=' matches exactly. "
                "A list is also a list of rails: tcp's local rank i uses entry i mod "
                "length when an interface that is up matches it (binding its source "
                "address for peers on that subnet), else the whole list.");

int gx_sock_resolve(const char *text, int default_port, const char *what,
                    struct gx_sockaddr *out)
{
    if (!text || !text[0])
        return gx_fail(GX_EINVAL, GX_SUB_BOOT, "%s: empty address", what);
    char host[256];
    const char *port_text = NULL;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || (size_t)(close - text - 1) >= sizeof(host))
            return gx_fail(GX_EINVAL, GX_SUB_BOOT, "%s: malformed address '%s'", what, text);
        memcpy(host, text + 1, (size_t)(close - text - 1));
        host[close - text - 1] = '\0';
        if (close[1] == ':')
            port_text = close + 2;
        else if (close[1])
            return gx_fail(GX_EINVAL, GX_SUB_BOOT, "%s: malformed address '%s'", what, text);
    } else {
        const char *colon = strrchr(text, ':');
        if (colon && strchr(text, ':') != colon)
            colon = NULL; /* bare IPv6 without brackets: no port */
        size_t hl = colon ? (size_t)(colon - text) : strlen(text);
        if (hl == 0 || hl >= sizeof(host))
            return gx_fail(GX_EINVAL, GX_SUB_BOOT, "%s: malformed address '%s'", what, text);
        memcpy(host, text, hl);
        host[hl] = '\0';
        if (colon)
            port_text = colon + 1;
    }
    long long port = default_port;
    if (port_text && (gx_parse_int(port_text, &port) != 0 || port < 0 || port > 65535))
        return gx_fail(GX_EINVAL, GX_SUB_BOOT, "%s: bad port in '%s'", what, text);
    if (port < 0)
        return gx_fail(GX_EINVAL, GX_SUB_BOOT, "%s: '%s' has no port", what, text);
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res)
        return gx_fail(GX_EINVAL, GX_SUB_BOOT, "%s: cannot resolve host '%s': %s", what, host,
                       gai_strerror(rc));
    memset(out, 0, sizeof(*out));
    memcpy(&out->u.storage, res->ai_addr, res->ai_addrlen);
    out->len = res->ai_addrlen;
    freeaddrinfo(res);
    gx_sock_set_port(out, (int)port);
    return GX_OK;
}

const char *gx_sock_addr_str(const struct gx_sockaddr *addr, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (addr->u.sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &addr->u.in4.sin_addr, ip, sizeof(ip));
        snprintf(buf, len, "%s:%d", ip, ntohs(addr->u.in4.sin_port));
    } else if (addr->u.sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &addr->u.in6.sin6_addr, ip, sizeof(ip));
        snprintf(buf, len, "[%s]:%d", ip, ntohs(addr->u.in6.sin6_port));
    } else {
        snprintf(buf, len, "(no address)");
    }
    return buf;
}

int gx_sock_port(const struct gx_sockaddr *addr)
{
    if (addr->u.sa.sa_family == AF_INET)
        return ntohs(addr->u.in4.sin_port);
    if (addr->u.sa.sa_family == AF_INET6)
        return ntohs(addr->u.in6.sin6_port);
    return -1;
}

void gx_sock_set_port(struct gx_sockaddr *addr, int port)
{
    if (addr->u.sa.sa_family == AF_INET)
        addr->u.in4.sin_port = htons((uint16_t)port);
    else if (addr->u.sa.sa_family == AF_INET6)
        addr->u.in6.sin6_port = htons((uint16_t)port);
}

bool gx_sock_ifname_matches(const char *spec, const char *ifname)
{
    if (!spec || !spec[0])
        return true;
    bool exclude = spec[0] == '^';
    if (exclude)
        spec++;
    bool exact = spec[0] == '=';
    if (exact)
        spec++;
    bool hit = false;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && !hit; tok = strtok_r(NULL, ",", &save))
        hit = exact ? strcmp(tok, ifname) == 0 : strncmp(tok, ifname, strlen(tok)) == 0;
    return exclude ? !hit : hit;
}

int gx_sock_rail_count(void)
{
    const char *spec = gx_param_text(&gx_param_socket_ifname);
    if (!spec[0] || spec[0] == '^')
        return 1;
    int n = 1;
    for (const char *p = spec; *p; p++)
        n += *p == ',' && p[1] && p[1] != ',';
    return n;
}

/* Entry `rail` mod the list's length of GX_SOCKET_IFNAME, keeping a leading
 * '=': "" when the variable is not a list of 2+ entries. */
static void rail_entry(int rail, char *buf, size_t len)
{
    const char *spec = gx_param_text(&gx_param_socket_ifname);
    int n = gx_sock_rail_count();
    buf[0] = 0;
    if (rail < 0 || n < 2)
        return;
    bool exact = spec[0] == '=';
    const char *p = spec + (exact ? 1 : 0);
    for (int i = 0; i < rail % n; i++) {
        p = strchr(p, ',');
        while (p && *p == ',')
            p++;
    }
    size_t w = p ? strcspn(p, ",") : 0;
    if (w > 0)
        snprintf(buf, len, "%s%.*s", exact ? "=" : "", (int)w, p);
}

static int pick_from(const char *spec, struct gx_sockaddr *out, struct gx_sockaddr *mask,
                     char *ifname, size_t ifname_len, bool quiet);

int gx_sock_pick_interface(struct gx_sockaddr *out, char *ifname, size_t ifname_len)
{
    return pick_from(gx_param_text(&gx_param_socket_ifname), out, NULL, ifname, ifname_len,
                     false);
}

int gx_sock_pick_rail(int rail, struct gx_sockaddr *out, struct gx_sockaddr *mask, char *ifname,
                      size_t ifname_len)
{
    char entry[128];
    rail_entry(rail, entry, sizeof(entry));
    if (entry[0] && pick_from(entry, out, mask, ifname, ifname_len, true) == GX_OK)
        return GX_OK;
    return pick_from(gx_param_text(&gx_param_socket_ifname), out, mask, ifname, ifname_len,
                     false);
}

bool gx_sock_same_subnet(const struct gx_sockaddr *a, const struct gx_sockaddr *mask,
                         const struct gx_sockaddr *b)
{
    if (a->u.sa.sa_family != AF_INET || b->u.sa.sa_family != AF_INET ||
        mask->u.sa.sa_family != AF_INET)
        return false;
    uint32_t m = mask->u.in4.sin_addr.s_addr;
    return m && (a->u.in4.sin_addr.s_addr & m) == (b->u.in4.sin_addr.s_addr & m);
}

static int pick_from(const char *spec, struct gx_sockaddr *out, struct gx_sockaddr *mask,
                     char *ifname, size_t ifname_len, bool quiet)
{
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) != 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_BOOT, "getifaddrs failed: %s", strerror(errno));
    const struct ifaddrs *best = NULL;
    int best_score = -1;
    for (const struct ifaddrs *ifa = list; ifa; ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP))
            continue;
        int fam = ifa->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6)
            continue;
        if (!gx_sock_ifname_matches(spec, ifa->ifa_name))
            continue;
        if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr))
            continue;
        bool loop = (ifa->ifa_flags & IFF_LOOPBACK) != 0;
        int score = (loop ? 0 : 2) + (fam == AF_INET ? 1 : 0);
        if (score > best_score) {
            best = ifa;
            best_score = score;
        }
    }
    if (!best && quiet) {
        freeifaddrs(list);
        return GX_EINVAL;
    }
    if (!best) {
        /* Name what there is, so a typo ('eht0') is seen at once. */
        char have[256] = "";
        size_t n = 0;
        for (const struct ifaddrs *ifa = list; ifa && n + 1 < sizeof(have); ifa = ifa->ifa_next) {
            if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP) ||
                (ifa->ifa_addr->sa_family != AF_INET && ifa->ifa_addr->sa_family != AF_INET6))
                continue;
            char word[IF_NAMESIZE + 2];
            snprintf(word, sizeof(word), " %s ", ifa->ifa_name);
            char padded[sizeof(have) + 2];
            snprintf(padded, sizeof(padded), " %s ", have);
            if (strstr(padded, word))
                continue; /* one name per interface, whatever its addresses */
            int w = snprintf(have + n, sizeof(have) - n, "%s%s", n ? " " : "", ifa->ifa_name);
            if (w > 0)
                n += (size_t)w;
        }
        freeifaddrs(list);
        return gx_fail(GX_EINVAL, GX_SUB_BOOT,
                       "no network interface that is up matches GX_SOCKET_IFNAME='%s'; the "
                       "interfaces that are up: %s", spec, have[0] ? have : "(none)");
    }
    memset(out, 0, sizeof(*out));
    out->len = best->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                      : sizeof(struct sockaddr_in6);
    memcpy(&out->u.storage, best->ifa_addr, out->len);
    gx_sock_set_port(out, 0);
    if (mask) {
        memset(mask, 0, sizeof(*mask));
        if (best->ifa_netmask && best->ifa_netmask->sa_family == best->ifa_addr->sa_family) {
            mask->len = out->len;
            memcpy(&mask->u.storage, best->ifa_netmask, out->len);
        }
    }
    if (ifname)
        snprintf(ifname, ifname_len, "%s", best->ifa_name);
    freeifaddrs(list);
    return GX_OK;
}

int gx_sock_set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return GX_ESYSTEM;
    return GX_OK;
}

int gx_sock_set_nodelay(int fd)
{
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0 ? GX_OK
                                                                           : GX_ESYSTEM;
}

int gx_sock_listen(struct gx_sockaddr *addr, int backlog, int *fd_out)
{
    int fd = socket(addr->u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return GX_ESYSTEM;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, &addr->u.sa, addr->len) != 0 || listen(fd, backlog) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return GX_ESYSTEM;
    }
    socklen_t len = sizeof(addr->u.storage);
    getsockname(fd, &addr->u.sa, &len);
    addr->len = len;
    *fd_out = fd;
    return GX_OK;
}

int gx_sock_connect(const struct gx_sockaddr *addr, uint64_t deadline, int *fd_out)
{
    int backoff_ms = 1;
    for (;;) {
        int fd = socket(addr->u.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return GX_ESYSTEM;
        int rc = connect(fd, &addr->u.sa, addr->len);
        if (rc != 0 && errno == EINPROGRESS) {
            struct pollfd pfd = { .fd = fd, .events = POLLOUT };
            int n = poll(&pfd, 1, gx_ms_left(deadline));
            if (n == 0) {
                close(fd);
                return GX_ETIMEOUT;
            }
            int err = 0;
            socklen_t elen = sizeof(err);
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
            rc = err ? -1 : 0;
            errno = err;
        }
        if (rc == 0) {
            gx_sock_set_nodelay(fd);
            *fd_out = fd;
            return GX_OK;
        }
        int saved = errno;
        close(fd);
        if (saved != ECONNREFUSED && saved != ECONNRESET && saved != ETIMEDOUT &&
            saved != EHOSTUNREACH && saved != ENETUNREACH && saved != EAGAIN) {
            errno = saved;
            return GX_ECONNECT;
        }
        if (gx_ms_left(deadline) == 0) {
            errno = saved;
            return GX_ETIMEOUT;
        }
        int wait = backoff_ms < gx_ms_left(deadline) ? backoff_ms : gx_ms_left(deadline);
        poll(NULL, 0, wait);
        if (backoff_ms < 100)
            backoff_ms *= 2;
    }
}

int gx_sock_accept(int listen_fd, int *fd_out, struct gx_sockaddr *peer)
{
    struct gx_sockaddr tmp;
    struct gx_sockaddr *p = peer ? peer : &tmp;
    p->len = sizeof(p->u.storage);
    int fd = accept4(listen_fd, &p->u.sa, &p->len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
            errno == ECONNABORTED)
            return GX_ETIMEOUT;
        return GX_ESYSTEM;
    }
    gx_sock_set_nodelay(fd);
    *fd_out = fd;
    return GX_OK;
}

static int wait_fd(int fd, short events, uint64_t deadline)
{
    struct pollfd pfd = { .fd = fd, .events = events };
    for (;;) {
        int n = poll(&pfd, 1, gx_ms_left(deadline));
        if (n > 0)
            return GX_OK;
        if (n == 0)
            return GX_ETIMEOUT;
        if (errno != EINTR)
            return GX_ESYSTEM;
    }
}

int gx_sock_send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            int rc = wait_fd(fd, POLLOUT, deadline);
            if (rc != GX_OK)
                return rc;
            continue;
        }
        return (errno == EPIPE || errno == ECONNRESET) ? GX_EPEER : GX_ESYSTEM;
    }
    return GX_OK;
}

int gx_sock_recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return GX_EPEER;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            int rc = wait_fd(fd, POLLIN, deadline);
            if (rc != GX_OK)
                return rc;
            continue;
        }
        return errno == ECONNRESET ? GX_EPEER : GX_ESYSTEM;
    }
    return GX_OK;
}

int gx_random_bytes(void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return GX_ESYSTEM;
        }
        p += n;
        len -= (size_t)n;
    }
    return GX_OK;
}
