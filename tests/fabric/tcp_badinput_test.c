/*
 * tcp_badinput_test.c - hostile input to the tcp provider from a raw client
 * that completes the job-key handshake and then sends malformed frames: bad
 * magic, another protocol version, a frame longer than its message, a
 * truncated header, a write under an unknown key, a write out of bounds, a
 * peer that hangs up after a header and part of its payload (both in the
 * receiver's read cache: the endpoint must fail naming the cut frame).
 * Each must give an error completion (or a dropped connection) with a log
 * line, never a crash or a write outside registered memory.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/clock.h"
#include "common/sock.h"
#include "fabric/fabric.h"
#include "fabric/tcp/tcp_proto.h"

#define CHECK(c, ...)                                                                  \
    do {                                                                               \
        if (!(c)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #c);      \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

enum { CASE_MAGIC, CASE_VERSION, CASE_FRAME_LEN, CASE_TRUNCATED, CASE_BAD_KEY, CASE_OOB,
       CASE_CUT_PAYLOAD, CASE_GARBAGE_HANDSHAKE, NCASES };
static const char *const names[] = { "bad magic", "other version", "frame > message",
                                     "truncated header", "unknown key", "out of bounds",
                                     "cut payload", "garbage instead of handshake" };

static struct gx_tcp_hdr good_send(void)
{
    struct gx_tcp_hdr h = { .magic = GX_TCP_MAGIC, .version = GX_TCP_VERSION,
                            .op = GX_TCP_OP_SEND, .hdr_len = sizeof(h), .msg_len = 8,
                            .frame_len = 8 };
    return h;
}

static void client(const struct gx_sockaddr *sa, const struct gx_fab_rkey *rkey)
{
    struct gx_auth_key key;
    gx_auth_key_derive("badinput", &key);
    struct gx_fab_swkey_view { uint32_t magic, index; uint64_t cookie, base, len; } k;
    memcpy(&k, rkey->bytes, sizeof(k));
    for (int c = 0; c < NCASES; c++) {
        int fd;
        CHECK(gx_sock_connect(sa, gx_deadline_after_ms(5000), &fd) == GX_OK, "connect");
        if (c == CASE_GARBAGE_HANDSHAKE) {
            char junk[200];
            memset(junk, 'x', sizeof(junk));
            (void)!send(fd, junk, sizeof(junk), MSG_NOSIGNAL);
        } else {
            CHECK(gx_auth_connect(fd, &key, GX_AUTH_TCP_DATA, 5, gx_tcp_conn_id(100 + c, 1, 0),
                                  gx_deadline_after_ms(5000)) == GX_OK, "handshake");
            struct gx_tcp_hdr h = good_send();
            size_t len = sizeof(h);
            switch (c) {
            case CASE_MAGIC: h.magic = 0x12345678; break;
            case CASE_VERSION: h.version = 9; break;
            case CASE_FRAME_LEN: h.frame_len = 9; break;
            case CASE_TRUNCATED: len = 30; break;
            case CASE_BAD_KEY:
            case CASE_OOB:
                h.op = GX_TCP_OP_WRITE_IMM;
                h.rkey_index = k.index;
                h.rkey_cookie = c == CASE_BAD_KEY ? k.cookie ^ 1 : k.cookie;
                h.raddr = k.base + k.len - 4; /* 8 bytes: 4 past the end */
                break;
            }
            char frame[sizeof(h) + 8];
            memcpy(frame, &h, sizeof(h));
            memset(frame + sizeof(h), 0xee, 8);
            if (c == CASE_CUT_PAYLOAD)
                len = sizeof(h) + 3; /* one segment: header and 3 of 8 bytes */
            else if (c != CASE_TRUNCATED)
                len = sizeof(frame);
            (void)!send(fd, frame, len, MSG_NOSIGNAL);
        }
        /* The server drops us (or we hang up, for the cut ones). */
        char b[128];
        if (c == CASE_CUT_PAYLOAD)
            usleep(100 * 1000); /* let the server read the part before the end */
        if (c != CASE_TRUNCATED && c != CASE_CUT_PAYLOAD)
            while (gx_sock_recv_all(fd, b, 1, gx_deadline_after_ms(10000)) == GX_OK)
                ;
        close(fd);
    }
    _exit(0);
}

