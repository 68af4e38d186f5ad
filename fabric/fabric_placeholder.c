/* Replaced by the fabric module (issue 3). */
typedef int gx_fabric_placeholder_t;
