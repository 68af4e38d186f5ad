/*
 * dpdk_port.c - the process's DPDK state: EAL (initialised once), the one
 * port GX_DPDK_VDEV names, its mempool, the connection-id table, receive
 * dispatch to endpoints, transmit, and receive-side fault injection
 * (GX_DPDK_DROP / GX_DPDK_REORDER / GX_DPDK_DUP).
 *
 * EAL pins the calling thread to its main lcore; we give the thread its
 * former CPU set back right after, so a rank's progress thread is not tied
 * to CPU 0 with every other rank of the machine.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include "common/log.h"
#include "common/param.h"
#include "fabric/dpdk/dpdk.h"

GX_PARAM_DEFINE(gx_param_dpdk_eal_args, "GX_DPDK_EAL_ARGS", GX_PARAM_STRING,
                "--no-huge -m 512 --no-pci --no-shconf --no-telemetry", NULL,
                "EAL arguments of the dpdk provider (space-separated; --no-shconf: no files "
                "under /var/run/dpdk). gx adds "
                "--file-prefix gx-<pid>, -l <current cpu> and --log-level=warning unless given.");
GX_PARAM_DEFINE(gx_param_dpdk_vdev, "GX_DPDK_VDEV", GX_PARAM_STRING, "", NULL,
                "The dpdk provider's port: a vdev (net_memif0,role=server,socket=/run/x.sock; "
                "net_af_packet0,iface=eth1) or a PCI address (0000:3b:00.0). A ';'-separated "
                "list is indexed by the rank (tests on one machine).");
GX_PARAM_DEFINE(gx_param_dpdk_mtu, "GX_DPDK_MTU", GX_PARAM_INT, "0", NULL,
                "IP MTU the dpdk provider sets on its port (0 = keep the port's, except on "
                "memif, which has none: the largest frame a ring buffer holds, 64000 or bsize "
                "less 14; 9000 for jumbo frames where the port allows).");
GX_PARAM_DEFINE(gx_param_dpdk_ip, "GX_DPDK_IP", GX_PARAM_STRING, "", NULL,
                "IPv4 source address of dpdk frames (default: the side-channel interface's).");
GX_PARAM_DEFINE(gx_param_dpdk_mbufs, "GX_DPDK_MBUFS", GX_PARAM_INT, "8191", NULL,
                "Packet buffers in the dpdk provider's mempool.");
GX_PARAM_DEFINE(gx_param_dpdk_drop, "GX_DPDK_DROP", GX_PARAM_STRING, "0", NULL,
                "Fault injection: fraction (0.05 or 5%) of received dpdk frames dropped.");
GX_PARAM_DEFINE(gx_param_dpdk_reorder, "GX_DPDK_REORDER", GX_PARAM_STRING, "0", NULL,
                "Fault injection: fraction of received dpdk frames held back behind the next.");
GX_PARAM_DEFINE(gx_param_dpdk_dup, "GX_DPDK_DUP", GX_PARAM_STRING, "0", NULL,
                "Fault injection: fraction of received dpdk frames processed twice.");

struct conn_slot {
    uint32_t id, cookie;
    struct dpdk_ep *ep;
    struct dpdk_domain *dom;
};

static struct {
    pthread_mutex_t init_lock;
    int init_rc; /* 1 = not tried */
    char init_err[512];
    uint16_t port_id;
    struct rte_mempool *pool;
    uint8_t mac[6];
    uint32_t ip;
    uint16_t udp_port, mtu;
    rte_spinlock_recursive_t lock;
    struct conn_slot *conns;
    uint32_t conn_next;
    int ndomains;
    struct dpdk_port_stats st;
    double p_drop, p_reorder, p_dup;
    uint64_t rng;
    struct rte_mbuf *held;
    struct dpdk_link_state ln;
    struct dpdk_memif_plan memif;
    uint8_t scratch[GX_DPDK_MTU_MAX + GX_DPDK_ETH_LEN];
    uint8_t replay_scratch[GX_DPDK_MTU_MAX + GX_DPDK_ETH_LEN];
    int park_budget;
} P = { .init_lock = PTHREAD_MUTEX_INITIALIZER, .init_rc = 1,
        .lock = RTE_SPINLOCK_RECURSIVE_INITIALIZER };

