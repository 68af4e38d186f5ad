/* auth.c - job-key challenge/response handshake (see auth.h, auth_proto.h),
 * the key derivation (PBKDF2 from libcrypto, once per process) and key files. */
#include "common/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/safe_file.h"
#include "common/sock.h"
#include "gx/gx.h"

/* A fixed, gx-specific salt: every rank must derive the same key before it
 * has exchanged a byte, so the salt cannot be per job; being gx's own, it
 * still makes generic precomputed password tables useless. */
static const char kdf_salt[] = "gx-job-key-v2/pbkdf2-hmac-sha256";

bool gx_auth_key_is_generated(const char *job_key)
{
    size_t plen = strlen(GX_AUTH_GENERATED_PREFIX);
    if (!job_key || strncmp(job_key, GX_AUTH_GENERATED_PREFIX, plen) != 0)
        return false;
    return strspn(job_key + plen, "0123456789abcdef") >= 32;
}

static bool key_is_public(const char *job_key)
{
    return strncmp(job_key, GX_AUTH_DEFAULT_PREFIX, strlen(GX_AUTH_DEFAULT_PREFIX)) == 0;
}

/* The stretched key of the last text derived: the KDF runs once per process
 * and key, not once per domain or connection. */
static pthread_mutex_t derive_lock = PTHREAD_MUTEX_INITIALIZER;
static bool derive_have;
static uint8_t derive_text_hash[GX_SHA256_LEN];
static uint8_t derive_out[GX_SHA256_LEN];
static unsigned long kdf_runs; /* under derive_lock */

unsigned long gx_auth_kdf_runs(void)
{
    pthread_mutex_lock(&derive_lock);
    unsigned long n = kdf_runs;
    pthread_mutex_unlock(&derive_lock);
    return n;
}

void gx_auth_key_derive(const char *job_key, struct gx_auth_key *out)
{
    const char *k = job_key ? job_key : "";
    size_t len = strlen(k);
    uint8_t text_hash[GX_SHA256_LEN];
    gx_sha256(k, len, text_hash);
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&derive_lock);
    if (!derive_have || !gx_mac_equal(text_hash, derive_text_hash, sizeof(text_hash))) {
        if (gx_auth_key_is_generated(k) || key_is_public(k)) {
            /* 128 random bits need no stretching; a public default gains nothing from it. */
            gx_hmac_sha256(kdf_salt, sizeof(kdf_salt) - 1, k, len, derive_out);
        } else {
            kdf_runs++;
            if (gx_pbkdf2_sha256(k, len, kdf_salt, sizeof(kdf_salt) - 1, GX_AUTH_KDF_ITERATIONS,
                                 derive_out) != 0) {
                /* libcrypto fails here only without memory: never fall back to a
                 * weak key; a random one makes every handshake fail instead. */
                gx_random_bytes(derive_out, sizeof(derive_out));
            }
        }
        memcpy(derive_text_hash, text_hash, sizeof(text_hash));
        derive_have = true;
    }
    memcpy(out->key, derive_out, sizeof(out->key));
    pthread_mutex_unlock(&derive_lock);
}

void gx_auth_file_tag(const struct gx_auth_key *key, uint8_t tag[8])
{
    uint8_t d[GX_SHA256_LEN];
    gx_hmac_sha256(key->key, sizeof(key->key), "gx-file-tag", 11, d);
    memcpy(tag, d, 8);
}

int gx_auth_read_key_file(const char *path, char *out, size_t len, char *err, size_t errlen)
{
    int fd = gx_safe_open(path, O_RDONLY, err, errlen);
    if (fd < 0)
        return GX_EINVAL;
    struct stat st;
    int rc = GX_OK;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot stat '%s': %s", path, strerror(errno));
        rc = GX_ESYSTEM;
    } else if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errlen, "refusing '%s' (owner uid %u, mode %04o): group or others may "
                 "read the key; chmod 600 it", path, (unsigned)st.st_uid,
                 (unsigned)(st.st_mode & 07777));
        rc = GX_EINVAL;
    }
    ssize_t n = rc == GX_OK ? read(fd, out, len) : 0;
    close(fd);
    if (rc != GX_OK)
        return rc;
    if (n < 0) {
        snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
        return GX_ESYSTEM;
    }
    if ((size_t)n >= len) {
        snprintf(err, errlen, "'%s' is longer than %zu bytes: a key file holds one line", path,
                 len - 1);
        return GX_EINVAL;
    }
    out[n] = '\0';
    out[strcspn(out, "\r\n")] = '\0';
    if (!out[0]) {
        snprintf(err, errlen, "'%s' holds no key (its first line is empty)", path);
        return GX_EINVAL;
    }
    return GX_OK;
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

