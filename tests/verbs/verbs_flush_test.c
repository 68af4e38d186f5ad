/*
 * verbs_flush_test.c - the flush after GPU-destined receives
 * (GX_IB_GDR_FLUSH, fabric/verbs/verbs_flush.c), exercised on host memory.
 *
 * Two ranks over softverbs exchange sends of several sizes (one striped
 * over two QPs), a zero-byte send and a write_imm into a registration.
 * Each rank interposes on its context's post_send (to record every RDMA
 * READ) and poll_cq (to hold every READ completion back for HOLD_MS before
 * the provider sees it). Checks, with `expect-flush` (GX_IB_GDR_FLUSH=on):
 *   - the data arrives intact;
 *   - exactly one one-byte READ per non-empty receive or write, of the last
 *     byte that arrived (receive buffer, or the write target);
 *   - no receive completes before the READ completion of every non-empty
 *     receive up to it has been released: the receive waits for its flush.
 * With `expect-none` (GX_IB_GDR_FLUSH=off, or auto on host memory): the
 * data arrives and no READ is posted. Run with expect-flush and
 * GX_IB_GDR_FLUSH=off, the test must fail (ctest WILL_FAIL).
 */
#include <string.h>

#include "common/clock.h"
#include "fab_harness.h"
#include "fabric/verbs/verbs.h"

#define HOLD_MS 20
#define MAXREADS 64
#define NMSG 4

static int (*orig_post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
static int (*orig_poll_cq)(struct ibv_cq *, int, struct ibv_wc *);
static uint64_t read_addr[MAXREADS];
static uint32_t read_len[MAXREADS];
static int nreads;

static struct ibv_wc held[MAXREADS];
static uint64_t held_until[MAXREADS];
static int nheld, released;

static int rec_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    for (struct ibv_send_wr *w = wr; w; w = w->next)
        if (w->opcode == IBV_WR_RDMA_READ && nreads < MAXREADS) {
            read_addr[nreads] = w->wr.rdma.remote_addr;
            read_len[nreads++] = w->num_sge ? w->sg_list[0].length : 0;
        }
    return orig_post_send(qp, wr, bad);
}

/* READ completions are kept for HOLD_MS, then handed out in order. */
static int hold_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
    int n = orig_poll_cq(cq, num, wc);
    if (n < 0)
        return n;
    int out = 0;
    uint64_t now = gx_now_ns();
    for (int i = 0; i < n; i++) {
        if (wc[i].opcode == IBV_WC_RDMA_READ && wc[i].status == IBV_WC_SUCCESS &&
            nheld < MAXREADS) {
            held[nheld] = wc[i];
            held_until[nheld++] = now + HOLD_MS * 1000000ull;
        } else {
            wc[out++] = wc[i];
        }
    }
    while (nheld && out < num && held_until[0] <= now) {
        wc[out++] = held[0];
        released++;
        memmove(held, held + 1, (size_t)(nheld - 1) * sizeof(held[0]));
        memmove(held_until, held_until + 1, (size_t)(nheld - 1) * sizeof(held_until[0]));
        nheld--;
    }
    return out;
}

static bool expect_flush;

