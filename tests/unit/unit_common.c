/* Unit tests of common/: SHA-256, HMAC, PBKDF2 (libcrypto), the job-key
 * derivation's cost, key files, parameter parsing, interface filters, and
 * the job-key handshake over a socketpair. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "common/auth.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/param.h"
#include "common/crypto.h"
#include "common/sock.h"
#include "gx/gx.h"

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

static void test_sha256(void)
{
    uint8_t d[32];
    char h[65];
    gx_sha256("abc", 3, d);
    hex(d, 32, h);
    CHECK(strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0,
          "sha256(abc) = %s", h);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    gx_sha256(two, strlen(two), d);
    hex(d, 32, h);
    CHECK(strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0,
          "sha256(448 bits) = %s", h);
    static char million[1000000];
    memset(million, 'a', sizeof(million));
    gx_sha256(million, sizeof(million), d);
    hex(d, 32, h);
    CHECK(strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0,
          "sha256(1M a) = %s", h);
    /* RFC 7914 section 11: PBKDF2-HMAC-SHA-256, P="passwd", S="salt", c=1. */
    CHECK(gx_pbkdf2_sha256("passwd", 6, "salt", 4, 1, d) == 0, "pbkdf2");
    hex(d, 32, h);
    CHECK(strncmp(h, "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc", 64) == 0,
          "pbkdf2(passwd, salt, 1) = %s", h);
}

static double ms_since(uint64_t t0)
{
    return (double)(gx_now_ns() - t0) / 1e6;
}

/* An offline guess costs >= 10 ms: the derivation of a user-chosen key is
 * slow; it runs once per process (a second derivation is remembered); a
 * generated 128-bit key is not stretched. */
static void test_key_cost(void)
{
    struct gx_auth_key a, b, c;
    unsigned long runs0 = gx_auth_kdf_runs();
    uint64_t t0 = gx_now_ns();
    gx_auth_key_derive("hunter2", &a);
    double slow = ms_since(t0);
    t0 = gx_now_ns();
    gx_auth_key_derive("hunter2", &b);
    double again = ms_since(t0);
    /* A lower bound: the stretch costs a guesser at least this much; a slow
     * machine only makes it larger. */
    CHECK(slow >= 10.0, "deriving a user key took %.2f ms, want >= 10", slow);
    CHECK(gx_auth_kdf_runs() == runs0 + 1, "a remembered key was stretched again (%lu runs)",
          gx_auth_kdf_runs() - runs0);
    CHECK(memcmp(a.key, b.key, 32) == 0, "derivation is deterministic");
    static const uint8_t zero[8];
    CHECK(memcmp(a.job_id, zero, 8) == 0, "the job id is not derived from the key");
    const char *gen = GX_AUTH_GENERATED_PREFIX "0123456789abcdef0123456789abcdef";
    CHECK(gx_auth_key_is_generated(gen) && !gx_auth_key_is_generated("hunter2") &&
          !gx_auth_key_is_generated(GX_AUTH_GENERATED_PREFIX "12"), "generated-key test");
    gx_auth_key_derive(gen, &c);
    CHECK(gx_auth_kdf_runs() == runs0 + 1, "a generated key was stretched (%lu runs)",
          gx_auth_kdf_runs() - runs0);
    CHECK(memcmp(a.key, c.key, 32) != 0, "different keys, different MAC keys");
    printf("key derivation: %.1f ms for a user key (PBKDF2, %u rounds), %.3f ms remembered\n",
           slow, GX_AUTH_KDF_ITERATIONS, again);
}

static void test_key_file(void)
{
    char path[] = "/tmp/gx-unit-key-XXXXXX", out[256], err[512];
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, "s3cret-key-of-jobs\n", 19) == 19, "write key file");
    close(fd);
    CHECK(gx_auth_read_key_file(path, out, sizeof(out), err, sizeof(err)) == GX_OK &&
          strcmp(out, "s3cret-key-of-jobs") == 0, "read key file: %s", err);
    chmod(path, 0640);
    CHECK(gx_auth_read_key_file(path, out, sizeof(out), err, sizeof(err)) == GX_EINVAL &&
          strstr(err, "mode 0640") && strstr(err, "may read"), "0640 key file: %s", err);
    unlink(path);
}

