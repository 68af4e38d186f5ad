/*
 * boot_rendezvous.c - how ranks first find each other.
 *
 *  env:// and tcp://HOST:PORT - rank 0 listens on the master address; every
 *    other rank registers its record there; rank 0 checks them and spreads
 *    the table down a binomial tree (each rank forwards to at most log2(n)
 *    children, n-1 messages in total). Then each rank ends its registration
 *    stream (BOOT_MSG_BYE): rank 0 reads N-1 records once (O(N) small
 *    messages, one socket open per registrant at a time) but keeps no
 *    socket per rank.
 *  file:///PATH - each rank appends its record to a shared file under an
 *    fcntl lock (works on NFS with lockd) and reads until all are present.
 *    Lines of other jobs (another job key) are ignored. The file is opened
 *    with gx_safe_open (created 0600; a planted link or another user's file
 *    is refused) and rank 0 removes it when its bootstrap ends (finalize).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/bootstrap/boot_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/safe_file.h"
#include "gx/gx.h"

#define BOOT_FILE_POLL_MS 20

static void fill_own_record(struct gx_boot *b, const struct boot_params *p)
{
    struct boot_rank_record *r = &b->records[b->rank];
    r->rank = b->rank;
    r->world_size = b->size;
    r->pid = (int32_t)getpid();
    r->addr_len = (uint16_t)b->listen_addr.len;
    memcpy(r->addr, &b->listen_addr.u.storage, b->listen_addr.len);
    if (gethostname(r->host, sizeof(r->host)) != 0)
        snprintf(r->host, sizeof(r->host), "unknown");
    r->host[sizeof(r->host) - 1] = '\0';
    snprintf(r->node_id, sizeof(r->node_id), "%s", p->node_id ? p->node_id : r->host);
}

static int listen_on(struct gx_boot *b, struct gx_sockaddr *addr, const char *what)
{
    char astr[64];
    if (gx_sock_listen(addr, 1024, &b->listen_fd) != GX_OK)
        return gx_fail(GX_ESYSTEM, GX_SUB_BOOT, "cannot listen on %s (%s): %s",
                       gx_sock_addr_str(addr, astr, sizeof(astr)), what, strerror(errno));
    b->listen_addr = *addr;
    return GX_OK;
}

/* The local address a packet to `to` would leave from (no packet is sent). */
static int local_address_towards(const struct gx_sockaddr *to, struct gx_sockaddr *out)
{
    int fd = socket(to->u.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return GX_ESYSTEM;
    struct gx_sockaddr probe = *to;
    if (gx_sock_port(&probe) == 0)
        gx_sock_set_port(&probe, 9);
    int rc = connect(fd, &probe.u.sa, probe.len);
    out->len = sizeof(out->u.storage);
    if (rc == 0)
        rc = getsockname(fd, &out->u.sa, &out->len);
    close(fd);
    if (rc != 0)
        return GX_ESYSTEM;
    gx_sock_set_port(out, 0);
    return GX_OK;
}

static int check_record(struct gx_boot *b, const struct boot_rank_record *r, int expect_rank)
{
    if (r->rank != expect_rank)
        return gx_fail(GX_EPROTO, GX_SUB_BOOT, "rendezvous: record of rank %d claims rank %d",
                       expect_rank, (int)r->rank);
    if (r->world_size != b->size)
        return gx_fail(GX_EMISMATCH, GX_SUB_BOOT,
                       "rendezvous: rank %d (%.64s pid %d) was started with world size %d, "
                       "rank %d with %d: every rank must get the same WORLD_SIZE",
                       (int)r->rank, r->host, (int)r->pid, (int)r->world_size, b->rank, b->size);
    if (r->addr_len == 0 || r->addr_len > sizeof(r->addr))
        return gx_fail(GX_EPROTO, GX_SUB_BOOT, "rendezvous: rank %d sent no address",
                       (int)r->rank);
    return GX_OK;
}

static void list_missing(struct gx_boot *b, char *buf, size_t len)
{
    size_t n = 0;
    int shown = 0, missing = 0;
    buf[0] = '\0';
    for (int r = 0; r < b->size; r++) {
        if (b->records[r].addr_len != 0)
            continue;
        missing++;
        if (shown < 32 && n < len) {
            int w = snprintf(buf + n, len - n, "%s%d", shown ? ", " : "", r);
            n += w > 0 ? (size_t)w : 0;
            shown++;
        }
    }
    if (missing > shown && n < len)
        snprintf(buf + n, len - n, " and %d more", missing - shown);
}

/* Rank 0: collect every registration before the deadline. */
static int master_gather(struct gx_boot *b, uint64_t deadline, int timeout_ms)
{
    int missing = b->size - 1;
    while (missing > 0) {
        for (int r = 1; r < b->size; r++) {
            struct boot_in *in = &b->in[r];
            if (b->records[r].addr_len != 0 || !in->head)
                continue;
            struct boot_msg *m = in->head;
            if (m->tag != BOOT_TAG(0, BOOT_OP_REGISTER, 0) || m->len != sizeof(struct boot_rank_record))
                return gx_fail(GX_EPROTO, GX_SUB_BOOT, "rendezvous: rank %d sent an unexpected "
                               "first message", r);
            struct boot_rank_record rec;
            memcpy(&rec, m->data, sizeof(rec));
            in->head = m->next;
            if (!in->head)
                in->tail = NULL;
            free(m);
            rec.host[sizeof(rec.host) - 1] = '\0';
            rec.node_id[sizeof(rec.node_id) - 1] = '\0';
            int rc = check_record(b, &rec, r);
            if (rc == GX_EMISMATCH)
                b->records[r] = rec; /* reachable: it will be told why it fails */
            if (rc != GX_OK)
                return rc;
            b->records[r] = rec;
            missing--;
        }
        if (missing == 0)
            break;
        int left = gx_ms_left(deadline);
        if (left == 0) {
            char list[256];
            list_missing(b, list, sizeof(list));
            return gx_fail(GX_ETIMEOUT, GX_SUB_BOOT,
                           "rendezvous timed out after %d ms: %d of %d ranks never arrived "
                           "(ranks %s); check that they were started, with the same master "
                           "address and job key", timeout_ms, missing, b->size, list);
        }
        int rc = boot_progress_locked(b, left < 200 ? left : 200, -1, 0);
        if (rc < 0)
            return rc;
    }
    return GX_OK;
}

/* Binomial-tree broadcast of the record table from rank 0. */
static int spread_table(struct gx_boot *b, uint64_t deadline)
{
    size_t bytes = (size_t)b->size * sizeof(struct boot_rank_record);
    uint64_t tag = BOOT_TAG(0, BOOT_OP_TABLE, 0);
    if (b->rank != 0) {
        int high = 1;
        while (high * 2 <= b->rank)
            high *= 2;
        struct boot_rank_record self = b->records[b->rank];
        int rc = boot_recv_locked(b, b->rank - high, 0, tag, b->records, bytes, deadline);
        if (rc != GX_OK)
            return rc;
        if (memcmp(&self, &b->records[b->rank], sizeof(self)) != 0)
            return gx_fail(GX_EPROTO, GX_SUB_BOOT, "rendezvous: the table from rank 0 does "
                           "not hold our record (two processes with rank %d?)", b->rank);
    }
    for (int mask = 1; mask < b->size; mask <<= 1) {
        if (b->rank < mask && b->rank + mask < b->size) {
            int rc = boot_send_locked(b, b->rank + mask, 0, tag, b->records, bytes, deadline);
            if (rc != GX_OK)
                return rc;
        }
    }
    return GX_OK;
}

static int rendezvous_master(struct gx_boot *b, const struct boot_params *p, const char *master,
                             uint64_t deadline)
{
    struct gx_sockaddr maddr;
    int rc = gx_sock_resolve(master, -1, "master address", &maddr);
    if (rc != GX_OK)
        return rc;
    if (b->rank == 0) {
        if (p->listen_fd >= 0) {
            b->listen_fd = p->listen_fd;
            gx_sock_set_nonblocking(b->listen_fd);
            b->listen_addr = maddr;
        } else {
            struct gx_sockaddr bind_addr = maddr;
            if (gx_sock_listen(&bind_addr, 1024, &b->listen_fd) != GX_OK) {
                if (errno != EADDRNOTAVAIL) {
                    char astr[64];
                    return gx_fail(GX_ESYSTEM, GX_SUB_BOOT,
                                   "rank 0 cannot listen on the master address %s: %s (another "
                                   "job on this port?)", gx_sock_addr_str(&maddr, astr,
                                   sizeof(astr)), strerror(errno));
                }
                /* The master name is not a local address (NAT, alias): listen on all. */
                memset(&bind_addr.u.in6, 0, sizeof(bind_addr.u.in6));
                bind_addr.u.sa.sa_family = maddr.u.sa.sa_family;
                gx_sock_set_port(&bind_addr, gx_sock_port(&maddr));
                rc = listen_on(b, &bind_addr, "master, all interfaces");
                if (rc != GX_OK)
                    return rc;
            }
            b->listen_addr = maddr;
        }
        fill_own_record(b, p);
        rc = master_gather(b, deadline, p->init_timeout_ms);
    } else {
        b->records[0].addr_len = (uint16_t)maddr.len;
        memcpy(b->records[0].addr, &maddr.u.storage, maddr.len);
        struct gx_sockaddr local;
        if (local_address_towards(&maddr, &local) != GX_OK) {
            char astr[64];
            return gx_fail(GX_ECONNECT, GX_SUB_BOOT, "no route to the master address %s: %s",
                           gx_sock_addr_str(&maddr, astr, sizeof(astr)), strerror(errno));
        }
        rc = listen_on(b, &local, "bootstrap listener");
        if (rc != GX_OK)
            return rc;
        fill_own_record(b, p);
        rc = boot_send_locked(b, 0, 0, BOOT_TAG(0, BOOT_OP_REGISTER, 0), &b->records[b->rank],
                              sizeof(struct boot_rank_record), deadline);
    }
    if (rc == GX_OK)
        rc = spread_table(b, deadline);
    /* Rank 0 keeps no socket per rank: each registration stream ends here
     * (a rank that needs rank 0 later connects again), so rank 0 holds the
     * O(log N) sockets of the tree-shaped exchanges like every other rank. */
    if (rc == GX_OK && b->rank != 0)
        boot_say_bye_locked(b, 0, deadline);
    return rc;
}

/* ---- file:// ------------------------------------------------------------ */

static int hex_decode(const char *text, void *data, size_t len)
{
    uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        unsigned v;
        if (sscanf(text + 2 * i, "%2x", &v) != 1)
            return -1;
        p[i] = (uint8_t)v;
    }
    return text[2 * len] == '\0' || text[2 * len] == '\n' ? 0 : -1;
}


