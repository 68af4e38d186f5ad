/* stats.c - the process-wide counters (see stats.h). */
#include "common/stats.h"

uint64_t gx_pstats[GX_PSTAT_COUNT];
