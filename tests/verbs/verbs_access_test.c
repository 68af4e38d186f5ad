/*
 * verbs_access_test.c - every registration, QP and posted remote key of the
 * verbs provider grants the narrowest access it needs.
 *
 * Two ranks over softverbs. Before any traffic each rank interposes on its
 * own provider: ibv_reg_mr / ibv_modify_qp through the loader's table
 * (gx_verbs_api_mutable) and ibv_post_send through the opened context's ops.
 * The ranks then exchange sends (unregistered buffers, small and striped),
 * zero-byte receives and write_imm into a caller registration, and finally
 * all-gather their registration tables. Checks:
 *   - QPs allow remote write only (no remote read, no atomics);
 *   - each registration is either 0 (the HCA only reads it) or exactly
 *     LOCAL_WRITE|REMOTE_WRITE (peers write it); none has remote read;
 *   - send sources are registered 0, receive buffers LOCAL|REMOTE_WRITE;
 *   - every posted local key (non-inline) names a read-only registration;
 *   - every posted remote (rkey, address, length) lies inside a peer
 *     registration with remote write, and nowhere else.
 * With GX_IB_GDR_FLUSH=on (the flush READ after receives, tested on host
 * memory) remote read appears exactly where the flush needs it:
 *   - one QP per endpoint (the loopback flush QP) allows remote read only;
 *   - receive buffers and write targets are LOCAL_WRITE|REMOTE_WRITE|
 *     REMOTE_READ, the READs' sink is LOCAL_WRITE, nothing else reads;
 *   - every posted READ reads one byte of one of our own remote-read
 *     registrations into the LOCAL_WRITE sink.
 */
#include <string.h>

#include "common/log.h"
#include "fab_harness.h"
#include "fabric/verbs/verbs.h"

#define MAXREG 128
#define MAXPOST 4096

struct reg {
    uint64_t addr, len;
    uint32_t rkey, lkey;
    int32_t access;
    int32_t live;
};
struct regtab {
    int n;
    int pad;
    struct reg r[MAXREG];
};
struct post {
    int opcode, inl;
    uint32_t lkey, rkey;
    uint64_t laddr, llen, raddr;
};

static struct gx_verbs_api orig;
static int (*orig_post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
static struct regtab regs;
static struct post posts[MAXPOST];
static int nposts, nqp_access, bad_qp_access, nqp_read;
static bool flush_on;

static struct ibv_mr *rec_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    struct ibv_mr *mr = orig.reg_mr(pd, addr, len, access);
    if (mr && regs.n < MAXREG)
        regs.r[regs.n++] = (struct reg){ (uint64_t)(uintptr_t)addr, len, mr->rkey, mr->lkey,
                                         access, 1 };
    return mr;
}

static int rec_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    if (mask & IBV_QP_ACCESS_FLAGS) {
        nqp_access++;
        if (flush_on && (int)a->qp_access_flags == IBV_ACCESS_REMOTE_READ)
            nqp_read++; /* the flush QP */
        else if ((int)a->qp_access_flags != IBV_ACCESS_REMOTE_WRITE)
            bad_qp_access++;
    }
    return orig.modify_qp(qp, a, mask);
}

static int rec_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    for (struct ibv_send_wr *w = wr; w && nposts < MAXPOST; w = w->next) {
        struct post *p = &posts[nposts++];
        p->opcode = w->opcode;
        p->inl = !!(w->send_flags & IBV_SEND_INLINE);
        p->lkey = w->num_sge ? w->sg_list[0].lkey : 0;
        p->laddr = w->num_sge ? w->sg_list[0].addr : 0;
        p->llen = w->num_sge ? w->sg_list[0].length : 0;
        p->rkey = w->wr.rdma.rkey;
        p->raddr = w->wr.rdma.remote_addr;
    }
    return orig_post_send(qp, wr, bad);
}

/* A registration covering the range with `rkey` (or any key if 0) and
 * `access` (or any if < 0). Page-widened cache entries may overlap. */
static const struct reg *find(const struct regtab *t, uint64_t addr, uint64_t len, uint32_t key,
                              int access)
{
    for (int i = 0; i < t->n; i++)
        if (addr >= t->r[i].addr && addr + len <= t->r[i].addr + t->r[i].len &&
            (!key || t->r[i].rkey == key) && (access < 0 || t->r[i].access == access))
            return &t->r[i];
    return NULL;
}

