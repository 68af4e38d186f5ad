/*
 * coll_names.c - the collectives' names ("allreduce", "broadcast", ...), as
 * logs, error messages, GX_ALGO's COLLECTIVE:ALGO form and gx-info print
 * them. The algorithms' names are their descriptors' (algorithms/).
 */
#include "collectives/schedule/schedule.h"

static const char *const kind_names[COLL_KIND_COUNT] = {
    "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "gather", "scatter",
    "alltoall",
};

const char *coll_kind_name(enum coll_kind k)
{
    return (unsigned)k < COLL_KIND_COUNT ? kind_names[k] : "?";
}
