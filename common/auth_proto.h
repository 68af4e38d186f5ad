/*
 * auth_proto.h - wire format of the job-key handshake that opens every gx
 * connection (bootstrap and tcp data connections alike).
 *
 *   acceptor  -> connector : struct gx_auth_challenge
 *   connector -> acceptor  : struct gx_auth_hello   (MAC over challenge+hello)
 *   acceptor  -> connector : struct gx_auth_accept  (MAC over hello)
 *
 * The MACs are HMAC-SHA-256 keyed with PBKDF2(job key) (auth.c); the key
 * itself never crosses the wire, the acceptor's fresh nonce defeats replay,
 * and the final message proves the acceptor knows the key too. Nothing the
 * acceptor sends before the connector has proved the key depends on the key:
 * the challenge carries only random bytes (rank 0's per-job id and a nonce),
 * so one connection gives an attacker nothing to test guesses against.
 * All integers little-endian.
 */
#ifndef GX_COMMON_AUTH_PROTO_H
#define GX_COMMON_AUTH_PROTO_H

#include <stdint.h>

#define GX_AUTH_VERSION 2
#define GX_AUTH_MAGIC_CHALLENGE 0x48435847u /* "GXCH" */
#define GX_AUTH_MAGIC_HELLO 0x4c485847u     /* "GXHL" */
#define GX_AUTH_MAGIC_ACCEPT 0x4b4f5847u    /* "GXOK" */

struct gx_auth_challenge {
    uint32_t magic;
    uint16_t version;
    uint16_t reserved;
    uint8_t job_id[8]; /* rank 0's random per-job id, zero if not yet known:
                        * lets a connector tell "another job" from "bad key" */
    uint8_t nonce[16];
};

struct gx_auth_hello {
    uint32_t magic;
    uint16_t version;
    uint16_t purpose;  /* enum gx_auth_purpose */
    int32_t rank;      /* connector's rank (world rank) */
    uint32_t reserved;
    uint64_t conn_id;  /* purpose-specific: endpoint / stream identifier */
    uint8_t nonce[16];
    uint8_t mac[32];
};

struct gx_auth_accept {
    uint32_t magic;
    uint32_t reserved;
    uint8_t mac[32];
};

_Static_assert(sizeof(struct gx_auth_challenge) == 32, "challenge layout");
_Static_assert(sizeof(struct gx_auth_hello) == 72, "hello layout");
_Static_assert(sizeof(struct gx_auth_accept) == 40, "accept layout");

#endif
