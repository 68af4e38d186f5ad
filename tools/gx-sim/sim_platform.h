/*
 * sim_platform.h - the machine gx-sim simulates, written as a SimGrid
 * platform file (XML, version 4.1) for one plan.
 *
 *   node: gpus_per_node GPUs (hosts g<rank>), each with an NVLink link
 *         to the node's switch (nvl<rank>) and one NIC (nic<rank>)
 *   leaf: one switch per rail (a GPU's index in its node) and group of
 *         nodes_per_leaf nodes (rail-optimised, as DGX SuperPODs are);
 *         its uplink to the spines (up<leaf>) carries
 *         nodes_per_leaf * nic / oversub
 *   spine: not a bottleneck beyond the leaves' uplinks
 *
 * --layout gives nodes of different sizes, --nics-per-node K fewer NICs
 * than GPUs (a host whose ranks share one network link, as the netns
 * nodes of perf/sim_calibrate.sh do): GPU i of a node sends on NIC i mod K,
 * and the rails (leaves) are the K NICs' indices.
 *
 * Every link is split-duplex (each direction its own bandwidth). Routes:
 * inside a node nvl<a> up, nvl<b> down; between nodes nic<a>, then
 * up<leaf a> and up<leaf b> when the leaves differ, then nic<b>. Only the
 * pairs the plan's sends use get a route (a full table of 4096^2 would not
 * fit).
 *
 * Owns: the platform's numbers and its file. Must not touch: the plan.
 */
#ifndef GX_SIM_PLATFORM_H
#define GX_SIM_PLATFORM_H

#include <stdio.h>

#include "tools/gx-sim/sim_plan.h"

#define SIM_MAX_LAYOUT 64 /* nodes of an explicit layout (--layout) */

struct sim_machine {
    int gpus_per_node;      /* the largest node's GPUs when `layout_nodes` */
    int layout_nodes;       /* 0: nodes of gpus_per_node in rank order (the last one
                               smaller); else node k has layout[k] ranks */
    int layout[SIM_MAX_LAYOUT];
    int nics_per_node;      /* 0: one per GPU; else K, GPU i of a node on NIC i mod K */
    double msg_us;          /* a message's software cost on its sender (CPU time) */
    int nodes_per_leaf;
    double nic_gbps;        /* Gb/s per NIC, each direction */
    double nvlink_gbps;     /* Gb/s per GPU into the node's switch, each direction */
    double oversub;         /* leaf down / up capacity (1: non-blocking) */
    double nic_lat_us;      /* one way, GPU to GPU under one leaf */
    double spine_lat_us;    /* added when the path crosses the spines */
    double nvlink_lat_us;   /* one way inside a node */
    double mem_gbytes;      /* GB/s of memory traffic a reduction or copy runs at */
};

#define SIM_MACHINE_DEFAULT                                                              \
    { .gpus_per_node = 8, .nodes_per_leaf = 32, .nic_gbps = 400, .nvlink_gbps = 3600,  \
      .oversub = 1, .nic_lat_us = 2, .spine_lat_us = 1, .nvlink_lat_us = 1,            \
      .mem_gbytes = 2000, .nics_per_node = 0, .msg_us = 0 }

/* Rank r's node, its index inside the node, the node count of n ranks,
 * the first rank of node k, the NICs per node. */
int sim_node_of(const struct sim_machine *m, int r);
int sim_local_of(const struct sim_machine *m, int r);
int sim_nodes_of(const struct sim_machine *m, int n);
int sim_node_first(const struct sim_machine *m, int k);
int sim_nics(const struct sim_machine *m);

/* Write the platform of `nranks` GPUs with routes for plan's sends to f;
 * 0, or -1 (out of memory, or the write failed). */
int sim_platform_write(FILE *f, const struct sim_machine *m, const struct sim_plan *plan);

/* One-way latency in seconds and bandwidth in bytes/s between two ranks
 * (what the cost model's probe would measure across nodes). */
void sim_platform_path(const struct sim_machine *m, int a, int b, double *lat_s, double *bytes_s);

#endif