static double parse_rate(const struct gx_param *p)
{
    const char *t = gx_param_text(p);
    char *end;
    double v = strtod(t, &end);
    if (*end == '%')
        v /= 100.0;
    if (v < 0 || v > 0.9) {
        GX_WARN(GX_SUB_FABRIC, "dpdk: %s=%s is outside 0..0.9 (or 0%%..90%%); ignored", p->name, t);
        return 0;
    }
    return v;
}

static double rnd(void)
{
    P.rng ^= P.rng << 13;
    P.rng ^= P.rng >> 7;
    P.rng ^= P.rng << 17;
    return (double)(P.rng >> 11) / (double)(1ull << 53);
}

/* The entry of a ';'-separated list for `rank` (rank < 0: the first). */
static void pick_entry(const char *list, int rank, char *out, size_t len)
{
    int n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ';';
    int want = rank < 0 ? 0 : rank % n;
    const char *s = list;
    for (int i = 0; i < want; i++)
        s = strchr(s, ';') + 1;
    size_t l = strcspn(s, ";");
    snprintf(out, len, "%.*s", (int)(l < len ? l : len - 1), s);
}

static int eal_init(int rank)
{
    char vdev[512], args[2048];
    pick_entry(gx_param_text(&gx_param_dpdk_vdev), rank, vdev, sizeof(vdev));
    const char *user = gx_param_text(&gx_param_dpdk_eal_args);
    cpu_set_t saved;
    CPU_ZERO(&saved);
    pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
    int cpu = sched_getcpu();
    size_t n = (size_t)snprintf(args, sizeof(args), "gx %s", user);
    if (!strstr(user, "--file-prefix"))
        n += (size_t)snprintf(args + n, sizeof(args) - n, " --file-prefix gx-%d", (int)getpid());
    if (!strstr(user, "-l ") && !strstr(user, "-c ") && !strstr(user, "--lcores"))
        n += (size_t)snprintf(args + n, sizeof(args) - n, " -l %d", cpu < 0 ? 0 : cpu);
    if (!strstr(user, "--log-level"))
        n += (size_t)snprintf(args + n, sizeof(args) - n, " --log-level=warning");
    if (vdev[0] && strncmp(vdev, "net_", 4) == 0)
        n += (size_t)snprintf(args + n, sizeof(args) - n, " --vdev %s", vdev);
    long long mtu = 0;
    if (gx_param_int(&gx_param_dpdk_mtu, &mtu) != GX_OK || mtu < 0 ||
        (mtu > 0 && mtu < 576) || mtu > GX_DPDK_MTU_MAX)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "GX_DPDK_MTU must be 0 or 576..%u",
                       GX_DPDK_MTU_MAX);
    int rc = dpdk_memif_plan(vdev, mtu, &P.memif);
    if (rc != GX_OK)
        return rc;
    if (P.memif.memif)
        n = dpdk_memif_args(&P.memif, vdev, user, args, n, sizeof(args));
    else if (vdev[0] && strncmp(vdev, "net_", 4) != 0)
        n += (size_t)snprintf(args + n, sizeof(args) - n, " -a %s", vdev);
    P.ln.restart_when_down = strstr(vdev, "memif") && strstr(vdev, "role=client");
    if (n >= sizeof(args))
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "dpdk: GX_DPDK_EAL_ARGS and GX_DPDK_VDEV are "
                       "too long (%zu bytes)", n);
    GX_INFO(GX_SUB_FABRIC, "dpdk: EAL arguments: %s", args + 3);
    char *argv[64];
    int argc = 0;
    for (char *save = NULL, *t = strtok_r(args, " ", &save); t && argc < 63;
         t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    argv[argc] = NULL;
    for (int i = 1; i < argc; i++)
        GX_TRACE(GX_SUB_FABRIC, "dpdk: EAL argument %s", argv[i]);
    rc = rte_eal_init(argc, argv);
    pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
    if (rc >= 0)
        rmdir(rte_eal_get_runtime_dir()); /* empty with --no-shconf --no-telemetry */
    if (rc < 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "dpdk: rte_eal_init failed: %s (GX_DPDK_EAL_ARGS"
                       "='%s', GX_DPDK_VDEV entry '%s')", rte_strerror(rte_errno), user, vdev);
    return GX_OK;
}

