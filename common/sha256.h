/* sha256.h - SHA-256 and HMAC-SHA-256 (FIPS 180-4, RFC 2104), used to
 * authenticate bootstrap and data connections with the job key. */
#ifndef GX_COMMON_SHA256_H
#define GX_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define GX_SHA256_LEN 32

struct gx_sha256 {
    uint32_t state[8];
    uint64_t length;
    uint8_t block[64];
    size_t fill;
};

void gx_sha256_init(struct gx_sha256 *ctx);
void gx_sha256_update(struct gx_sha256 *ctx, const void *data, size_t len);
void gx_sha256_final(struct gx_sha256 *ctx, uint8_t out[GX_SHA256_LEN]);

void gx_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                    uint8_t out[GX_SHA256_LEN]);

/** Compare two MACs in time independent of where they differ. 1 if equal. */
int gx_mac_equal(const uint8_t *a, const uint8_t *b, size_t len);

#endif
