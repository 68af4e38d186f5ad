/*
 * crypto.h - the hashing gx needs, from OpenSSL's libcrypto (a vetted,
 * constant-time implementation, packaged everywhere gx runs; see
 * docs/security.md): SHA-256, HMAC-SHA-256, PBKDF2-HMAC-SHA-256 and a
 * constant-time compare. Random bytes come from the kernel (gx_random_bytes,
 * common/sock.h). Owns no state.
 */
#ifndef GX_COMMON_CRYPTO_H
#define GX_COMMON_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define GX_SHA256_LEN 32

void gx_sha256(const void *data, size_t len, uint8_t out[GX_SHA256_LEN]);

void gx_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    uint8_t out[GX_SHA256_LEN]);

/** PBKDF2-HMAC-SHA-256 (RFC 8018) of `pass` with `salt`, 32 bytes out.
 *  Returns 0, or -1 if libcrypto failed. */
int gx_pbkdf2_sha256(const char *pass, size_t pass_len, const void *salt, size_t salt_len,
                     unsigned iterations, uint8_t out[GX_SHA256_LEN]);

/** Compare two MACs in time independent of where they differ. 1 if equal. */
int gx_mac_equal(const uint8_t *a, const uint8_t *b, size_t len);

#endif