static int port_setup(void)
{
    uint16_t pid = RTE_MAX_ETHPORTS;
    uint16_t i;
    RTE_ETH_FOREACH_DEV(i) {
        pid = i;
        break;
    }
    if (pid == RTE_MAX_ETHPORTS)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "dpdk: no port: set GX_DPDK_VDEV to a "
                       "vdev (net_memif0,role=server) or a PCI address bound to a DPDK driver");
    P.port_id = pid;
    long long mtu = P.memif.mtu, nmbufs = 8191;
    if (gx_param_int(&gx_param_dpdk_mbufs, &nmbufs) != GX_OK || nmbufs < 1023)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "GX_DPDK_MBUFS must be at least 1023");
    uint16_t cur = 1500;
    rte_eth_dev_get_mtu(pid, &cur);
    P.mtu = mtu ? (uint16_t)mtu : cur;
    uint32_t room = RTE_PKTMBUF_HEADROOM + P.mtu + GX_DPDK_ETH_LEN + 64;
    if (room < RTE_PKTMBUF_HEADROOM + dpdk_memif_bsize(P.mtu)) /* a memif buffer per frame */
        room = RTE_PKTMBUF_HEADROOM + dpdk_memif_bsize(P.mtu);
    if (room < RTE_MBUF_DEFAULT_BUF_SIZE)
        room = RTE_MBUF_DEFAULT_BUF_SIZE;
    /* The default count fits big buffers (memif frames up to 64000 bytes)
     * into 256 MiB of EAL memory. */
    if (!getenv("GX_DPDK_MBUFS") && (uint64_t)nmbufs * room > (256ull << 20))
        nmbufs = (long long)((256ull << 20) / room) - 1 < 1023 ? 1023
                 : (long long)((256ull << 20) / room) - 1;
    char name[64];
    snprintf(name, sizeof(name), "gx_pool_%d", (int)getpid());
    P.pool = rte_pktmbuf_pool_create(name, (unsigned)nmbufs, 256, 0, (uint16_t)room,
                                     rte_eth_dev_socket_id(pid));
    P.park_budget = (int)(nmbufs / 4);
    if (!P.pool)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "dpdk: mempool of %lld buffers of %u bytes: %s "
                       "(raise -m in GX_DPDK_EAL_ARGS or lower GX_DPDK_MBUFS)", nmbufs, room,
                       rte_strerror(rte_errno));
    if (P.memif.zc && dpdk_memif_zc_check(P.pool) != GX_OK)
        return GX_EUNSUPPORTED;
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof(conf));
    conf.txmode.offloads = dpdk_zc_setup(pid, (unsigned)nmbufs, P.memif.zc);
    int rc = rte_eth_dev_configure(pid, 1, 1, &conf);
    if (rc < 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "dpdk: configuring port %u: %s", pid,
                       rte_strerror(-rc));
    if (mtu && (rc = rte_eth_dev_set_mtu(pid, (uint16_t)mtu)) < 0) {
        /* Some vdevs (memif) have no MTU to set but carry frames up to
         * max_mtu in chained buffers. */
        struct rte_eth_dev_info info;
        memset(&info, 0, sizeof(info));
        rte_eth_dev_info_get(pid, &info);
        if (rc == -ENOTSUP && info.max_mtu >= mtu) {
            GX_INFO(GX_SUB_FABRIC, "dpdk: port %u has no MTU setting; frames of up to %lld bytes "
                    "(its limit is %u)", pid, mtu, info.max_mtu);
        } else {
            GX_WARN(GX_SUB_FABRIC, "dpdk: port %u refused MTU %lld (%s, max %u); using %u", pid,
                    mtu, rte_strerror(-rc), info.max_mtu, cur);
            P.mtu = cur;
        }
    }
    uint16_t nrx = 1024, ntx = 1024;
    rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nrx, &ntx);
    rc = rte_eth_rx_queue_setup(pid, 0, nrx, (unsigned)rte_eth_dev_socket_id(pid), NULL, P.pool);
    if (rc == 0)
        rc = rte_eth_tx_queue_setup(pid, 0, ntx, (unsigned)rte_eth_dev_socket_id(pid), NULL);
    if (rc < 0)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "dpdk: setting up the queues of port %u: %s",
                       pid, rte_strerror(-rc));
    /* A memif client in zero-copy mode starts once a peer is known to have
     * started its port (dpdk_port_peer_up): a handshake the server refuses
     * ("ID not found" before its start) costs a zero-copy client its memory
     * file (dpdk_memif.c). */
    P.ln.zc_client = P.memif.zc;
    rc = P.memif.zc ? -EAGAIN : rte_eth_dev_start(pid);
    if (rc < 0 && !P.ln.restart_when_down)
        return gx_fail(GX_ESYSTEM, GX_SUB_FABRIC, "dpdk: starting port %u: %s", pid,
                       rte_strerror(-rc));
    /* A memif client whose server is not up yet fails to start: it is
     * started again from the data path until it connects. */
    P.ln.started = rc == 0;
    P.ln.last_start = rte_get_timer_cycles();
    rte_eth_promiscuous_enable(pid); /* af_packet and some vdevs; failure is harmless */
    struct rte_ether_addr mac;
    rte_eth_macaddr_get(pid, &mac);
    memcpy(P.mac, mac.addr_bytes, 6);
    return GX_OK;
}

