/*
 * dpdk_memif.c - what gx asks of a net_memif port unless the user says
 * otherwise: its frame size (memif has no MTU of its own), its ring
 * (bsize, rsize), and on a memif client memif's zero-copy mode, where the
 * client's packet buffers are the ring's, so a frame the client receives is
 * not copied by the PMD (the server copies it once, straight into the
 * client's buffer). Also the check that zero copy can work with the memory
 * the process has (DPDK 22.11 names every zero-copy buffer as region 1).
 *
 * Owns: the memif plan of the process (struct dpdk_memif_plan) and the
 * vdev and EAL arguments it adds. Must not touch the port after set-up:
 * dpdk_port.c brings it up and runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <rte_memory.h>
#include <rte_mempool.h>

#include "common/log.h"
#include "fabric/dpdk/dpdk.h"

/* memif buffer size for an IP MTU: the frame, rounded up to 1 KiB. */
uint32_t dpdk_memif_bsize(uint32_t mtu)
{
    return (mtu + GX_DPDK_ETH_LEN + 1023) / 1024 * 1024;
}

/* The value of `key=` in a vdev string (0 when absent or not a number). */
static long vdev_number(const char *vdev, const char *key)
{
    const char *p = strstr(vdev, key);
    return p ? strtol(p + strlen(key), NULL, 10) : 0;
}

int dpdk_memif_plan(const char *vdev, long long user_mtu, struct dpdk_memif_plan *out)
{
    memset(out, 0, sizeof(*out));
    out->mtu = (uint32_t)user_mtu;
    if (strncmp(vdev, "net_memif", 9) != 0)
        return GX_OK;
    out->memif = true;
    out->client = strstr(vdev, "role=client") || strstr(vdev, "role=slave");
    const char *zc = strstr(vdev, "zero-copy=");
    /* A client asks for zero copy unless its vdev string says; a server
     * has no zero-copy mode in DPDK (zero-copy=yes there is refused). */
    out->zc = out->client && (!zc || strncmp(zc + 10, "yes", 3) == 0);
    out->add_zc = out->zc && !zc;
    if (user_mtu)
        return GX_OK;
    /* No MTU given: the largest frame one ring buffer holds. In zero-copy
     * mode the buffers are our packet buffers, sized to the frame; in copy
     * mode a bsize= in the vdev string bounds it (a frame over several
     * buffers is chained, which halved the bandwidth here). */
    long bsize = out->zc ? 0 : vdev_number(vdev, "bsize=");
    long mtu = bsize ? bsize - GX_DPDK_ETH_LEN : (long)GX_DPDK_MTU_MAX;
    if (mtu > (long)GX_DPDK_MTU_MAX)
        mtu = GX_DPDK_MTU_MAX;
    if (mtu < 576)
        return gx_fail(GX_EINVAL, GX_SUB_FABRIC, "dpdk: GX_DPDK_VDEV's bsize=%ld holds no frame "
                       "of 576 bytes; raise it or set GX_DPDK_MTU", bsize);
    out->mtu = (uint32_t)mtu;
    return GX_OK;
}

