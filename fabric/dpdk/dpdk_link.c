/*
 * dpdk_link.c - starting, stopping and closing the port on EAL's interrupt
 * thread, once the port has been started.
 *
 * Why: DPDK 22.11's memif PMD runs its control channel on EAL's interrupt
 * thread; a peer's disconnect (its process exited or stopped its port) is
 * handled there by memif_disconnect(), which closes the queue eventfds and
 * frees the shared-memory regions without a lock against a
 * rte_eth_dev_stop() on another thread (which runs memif_disconnect() too).
 * Both at once freed the same memory twice here ("EAL: Error: Invalid
 * memory", SIGSEGV). A stop, restart or close from gx's thread is therefore
 * run as an EAL alarm callback, which the interrupt thread executes between
 * the PMD's own callbacks, never beside them; the caller waits for it with a
 * deadline. See docs/dpdk.md "memif and DPDK 22.11's interrupt thread".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_alarm.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "common/clock.h"
#include "common/log.h"
#include "fabric/dpdk/dpdk.h"

enum { JOB_PENDING, JOB_DONE, JOB_ABANDONED };

struct link_job {
    uint16_t port;
    enum dpdk_link_op op;
    int rc;
    int state; /* JOB_*, atomic */
};

static int run_op(uint16_t port, enum dpdk_link_op op)
{
    int rc = 0;
    switch (op) {
    case DPDK_LINK_START:
        rc = rte_eth_dev_start(port);
        break;
    case DPDK_LINK_STOP:
        rc = rte_eth_dev_stop(port);
        break;
    case DPDK_LINK_RESTART:
        rte_eth_dev_stop(port);
        rc = rte_eth_dev_start(port);
        break;
    case DPDK_LINK_CLOSE:
        rte_eth_dev_stop(port); /* a stopped port says so and returns */
        rc = rte_eth_dev_close(port);
        break;
    }
    return rc;
}

static void job_run(void *arg)
{
    struct link_job *j = arg;
    j->rc = run_op(j->port, j->op);
    int want = JOB_PENDING;
    if (!__atomic_compare_exchange_n(&j->state, &want, JOB_DONE, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        free(j); /* the caller gave up waiting */
}

int dpdk_link_ctl(uint16_t port, enum dpdk_link_op op, unsigned timeout_ms, int *op_rc)
{
    struct link_job *j = calloc(1, sizeof(*j));
    if (!j)
        return GX_ENOMEM;
    j->port = port;
    j->op = op;
    int rc = rte_eal_alarm_set(1, job_run, j);
    if (rc < 0) {
        free(j);
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "dpdk: port %u: cannot queue the port operation "
                       "on EAL's interrupt thread: %s", port, rte_strerror(-rc));
    }
    uint64_t deadline = gx_deadline_after_ms(timeout_ms);
    struct timespec nap = { 0, 50000 };
    while (__atomic_load_n(&j->state, __ATOMIC_ACQUIRE) == JOB_PENDING && gx_now_ns() < deadline)
        nanosleep(&nap, NULL);
    int want = JOB_PENDING;
    if (__atomic_compare_exchange_n(&j->state, &want, JOB_ABANDONED, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return gx_fail(GX_ETIMEOUT, GX_SUB_FABRIC, "dpdk: port %u: EAL's interrupt thread did not "
                       "run the port operation within %u ms", port, timeout_ms);
    if (op_rc)
        *op_rc = j->rc;
    free(j);
    return GX_OK;
}

/* A memif zero-copy client may connect only with the memory file it had
 * (dpdk_memif.c); without it the port stays down and the endpoints fail
 * through their side channel, naming the peer. */
static bool zc_file_intact(struct dpdk_link_state *l)
{
    if (!l->zc_client || dpdk_memif_zc_file_intact())
        return true;
    l->zc_broken = true;
    GX_WARN(GX_SUB_FABRIC, "dpdk: the memif zero-copy client cannot connect again: DPDK 22.11 "
            "closed this process's memory file when its connection ended; the port stays down "
            "(zero-copy=no in GX_DPDK_VDEV reconnects in copy mode)");
    return false;
}

/* A memif client that started before its server never retries by itself:
 * it is restarted now and then, but only until its link has been up once: a
 * memif peer whose link went down after that has left (exited or closed its
 * port), and reconnecting to a server in its exit path made DPDK 22.11 abort
 * that server (docs/dpdk.md). */
void dpdk_link_kick(uint16_t port, struct dpdk_link_state *l, uint64_t *link_down)
{
    uint64_t now = rte_get_timer_cycles();
    if (now - l->last_kick < rte_get_timer_hz() / 20)
        return;
    l->last_kick = now;
    if (l->closed || l->peer_left)
        return;
    int rc = -1;
    if (l->zc_client && (!__atomic_load_n(&l->peer_up, __ATOMIC_ACQUIRE) || l->zc_broken))
        return;
    if (!l->started) {
        if (!zc_file_intact(l))
            return;
        l->restarts++;
        dpdk_link_ctl(port, DPDK_LINK_START, 1000, &rc);
        l->started = rc == 0;
        l->last_start = now;
        return;
    }
    struct rte_eth_link link;
    memset(&link, 0, sizeof(link));
    if (rte_eth_link_get_nowait(port, &link) != 0 || link.link_status)
        return;
    (*link_down)++;
    if (l->was_up && l->restart_when_down) {
        l->peer_left = true;
        GX_INFO(GX_SUB_FABRIC, "dpdk: the memif peer left (link down after it was up); the "
                "port is not reconnected");
        return;
    }
    /* memif connects asynchronously after a start: restarting during that
     * handshake broke the server's control channel. Only a link down for
     * seconds is restarted. */
    if (l->restart_when_down && now - l->last_start > 3 * rte_get_timer_hz()) {
        l->restarts++;
        if (l->zc_client) { /* the stop may close the memory file: look before starting */
            dpdk_link_ctl(port, DPDK_LINK_STOP, 1000, NULL);
            l->started = false;
            if (!zc_file_intact(l))
                return;
        }
        dpdk_link_ctl(port, l->zc_client ? DPDK_LINK_START : DPDK_LINK_RESTART, 1000, &rc);
        l->started = rc == 0;
        l->last_start = now;
    }
}
