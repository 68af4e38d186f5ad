/*
 * tcp_close_test.c - test fabric.tcp.close_after_send: on tcp a send
 * completes once it is in the socket, before the peer has a receive for it
 * (on shm and verbs a send completes only into a posted receive, as on RDMA
 * RC, so the question does not arise there). Rank 1's sends complete, then it
 * closes its endpoint; rank 0 posts its receives only afterwards and must
 * still get every message, although the close of one tcp stream is read
 * before the data of another (before the fix, message 7 was lost).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fab_harness.h"

#define WAIT_MS 20000

static uint8_t byte_at(uint32_t seed, size_t i)
{
    return (uint8_t)(seed * 131u + i * 7u);
}

static int t_close_after_send(struct fab_ctx *c)
{
    enum { N = 8 };
    struct gx_fab_ep *ep = fab_pair(c, 0, 1);
    const size_t len = 4096;
    uint8_t *buf = malloc(N * len);
    if (c->rank == 1) {
        for (int i = 0; i < N; i++) {
            for (size_t k = 0; k < len; k++)
                buf[(size_t)i * len + k] = byte_at((uint32_t)i, k);
            FAB_OK(gx_fab_post_send(ep, buf + (size_t)i * len, len, NULL, (uint64_t)i,
                                    (uint64_t)i));
        }
        for (int i = 0; i < N; i++) {
            struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
            FAB_CHECK(e.status == GX_OK, "send %d: %s", i, gx_strerror(e.status));
        }
        gx_fab_ep_close(ep);
        fab_barrier(c);
    } else {
        fab_barrier(c); /* rank 1 has closed */
        for (int i = 0; i < N; i++)
            FAB_OK(gx_fab_post_recv(ep, buf + (size_t)i * len, len, NULL, (uint64_t)i));
        for (int i = 0; i < N; i++) {
            struct gx_fab_cqe e = fab_wait1(c, WAIT_MS);
            FAB_CHECK(e.status == GX_OK && e.context == (uint64_t)i,
                      "message %d sent before the peer closed: %s", i, gx_strerror(e.status));
            for (size_t k = 0; k < len; k++)
                FAB_CHECK(buf[(size_t)i * len + k] == byte_at((uint32_t)i, k), "msg %d byte %zu",
                          i, k);
        }
        gx_fab_ep_close(ep);
    }
    free(buf);
    return 0;
}

int main(void)
{
    int rc = fab_run("tcp", 2, 50, "tcp-close", t_close_after_send);
    printf("tcp close_after_send: %s\n", rc == 0 ? "PASS" : rc == 77 ? "SKIP" : "FAIL");
    return rc;
}
