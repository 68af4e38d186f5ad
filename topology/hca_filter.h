/*
 * hca_filter.h - GX_IB_HCA device lists, shared by topology and the verbs
 * provider (fabric/verbs may include this header: topology is below it).
 *
 * Syntax, as NCCL_IB_HCA: a comma list of NAME[:PORT]. NAME matches device
 * names that start with it ("mlx5" matches mlx5_0 and mlx5_10); a leading
 * "=" makes every NAME an exact match; a leading "^" turns the list into an
 * exclude list ("^=mlx5_1" excludes exactly mlx5_1). An entry without a port
 * matches every port. An empty spec matches everything.
 */
#ifndef GX_TOPOLOGY_HCA_FILTER_H
#define GX_TOPOLOGY_HCA_FILTER_H

#include <stdbool.h>

/** True when device `devname` port `port` passes the filter. port <= 0 asks
 *  "does any port of the device pass": an entry's port is then ignored. */
bool gx_topo_hca_filter_match(const char *spec, const char *devname, int port);

/** The GX_IB_HCA value ("" when unset). */
const char *gx_topo_hca_spec(void);

#endif