static int t_flush(struct fab_ctx *c)
{
    struct verbs_domain *vd = (struct verbs_domain *)c->dom;
    orig_post_send = vd->ctx->ops.post_send;
    vd->ctx->ops.post_send = rec_post_send;
    orig_poll_cq = vd->ctx->ops.poll_cq;
    vd->ctx->ops.poll_cq = hold_poll_cq;

    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    static const size_t sizes[NMSG] = { 1, 100, 300 * 1024, 0 }; /* 300 KiB: striped */
    char *src[NMSG], *dst[NMSG];
    for (int i = 0; i < NMSG; i++) {
        src[i] = malloc(sizes[i] + 1);
        dst[i] = calloc(1, sizes[i] + 1);
        for (size_t b = 0; b < sizes[i]; b++)
            src[i][b] = (char)(b * 7 + (size_t)i + 1 + (size_t)c->rank);
    }
    const size_t wlen = 8192;
    char *wsrc = malloc(wlen), *wdst = calloc(1, wlen);
    memset(wsrc, 0x5a + c->rank, wlen);
    struct gx_fab_mr *dst_mr = fab_reg(c, wdst, wlen,
                                       GX_FAB_ACCESS_LOCAL | GX_FAB_ACCESS_REMOTE_WRITE);
    struct gx_fab_rkey key, keys[2];
    FAB_OK(gx_fab_mr_pack_rkey(dst_mr, &key));
    fab_allgather(c, &key, keys, sizeof(key));
    for (int i = 0; i < NMSG; i++)
        FAB_OK(gx_fab_post_recv(ep, dst[i], sizes[i], NULL, 100 + (uint64_t)i));
    FAB_OK(gx_fab_post_recv(ep, NULL, 0, NULL, 100 + NMSG)); /* for the write_imm */
    fab_barrier(c);
    uint64_t base;
    memcpy(&base, keys[1 - c->rank].bytes + 16, sizeof(base));
    for (int i = 0; i < NMSG; i++)
        FAB_OK(gx_fab_post_send(ep, src[i], sizes[i], NULL, 7, (uint64_t)i));
    FAB_OK(gx_fab_post_write_imm(ep, wsrc, wlen, NULL, base, &keys[1 - c->rank], 9, NMSG));

    /* Non-empty receives and the write need a flush each, in post order. */
    int flushed_needed = 0, recvs = 0;
    uint64_t t0 = gx_now_ns();
    for (int i = 0; i < 2 * (NMSG + 1); i++) {
        struct gx_fab_cqe e = fab_wait1(c, 20000);
        FAB_CHECK(e.status == GX_OK, "op %llu: %s", (unsigned long long)e.context,
                  gx_strerror(e.status));
        if (e.op != GX_FAB_OP_RECV)
            continue;
        int k = (int)(e.context - 100);
        size_t len = k < NMSG ? sizes[k] : wlen;
        flushed_needed += len > 0;
        recvs++;
        if (expect_flush)
            FAB_CHECK(released >= flushed_needed, "receive %d completed after %d of the %d "
                      "flush READ completions it must wait for", k, released, flushed_needed);
    }
    double ms = (double)(gx_now_ns() - t0) / 1e6;
    FAB_CHECK(recvs == NMSG + 1, "%d receives", recvs);
    for (int i = 0; i < NMSG; i++) {
        char want0 = (char)(1 + i + (1 - c->rank));
        FAB_CHECK(sizes[i] == 0 || (dst[i][0] == want0 &&
                                    dst[i][sizes[i] - 1] ==
                                        (char)((sizes[i] - 1) * 7 + (size_t)i + 1 +
                                               (size_t)(1 - c->rank))),
                  "payload %d (%zu bytes)", i, sizes[i]);
    }
    fab_barrier(c); /* the peer's write_imm has landed */
    FAB_CHECK(wdst[0] == (char)(0x5a + 1 - c->rank) && wdst[wlen - 1] == wdst[0], "write target");

    if (expect_flush) {
        FAB_CHECK(nreads == flushed_needed, "%d flush READs posted, %d expected", nreads,
                  flushed_needed);
        for (int r = 0; r < nreads; r++) {
            bool known = read_addr[r] == (uintptr_t)wdst + wlen - 1;
            for (int i = 0; i < NMSG; i++)
                known |= sizes[i] && read_addr[r] == (uintptr_t)dst[i] + sizes[i] - 1;
            FAB_CHECK(known && read_len[r] == 1, "READ %d of %u bytes at 0x%llx is not the "
                      "last byte of a receive", r, read_len[r],
                      (unsigned long long)read_addr[r]);
        }
    } else {
        FAB_CHECK(nreads == 0, "%d READs posted with no flush expected", nreads);
    }
    fprintf(stderr, "rank %d: %d receives, %d flush READs (completions held %d ms each), "
            "all completed in %.1f ms\n", c->rank, recvs, nreads, HOLD_MS, ms);
    FAB_OK(gx_fab_mr_dereg(dst_mr));
    gx_fab_ep_close(ep);
    vd->ctx->ops.post_send = orig_post_send;
    vd->ctx->ops.poll_cq = orig_poll_cq;
    for (int i = 0; i < NMSG; i++) {
        free(src[i]);
        free(dst[i]);
    }
    free(wsrc);
    free(wdst);
    return 0;
}

int main(int argc, char **argv)
{
    if (!getenv("GX_IBVERBS_LIB")) {
        printf("GX_IBVERBS_LIB unset: needs the softverbs emulator; skipping\n");
        return 77;
    }
    if (argc != 2 || (strcmp(argv[1], "expect-flush") && strcmp(argv[1], "expect-none"))) {
        fprintf(stderr, "usage: %s expect-flush|expect-none\n", argv[0]);
        return 2;
    }
    expect_flush = strcmp(argv[1], "expect-flush") == 0;
    int rc = fab_run("verbs", 2, 50, "flush", t_flush);
    printf("verbs flush (%s, GX_IB_GDR_FLUSH=%s): %s\n", argv[1],
           getenv("GX_IB_GDR_FLUSH") ? getenv("GX_IB_GDR_FLUSH") : "auto",
           rc == 0 ? "PASS" : rc == 77 ? "SKIP" : "FAIL");
    return rc;
}
