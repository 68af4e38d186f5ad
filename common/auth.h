/*
 * auth.h - the job-key handshake (wire format in auth_proto.h).
 *
 * Connector side is blocking with a deadline. Acceptor side is a small state
 * machine so a listener can drive many half-open connections from one poll
 * loop: a silent or hostile connection never stalls the others.
 */
#ifndef GX_COMMON_AUTH_H
#define GX_COMMON_AUTH_H

#include <stdbool.h>
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
    uint8_t key[32];   /* the MAC key: PBKDF2 of the job key text */
    uint8_t job_id[8]; /* rank 0's random per-job id; all zero while unknown */
};

/** gx-run's generated keys: this prefix and 32 hex digits (128 random bits).
 *  Such a key is not stretched. */
#define GX_AUTH_GENERATED_PREFIX "gxk1-"
/** The stand-in key of a job run without one (public, not stretched). */
#define GX_AUTH_DEFAULT_PREFIX "gx-default-key:"
/** PBKDF2-HMAC-SHA-256 rounds for a user-chosen key: about 45 ms on a 2020s
 *  x86 core with SHA extensions, so one offline guess costs >= 10 ms. */
#define GX_AUTH_KDF_ITERATIONS 200000u

/** Derive the MAC key from the job key text (PBKDF2 with a fixed gx salt, or
 *  a single HMAC for generated keys); the result is remembered, so the slow
 *  derivation runs once per process. job_id is left zero (unknown): rank 0
 *  picks it, the others learn it in rendezvous. */
void gx_auth_key_derive(const char *job_key, struct gx_auth_key *out);
/* How many times this process ran the PBKDF2 stretch: tests check that a
 * remembered or generated key skips it without timing anything. */
unsigned long gx_auth_kdf_runs(void);

/** True for a key gx-run generated (GX_AUTH_GENERATED_PREFIX + 32 hex). */
bool gx_auth_key_is_generated(const char *job_key);

/** The tag of this job's lines in a file:// rendezvous file (that file is
 *  0600: only its owner can read the tag). */
void gx_auth_file_tag(const struct gx_auth_key *key, uint8_t tag[8]);

/** Read a key file (GX_JOB_KEY_FILE, gx-run --job-key-file): its first line.
 *  Refuses a link, another user's file, and a file group or others may read
 *  (GX_EINVAL, `err` names the file, owner and mode). */
int gx_auth_read_key_file(const char *path, char *out, size_t len, char *err, size_t errlen);

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
/** True only when both sides know the job id and it is the same: an acceptor
 *  of our own job that drops the hello died, it did not refuse the key. */
int gx_auth_known_same_job(const struct gx_auth_key *key, const struct gx_auth_challenge *ch);
int gx_auth_client_check(const struct gx_auth_key *key, const struct gx_auth_hello *hello,
                         const struct gx_auth_accept *acc);

/** Connector without blocking, for providers that set up many connections
 *  at once (two ranks connecting to each other must never wait for each
 *  other's acceptor inside a handshake). Start it on a connected socket,
 *  then call progress until it is not GX_INPROGRESS: GX_OK, or the codes of
 *  gx_auth_connect. Does not log. */
struct gx_auth_client {
    int fd;
    const struct gx_auth_key *key;
    int purpose;
    int rank;
    uint64_t conn_id;
    int stage;                       /* 0 challenge, 1 accept, 2 done */
    struct gx_auth_challenge ch;
    struct gx_auth_hello hello;
    struct gx_auth_accept acc;
    size_t got;
};
void gx_auth_client_start(struct gx_auth_client *c, int fd, const struct gx_auth_key *key,
                          enum gx_auth_purpose purpose, int rank, uint64_t conn_id);
int gx_auth_client_progress(struct gx_auth_client *c);

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

/** Acceptor: judge the first `len` bytes of a hello against our challenge:
 *  GX_INPROGRESS (too short yet), GX_EPROTO (not a hello of this version),
 *  GX_EAUTH (MAC wrong: no key), GX_OK (*out filled when non-NULL). Pure: the
 *  fuzz target calls it. */
int gx_auth_check_hello(const struct gx_auth_key *key, const struct gx_auth_challenge *ch,
                        const void *bytes, size_t len, struct gx_auth_hello *out);

/** Blocking acceptor for simple cases (tests, tools). */
int gx_auth_accept_blocking(int fd, const struct gx_auth_key *key, uint64_t deadline,
                            struct gx_auth_hello *hello_out);

#endif
