/*
 * tcp.h - internal objects of the tcp provider (fabric/tcp/).
 *
 * Files: tcp_provider.c (domain, cq, registrations, probe), tcp_conn.c
 * (listen / accept / connect with the job-key handshake on every stream),
 * tcp_data.c (posts, frame transmission and reception, errors and flush).
 */
#ifndef GX_FABRIC_TCP_TCP_H
#define GX_FABRIC_TCP_TCP_H

#include <stdbool.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/sock.h"
#include "fabric/fabric_provider.h"
#include "fabric/fabric_sock.h"
#include "fabric/tcp/tcp_proto.h"

struct tcp_domain {
    struct gx_fab_domain base;
    struct gx_auth_key key;
    struct gx_fab_mrtab mrtab;
    int nstreams;
    size_t stripe_min;
    size_t notsent_lowat;      /* GX_TCP_NOTSENT_LOWAT, 0: the kernel's default */
    struct gx_sockaddr local;  /* interface address chosen at open */
    struct gx_sockaddr mask;   /* its netmask: peers in that subnet are reached from it */
    int rail;                  /* attr.rail, -1 none */
    char ifname[64];
};

#define TCP_CQ_LISTENERS 4
struct tcp_cq {
    struct gx_fab_swcq sw;
    struct tcp_listener *lst[TCP_CQ_LISTENERS]; /* listeners bound to it (their fds wake a sleep) */
};

struct tcp_txop {
    uint64_t context;
    uint8_t op;
    uint32_t frames_left;
};

struct tcp_frame {
    struct gx_tcp_hdr hdr;
    const char *payload;
    uint64_t op_index; /* position of its op in the endpoint's tx ring */
};

struct tcp_rxslot {
    uint64_t context;
    char *buf;
    size_t len;
    bool started;
    uint8_t op;
    uint64_t msg_len;
    uint64_t got;
    uint64_t tag;
    uint32_t imm;
};

enum tcp_rx_state { RX_HDR, RX_PAYLOAD };
enum tcp_conn_stage { STAGE_TCP, STAGE_CHALLENGE, STAGE_READY };

struct tcp_stream {
    int fd;
    enum tcp_conn_stage stage;
    struct gx_auth_client auth;  /* connector, STAGE_CHALLENGE: the handshake so far */
    /* transmit: a ring of frames, the head one partly sent */
    struct tcp_frame *txq;
    uint64_t txq_head, txq_tail;
    size_t tx_off;
    /* receive */
    enum tcp_rx_state rx_state;
    struct gx_tcp_hdr rx_hdr;
    size_t rx_hdr_got;
    char *rx_dest;
    uint64_t rx_left;
    struct tcp_rxslot *rx_slot;
    bool rx_eof;   /* the peer closed this stream cleanly, between frames */
    /* read cache: bytes read ahead of the frame being parsed (headers, small
     * payloads, the next frames); only read into when empty */
    char *rc_buf;
    uint32_t rc_off, rc_len;
};

/* Read cache per stream: a header and a small payload (the transport's
 * control messages, eager data) arrive in one recv; payloads at least this
 * large are read straight into their destination. */
#define GX_TCP_RCACHE_BYTES 4096

enum tcp_ep_state { EP_CONNECTING, EP_ESTABLISHED, EP_ERROR };

struct tcp_ep {
    struct gx_fab_ep base;
    struct tcp_domain *dom;
    struct tcp_cq *cq;
    enum tcp_ep_state state;
    int error;     /* status every later op fails with */
    int nstreams;
    struct tcp_stream *streams;
    uint32_t depth;
    /* connector */
    uint64_t token;
    uint64_t deadline;
    struct gx_sockaddr peer;
    /* sends and writes, completed in post order */
    struct tcp_txop *txops;
    uint64_t tx_post, tx_done;
    unsigned rr;
    /* receives; message sequence k lands in rx[k % depth] */
    struct tcp_rxslot *rx;
    uint64_t rx_post, rx_done;
    uint64_t eof_ns;   /* when the first stream ended cleanly; 0 none */
};

/* After one stream of a peer ends cleanly, how long the others may take to
 * end too (their data is delivered meanwhile) before the endpoint fails. */
#define GX_TCP_EOF_GRACE_NS 1000000000ull

struct tcp_group {
    int rank;
    uint64_t token;
    int nstreams;
    int have;
    int fds[GX_TCP_MAX_STREAMS];
    uint64_t deadline;
    struct gx_sockaddr from;
};

struct tcp_listener {
    struct gx_fab_listener base;
    struct tcp_domain *dom;
    int fd;
    struct gx_fab_sock_pending half; /* of struct gx_fab_sock_half: in the handshake */
    struct tcp_group *groups;
    int ngroups, groups_cap;
};

/* tcp_data.c */
int tcp_cq_wait_fds(struct gx_fab_cq *cq, struct pollfd *fds, int max, int *nfds);
/* A data stream is authenticated and about to carry frames: apply the
 * domain's socket options (TCP_NOTSENT_LOWAT), best effort. */
void tcp_stream_ready(const struct tcp_domain *dom, int fd);
int tcp_ep_alloc(struct tcp_domain *dom, struct tcp_cq *cq, int nstreams, struct tcp_ep **out);
void tcp_ep_free(struct tcp_ep *ep);
void tcp_ep_progress(struct gx_fab_ep *ep);
void tcp_ep_close(struct gx_fab_ep *ep);
int tcp_post_send(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                  uint64_t tag, uint64_t context);
int tcp_post_recv(struct gx_fab_ep *ep, void *buf, size_t len, struct gx_fab_mr *mr,
                  uint64_t context);
int tcp_post_write_imm(struct gx_fab_ep *ep, const void *buf, size_t len, struct gx_fab_mr *mr,
                       uint64_t raddr, const struct gx_fab_rkey *rkey, uint32_t imm,
                       uint64_t context);

/* tcp_conn.c */
int tcp_listen(struct gx_fab_domain *dom, struct gx_fab_cq *cq, struct gx_fab_listener **out,
               struct gx_fab_addr *addr_out);
int tcp_accept(struct gx_fab_listener *lst, struct gx_fab_ep **out);
void tcp_listener_close(struct gx_fab_listener *lst);
int tcp_connect(struct gx_fab_domain *dom, struct gx_fab_cq *cq, const struct gx_fab_addr *peer,
                const struct gx_fab_conn_param *param, struct gx_fab_ep **out);
int tcp_ep_establish(struct gx_fab_ep *ep);

#endif