size_t dpdk_memif_args(const struct dpdk_memif_plan *pl, const char *vdev, const char *user,
                       char *args, size_t n, size_t cap)
{
    if (!pl->memif || n >= cap)
        return n;
    /* One frame per buffer, unless the vdev string says otherwise (2 KiB
     * buffers chained five deep halved the bandwidth here). The ring holds
     * about twice what GX_DPDK_INFLIGHT_MAX lets a connection keep in
     * flight, at least 64 slots: 64 of 63 KiB, 512 of 9 KiB by default. A
     * 37 MB ring cycled through more memory than the caches hold, so both
     * copies missed (notes/memifrx.md: -16% receiver, -29% sender CPU per
     * GiB); a ring no bigger than the window (32 slots) left the sender
     * spinning on a full ring. */
    if (pl->mtu > 2048) {
        size_t ring = 2u << 20;
        (void)gx_param_size(&gx_param_dpdk_inflight_max, &ring);
        uint32_t bsize = dpdk_memif_bsize(pl->mtu);
        int rsize = 6;
        while ((size_t)(1u << rsize) * bsize < 2 * ring - ring / 4 && rsize < 14)
            rsize++;
        if (!strstr(vdev, "bsize="))
            n += (size_t)snprintf(args + n, cap - n, ",bsize=%u", bsize);
        if (n < cap && !strstr(vdev, "rsize="))
            n += (size_t)snprintf(args + n, cap - n, ",rsize=%d", rsize);
    }
    if (n < cap && pl->add_zc)
        n += (size_t)snprintf(args + n, cap - n, ",zero-copy=yes");
    /* memif's zero copy shares the process's memory by file descriptor:
     * one file per memory segment list. */
    if (n < cap && pl->zc && !strstr(user, "--single-file-segments"))
        n += (size_t)snprintf(args + n, cap - n, " --single-file-segments");
    return n;
}

/* ---- the zero-copy memory check ------------------------------------------ */

/* The memory file memif shares (the first segment list's), by number and
 * identity: DPDK 22.11's memif_free_regions() closes it (EAL's own fd) when
 * a zero-copy client's connection ends, and its next connection sends
 * whatever file took the number (a server mapping it failed with EPERM
 * here, or could map the wrong memory). */
static struct {
    int fd;
    dev_t dev;
    ino_t ino;
} F = { -1, 0, 0 };

static int first_list(const struct rte_memseg_list *msl, const struct rte_memseg *ms, void *arg)
{
    *(const struct rte_memseg_list **)arg = msl;
    F.fd = rte_memseg_get_fd_thread_unsafe(ms);
    struct stat st;
    if (F.fd >= 0 && fstat(F.fd, &st) == 0) {
        F.dev = st.st_dev;
        F.ino = st.st_ino;
    } else {
        F.fd = -1;
    }
    return 1; /* stop at the first segment */
}

bool dpdk_memif_zc_file_intact(void)
{
    struct stat st;
    return F.fd >= 0 && fstat(F.fd, &st) == 0 && st.st_dev == F.dev && st.st_ino == F.ino;
}

struct chunk_check {
    const struct rte_memseg_list *want;
    unsigned bad;
};

static void chunk_in_list(struct rte_mempool *mp, void *opaque, struct rte_mempool_memhdr *mh,
                          unsigned idx)
{
    (void)mp;
    (void)idx;
    struct chunk_check *c = opaque;
    const char *a = mh->addr;
    if (rte_mem_virt2memseg_list(a) != c->want ||
        (mh->len && rte_mem_virt2memseg_list(a + mh->len - 1) != c->want))
        c->bad++;
}

int dpdk_memif_zc_check(struct rte_mempool *pool)
{
    /* DPDK 22.11's memif describes every zero-copy buffer as region 1, the
     * first memory segment list with memory ("FIXME: get region index" in
     * its transmit path): a buffer elsewhere would be read from the wrong
     * place by the server. With --no-huge there is one list; with
     * hugepages of several sizes or sockets there can be more. */
    struct chunk_check c = { NULL, 0 };
    rte_memseg_walk(first_list, &c.want);
    if (c.want)
        rte_mempool_mem_iter(pool, chunk_in_list, &c);
    if (!c.want || c.bad || F.fd < 0)
        return gx_fail(GX_EUNSUPPORTED, GX_SUB_FABRIC, "dpdk: memif zero copy needs the packet "
                       "buffers in the first memory segment list, and a file behind it (%u of "
                       "the pool's chunks are elsewhere%s); add zero-copy=no to the memif "
                       "client's GX_DPDK_VDEV entry (or use --no-huge in GX_DPDK_EAL_ARGS)",
                       c.bad, F.fd < 0 ? ", no file" : "");
    return GX_OK;
}