static void hex_encode(const void *data, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * len] = '\0';
}

int boot_parse_file_line(const char *line, const char *job_tag, int world_size, int *rank,
                         struct boot_rank_record *rec)
{
    char ljob[32], hex[512];
    _Static_assert(2 * sizeof(struct boot_rank_record) < sizeof(hex) - 1, "hex buffer");
    int lrank;
    if (sscanf(line, "gx1 %31s %d %511s", ljob, &lrank, hex) != 3 || strcmp(ljob, job_tag) != 0)
        return -1;
    if (lrank < 0 || lrank >= world_size || strlen(hex) != 2 * sizeof(*rec) ||
        hex_decode(hex, rec, sizeof(*rec)) != 0)
        return -1;
    rec->host[sizeof(rec->host) - 1] = '\0';
    rec->node_id[sizeof(rec->node_id) - 1] = '\0';
    *rank = lrank;
    return 0;
}

static int file_lock(int fd, short type)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET };
    while (fcntl(fd, F_SETLKW, &fl) != 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

static int file_open(const char *path, int flags)
{
    char err[768];
    int fd = gx_safe_open(path, flags, err, sizeof(err));
    if (fd < 0)
        gx_fail(GX_ESYSTEM, GX_SUB_BOOT, "file:// rendezvous: %s", err);
    return fd;
}

static int file_append_record(struct gx_boot *b, const char *path)
{
    int fd = file_open(path, O_RDWR | O_CREAT | O_APPEND);
    if (fd < 0)
        return GX_ESYSTEM;
    char job[17], rec[2 * sizeof(struct boot_rank_record) + 1];
    uint8_t tag[8];
    gx_auth_file_tag(&b->key, tag);
    hex_encode(tag, sizeof(tag), job);
    hex_encode(&b->records[b->rank], sizeof(struct boot_rank_record), rec);
    char *line = NULL;
    int n = asprintf(&line, "gx1 %s %d %s\n", job, b->rank, rec);
    int rc = GX_OK;
    if (n < 0) {
        rc = GX_ENOMEM;
    } else if (file_lock(fd, F_WRLCK) != 0 || write(fd, line, (size_t)n) != n) {
        rc = gx_fail(GX_ESYSTEM, GX_SUB_BOOT, "file:// rendezvous: cannot write '%s': %s",
                     path, strerror(errno));
    }
    file_lock(fd, F_UNLCK);
    free(line);
    if (rc == GX_OK && b->rank == 0 && (b->rdv_path = strdup(path)) != NULL)
        b->rdv_fd = fd; /* kept to remove this very file at the end */
    else
        close(fd);
    return rc;
}

void boot_rendezvous_cleanup(struct gx_boot *b)
{
    if (!b->rdv_path) /* also covers a boot freed before rdv_fd was set to -1 */
        return;
    if (gx_safe_unlink(b->rdv_path, b->rdv_fd) != 0 && errno != ENOENT)
        GX_WARN(GX_SUB_BOOT, "file:// rendezvous: left '%s' in place: %s", b->rdv_path,
                errno == ESTALE ? "it is no longer the file this job wrote" : strerror(errno));
    close(b->rdv_fd);
    free(b->rdv_path);
    b->rdv_fd = -1;
    b->rdv_path = NULL;
}

static int file_read_records(struct gx_boot *b, const char *path)
{
    int fd = file_open(path, O_RDONLY);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return fd >= 0 ? gx_fail(GX_ESYSTEM, GX_SUB_BOOT, "file:// rendezvous: cannot read "
                                 "'%s': %s", path, strerror(errno))
                       : GX_ESYSTEM;
    }
    file_lock(fileno(f), F_RDLCK);
    char job[17];
    uint8_t tag[8];
    gx_auth_file_tag(&b->key, tag);
    hex_encode(tag, sizeof(tag), job);
    char *line = NULL;
    size_t cap = 0;
    int rc = GX_OK;
    while (rc == GX_OK && getline(&line, &cap, f) > 0) {
        int lrank;
        struct boot_rank_record rec;
        if (boot_parse_file_line(line, job, b->size, &lrank, &rec) != 0)
            continue; /* another job's line, or not ours at all */
        rc = check_record(b, &rec, lrank);
        if (rc != GX_OK)
            break;
        struct boot_rank_record *have = &b->records[lrank];
        if (have->addr_len && memcmp(have, &rec, sizeof(rec)) != 0)
            rc = gx_fail(GX_EINVAL, GX_SUB_BOOT,
                         "file:// rendezvous: '%s' holds two records for rank %d (pids %d and "
                         "%d): the file is left from an earlier run with the same job key; "
                         "use a fresh file per job", path, lrank, (int)have->pid, (int)rec.pid);
        else
            *have = rec;
    }
    free(line);
    file_lock(fileno(f), F_UNLCK);
    fclose(f);
    return rc;
}

