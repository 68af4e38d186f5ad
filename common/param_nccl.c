/*
 * param_nccl.c - NCCL_* variables that have a GX_* equivalent.
 *
 * Jobs moving from NCCL to gx keep their NCCL_* settings. Where the meaning
 * and the form are the same (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, ...), gx reads
 * the NCCL_* value when the GX_* one is unset, and says so once in a one-line
 * notice; where they differ (NCCL_ALGO, NCCL_TOPO_FILE, ...), gx ignores the
 * NCCL_* one and a warning names the GX_* variable to set instead. A GX_*
 * variable that is set always wins. docs/api.md has the table.
 *
 * gx_param_text() calls gx_param_nccl_value() and must not log (the logger
 * reads its own parameters through it); the notices and warnings come from
 * gx_param_nccl_report(), called by gx_param_check_environment().
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/param.h"

/* How an NCCL_* value becomes a GX_* value; NULL when it cannot. */
typedef const char *(*nccl_translate_fn)(const char *nccl_value);

struct nccl_alias {
    const char *nccl;
    const char *gx;
    nccl_translate_fn translate; /* NULL: read as is; see `why` when `read` is false */
    bool read;
    const char *why;             /* not read: what differs */
};

static const char *debug_level(const char *v)
{
    static const char *const map[][2] = { { "VERSION", "warn" }, { "WARN", "warn" },
                                          { "INFO", "info" }, { "TRACE", "trace" },
                                          { "ABORT", "warn" } };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcasecmp(v, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

static const char *net_name(const char *v)
{
    if (strcasecmp(v, "IB") == 0)
        return "verbs";
    if (strcasecmp(v, "Socket") == 0)
        return "tcp";
    return NULL;
}

static const struct nccl_alias aliases[] = {
    { "NCCL_SOCKET_IFNAME", "GX_SOCKET_IFNAME", NULL, true, NULL },
    { "NCCL_IB_HCA", "GX_IB_HCA", NULL, true, NULL },
    { "NCCL_IB_GID_INDEX", "GX_IB_GID_INDEX", NULL, true, NULL },
    { "NCCL_IB_TIMEOUT", "GX_IB_TIMEOUT", NULL, true, NULL },
    { "NCCL_IB_RETRY_CNT", "GX_IB_RETRY_CNT", NULL, true, NULL },
    { "NCCL_IB_SL", "GX_IB_SL", NULL, true, NULL },
    { "NCCL_IB_TC", "GX_IB_TC", NULL, true, NULL },
    { "NCCL_IB_QPS_PER_CONNECTION", "GX_IB_QPS_PER_CONN", NULL, true, NULL },
    { "NCCL_NET_GDR_LEVEL", "GX_NET_GDR_LEVEL", NULL, true, NULL },
    { "NCCL_DEBUG", "GX_DEBUG", debug_level, true, NULL },
    { "NCCL_NET", "GX_NET", net_name, true, NULL },
    { "NCCL_DEBUG_SUBSYS", "GX_DEBUG_SUBSYS", NULL, false,
      "gx's subsystems have other names (init,boot,fabric,coll,topo,gpu,ddp,param,tool)" },
    { "NCCL_DEBUG_FILE", "GX_DEBUG_FILE", NULL, false, "gx writes its own log format there" },
    { "NCCL_ALGO", "GX_ALGO", NULL, false,
      "gx's algorithms have other names (ring|tree|dbtree|rhd|rd|linear|shm)" },
    { "NCCL_TOPO_FILE", "GX_TOPO_FILE", NULL, false,
      "GX_TOPO_FILE reads hwloc XML, not NCCL's topology XML" },
    { "NCCL_TOPO_DUMP_FILE", "GX_TOPO_DUMP", NULL, false, "GX_TOPO_DUMP writes hwloc XML" },
    { "NCCL_IB_DISABLE", "GX_NET", NULL, false, "GX_NET=tcp keeps gx off RDMA" },
    { "NCCL_SHM_DISABLE", "GX_PROVIDER", NULL, false,
      "GX_PROVIDER=tcp (or verbs) keeps gx off shared memory" },
    { "NCCL_SOCKET_NTHREADS", "GX_TCP_NSTREAMS", NULL, false,
      "gx's tcp provider opens GX_TCP_NSTREAMS streams per connection" },
    { "NCCL_NSOCKS_PERTHREAD", "GX_TCP_NSTREAMS", NULL, false,
      "gx's tcp provider opens GX_TCP_NSTREAMS streams per connection" },
    { "NCCL_BUFFSIZE", "GX_COLL_CHUNK", NULL, false, "gx pipelines in GX_COLL_CHUNK pieces" },
    { "NCCL_COMM_ID", "GX_MASTER_ADDR", NULL, false,
      "gx meets at GX_MASTER_ADDR:GX_MASTER_PORT (or MASTER_ADDR/MASTER_PORT)" },
};

#define NALIASES (sizeof(aliases) / sizeof(aliases[0]))

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

const char *gx_param_nccl_value(const char *gx_name, const char **from)
{
    for (size_t i = 0; i < NALIASES; i++) {
        const struct nccl_alias *a = &aliases[i];
        if (!a->read || strcmp(a->gx, gx_name) != 0)
            continue;
        const char *v = env(a->nccl);
        if (!v)
            continue;
        if (a->translate)
            v = a->translate(v);
        if (v) {
            if (from)
                *from = a->nccl;
            return v;
        }
    }
    return NULL;
}

int gx_param_nccl_at(size_t i, const char **nccl, const char **gx, bool *read)
{
    if (i >= NALIASES)
        return -1;
    *nccl = aliases[i].nccl;
    *gx = aliases[i].gx;
    *read = aliases[i].read;
    return 0;
}

void gx_param_nccl_report(void)
{
    static char said[NALIASES];
    for (size_t i = 0; i < NALIASES; i++) {
        const struct nccl_alias *a = &aliases[i];
        const char *v = env(a->nccl);
        if (!v || env(a->gx) || __atomic_exchange_n(&said[i], 1, __ATOMIC_RELAXED))
            continue;
        const char *as = a->read && a->translate ? a->translate(v) : v;
        if (a->read && as)
            GX_WARN(GX_SUB_PARAM, "note: reading %s=%s as %s=%s (set %s to choose for gx alone)",
                    a->nccl, v, a->gx, as, a->gx);
        else if (a->read)
            GX_WARN(GX_SUB_PARAM, "%s=%s is not read: %s takes no such value; set %s", a->nccl,
                    v, a->gx, a->gx);
        else
            GX_WARN(GX_SUB_PARAM, "%s is set but gx does not read it: %s; set %s", a->nccl,
                    a->why, a->gx);
    }
}
