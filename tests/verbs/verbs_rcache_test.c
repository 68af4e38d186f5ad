/*
 * verbs_rcache_test.c - a buffer freed and mapped again at the same address
 * is registered afresh, not served from a stale registration
 * (GX_IB_RCACHE=per-op, the default; docs/verbs.md).
 *
 * Two ranks over softverbs. Rank 0 sends 1 MiB from an anonymous mapping
 * it never registered; rank 1 receives it into another unregistered
 * mapping. Then both unmap their buffer, map a new one at the same address
 * (MAP_FIXED_NOREPLACE: never over someone else's memory) and do it again;
 * a third round repeats it through a domain registration cache as the
 * communicator's rendezvous uses it. On real hardware a stale MR would pin
 * the old pages; softverbs copies by virtual address, so the data alone
 * cannot show it: the test interposes on ibv_reg_mr and the context's
 * post_send and checks registration identity instead:
 *   - every round made a new registration covering the buffer (one per
 *     round, not one in total);
 *   - every posted payload lkey (rank 0) / advertised rkey (rank 1) is the
 *     key of the registration made in that round;
 *   - the data of every round arrives.
 * `expect-fresh` is run with GX_IB_RCACHE=per-op and passes; run with
 * GX_IB_RCACHE=cache it must fail (ctest WILL_FAIL): that is the stale reuse.
 */
#include <string.h>
#include <sys/mman.h>

#include "fab_harness.h"
#include "fabric/rcache.h"
#include "fabric/verbs/verbs.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define LEN (1u << 20)
#define ROUNDS 3
#define MAXREG 256
#define MAXPOST 4096

static struct gx_verbs_api orig;
static int (*orig_post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
struct reg {
    uint64_t addr, len;
    uint32_t lkey, rkey;
};
struct post {
    uint64_t laddr;
    uint32_t lkey;
    int opcode;
};
static struct reg regs[MAXREG];
static int nregs;
static struct post posts[MAXPOST];
static int nposts;

static struct ibv_mr *rec_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    struct ibv_mr *mr = orig.reg_mr(pd, addr, len, access);
    if (mr && nregs < MAXREG)
        regs[nregs++] = (struct reg){ (uintptr_t)addr, len, mr->lkey, mr->rkey };
    return mr;
}

static int rec_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    for (struct ibv_send_wr *w = wr; w && nposts < MAXPOST; w = w->next)
        if (w->num_sge && !(w->send_flags & IBV_SEND_INLINE))
            posts[nposts++] = (struct post){ w->sg_list[0].addr, w->sg_list[0].lkey,
                                                  w->opcode };
    return orig_post_send(qp, wr, bad);
}

/* Registrations made since `from` that cover [buf, buf+LEN). */
static int covering(int from, const char *buf, int *last)
{
    int n = 0;
    for (int i = from; i < nregs; i++)
        if (regs[i].addr <= (uintptr_t)buf && (uintptr_t)buf + LEN <= regs[i].addr + regs[i].len) {
            n++;
            *last = i;
        }
    return n;
}