static int rendezvous_file(struct gx_boot *b, const struct boot_params *p, const char *path,
                           uint64_t deadline)
{
    struct gx_sockaddr addr;
    int rc = gx_sock_pick_interface(&addr, NULL, 0);
    if (rc == GX_OK)
        rc = listen_on(b, &addr, "bootstrap listener");
    if (rc != GX_OK)
        return rc;
    fill_own_record(b, p);
    struct boot_rank_record self = b->records[b->rank];
    rc = file_append_record(b, path);
    for (;;) {
        if (rc != GX_OK)
            return rc;
        rc = file_read_records(b, path);
        if (rc != GX_OK)
            return rc;
        if (memcmp(&self, &b->records[b->rank], sizeof(self)) != 0)
            return gx_fail(GX_EINVAL, GX_SUB_BOOT, "file:// rendezvous: another process "
                           "registered rank %d in '%s'", b->rank, path);
        int missing = 0;
        for (int r = 0; r < b->size; r++)
            missing += b->records[r].addr_len == 0;
        if (missing == 0)
            return GX_OK;
        if (gx_ms_left(deadline) == 0) {
            char list[256];
            list_missing(b, list, sizeof(list));
            return gx_fail(GX_ETIMEOUT, GX_SUB_BOOT,
                           "file:// rendezvous in '%s' timed out after %d ms: %d of %d ranks "
                           "never arrived (ranks %s)", path, p->init_timeout_ms, missing,
                           b->size, list);
        }
        /* Serve early connections meanwhile. */
        rc = boot_progress_locked(b, BOOT_FILE_POLL_MS, -1, 0);
        rc = rc < 0 ? rc : GX_OK;
    }
}