static bool id_known(const uint8_t id[8])
{
    static const uint8_t zero[8];
    return memcmp(id, zero, 8) != 0;
}

int gx_auth_same_job(const struct gx_auth_key *key, const struct gx_auth_challenge *ch)
{
    /* Either side may not know the job id yet (before rendezvous): only
     * two known, different ids say "another job". */
    return !id_known(key->job_id) || !id_known(ch->job_id) ||
           memcmp(ch->job_id, key->job_id, sizeof(ch->job_id)) == 0;
}

int gx_auth_known_same_job(const struct gx_auth_key *key, const struct gx_auth_challenge *ch)
{
    return id_known(key->job_id) && memcmp(ch->job_id, key->job_id, sizeof(ch->job_id)) == 0;
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
    if (rc == GX_EPEER && !gx_auth_known_same_job(key, &ch))
        return GX_EAUTH; /* a dropped hello: most likely the key was refused */
    if (rc != GX_OK)
        return rc; /* our own job's acceptor closed: it died or gave up */
    return gx_auth_client_check(key, &hello, &acc);
}

void gx_auth_client_start(struct gx_auth_client *c, int fd, const struct gx_auth_key *key,
                          enum gx_auth_purpose purpose, int rank, uint64_t conn_id)
{
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->key = key;
    c->purpose = (int)purpose;
    c->rank = rank;
    c->conn_id = conn_id;
}

/* Read what has arrived of `len` bytes into buf: GX_OK when complete. */
static int client_read(struct gx_auth_client *c, void *buf, size_t len)
{
    while (c->got < len) {
        ssize_t n = recv(c->fd, (char *)buf + c->got, len - c->got, MSG_DONTWAIT);
        if (n > 0) {
            c->got += (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return GX_INPROGRESS;
        return GX_EPEER;
    }
    return GX_OK;
}

int gx_auth_client_progress(struct gx_auth_client *c)
{
    if (c->stage == 0) {
        int rc = client_read(c, &c->ch, sizeof(c->ch));
        if (rc != GX_OK)
            return rc;
        rc = gx_auth_client_respond(c->key, &c->ch, (enum gx_auth_purpose)c->purpose, c->rank,
                                    c->conn_id, &c->hello);
        if (rc != GX_OK)
            return rc;
        /* A hello into a socket that has sent us only 32 bytes: its send
         * buffer is empty, this never blocks. */
        ssize_t n = send(c->fd, &c->hello, sizeof(c->hello), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n != (ssize_t)sizeof(c->hello))
            return GX_EPEER;
        if (!gx_auth_same_job(c->key, &c->ch))
            return GX_EAUTH; /* the acceptor logs and drops our hello */
        c->stage = 1;
        c->got = 0;
    }
    if (c->stage == 1) {
        int rc = client_read(c, &c->acc, sizeof(c->acc));
        if (rc == GX_EPEER && !gx_auth_known_same_job(c->key, &c->ch))
            return GX_EAUTH; /* a dropped hello: most likely the key was refused */
        if (rc != GX_OK)
            return rc;
        rc = gx_auth_client_check(c->key, &c->hello, &c->acc);
        if (rc != GX_OK)
            return rc;
        c->stage = 2;
    }
    return GX_OK;
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

int gx_auth_check_hello(const struct gx_auth_key *key, const struct gx_auth_challenge *ch,
                        const void *bytes, size_t len, struct gx_auth_hello *out)
{
    struct gx_auth_hello h;
    if (len < 8)
        return GX_INPROGRESS;
    memcpy(&h, bytes, len < sizeof(h) ? len : sizeof(h));
    if (h.magic != GX_AUTH_MAGIC_HELLO || h.version != GX_AUTH_VERSION)
        return GX_EPROTO;
    if (len < sizeof(h))
        return GX_INPROGRESS;
    uint8_t expect[32];
    hello_mac(key, ch, &h, expect);
    if (!gx_mac_equal(expect, h.mac, sizeof(expect)))
        return GX_EAUTH;
    if (out)
        *out = h;
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
    int rc = gx_auth_check_hello(s->key, &s->challenge, &s->hello, sizeof(s->hello), NULL);
    if (rc != GX_OK)
        return rc;
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