static char *map_at(void *want)
{
    void *p = mmap(want, LEN, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (want ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    if (p == MAP_FAILED || (want && p != want)) {
        if (p != MAP_FAILED)
            munmap(p, LEN);
        return NULL;
    }
    return p;
}

static int t_remap(struct fab_ctx *c)
{
    struct gx_verbs_api *api = gx_verbs_api_mutable();
    FAB_CHECK(api != NULL, "verbs library not loaded");
    orig = *api;
    api->reg_mr = rec_reg_mr;
    struct verbs_domain *vd = (struct verbs_domain *)c->dom;
    orig_post_send = vd->ctx->ops.post_send;
    vd->ctx->ops.post_send = rec_post_send;

    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    struct gx_fab_rcache *rc; /* as the communicator's rendezvous uses it */
    FAB_OK(gx_fab_rcache_create_domain(c->dom, c->rank == 0 ? GX_FAB_ACCESS_LOCAL
                                                            : GX_FAB_ACCESS_LOCAL |
                                                                  GX_FAB_ACCESS_REMOTE_WRITE,
                                       &rc));
    char *buf = map_at(NULL);
    FAB_CHECK(buf != NULL, "mmap: %m");
    for (int round = 0; round < ROUNDS; round++) {
        if (round > 0) {
            void *at = buf;
            FAB_CHECK(munmap(buf, LEN) == 0, "munmap: %m");
            buf = map_at(at);
            if (!buf) {
                printf("the kernel would not map %p again (taken meanwhile): skipping\n", at);
                exit(77);
            }
        }
        int reg_mark = nregs, post_mark = nposts;
        struct gx_fab_rcache_entry *e = NULL;
        struct gx_fab_mr *mr = NULL;
        if (round == ROUNDS - 1) { /* through a domain cache, with its registration */
            FAB_OK(gx_fab_rcache_get(rc, buf, LEN, GX_FAB_MEM_HOST, &e));
            mr = gx_fab_rcache_handle(e);
        }
        if (c->rank == 1) {
            FAB_OK(gx_fab_post_recv(ep, buf, LEN, mr, (uint64_t)round));
            fab_barrier(c);
        } else {
            memset(buf, 'a' + round, LEN);
            fab_barrier(c);
            FAB_OK(gx_fab_post_send(ep, buf, LEN, mr, 5, (uint64_t)round));
        }
        struct gx_fab_cqe ce = fab_wait1(c, 20000);
        FAB_CHECK(ce.status == GX_OK, "round %d: %s", round, gx_strerror(ce.status));
        if (c->rank == 1)
            FAB_CHECK(buf[0] == 'a' + round && buf[LEN - 1] == 'a' + round, "round %d data",
                      round);
        if (e)
            gx_fab_rcache_put(rc, e);
        int last = -1, n = covering(reg_mark, buf, &last);
        if (round > 0)
            FAB_CHECK(n == 1, "round %d: %d new registrations cover the re-mapped buffer %p "
                      "(a stale registration from an earlier round was reused)", round, n,
                      (void *)buf);
        if (c->rank == 0) {
            int payload = 0;
            for (int i = post_mark; i < nposts; i++)
                if (posts[i].laddr >= (uintptr_t)buf && posts[i].laddr < (uintptr_t)buf + LEN) {
                    payload++;
                    FAB_CHECK(last >= 0 && posts[i].lkey == regs[last].lkey, "round %d: "
                              "payload posted with lkey 0x%x, this round registered 0x%x",
                              round, posts[i].lkey, last >= 0 ? regs[last].lkey : 0);
                }
            FAB_CHECK(payload > 0, "round %d: no payload write from the buffer", round);
        }
        fab_barrier(c);
    }
    struct gx_fab_rcache_stats st;
    gx_fab_rcache_stats(rc, &st);
    FAB_CHECK(st.entries == 0 && st.per_op_releases == 1, "domain cache kept %zu entries, "
              "released %llu at their last put", st.entries,
              (unsigned long long)st.per_op_releases);
    fprintf(stderr, "rank %d: %d rounds over a re-mapped %u KiB buffer, each with its own "
            "registration (%d registrations in all)\n", c->rank, ROUNDS, LEN >> 10, nregs);
    gx_fab_rcache_destroy(rc);
    gx_fab_ep_close(ep);
    munmap(buf, LEN);
    vd->ctx->ops.post_send = orig_post_send;
    *api = orig;
    return 0;
}

int main(void)
{
    if (!getenv("GX_IBVERBS_LIB")) {
        printf("GX_IBVERBS_LIB unset: needs the softverbs emulator; skipping\n");
        return 77;
    }
    int rc = fab_run("verbs", 2, 50, "rcache", t_remap);
    printf("verbs registration after munmap/mmap (GX_IB_RCACHE=%s): %s\n",
           getenv("GX_IB_RCACHE") ? getenv("GX_IB_RCACHE") : "per-op",
           rc == 0 ? "PASS" : rc == 77 ? "SKIP" : "FAIL");
    return rc;
}
