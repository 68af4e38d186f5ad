/* comm_env.h - turning the environment and a gx_config into bootstrap
 * parameters (GX_*, torchrun, Slurm, Open MPI). */
#ifndef GX_COMM_ENV_H
#define GX_COMM_ENV_H

#include "collectives/bootstrap/boot.h"
#include "gx/gx.h"

struct comm_setup {
    struct boot_params boot;
    char init_method[512];
    char job_key[256];
    char node_id[64];
    int op_timeout_ms;
    const char *op_timeout_src; /* where op_timeout_ms came from, for messages */
    int rts_ahead;              /* GX_RTS_AHEAD */
    char name[32];
};

/** Resolve everything init needs. Errors name the variable or field. */
int comm_setup_resolve(const struct gx_config *cfg, struct comm_setup *out);

#endif
