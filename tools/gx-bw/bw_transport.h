/*
 * bw_transport.h - gx-bw's fabric set-up, separate from how the two sides
 * find each other: each side makes a card (fabric address, remote key and
 * buffer address), the cards are exchanged by any means (gx-bw's own TCP
 * socket today, a communicator's all-gather under gx-run later), and
 * bw_transport_connect() turns the peer's card into a connected endpoint.
 */
#ifndef GX_TOOLS_BW_TRANSPORT_H
#define GX_TOOLS_BW_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "fabric/fabric.h"

struct bw_card {
    struct gx_fab_addr addr; /* listener address (server side) */
    struct gx_fab_rkey rkey; /* receive buffer, remote-writable */
    uint64_t base;           /* receive buffer address */
};

struct bw_transport {
    struct gx_fab_domain *dom;
    struct gx_fab_cq *cq;
    struct gx_fab_listener *lst;
    struct gx_fab_ep *ep;
    char *sbuf, *rbuf;
    size_t buf_len;
    struct gx_fab_mr *smr, *rmr;
    struct bw_card mine, peer;
};

/** Open the provider, register buffers of `len` bytes, listen if `server`. */
int bw_transport_open(struct bw_transport *t, const char *provider, const char *device, int rank,
                      size_t len, int server, const char *job_key);
/** Connect (client) or accept (server) given the exchanged peer card. */
int bw_transport_connect(struct bw_transport *t, const struct bw_card *peer, int server,
                         int timeout_ms);
void bw_transport_close(struct bw_transport *t);

/** "verbs" when it is built and finds an active device, else "tcp". */
const char *bw_default_provider(void);
/** Connect the control socket with one attempt, as perftest does: a client
 *  with no server fails at once, naming HOST:PORT on stderr. 0 or -1. */
int bw_connect_once(const char *host, long long port, int *fd_out);

#endif
