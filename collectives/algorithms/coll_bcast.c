/*
 * coll_bcast.c - the chain (pipelined ring) broadcast: virtual rank v
 * receives each chunk from v-1 and forwards it to v+1 at once, so for large
 * vectors every link carries the vector once and the time approaches
 * size/bandwidth + (n-2) chunk times. The binomial-tree broadcast, better
 * for small vectors, is in coll_tree.c.
 */
#include "collectives/algorithms/algorithms.h"
#include "collectives/comm/comm_internal.h"

int chain_bcast_build(struct coll_op *op)
{
    const struct coll_args *a = &op->a;
    int n = op->comm->size, r = op->comm->rank;
    size_t es = a->es, count = a->count, bytes = count * es;
    int v = (r - a->root + n) % n;
    if (v == 0)
        cs_copy(op, a->recvbuf, a->sendbuf, bytes, -1, -1, -1);
    if (n == 1 || bytes == 0)
        return GX_OK;
    int nch = coll_chunks(bytes);
    int from = (r + n - 1) % n, to = (r + 1) % n;
    for (int c = 0; c < nch; c++) {
        size_t co = block_off(count, nch, c), cl = block_len(count, nch, c);
        if (!cl)
            continue;
        int dep = -1;
        const char *src = (const char *)a->sendbuf + co * es;
        if (v > 0) {
            dep = cs_recv(op, from, (uint32_t)c, (char *)a->recvbuf + co * es, cl * es, -1, -1,
                          -1);
            src = (const char *)a->recvbuf + co * es;
        }
        if (v < n - 1)
            cs_send(op, to, (uint32_t)c, src, cl * es, dep, -1, -1);
    }
    return GX_OK;
}
