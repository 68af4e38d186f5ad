/* hca_filter.c - GX_IB_HCA include/exclude lists (see hca_filter.h). */
#include "topology/hca_filter.h"

#include "common/param.h"

#include <stdlib.h>
#include <string.h>

GX_PARAM_DEFINE(gx_param_ib_hca, "GX_IB_HCA", GX_PARAM_STRING, "", NULL,
                "RDMA devices to use, as NCCL_IB_HCA: comma list of NAME[:PORT] "
                "(prefix match; '=' first for exact names, '^' first to exclude), "
                "e.g. mlx5_0:1,mlx5_1 or ^=mlx5_2");

const char *gx_topo_hca_spec(void)
{
    return gx_param_text(&gx_param_ib_hca);
}

/* Does entry [begin, end) ("NAME" or "NAME:PORT") match devname/port? */
static bool entry_matches(const char *begin, const char *end, bool exact, const char *devname, int port)
{
    const char *colon = memchr(begin, ':', (size_t)(end - begin));
    const char *name_end = colon ? colon : end;
    size_t name_len = (size_t)(name_end - begin);

    if (name_len == 0)
        return false;
    if (strncmp(devname, begin, name_len) != 0)
        return false;
    if (exact && devname[name_len] != '\0')
        return false;
    if (colon && port > 0) {
        char buf[16];
        size_t len = (size_t)(end - colon - 1);
        if (len == 0 || len >= sizeof(buf))
            return false;
        memcpy(buf, colon + 1, len);
        buf[len] = '\0';
        char *stop;
        long want = strtol(buf, &stop, 10);
        if (*stop != '\0' || want != port)
            return false;
    }
    return true;
}

bool gx_topo_hca_filter_match(const char *spec, const char *devname, int port)
{
    if (spec == NULL || devname == NULL)
        return true;
    while (*spec == ' ')
        spec++;
    if (*spec == '\0')
        return true;

    bool exclude = false, exact = false;
    if (*spec == '^') {
        exclude = true;
        spec++;
    }
    if (*spec == '=') {
        exact = true;
        spec++;
    }

    bool hit = false;
    const char *p = spec;
    while (*p != '\0' && !hit) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *b = p, *e = end;
        while (b < e && *b == ' ')
            b++;
        while (e > b && e[-1] == ' ')
            e--;
        hit = entry_matches(b, e, exact, devname, port);
        p = comma ? comma + 1 : end;
    }
    return exclude ? !hit : hit;
}
