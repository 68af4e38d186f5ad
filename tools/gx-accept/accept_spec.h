/*
 * accept_spec.h - gx-accept's expectations, read from a JSON spec file
 * (docs/accept.md) and checked key by key: unknown keys, missing required
 * keys, wrong types and out-of-range values are refused with the file, the
 * line and the dotted key ("spec.json:7: p2p.min_gbs: expected a number,
 * found a string").
 *
 * The parsed spec is a plain struct without pointers, so rank 0 can read the
 * file and broadcast it to the other ranks byte for byte. Owns the schema
 * and its defaults; must not touch the communicator or run any check.
 */
#ifndef GX_ACCEPT_SPEC_H
#define GX_ACCEPT_SPEC_H

#include <stddef.h>

#define ACCEPT_NAME_MAX 64
#define ACCEPT_MAX_OVERRIDES 16
#define ACCEPT_UNSET (-1.0) /* a numeric expectation the spec did not give */

/* Expectations for one node (the "node" section, or an override). */
struct accept_node_spec {
    double gpus;            /* GPUs per node */
    double nics;            /* NICs gx would use: RDMA NICs, or Ethernet NICs when none */
    double nic_min_gbps;    /* every such NIC's link at least this (unknown -> skip) */
    char max_nic_path[8];   /* farthest allowed rank->NIC path: PIX PXB PHB NODE SYS, "" = any */
    char cpu_governor[32];  /* "" = not checked */
    int dpdk;               /* hugepages are checked when 1 */
    double hugepages_min_mb;
    char topology_xml[256]; /* read this hwloc XML instead of probing ("" = probe) */
};

struct accept_override {
    char node[ACCEPT_NAME_MAX]; /* node name (GX_NODE_ID or host name) */
    struct accept_node_spec spec;
};

struct accept_sweep_spec {
    int enabled;            /* the section is present */
    double min_bytes, max_bytes;
    double factor;          /* size step factor (>= 2) */
    double iters;           /* timed iterations per size */
    double min_busbw_gbs;   /* at the largest size; UNSET = not checked */
};

struct accept_spec {
    double version;         /* spec format, 1 */
    char name[ACCEPT_NAME_MAX];
    double nodes;           /* expected node count, UNSET = any */
    double ranks_per_node;  /* expected ranks per node, UNSET = any */
    struct accept_node_spec node;
    int noverrides;
    struct accept_override overrides[ACCEPT_MAX_OVERRIDES];
    double max_clock_skew_ms;
    int p2p_enabled;
    double p2p_bytes;       /* bytes per direction per repeat */
    double p2p_message_bytes;
    double p2p_repeats;
    double p2p_min_gbs;     /* GB/s each direction; UNSET = not checked */
    double p2p_max_latency_us;
    struct accept_sweep_spec allreduce, allgather;
    int soak_enabled;
    double soak_seconds;
    double soak_max_bytes;
    double outlier_fraction; /* below this fraction of the median is an outlier */
};

/**
 * Read and check the spec file at `path`. 0 on success; -1 with one error
 * ("FILE:LINE: KEY: what") in err, naming the first fault found.
 */
int accept_spec_load(const char *path, struct accept_spec *spec, char *err, size_t err_len);

/** Parse spec text (path is only used in messages). */
int accept_spec_parse(const char *path, const char *text, size_t len, struct accept_spec *spec,
                      char *err, size_t err_len);

/** The node expectations for node `name` (its override, or the "node" section). */
const struct accept_node_spec *accept_spec_for_node(const struct accept_spec *spec,
                                                    const char *name);

#endif