static void port_stop_at_exit(void)
{
    rte_spinlock_recursive_lock(&P.lock);
    bool started = P.ln.started;
    P.ln.started = false;
    P.ln.closed = true; /* a progress thread still polling finds nothing to touch */
    rte_spinlock_recursive_unlock(&P.lock);
    /* EAL leaves /var/run/dpdk/<prefix>; with --no-shconf it is empty. */
    rmdir(rte_eal_get_runtime_dir());
    /* Stopped and closed on EAL's interrupt thread (dpdk_link.c), which may
     * be handling the peer's disconnect right now: never both at once. */
    if (started && dpdk_link_ctl(P.port_id, DPDK_LINK_CLOSE, 1000, NULL) != GX_OK)
        GX_INFO(GX_SUB_FABRIC, "dpdk: port not closed at exit: %s", gx_last_error());
}

int dpdk_port_up(int rank)
{
    pthread_mutex_lock(&P.init_lock);
    if (P.init_rc == 1) {
        P.conns = calloc(DPDK_MAX_CONNS, sizeof(*P.conns));
        P.init_rc = P.conns ? eal_init(rank) : GX_ENOMEM;
        if (P.init_rc == GX_OK)
            P.init_rc = port_setup();
        if (P.init_rc == GX_OK) {
            P.udp_port = GX_DPDK_UDP_PORT;
            P.p_drop = parse_rate(&gx_param_dpdk_drop);
            P.p_reorder = parse_rate(&gx_param_dpdk_reorder);
            P.p_dup = parse_rate(&gx_param_dpdk_dup);
            dpdk_cost_init();
            P.rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 20;
            P.conn_next = (uint32_t)(P.rng >> 40);
            const char *ip = gx_param_text(&gx_param_dpdk_ip);
            if (ip[0] && inet_pton(AF_INET, ip, &P.ip) != 1)
                GX_WARN(GX_SUB_FABRIC, "dpdk: GX_DPDK_IP=%s is not an IPv4 address; ignored", ip);
            atexit(port_stop_at_exit);
            char n[64], d[128];
            dpdk_port_describe(n, sizeof(n), d, sizeof(d));
            GX_INFO(GX_SUB_FABRIC, "dpdk: port %s (%s), faults drop %.3f reorder %.3f dup %.3f",
                    n, d, P.p_drop, P.p_reorder, P.p_dup);
        } else {
            snprintf(P.init_err, sizeof(P.init_err), "%s", gx_last_error());
        }
    }
    int rc = P.init_rc;
    pthread_mutex_unlock(&P.init_lock);
    if (rc != GX_OK)
        return gx_fail(rc, GX_SUB_FABRIC, "%s", P.init_err);
    return GX_OK;
}

int dpdk_port_describe(char *name, size_t nlen, char *detail, size_t dlen)
{
    if (P.init_rc != GX_OK)
        return GX_ESTATE;
    struct rte_eth_dev_info info;
    memset(&info, 0, sizeof(info));
    rte_eth_dev_info_get(P.port_id, &info);
    char dn[RTE_ETH_NAME_MAX_LEN] = "";
    rte_eth_dev_get_name_by_port(P.port_id, dn);
    snprintf(name, nlen, "%s", dn);
    snprintf(detail, dlen, "driver %s, MAC %02x:%02x:%02x:%02x:%02x:%02x, MTU %u",
             info.driver_name ? info.driver_name : "?", P.mac[0], P.mac[1], P.mac[2], P.mac[3],
             P.mac[4], P.mac[5], P.mtu);
    return GX_OK;
}