int gx_boot_create(const struct boot_params *p, struct gx_boot **out)
{
    if (p->world_size <= 0)
        return gx_fail(GX_EINVAL, GX_SUB_BOOT, "world size %d is invalid: it must be at least 1 "
                       "(set WORLD_SIZE, GX_SIZE or gx_config.world_size)", p->world_size);
    if (p->rank < 0 || p->rank >= p->world_size)
        return gx_fail(GX_EINVAL, GX_SUB_BOOT, "rank %d is out of range for world size %d",
                       p->rank, p->world_size);
    struct gx_boot *b;
    int rc = boot_alloc(p->rank, p->world_size, p->job_key, &b);
    if (rc != GX_OK)
        return gx_fail(rc, GX_SUB_BOOT, "out of memory for a job of %d ranks", p->world_size);
    uint64_t deadline = gx_deadline_after_ms(p->init_timeout_ms);
    const char *m = p->init_method;
    pthread_mutex_lock(&b->lock);
    if (strncmp(m, "tcp://", 6) == 0) {
        rc = rendezvous_master(b, p, m + 6, deadline);
    } else if (strncmp(m, "file://", 7) == 0) {
        rc = m[7] ? rendezvous_file(b, p, m + 7, deadline)
                  : gx_fail(GX_EINVAL, GX_SUB_BOOT, "init method 'file://' needs a path");
    } else {
        rc = gx_fail(GX_EINVAL, GX_SUB_BOOT, "init method '%s' is not env://, tcp://HOST:PORT "
                     "or file:///PATH", m);
    }
    pthread_mutex_unlock(&b->lock);
    if (rc != GX_OK) {
        /* Tell the ranks we know about, so they fail now rather than at their deadline. */
        if (rc != GX_ETIMEOUT) {
            char msg[512];
            snprintf(msg, sizeof(msg), "%s", gx_last_error_text());
            gx_boot_fail(b, rc, b->rank, msg);
        }
        boot_free(b);
        return rc;
    }
    *out = b;
    return GX_OK;
}
