/* Replaced by the topology module (issue 5). */
typedef int gx_topology_placeholder_t;
