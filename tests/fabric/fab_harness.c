/* fab_harness.c - see fab_harness.h. */
#include "fab_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"

int fab_cur_rank = -1;

static int write_full(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_full(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int fab_allgather(void *ctx, const void *mine, void *all, size_t len)
{
    struct fab_ctx *c = ctx;
    uint32_t l = (uint32_t)len;
    if (write_full(c->ctl_fd, &l, sizeof(l)) || write_full(c->ctl_fd, mine, len) ||
        read_full(c->ctl_fd, all, len * (size_t)c->nranks))
        return GX_EPEER;
    return GX_OK;
}

void fab_barrier(struct fab_ctx *c)
{
    char b = 0, all[64];
    FAB_CHECK(c->nranks <= 64, "too many ranks");
    FAB_CHECK(fab_allgather(c, &b, all, 1) == GX_OK, "barrier relay failed");
}

struct gx_fab_mr *fab_reg(struct fab_ctx *c, void *buf, size_t len, unsigned access)
{
    struct gx_fab_mr *mr = NULL;
    FAB_OK(gx_fab_mr_reg(c->dom, buf, len, GX_FAB_MEM_HOST, access, &mr));
    return mr;
}

struct gx_fab_ep *fab_pair(struct fab_ctx *c, int listener, int connector)
{
    struct gx_fab_addr addr, *all = calloc((size_t)c->nranks, sizeof(addr));
    struct gx_fab_listener *lst = NULL;
    memset(&addr, 0, sizeof(addr));
    if (c->rank == listener)
        FAB_OK(gx_fab_listen(c->dom, c->cq, &lst, &addr));
    FAB_CHECK(fab_allgather(c, &addr, all, sizeof(addr)) == GX_OK, "address exchange");
    struct gx_fab_ep *ep = NULL;
    uint64_t deadline = gx_deadline_after_ms(20000);
    if (c->rank == connector) {
        struct gx_fab_conn_param p = GX_FAB_CONN_PARAM_INIT;
        p.peer_rank = listener;
        FAB_OK(gx_fab_connect(c->dom, c->cq, &all[listener], &p, &ep));
        int rc;
        while ((rc = gx_fab_ep_establish(ep)) == GX_INPROGRESS)
            FAB_CHECK(gx_now_ns() < deadline, "connect did not finish");
        FAB_CHECK(rc == GX_OK, "establish: %s: %s", gx_strerror(rc), gx_last_error());
    } else if (c->rank == listener) {
        int rc;
        while ((rc = gx_fab_accept(lst, &ep)) == GX_INPROGRESS) {
            FAB_CHECK(gx_now_ns() < deadline, "accept did not finish");
            usleep(100);
        }
        FAB_CHECK(rc == GX_OK, "accept: %s", gx_strerror(rc));
        FAB_CHECK(ep->peer_rank == connector, "accepted rank %d, expected %d", ep->peer_rank,
                  connector);
        gx_fab_listener_close(lst);
    }
    free(all);
    return ep;
}

struct gx_fab_cqe fab_wait1(struct fab_ctx *c, int timeout_ms)
{
    struct gx_fab_cqe e;
    int n = gx_fab_cq_wait(c->cq, &e, 1, gx_deadline_after_ms(timeout_ms));
    FAB_CHECK(n == 1, "no completion within %d ms (%s)", timeout_ms,
              n < 0 ? gx_strerror(n) : "?");
    return e;
}

/* FAB_NETNS="nsA;nsB": rank r runs in the r-th named network namespace
 * (ip netns), so two ranks are two nodes joined by a veth pair. */
static void enter_netns(int rank)
{
    const char *list = getenv("FAB_NETNS");
    if (!list || !*list)
        return;
    const char *s = list;
    for (int i = 0; i < rank && s; i++)
        s = strchr(s, ';') ? strchr(s, ';') + 1 : NULL;
    FAB_CHECK(s && *s, "FAB_NETNS=%s names no namespace for rank %d", list, rank);
    char path[256];
    snprintf(path, sizeof(path), "/run/netns/%.*s", (int)strcspn(s, ";"), s);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    FAB_CHECK(fd >= 0 && setns(fd, CLONE_NEWNET) == 0, "entering %s: %s", path, strerror(errno));
    close(fd);
}

static int child_main(const char *provider, int rank, int nranks, int fd, const char *job_key,
                      fab_test_fn fn)
{
    fab_cur_rank = rank;
    enter_netns(rank);
    gx_log_set_rank(rank);
    struct fab_ctx c = { .provider = provider, .rank = rank, .nranks = nranks, .ctl_fd = fd };
    c.prov = gx_fab_provider_find(provider);
    if (!c.prov) {
        fprintf(stderr, "provider %s is not built: skipping\n", provider);
        return 77;
    }
    struct gx_fab_domain_attr attr = GX_FAB_DOMAIN_ATTR_INIT;
    attr.job_key = job_key;
    attr.rank = rank;
    FAB_OK(gx_fab_domain_open(c.prov, &attr, &c.dom));
    FAB_OK(gx_fab_cq_open(c.dom, &c.cq));
    int rc = fn(&c);
    gx_fab_cq_close(c.cq);
    gx_fab_domain_close(c.dom);
    return rc;
}

/* Relay all-gathers until every child has hung up. A child that exits early
 * drops out of later rounds. */
static int relay(unsigned n_, int *fds, pid_t *pids, int timeout_s)
{
    int n = (int)(n_ & 63);
    uint64_t deadline = gx_deadline_after_ms((long long)timeout_s * 1000);
    char **bufs = calloc(64, sizeof(char *));
    uint32_t *lens = calloc(64, sizeof(uint32_t));
    int *have = calloc(64, sizeof(int));
    int live = n, timed_out = 0;
    while (live > 0) {
        struct pollfd pfd[64];
        int map[64], np = 0;
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0 && !have[i]) {
                pfd[np].fd = fds[i];
                pfd[np].events = POLLIN;
                map[np++] = i;
            }
        int left = gx_ms_left(deadline);
        if (left == 0) {
            timed_out = 1;
            break;
        }
        if (np && poll(pfd, (nfds_t)np, left > 200 ? 200 : left) < 0 && errno != EINTR)
            break;
        for (int k = 0; k < np; k++) {
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int i = map[k];
            uint32_t l;
            if (read_full(fds[i], &l, sizeof(l)) != 0) {
                close(fds[i]);
                fds[i] = -1;
                live--;
                continue;
            }
            bufs[i] = realloc(bufs[i], l ? l : 1);
            if (read_full(fds[i], bufs[i], l) != 0) {
                close(fds[i]);
                fds[i] = -1;
                live--;
                continue;
            }
            lens[i] = l;
            have[i] = 1;
        }
        int ready = live > 0;
        uint32_t len = 0;
        for (int i = 0; i < n; i++) {
            if (fds[i] < 0)
                continue;
            if (!have[i])
                ready = 0;
            else
                len = lens[i];
        }
        if (!ready)
            continue;
        char *all = calloc((size_t)n, len ? len : 1);
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0 && lens[i] == len)
                memcpy(all + (size_t)i * len, bufs[i], len);
        for (int i = 0; i < n; i++) {
            if (fds[i] >= 0)
                (void)write_full(fds[i], all, (size_t)len * (size_t)n);
            have[i] = 0;
        }
        free(all);
    }
    for (int i = 0; i < n; i++)
        free(bufs[i]);
    free(bufs);
    free(lens);
    free(have);
    if (timed_out) {
        fprintf(stderr, "watchdog: test did not finish within %d s; killing ranks\n", timeout_s);
        for (int i = 0; i < n; i++)
            kill(pids[i], SIGKILL);
    }
    return timed_out;
}

int fab_run(const char *provider, int nranks, int timeout_s, const char *job_key, fab_test_fn fn)
{
    pid_t pids[64];
    int fds[64];
    if (nranks > 64)
        return 1;
    fflush(NULL);
    for (int i = 0; i < nranks; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            return 1;
        pids[i] = fork();
        if (pids[i] == 0) {
            close(sv[0]);
            for (int j = 0; j < i; j++)
                close(fds[j]);
            alarm((unsigned)timeout_s + 5); /* second watchdog if the parent dies */
            int rc = child_main(provider, i, nranks, sv[1], job_key, fn);
            fflush(NULL);
            _exit(rc);
        }
        close(sv[1]);
        fds[i] = sv[0];
    }
    int timed_out = relay((unsigned)nranks, fds, pids, timeout_s);
    int result = 0, skipped = 0;
    for (int i = 0; i < nranks; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
            skipped++;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d failed (%s %d)\n", i,
                    WIFEXITED(st) ? "exit" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            result = 1;
        }
    }
    if (timed_out)
        return 1;
    if (result)
        return 1;
    return skipped == nranks ? 77 : 0;
}
