/* crypto.c - thin wrappers over OpenSSL's libcrypto (see crypto.h). */
#include "common/crypto.h"

#include <pthread.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

/* libcrypto set up once: no configuration file (gx needs none, and a site's
 * openssl.cnf could load engines into every rank), and no atexit clean-up
 * (it tears libcrypto down while other threads or LeakSanitizer's exit scan
 * may still run; the process is ending anyway). */
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;

static void crypto_init(void)
{
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ATEXIT, NULL);
}

void gx_sha256(const void *data, size_t len, uint8_t out[GX_SHA256_LEN])
{
    pthread_once(&crypto_once, crypto_init);
    SHA256(data, len, out);
}

void gx_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    uint8_t out[GX_SHA256_LEN])
{
    pthread_once(&crypto_once, crypto_init);
    unsigned int n = GX_SHA256_LEN;
    HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, out, &n);
}

int gx_pbkdf2_sha256(const char *pass, size_t pass_len, const void *salt, size_t salt_len,
                     unsigned iterations, uint8_t out[GX_SHA256_LEN])
{
    pthread_once(&crypto_once, crypto_init);
    return PKCS5_PBKDF2_HMAC(pass, (int)pass_len, salt, (int)salt_len, (int)iterations,
                             EVP_sha256(), GX_SHA256_LEN, out) == 1 ? 0 : -1;
}

int gx_mac_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
    return CRYPTO_memcmp(a, b, len) == 0;
}