int dpdk_port_attach(struct dpdk_domain *dom)
{
    char name[64];
    static int seq;
    snprintf(name, sizeof(name), "gx_dom_%d_%d", (int)getpid(), __atomic_fetch_add(&seq, 1, 0));
    dom->ring = rte_ring_create(name, 4096, SOCKET_ID_ANY, RING_F_SC_DEQ);
    if (!dom->ring)
        return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "dpdk: handover ring: %s",
                       rte_strerror(rte_errno));
    rte_spinlock_recursive_lock(&P.lock);
    P.ndomains++;
    rte_spinlock_recursive_unlock(&P.lock);
    return GX_OK;
}

void dpdk_port_detach(struct dpdk_domain *dom)
{
    rte_spinlock_recursive_lock(&P.lock);
    P.ndomains--;
    void *m;
    while (rte_ring_dequeue(dom->ring, &m) == 0)
        rte_pktmbuf_free(m);
    rte_ring_free(dom->ring);
    dom->ring = NULL;
    rte_spinlock_recursive_unlock(&P.lock);
}

void dpdk_port_peer_up(void)
{
    __atomic_store_n(&P.ln.peer_up, true, __ATOMIC_RELEASE);
}

void dpdk_port_local(uint8_t mac[6], uint32_t *ip, uint16_t *udp_port, uint16_t *mtu)
{
    memcpy(mac, P.mac, 6);
    *ip = P.ip;
    *udp_port = P.udp_port;
    *mtu = P.mtu;
}

int dpdk_port_conn_add(struct dpdk_ep *ep)
{
    rte_spinlock_recursive_lock(&P.lock);
    for (uint32_t i = 0; i < DPDK_MAX_CONNS; i++) {
        uint32_t id = P.conn_next++;
        struct conn_slot *s = &P.conns[id % DPDK_MAX_CONNS];
        if (s->ep || id == 0)
            continue;
        s->id = id;
        s->ep = ep;
        s->dom = ep->dom;
        s->cookie = ep->cookie;
        ep->conn_id = id;
        rte_spinlock_recursive_unlock(&P.lock);
        return GX_OK;
    }
    rte_spinlock_recursive_unlock(&P.lock);
    return gx_fail(GX_ENOMEM, GX_SUB_FABRIC, "dpdk: all %u connection ids are in use",
                   DPDK_MAX_CONNS);
}

void dpdk_port_conn_del(struct dpdk_ep *ep)
{
    rte_spinlock_recursive_lock(&P.lock);
    struct conn_slot *s = &P.conns[ep->conn_id % DPDK_MAX_CONNS];
    if (s->ep == ep)
        memset(s, 0, sizeof(*s));
    rte_spinlock_recursive_unlock(&P.lock);
}

static void link_kick(void);

/* Parse and deliver one frame; frees it unless handed to another domain. */
static void deliver(struct dpdk_domain *dom, struct rte_mbuf *m)
{
    const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
    size_t len = rte_pktmbuf_pkt_len(m);
    if (m->nb_segs > 1) {
        if (len > sizeof(P.scratch)) {
            P.st.drops[GX_DPDK_DROP_FIELDS]++;
            rte_pktmbuf_free(m);
            return;
        }
        f = rte_pktmbuf_read(m, 0, (uint32_t)len, P.scratch);
    }
    struct gx_dpdk_hdr h;
    const uint8_t *payload;
    int why = gx_dpdk_parse(f, len, P.udp_port, &h, &payload);
    if (why) {
        P.st.drops[why]++;
        rte_pktmbuf_free(m);
        return;
    }
    struct conn_slot *s = &P.conns[h.conn_id % DPDK_MAX_CONNS];
    if (!s->ep || s->id != h.conn_id) {
        P.st.unknown_conn++;
    } else if (s->cookie != h.cookie) {
        P.st.bad_cookie++;
    } else if (s->dom != dom) {
        if (rte_ring_enqueue(s->dom->ring, m) != 0)
            P.st.ring_full++;
        else
            return;
    } else if (dpdk_rx_frame(s->ep, &h, payload, m)) {
        return; /* parked by the endpoint */
    }
    rte_pktmbuf_free(m);
}

