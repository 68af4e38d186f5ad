/* crypto.c - thin wrappers over OpenSSL's libcrypto (see crypto.h). */
#include "common/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

void gx_sha256(const void *data, size_t len, uint8_t out[GX_SHA256_LEN])
{
    SHA256(data, len, out);
}

void gx_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    uint8_t out[GX_SHA256_LEN])
{
    unsigned int n = GX_SHA256_LEN;
    HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, out, &n);
}

int gx_pbkdf2_sha256(const char *pass, size_t pass_len, const void *salt, size_t salt_len,
                     unsigned iterations, uint8_t out[GX_SHA256_LEN])
{
    return PKCS5_PBKDF2_HMAC(pass, (int)pass_len, salt, (int)salt_len, (int)iterations,
                             EVP_sha256(), GX_SHA256_LEN, out) == 1 ? 0 : -1;
}

int gx_mac_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
    return CRYPTO_memcmp(a, b, len) == 0;
}
