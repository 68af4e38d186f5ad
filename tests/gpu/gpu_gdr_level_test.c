/*
 * gpu_gdr_level_test.c - GX_NET_GDR_LEVEL as NCCL_NET_GDR_LEVEL: the names
 * (LOC PIX PXB PHB NODE SYS, any case) and NCCL's numbers (0 LOC, 1 PIX,
 * 2 PXB, 3 PHB, 4 and above SYS); anything else is GX_EINVAL naming the
 * variable. Unset: PXB.
 */
#include <stdlib.h>
#include <string.h>

#include "../unit/check.h"
#include "common/log.h"
#include "gpudirect/gpudirect.h"

static void want(const char *v, int rc_want, enum gx_topo_path p_want)
{
    if (v)
        setenv("GX_NET_GDR_LEVEL", v, 1);
    else
        unsetenv("GX_NET_GDR_LEVEL");
    enum gx_topo_path p = GX_TOPO_PATH_UNKNOWN;
    int rc = gx_gpu_gdr_level(&p);
    CHECK(rc == rc_want, "%s: rc %d", v ? v : "(unset)", rc);
    if (rc == GX_OK)
        CHECK(p == p_want, "%s: %s, want %s", v ? v : "(unset)", gx_gpu_path_name(p),
              gx_gpu_path_name(p_want));
    else
        CHECK(strstr(gx_last_error(), "GX_NET_GDR_LEVEL"), "%s", gx_last_error());
}

int main(void)
{
    want(NULL, GX_OK, GX_TOPO_PATH_PXB);
    want("LOC", GX_OK, GX_TOPO_PATH_SELF);
    want("pix", GX_OK, GX_TOPO_PATH_PIX);
    want("PHB", GX_OK, GX_TOPO_PATH_PHB);
    want("NODE", GX_OK, GX_TOPO_PATH_NODE);
    want("SYS", GX_OK, GX_TOPO_PATH_SYS);
    want("0", GX_OK, GX_TOPO_PATH_SELF);
    want("1", GX_OK, GX_TOPO_PATH_PIX);
    want("2", GX_OK, GX_TOPO_PATH_PXB);
    want("3", GX_OK, GX_TOPO_PATH_PHB);
    want("4", GX_OK, GX_TOPO_PATH_SYS);
    want("7", GX_OK, GX_TOPO_PATH_SYS);
    want("2x", GX_EINVAL, GX_TOPO_PATH_UNKNOWN);
    want("-1", GX_EINVAL, GX_TOPO_PATH_UNKNOWN);
    want("sideways", GX_EINVAL, GX_TOPO_PATH_UNKNOWN);
    CHECK_DONE("gdr level");
}