static void test_crc32c(void)
{
    /* The check value and RFC 3720 (iSCSI) B.4 vectors. */
    uint32_t c = gx_crc32c(0, "123456789", 9);
    CHECK(c == 0xe3069283u, "crc32c(123456789) = %08x", c);
    uint8_t buf[64];
    memset(buf, 0, 32);
    CHECK(gx_crc32c(0, buf, 32) == 0x8a9136aau, "crc32c(32 zeros)");
    memset(buf, 0xff, 32);
    CHECK(gx_crc32c(0, buf, 32) == 0x62a8ab43u, "crc32c(32 x ff)");
    /* In pieces and unaligned: the same as in one go. */
    for (int i = 0; i < 64; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    uint32_t whole = gx_crc32c(0, buf + 1, 63);
    uint32_t parts = gx_crc32c(gx_crc32c(0, buf + 1, 13), buf + 14, 50);
    CHECK(whole == parts, "crc32c in pieces %08x != whole %08x", parts, whole);
    buf[30] ^= 0x10;
    CHECK(gx_crc32c(0, buf + 1, 63) != whole, "a flipped bit leaves crc32c unchanged");
}

static void test_hmac(void)
{
    /* RFC 4231 test cases 1 and 2. */
    uint8_t key[20], d[32];
    char h[65];
    memset(key, 0x0b, sizeof(key));
    gx_hmac_sha256(key, 20, "Hi There", 8, d);
    hex(d, 32, h);
    CHECK(strcmp(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7") == 0,
          "hmac case 1 = %s", h);
    gx_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
    hex(d, 32, h);
    CHECK(strcmp(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843") == 0,
          "hmac case 2 = %s", h);
    uint8_t a[4] = { 1, 2, 3, 4 }, b[4] = { 1, 2, 3, 5 };
    CHECK(gx_mac_equal(a, a, 4) && !gx_mac_equal(a, b, 4), "mac_equal");
}

GX_PARAM_DEFINE(test_param_enum, "GX_TEST_UNIT_ENUM", GX_PARAM_ENUM, "ring", "ring|tree|auto",
                "unit test parameter");
GX_PARAM_DEFINE(test_param_size, "GX_TEST_UNIT_SIZE", GX_PARAM_SIZE, "4M", NULL,
                "unit test parameter");

static void test_params(void)
{
    long long i;
    bool b;
    size_t z;
    CHECK(gx_parse_int("42", &i) == 0 && i == 42, "int 42");
    CHECK(gx_parse_int("-7", &i) == 0 && i == -7, "int -7");
    CHECK(gx_parse_int("4x", &i) != 0 && gx_parse_int("", &i) != 0, "bad ints rejected");
    CHECK(gx_parse_bool("yes", &b) == 0 && b && gx_parse_bool("OFF", &b) == 0 && !b, "bools");
    CHECK(gx_parse_bool("maybe", &b) != 0, "bad bool rejected");
    CHECK(gx_parse_size("4M", &z) == 0 && z == 4u << 20, "4M");
    CHECK(gx_parse_size("64KiB", &z) == 0 && z == 64u << 10, "64KiB");
    CHECK(gx_parse_size("1G", &z) == 0 && z == 1u << 30, "1G");
    CHECK(gx_parse_size("12", &z) == 0 && z == 12, "12");
    CHECK(gx_parse_size("-1", &z) != 0 && gx_parse_size("3X", &z) != 0, "bad sizes rejected");
    CHECK(gx_parse_size("99999999999999999999G", &z) != 0, "overflow rejected");

    CHECK(gx_param_find("GX_TIMEOUT") != NULL, "GX_TIMEOUT registered");
    CHECK(gx_param_find("GX_DEBUG") != NULL, "GX_DEBUG registered");
    CHECK(gx_param_find("GX_NO_SUCH_THING") == NULL, "unknown not found");
    int e;
    unsetenv("GX_TEST_UNIT_ENUM");
    CHECK(gx_param_enum(&test_param_enum, &e) == GX_OK && e == 0, "enum default");
    setenv("GX_TEST_UNIT_ENUM", "TREE", 1);
    CHECK(gx_param_enum(&test_param_enum, &e) == GX_OK && e == 1, "enum value, any case");
    setenv("GX_TEST_UNIT_ENUM", "star", 1);
    CHECK(gx_param_enum(&test_param_enum, &e) == GX_EINVAL, "bad enum rejected");
    CHECK(strstr(gx_last_error(), "GX_TEST_UNIT_ENUM='star'") != NULL, "error names it: %s",
          gx_last_error());
    CHECK(gx_param_check_environment() == GX_EINVAL, "check_environment reports it");
    unsetenv("GX_TEST_UNIT_ENUM");
    CHECK(gx_param_size(&test_param_size, &z) == GX_OK && z == 4u << 20, "size default");
    /* Names are unique across the registry. */
    for (size_t a = 0; gx_param_at(a); a++)
        for (size_t c = a + 1; gx_param_at(c); c++)
            CHECK(strcmp(gx_param_at(a)->name, gx_param_at(c)->name) != 0, "%s twice",
                  gx_param_at(a)->name);
}

static void test_ifname_filter(void)
{
    CHECK(gx_sock_ifname_matches("", "eth0"), "empty matches all");
    CHECK(gx_sock_ifname_matches("eth", "eth0"), "prefix");
    CHECK(!gx_sock_ifname_matches("eth", "ib0"), "prefix miss");
    CHECK(gx_sock_ifname_matches("ib,eth", "eth1"), "list");
    CHECK(!gx_sock_ifname_matches("^docker,lo", "lo"), "exclude");
    CHECK(gx_sock_ifname_matches("^docker,lo", "eth0"), "exclude passes others");
    CHECK(gx_sock_ifname_matches("=eth0", "eth0") && !gx_sock_ifname_matches("=eth0", "eth01"),
          "exact");
    struct gx_sockaddr a;
    CHECK(gx_sock_resolve("127.0.0.1:80", -1, "t", &a) == GX_OK && gx_sock_port(&a) == 80, "v4");
    CHECK(gx_sock_resolve("[::1]:81", -1, "t", &a) == GX_OK && gx_sock_port(&a) == 81, "v6");
    CHECK(gx_sock_resolve("localhost", -1, "t", &a) == GX_EINVAL, "missing port rejected");
    CHECK(gx_sock_resolve("127.0.0.1:99999", -1, "t", &a) == GX_EINVAL, "bad port rejected");
}

struct server_arg {
    int fd;
    struct gx_auth_key key;
    int rc;
    struct gx_auth_hello hello;
};

static void *server_thread(void *p)
{
    struct server_arg *s = p;
    s->rc = gx_auth_accept_blocking(s->fd, &s->key, gx_deadline_after_ms(5000), &s->hello);
    if (s->rc != GX_OK)
        shutdown(s->fd, SHUT_RDWR); /* an acceptor drops a refused connection */
    return NULL;
}

static int handshake(const char *server_key, const char *client_key, int *server_rc)
{
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
    struct server_arg s = { .fd = sv[0] };
    gx_auth_key_derive(server_key, &s.key);
    pthread_t t;
    pthread_create(&t, NULL, server_thread, &s);
    struct gx_auth_key ck;
    gx_auth_key_derive(client_key, &ck);
    int rc = gx_auth_connect(sv[1], &ck, GX_AUTH_TEST, 5, 77, gx_deadline_after_ms(5000));
    if (rc != GX_OK)
        close(sv[1]); /* let a server waiting for more bytes see EOF */
    pthread_join(t, NULL);
    *server_rc = s.rc;
    if (s.rc == GX_OK)
        CHECK(s.hello.rank == 5 && s.hello.conn_id == 77, "hello fields");
    close(sv[0]);
    if (rc == GX_OK)
        close(sv[1]);
    return rc;
}

static void test_handshake(void)
{
    int srv;
    CHECK(handshake("k1", "k1", &srv) == GX_OK && srv == GX_OK, "same key: %d/%d", 0, srv);
    CHECK(handshake("k1", "k2", &srv) == GX_EAUTH && srv == GX_EAUTH, "wrong key: server %d",
          srv);
    /* Garbage instead of a hello. */
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
    struct server_arg s = { .fd = sv[0] };
    gx_auth_key_derive("k", &s.key);
    pthread_t t;
    pthread_create(&t, NULL, server_thread, &s);
    char junk[100];
    memset(junk, 'x', sizeof(junk));
    CHECK(write(sv[1], junk, sizeof(junk)) == (ssize_t)sizeof(junk), "write junk");
    pthread_join(t, NULL);
    CHECK(s.rc == GX_EPROTO, "garbage gives GX_EPROTO, got %d", s.rc);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    test_sha256();
    test_key_cost();
    test_key_file();
    test_crc32c();
    test_hmac();
    test_params();
    test_ifname_filter();
    test_handshake();
    CHECK_DONE("unit_common");
}