int main(void)
{
    const struct gx_fab_provider *prov = gx_fab_provider_find("tcp");
    struct gx_fab_domain_attr attr = GX_FAB_DOMAIN_ATTR_INIT;
    attr.job_key = "badinput";
    attr.rank = 0;
    struct gx_fab_domain *dom;
    struct gx_fab_cq *cq;
    struct gx_fab_listener *lst;
    struct gx_fab_addr addr;
    CHECK(gx_fab_domain_open(prov, &attr, &dom) == GX_OK, "domain");
    CHECK(gx_fab_cq_open(dom, &cq) == GX_OK, "cq");
    CHECK(gx_fab_listen(dom, cq, &lst, &addr) == GX_OK, "listen");
    char *target = calloc(1, 3 * 4096);
    struct gx_fab_mr *mr;
    CHECK(gx_fab_mr_reg(dom, target + 4096, 4096, GX_FAB_MEM_HOST, GX_FAB_ACCESS_REMOTE_WRITE,
                        &mr) == GX_OK, "reg");
    struct gx_fab_rkey rkey;
    gx_fab_mr_pack_rkey(mr, &rkey);
    struct gx_tcp_addr ta;
    memcpy(&ta, addr.bytes, sizeof(ta));
    struct gx_sockaddr sa = { .len = sizeof(struct sockaddr_in) };
    sa.u.in4.sin_family = AF_INET;
    memcpy(&sa.u.in4.sin_addr, ta.ip, 4);
    gx_sock_set_port(&sa, ta.port);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(50);
        client(&sa, &rkey);
    }
    for (int c = 0; c < NCASES - 1; c++) {
        struct gx_fab_ep *ep = NULL;
        uint64_t deadline = gx_deadline_after_ms(10000);
        int rc;
        while ((rc = gx_fab_accept(lst, &ep)) == GX_INPROGRESS)
            CHECK(gx_now_ns() < deadline, "case %s: no connection", names[c]);
        CHECK(rc == GX_OK, "accept");
        char buf[16] = { 0 };
        CHECK(gx_fab_post_recv(ep, buf, 8, NULL, 1) == GX_OK, "post");
        struct gx_fab_cqe e;
        int n = gx_fab_cq_wait(cq, &e, 1, gx_deadline_after_ms(10000));
        CHECK(n == 1 && e.status != GX_OK, "case %s: got %s", names[c],
              n == 1 ? gx_strerror(e.status) : "no completion");
        printf("case %-14s -> %s: %s\n", names[c], gx_strerror(e.status), gx_last_error());
        if (c == CASE_CUT_PAYLOAD)
            CHECK(e.status == GX_EPEER && strstr(gx_last_error(), "middle of a frame"),
                  "case %s: got %s: %s", names[c], gx_strerror(e.status), gx_last_error());
        gx_fab_ep_close(ep);
    }
    /* The garbage handshake never becomes an endpoint. */
    uint64_t until = gx_deadline_after_ms(500);
    while (gx_now_ns() < until) {
        struct gx_fab_ep *ep = NULL;
        CHECK(gx_fab_accept(lst, &ep) == GX_INPROGRESS, "garbage became an endpoint");
    }
    for (int i = 0; i < 3 * 4096; i++)
        CHECK(target[i] == 0, "byte %d of the target was written", i);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client failed");
    gx_fab_mr_dereg(mr);
    gx_fab_listener_close(lst);
    gx_fab_cq_close(cq);
    gx_fab_domain_close(dom);
    free(target);
    printf("tcp bad input: %d passed, 0 failed\n", NCASES);
    return 0;
}
