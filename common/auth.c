/* auth.c - job-key challenge/response handshake (see auth.h, auth_proto.h). */
#include "common/auth.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/sha256.h"
#include "common/sock.h"
#include "gx/gx.h"

void gx_auth_key_derive(const char *job_key, struct gx_auth_key *out)
{
    const char *k = job_key ? job_key : "";
    struct gx_sha256 h;
    gx_sha256_init(&h);
    gx_sha256_update(&h, "gx-job-key:", 11);
    gx_sha256_update(&h, k, strlen(k));
    gx_sha256_final(&h, out->key);
    uint8_t id[GX_SHA256_LEN];
    gx_hmac_sha256(out->key, sizeof(out->key), "gx-job-id", 9, id);
    memcpy(out->job_id, id, sizeof(out->job_id));
}

static void hello_mac(const struct gx_auth_key *key, const struct gx_auth_challenge *ch,
                      const struct gx_auth_hello *hello, uint8_t out[32])
{
    uint8_t msg[sizeof(*ch) + offsetof(struct gx_auth_hello, mac) + 8];
    memcpy(msg, "gx-hello", 8);
    memcpy(msg + 8, ch, sizeof(*ch));
    memcpy(msg + 8 + sizeof(*ch), hello, offsetof(struct gx_auth_hello, mac));
    gx_hmac_sha256(key->key, sizeof(key->key), msg, sizeof(msg), out);
}

static void accept_mac(const struct gx_auth_key *key, const struct gx_auth_hello *hello,
                       uint8_t out[32])
{
    uint8_t msg[sizeof(*hello) + 9];
    memcpy(msg, "gx-accept", 9);
    memcpy(msg + 9, hello, sizeof(*hello));
    gx_hmac_sha256(key->key, sizeof(key->key), msg, sizeof(msg), out);
}

int gx_auth_client_respond(const struct gx_auth_key *key, const struct gx_auth_challenge *ch,
                           enum gx_auth_purpose purpose, int rank, uint64_t conn_id,
                           struct gx_auth_hello *hello_out)
{
    if (ch->magic != GX_AUTH_MAGIC_CHALLENGE || ch->version != GX_AUTH_VERSION)
        return GX_EPROTO;
    struct gx_auth_hello hello = {
        .magic = GX_AUTH_MAGIC_HELLO,
        .version = GX_AUTH_VERSION,
        .purpose = (uint16_t)purpose,
        .rank = rank,
        .conn_id = conn_id,
    };
    if (gx_random_bytes(hello.nonce, sizeof(hello.nonce)) != GX_OK)
        return GX_ESYSTEM;
    hello_mac(key, ch, &hello, hello.mac);
    *hello_out = hello;
    return GX_OK;
}

int gx_auth_same_job(const struct gx_auth_key *key, const struct gx_auth_challenge *ch)
{
    return memcmp(ch->job_id, key->job_id, sizeof(ch->job_id)) == 0;
}

int gx_auth_client_check(const struct gx_auth_key *key, const struct gx_auth_hello *hello,
                         const struct gx_auth_accept *acc)
{
    uint8_t expect[32];
    accept_mac(key, hello, expect);
    if (acc->magic != GX_AUTH_MAGIC_ACCEPT || !gx_mac_equal(expect, acc->mac, sizeof(expect)))
        return GX_EAUTH;
    return GX_OK;
}

int gx_auth_connect(int fd, const struct gx_auth_key *key, enum gx_auth_purpose purpose,
                    int rank, uint64_t conn_id, uint64_t deadline)
{
    struct gx_auth_challenge ch;
    int rc = gx_sock_recv_all(fd, &ch, sizeof(ch), deadline);
    if (rc != GX_OK)
        return rc;
    struct gx_auth_hello hello;
    rc = gx_auth_client_respond(key, &ch, purpose, rank, conn_id, &hello);
    if (rc != GX_OK)
        return rc;
    rc = gx_sock_send_all(fd, &hello, sizeof(hello), deadline);
    if (rc != GX_OK)
        return rc;
    if (!gx_auth_same_job(key, &ch))
        return GX_EAUTH; /* the acceptor logs and drops our hello */
    struct gx_auth_accept acc;
    rc = gx_sock_recv_all(fd, &acc, sizeof(acc), deadline);
    if (rc != GX_OK)
        return rc == GX_EPEER ? GX_EAUTH : rc; /* a dropped hello means the key was refused */
    return gx_auth_client_check(key, &hello, &acc);
}

int gx_auth_server_start(struct gx_auth_server *s, int fd, const struct gx_auth_key *key)
{
    memset(s, 0, sizeof(*s));
    s->fd = fd;
    s->key = key;
    s->challenge.magic = GX_AUTH_MAGIC_CHALLENGE;
    s->challenge.version = GX_AUTH_VERSION;
    memcpy(s->challenge.job_id, key->job_id, sizeof(s->challenge.job_id));
    if (gx_random_bytes(s->challenge.nonce, sizeof(s->challenge.nonce)) != GX_OK)
        return GX_ESYSTEM;
    /* 32 bytes into a fresh socket's empty send buffer: never blocks. */
    ssize_t n = send(fd, &s->challenge, sizeof(s->challenge), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n != (ssize_t)sizeof(s->challenge))
        return GX_EPEER;
    return GX_OK;
}

int gx_auth_server_progress(struct gx_auth_server *s)
{
    while (s->received < sizeof(s->hello)) {
        ssize_t n = recv(s->fd, (char *)&s->hello + s->received, sizeof(s->hello) - s->received,
                         MSG_DONTWAIT);
        if (n > 0) {
            s->received += (size_t)n;
            if (s->received >= 8 && (s->hello.magic != GX_AUTH_MAGIC_HELLO ||
                                     s->hello.version != GX_AUTH_VERSION))
                return GX_EPROTO;
            continue;
        }
        if (n == 0)
            return GX_EPEER;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return GX_INPROGRESS;
        return GX_EPEER;
    }
    uint8_t expect[32];
    hello_mac(s->key, &s->challenge, &s->hello, expect);
    if (!gx_mac_equal(expect, s->hello.mac, sizeof(expect)))
        return GX_EAUTH;
    struct gx_auth_accept acc = { .magic = GX_AUTH_MAGIC_ACCEPT };
    accept_mac(s->key, &s->hello, acc.mac);
    return gx_sock_send_all(s->fd, &acc, sizeof(acc), gx_deadline_after_ms(1000));
}

int gx_auth_accept_blocking(int fd, const struct gx_auth_key *key, uint64_t deadline,
                            struct gx_auth_hello *hello_out)
{
    struct gx_auth_server s;
    int rc = gx_auth_server_start(&s, fd, key);
    while (rc == GX_OK) {
        rc = gx_auth_server_progress(&s);
        if (rc != GX_INPROGRESS)
            break;
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int left = gx_ms_left(deadline);
        if (left == 0)
            return GX_ETIMEOUT;
        poll(&pfd, 1, left);
        rc = GX_OK;
    }
    if (rc == GX_OK && hello_out)
        *hello_out = s.hello;
    return rc;
}