static void dump(const char *what, const struct regtab *t)
{
    for (int i = 0; i < t->n; i++)
        fprintf(stderr, "  %s reg %d: 0x%llx+%llu key 0x%x access 0x%x\n", what, i,
                (unsigned long long)t->r[i].addr, (unsigned long long)t->r[i].len, t->r[i].rkey,
                t->r[i].access);
}

#define LWRW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
#define LWRWRR (LWRW | IBV_ACCESS_REMOTE_READ)

static int t_access(struct fab_ctx *c)
{
    const char *fl = getenv("GX_IB_GDR_FLUSH");
    flush_on = fl && strcmp(fl, "on") == 0;
    const int rx = flush_on ? LWRWRR : LWRW; /* receive targets */
    struct gx_verbs_api *api = gx_verbs_api_mutable();
    FAB_CHECK(api != NULL, "verbs library not loaded");
    orig = *api;
    api->reg_mr = rec_reg_mr;
    api->modify_qp = rec_modify_qp;
    struct verbs_domain *vd = (struct verbs_domain *)c->dom;
    orig_post_send = vd->ctx->ops.post_send;
    vd->ctx->ops.post_send = rec_post_send;

    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    const size_t small = 100, big = 300 * 1024, wlen = 4096;
    char *sbuf = malloc(small), *bbuf = malloc(big), *rs = malloc(small), *rb = malloc(big);
    char *wsrc = malloc(wlen), *wdst = calloc(1, wlen);
    memset(sbuf, 1, small);
    memset(bbuf, 2, big);
    memset(wsrc, 3, wlen);
    struct gx_fab_mr *src_mr = fab_reg(c, wsrc, wlen, GX_FAB_ACCESS_LOCAL);
    struct gx_fab_mr *dst_mr = fab_reg(c, wdst, wlen,
                                       GX_FAB_ACCESS_LOCAL | GX_FAB_ACCESS_REMOTE_WRITE);
    struct gx_fab_rkey key, keys[2];
    FAB_OK(gx_fab_mr_pack_rkey(dst_mr, &key));
    fab_allgather(c, &key, keys, sizeof(key));
    FAB_OK(gx_fab_post_recv(ep, rs, small, NULL, 1));
    FAB_OK(gx_fab_post_recv(ep, rb, big, NULL, 2));
    FAB_OK(gx_fab_post_recv(ep, NULL, 0, NULL, 3));
    fab_barrier(c);
    uint64_t base;
    memcpy(&base, keys[1 - c->rank].bytes + 16, sizeof(base));
    FAB_OK(gx_fab_post_send(ep, sbuf, small, NULL, 7, 4));
    FAB_OK(gx_fab_post_send(ep, bbuf, big, NULL, 8, 5));
    FAB_OK(gx_fab_post_write_imm(ep, wsrc, wlen, src_mr, base, &keys[1 - c->rank], 9, 6));
    for (int i = 0; i < 6; i++) {
        struct gx_fab_cqe e = fab_wait1(c, 20000);
        FAB_CHECK(e.status == GX_OK, "op %llu: %s", (unsigned long long)e.context,
                  gx_strerror(e.status));
    }
    fab_barrier(c);
    FAB_CHECK(memcmp(rb, bbuf, big) == 0 && wdst[wlen - 1] == 3, "payload");

    /* local checks */
    FAB_CHECK(nqp_access > 0 && bad_qp_access == 0, "%d of %d QP transitions set access "
              "flags other than REMOTE_WRITE", bad_qp_access, nqp_access);
    FAB_CHECK(nqp_read == (flush_on ? 1 : 0), "%d QPs allow remote read (expected %d: the "
              "flush QP)", nqp_read, flush_on ? 1 : 0);
    int sinks = 0;
    for (int i = 0; i < regs.n; i++) {
        int a = regs.r[i].access;
        sinks += a == IBV_ACCESS_LOCAL_WRITE;
        FAB_CHECK(a == 0 || a == LWRW || (flush_on && (a == LWRWRR ||
                                                      a == IBV_ACCESS_LOCAL_WRITE)),
                  "registration %d (%llu bytes) has access 0x%x", i,
                  (unsigned long long)regs.r[i].len, a);
    }
    FAB_CHECK(sinks == (flush_on ? 1 : 0), "%d LOCAL_WRITE registrations (flush sinks)", sinks);
    const struct reg *r;
    (void)r;
    FAB_CHECK(find(&regs, (uintptr_t)sbuf, small, 0, 0), "small send source");
    FAB_CHECK(find(&regs, (uintptr_t)bbuf, big, 0, 0), "big send source");
    FAB_CHECK(find(&regs, (uintptr_t)wsrc, wlen, 0, 0), "write source");
    FAB_CHECK(find(&regs, (uintptr_t)rs, small, 0, rx), "small receive");
    FAB_CHECK(find(&regs, (uintptr_t)rb, big, 0, rx), "big receive");
    FAB_CHECK(find(&regs, (uintptr_t)wdst, wlen, 0, rx), "write target");
    int writes = 0, withimm = 0, inl = 0, reads = 0;
    for (int i = 0; i < nposts; i++) {
        const struct post *p = &posts[i];
        if (flush_on && p->opcode == IBV_WR_RDMA_READ) {
            reads++;
            r = find(&regs, p->raddr, 1, p->rkey, LWRWRR);
            FAB_CHECK(r && p->llen == 1, "READ %d: 0x%llx+%llu with key 0x%x is not one byte of "
                      "our remote-read registration", i, (unsigned long long)p->raddr,
                      (unsigned long long)p->llen, p->rkey);
            r = find(&regs, p->laddr, 1, p->lkey, IBV_ACCESS_LOCAL_WRITE);
            FAB_CHECK(r, "READ %d does not land in the LOCAL_WRITE sink", i);
            continue;
        }
        FAB_CHECK(p->opcode == IBV_WR_RDMA_WRITE || p->opcode == IBV_WR_RDMA_WRITE_WITH_IMM,
                  "post %d: opcode %d (only RDMA writes are expected)", i, p->opcode);
        writes++;
        withimm += p->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
        inl += p->inl;
        if (p->inl || p->llen == 0)
            continue;
        r = find(&regs, p->laddr, p->llen, p->lkey, -1);
        FAB_CHECK(r && r->access == 0, "post %d: local key 0x%x of a "
                  "registration with access 0x%x (sources must be read-only)", i, p->lkey,
                  r ? r->access : -1);
    }
    /* cross checks: every remote key we posted is a peer registration with
     * remote write that covers the range. */
    struct regtab *all = calloc(2, sizeof(*all));
    fab_allgather(c, &regs, all, sizeof(regs));
    const struct regtab *peer = &all[1 - c->rank];
    for (int i = 0; i < nposts; i++) {
        const struct post *p = &posts[i];
        if (p->llen == 0 || p->opcode == IBV_WR_RDMA_READ)
            continue;
        const struct reg *pr = find(peer, p->raddr, p->llen, p->rkey, -1);
        if (!pr || (pr->access != LWRW && !(flush_on && pr->access == LWRWRR)))
            dump("peer", peer);
        FAB_CHECK(pr && (pr->access == LWRW || (flush_on && pr->access == LWRWRR)), "post %d: remote key 0x%x at "
                  "0x%llx+%llu is not a peer remote-write registration (found access %d)", i,
                  p->rkey, (unsigned long long)p->raddr, (unsigned long long)p->llen,
                  pr ? pr->access : -1);
    }
    /* flush: the small and big receives and the write target, each read once */
    FAB_CHECK(reads == (flush_on ? 3 : 0), "%d flush READs posted (expected %d)", reads,
              flush_on ? 3 : 0);
    fprintf(stderr, "rank %d: %d registrations, %d RDMA writes (%d with immediate, %d inline), "
            "%d flush READs, %d QP access settings: all narrowest\n", c->rank, regs.n, writes,
            withimm, inl, reads, nqp_access);
    free(all);
    FAB_OK(gx_fab_mr_dereg(src_mr));
    FAB_OK(gx_fab_mr_dereg(dst_mr));
    gx_fab_ep_close(ep);
    *api = orig;
    return 0;
}

int main(void)
{
    if (!getenv("GX_IBVERBS_LIB")) {
        printf("GX_IBVERBS_LIB unset: needs the softverbs emulator; skipping\n");
        return 77;
    }
    int rc = fab_run("verbs", 2, 50, "access", t_access);
    printf("verbs access flags: %s\n", rc == 0 ? "PASS" : rc == 77 ? "SKIP" : "FAIL");
    return rc;
}
