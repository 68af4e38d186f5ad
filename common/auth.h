/*
 * auth.h - the job-key handshake (wire format in auth_proto.h).
 *
 * Connector side is blocking with a deadline. Acceptor side is a small state
 * machine so a listener can drive many half-open connections from one poll
 * loop: a silent or hostile connection never stalls the others.
 */
#ifndef GX_COMMON_AUTH_H
#define GX_COMMON_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "common/auth_proto.h"

/** Internal status: "not finished yet, call again" (never returned by the
 *  public API). */
#define GX_INPROGRESS 1

enum gx_auth_purpose {
    GX_AUTH_BOOT_RENDEZVOUS = 1, /* rank -> master: registration */
    GX_AUTH_BOOT_PEER = 2,       /* rank -> rank bootstrap messages */
    GX_AUTH_TCP_DATA = 3,        /* tcp provider data stream */
    GX_AUTH_SHM_DATA = 4,        /* shm provider unix-socket handover */
    GX_AUTH_VERBS_CM = 5,        /* verbs provider side channel (QP exchange) */
    GX_AUTH_DPDK_CM = 6,         /* dpdk provider side channel (address exchange, liveness) */
    GX_AUTH_TEST = 99,
};

struct gx_auth_key {
    uint8_t key[32];
    uint8_t job_id[8];
};

/** Derive the MAC key and the public job id from the job key text. */
void gx_auth_key_derive(const char *job_key, struct gx_auth_key *out);

/** Connector: read the challenge, send the hello, check the acceptor's proof.
 *  Returns GX_OK, GX_EAUTH (other job / bad proof), GX_EPROTO (not a gx
 *  peer), GX_EPEER, GX_ETIMEOUT. Does not log. */
int gx_auth_connect(int fd, const struct gx_auth_key *key, enum gx_auth_purpose purpose,
                    int rank, uint64_t conn_id, uint64_t deadline);

/** Connector, in two steps for callers that run their own poll loop: answer a
 *  received challenge (GX_EPROTO if it is not one), send the hello, then check
 *  the acceptor's final proof. A hello is sent even to another job's acceptor
 *  (gx_auth_same_job() false) so that it can log the refused key. */
int gx_auth_client_respond(const struct gx_auth_key *key, const struct gx_auth_challenge *ch,
                           enum gx_auth_purpose purpose, int rank, uint64_t conn_id,
                           struct gx_auth_hello *hello_out);
int gx_auth_same_job(const struct gx_auth_key *key, const struct gx_auth_challenge *ch);
int gx_auth_client_check(const struct gx_auth_key *key, const struct gx_auth_hello *hello,
                         const struct gx_auth_accept *acc);

struct gx_auth_server {
    int fd;
    const struct gx_auth_key *key;
    struct gx_auth_challenge challenge;
    struct gx_auth_hello hello; /* valid once gx_auth_server_progress() returned GX_OK */
    size_t received;
};

/** Acceptor: send the challenge on a freshly accepted non-blocking socket. */
int gx_auth_server_start(struct gx_auth_server *s, int fd, const struct gx_auth_key *key);
/** Acceptor: read what has arrived; GX_INPROGRESS until the hello is
 *  complete, then verify it and answer. GX_OK (s->hello is the verified
 *  hello), GX_EAUTH (wrong key), GX_EPROTO (garbage), GX_EPEER (closed). */
int gx_auth_server_progress(struct gx_auth_server *s);

/** Blocking acceptor for simple cases (tests, tools). */
int gx_auth_accept_blocking(int fd, const struct gx_auth_key *key, uint64_t deadline,
                            struct gx_auth_hello *hello_out);

#endif
