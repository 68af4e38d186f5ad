/* A training binary's first lines: init from the environment, barrier, done. */
#include <gx/gx.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    setenv("GX_RANK", "0", 0);
    setenv("GX_SIZE", "1", 0);
    struct gx_comm *comm;
    int rc = gx_comm_init_env(&comm);
    if (rc != GX_OK) {
        fprintf(stderr, "init: %s: %s\n", gx_strerror(rc), gx_last_error());
        return 1;
    }
    rc = gx_barrier(comm);
    printf("gx hello: rank %d of %d, barrier %s, libgx %s\n", gx_comm_rank(comm),
           gx_comm_size(comm), gx_strerror(rc), gx_version());
    gx_comm_finalize(comm);
    gx_comm_destroy(comm);
    return rc == GX_OK ? 0 : 1;
}
