/* topo_print.h - gx-topo's output formats: text (like nvidia-smi topo -m),
 * JSON and Graphviz dot. Uses only the public gx_topo API. */
#ifndef GX_TOOLS_TOPO_PRINT_H
#define GX_TOOLS_TOPO_PRINT_H

#include "gx/gx.h"

#include <stdio.h>

/* The path matrix and its legend, as nvidia-smi topo -m prints them. */
void topo_print_matrix(FILE *out, const struct gx_topo *topo);
void topo_print_text(FILE *out, const struct gx_topo *topo, int nranks, const struct gx_topo_placement *pl);
void topo_print_json(FILE *out, const struct gx_topo *topo, int nranks, const struct gx_topo_placement *pl);
void topo_print_dot(FILE *out, const struct gx_topo *topo);

#endif