bool dpdk_port_park(void)
{
    int left = __atomic_load_n(&P.park_budget, __ATOMIC_RELAXED);
    while (left > 0)
        if (__atomic_compare_exchange_n(&P.park_budget, &left, left - 1, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return true;
    return false;
}

void dpdk_port_unpark(struct rte_mbuf *m)
{
    rte_pktmbuf_free(m);
    __atomic_add_fetch(&P.park_budget, 1, __ATOMIC_RELAXED);
}

void dpdk_port_frame(struct rte_mbuf *m, struct gx_dpdk_hdr *h, const uint8_t **payload)
{
    const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
    size_t len = rte_pktmbuf_pkt_len(m);
    if (m->nb_segs > 1)
        f = rte_pktmbuf_read(m, 0, (uint32_t)len, P.replay_scratch);
    gx_dpdk_parse(f, len, P.udp_port, h, payload);
}

static void inject_and_deliver(struct dpdk_domain *dom, struct rte_mbuf *m)
{
    if (P.p_drop > 0 && rnd() < P.p_drop) {
        P.st.inj_drop++;
        rte_pktmbuf_free(m);
        return;
    }
    if (P.p_dup > 0 && rnd() < P.p_dup) {
        P.st.inj_dup++;
        rte_mbuf_refcnt_update(m, 1);
        deliver(dom, m);
    }
    if (P.p_reorder > 0 && !P.held && rnd() < P.p_reorder) {
        P.st.inj_reorder++;
        P.held = m;
        return;
    }
    deliver(dom, m);
    if (P.held) {
        struct rte_mbuf *h = P.held;
        P.held = NULL;
        deliver(dom, h);
    }
}

void dpdk_port_poll(struct dpdk_domain *dom)
{
    struct rte_mbuf *m[DPDK_BURST];
    uint64_t t0 = dpdk_port_cpu_ns();
    if (!rte_spinlock_recursive_trylock(&P.lock))
        return;
    unsigned n = rte_ring_dequeue_burst(dom->ring, (void **)m, DPDK_BURST, NULL);
    for (unsigned i = 0; i < n; i++)
        deliver(dom, m[i]);
    if (!P.ln.started) {
        link_kick();
        rte_spinlock_recursive_unlock(&P.lock);
        return;
    }
    n = rte_eth_rx_burst(P.port_id, 0, m, DPDK_BURST);
    P.st.rx_frames += n;
    P.ln.was_up |= n > 0;
    /* A memif client whose first handshake the server refused ("ID not
     * found": its port was not started yet) waits with its link down; one
     * that only receives never transmits, which was the only other kick. */
    if (n == 0 && P.ln.restart_when_down && !P.ln.was_up)
        link_kick();
    for (unsigned i = 0; i < n; i++)
        inject_and_deliver(dom, m[i]);
    if (n == 0 && P.held) {
        struct rte_mbuf *h = P.held;
        P.held = NULL;
        deliver(dom, h);
    }
    rte_spinlock_recursive_unlock(&P.lock);
    if (n)
        dpdk_port_work(t0);
}

int dpdk_port_alloc(struct rte_mbuf **m, unsigned n)
{
    return rte_pktmbuf_alloc_bulk(P.pool, m, n) == 0 ? GX_OK : GX_ENOMEM;
}

static void link_kick(void)
{
    dpdk_link_kick(P.port_id, &P.ln, &P.st.link_down);
}

unsigned dpdk_port_tx(struct rte_mbuf **m, unsigned n)
{
    rte_spinlock_recursive_lock(&P.lock);
    unsigned sent = n && P.ln.started ? rte_eth_tx_burst(P.port_id, 0, m, (uint16_t)n) : 0;
    P.st.tx_frames += sent;
    P.ln.was_up |= sent > 0;
    if (sent < n) {
        P.st.tx_full++;
        if (sent == 0)
            link_kick();
    }
    rte_spinlock_recursive_unlock(&P.lock);
    for (unsigned i = sent; i < n; i++)
        rte_pktmbuf_free(m[i]);
    return sent;
}

int dpdk_port_send_raw(const void *frame, size_t len)
{
    struct rte_mbuf *m;
    if (len > (size_t)P.mtu + GX_DPDK_ETH_LEN || dpdk_port_alloc(&m, 1) != GX_OK)
        return GX_ENOMEM;
    char *d = rte_pktmbuf_append(m, (uint16_t)len);
    if (!d) {
        rte_pktmbuf_free(m);
        return GX_ENOMEM;
    }
    memcpy(d, frame, len);
    return dpdk_port_tx(&m, 1) == 1 ? GX_OK : GX_ENOMEM;
}

void dpdk_port_stats(struct dpdk_port_stats *out)
{
    rte_spinlock_recursive_lock(&P.lock);
    *out = P.st;
    out->restarts = P.ln.restarts;
    out->peer_left = P.ln.peer_left;
    rte_spinlock_recursive_unlock(&P.lock);
    dpdk_cost_read(&out->work_ns, &out->work_calls);
}
