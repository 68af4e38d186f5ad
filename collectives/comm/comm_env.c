/*
 * comm_env.c - where rank, size and the rendezvous come from, in order:
 * the gx_config fields, GX_* (set by gx-run), torchrun (RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT), Open MPI (OMPI_COMM_WORLD_RANK/SIZE), MPICH's
 * PMI (PMI_RANK/SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS). The launcher that
 * started the process comes before the one around it: mpirun inside a Slurm
 * allocation leaves the allocation's SLURM_PROCID in every rank.
 * MASTER_PORT is torch's store's port: gx's rendezvous takes the next one.
 */
#include "collectives/comm/comm_env.h"
#include "collectives/comm/request.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/param.h"

/* At most the engine's step window (STEP_WINDOW, coll_engine.h). */
#define RTS_AHEAD_MAX 1024
GX_PARAM_DEFINE(gx_param_rts_ahead, "GX_RTS_AHEAD", GX_PARAM_INT, "256", NULL,
                "Schedule steps ahead of the first unfinished one within which a collective "
                "announces its rendezvous sends before their data is ready: the request to "
                "send goes out at once, so the receiver's clear-to-send is back when the data "
                "is (instead of a round trip per message behind the bulk data on the link). "
                "0 turns it off; at most 1024. Not with GX_CHECKSUM (the request carries the "
                "data's checksum), GX_FAULT, or device buffers. docs/scale.md.");
GX_PARAM_DEFINE(gx_param_world_rank, "GX_RANK", GX_PARAM_INT, "", NULL,
                "This process's rank (set by gx-run; else RANK, OMPI_COMM_WORLD_RANK, "
                "PMI_RANK or SLURM_PROCID is used, in that order).");
GX_PARAM_DEFINE(gx_param_world_size, "GX_SIZE", GX_PARAM_INT, "", NULL,
                "Number of ranks (set by gx-run; else WORLD_SIZE, OMPI_COMM_WORLD_SIZE, "
                "PMI_SIZE or SLURM_NTASKS, from the same launcher as the rank).");
GX_PARAM_DEFINE(gx_param_local_rank, "GX_LOCAL_RANK", GX_PARAM_INT, "", NULL,
                "Rank on this node as set by the launcher (informational: gx computes the "
                "local rank from node identities).");
GX_PARAM_DEFINE(gx_param_local_size, "GX_LOCAL_SIZE", GX_PARAM_INT, "", NULL,
                "Ranks on this node as set by the launcher (informational).");
GX_PARAM_DEFINE(gx_param_master_addr, "GX_MASTER_ADDR", GX_PARAM_STRING, "", NULL,
                "Host of rank 0's rendezvous listener (else MASTER_ADDR).");
GX_PARAM_DEFINE(gx_param_master_port, "GX_MASTER_PORT", GX_PARAM_INT, "", NULL,
                "Port of rank 0's rendezvous listener (else MASTER_PORT + 1: MASTER_PORT "
                "itself is torch's store under torchrun).");
GX_PARAM_DEFINE(gx_param_init_method, "GX_INIT_METHOD", GX_PARAM_STRING, "env://", NULL,
                "Rendezvous: env:// (master address from the environment), tcp://HOST:PORT, "
                "or file:///PATH (a file on a shared file system, fresh for each job).");
GX_PARAM_DEFINE(gx_param_job_key, "GX_JOB_KEY", GX_PARAM_STRING, "", NULL,
                "Shared secret that authenticates every connection of the job (gx-run "
                "generates one); 16+ random characters. Unset: derived from the rendezvous "
                "address, which keeps jobs apart but is not a secret (a warning says so).");
GX_PARAM_DEFINE(gx_param_job_key_file, "GX_JOB_KEY_FILE", GX_PARAM_STRING, "", NULL,
                "File whose first line is the job key (keeps it out of the environment of "
                "scripts and off command lines); must be ours and not group/other-readable.");
GX_PARAM_DEFINE(gx_param_node_id, "GX_NODE_ID", GX_PARAM_STRING, "", NULL,
                "Identity of this node; ranks with equal ids share a node (default: host "
                "name). Lets tests fake several nodes on one machine.");
GX_PARAM_DEFINE(gx_param_init_timeout, "GX_INIT_TIMEOUT", GX_PARAM_INT, "300", NULL,
                "Seconds the rendezvous may take before init fails naming missing ranks.");
GX_PARAM_DEFINE(gx_param_timeout, "GX_TIMEOUT", GX_PARAM_INT, "600", NULL,
                "Seconds any blocking operation may take before it fails with GX_ETIMEOUT.");
GX_PARAM_DEFINE(gx_param_restart_count, "GX_RESTART_COUNT", GX_PARAM_INT, "0", NULL,
                "Set by gx-run --max-restarts: how many times the job was restarted (0 in the "
                "first run); for the application, e.g. to resume from a checkpoint.");
GX_PARAM_DEFINE(gx_param_boot_listen_fd, "GX_BOOT_LISTEN_FD", GX_PARAM_INT, "-1", NULL,
                "Internal (gx-run): inherited listening socket for rank 0's rendezvous.");

static int int_from_var(const char *name, long long *out, bool *found)
{
    const char *v = getenv(name);
    *found = v && v[0];
    if (*found && gx_parse_int(v, out) != 0)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "%s='%s' is not an integer", name, v);
    return GX_OK;
}

/* Launchers, innermost first: the first whose rank variable is set gives
 * both rank and size, so they never come from two different launchers. */
static const struct launcher_vars {
    const char *rank, *size;
} launchers[] = {
    { "GX_RANK", "GX_SIZE" },                           /* gx-run */
    { "RANK", "WORLD_SIZE" },                           /* torchrun */
    { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" }, /* Open MPI's mpirun */
    { "PMI_RANK", "PMI_SIZE" },                         /* MPICH / Hydra */
    { "SLURM_PROCID", "SLURM_NTASKS" },                 /* srun */
};

static int resolve_rank_size(const struct gx_config *cfg, struct comm_setup *s)
{
    long long rank = cfg->rank, size = cfg->world_size;
    const char *rank_src = "gx_config.rank", *size_src = "gx_config.world_size";
    const struct launcher_vars *from = NULL;
    size_t nl = sizeof(launchers) / sizeof(launchers[0]);
    for (size_t i = 0; i < nl && (cfg->rank < 0 || cfg->world_size < 0) && !from; i++) {
        long long v;
        bool found;
        int rc = int_from_var(launchers[i].rank, &v, &found);
        if (rc != GX_OK)
            return rc;
        if (found)
            from = &launchers[i];
    }
    if (cfg->rank < 0) {
        if (!from)
            return gx_fail(GX_EINVAL, GX_SUB_INIT,
                           "rank unknown: set gx_config.rank, or run under gx-run, torchrun, "
                           "mpirun or Slurm (GX_RANK / RANK / OMPI_COMM_WORLD_RANK / PMI_RANK / "
                           "SLURM_PROCID)");
        bool found;
        int rc = int_from_var(from->rank, &rank, &found);
        if (rc != GX_OK)
            return rc;
        rank_src = from->rank;
    }
    if (cfg->world_size < 0) {
        bool found = false;
        if (from) {
            int rc = int_from_var(from->size, &size, &found);
            if (rc != GX_OK)
                return rc;
        }
        if (!found)
            return gx_fail(GX_EINVAL, GX_SUB_INIT,
                           "world size unknown: set gx_config.world_size, or %s (GX_SIZE / "
                           "WORLD_SIZE / OMPI_COMM_WORLD_SIZE / PMI_SIZE / SLURM_NTASKS)",
                           from ? from->size : "the launcher's size variable");
        size_src = from->size;
    }
    if (size < 1 || size > 1000000)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "%s=%lld is not a valid rank count (1..1000000)",
                       size_src, size);
    if (rank < 0 || rank >= size)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "%s=%lld is out of range for %s=%lld", rank_src,
                       rank, size_src, size);
    s->boot.rank = (int)rank;
    s->boot.world_size = (int)size;
    return GX_OK;
}

static int resolve_method(const struct gx_config *cfg, struct comm_setup *s)
{
    const char *m = cfg->init_method ? cfg->init_method : gx_param_text(&gx_param_init_method);
    if (strcmp(m, "env://") != 0) {
        snprintf(s->init_method, sizeof(s->init_method), "%s", m);
        return GX_OK;
    }
    const char *addr = gx_param_is_set(&gx_param_master_addr) ? gx_param_text(&gx_param_master_addr)
                                                              : getenv("MASTER_ADDR");
    const char *port_var = gx_param_is_set(&gx_param_master_port) ? "GX_MASTER_PORT" : "MASTER_PORT";
    const char *port = getenv(port_var);
    if ((!addr || !addr[0]) && (!port || !port[0]) && s->boot.world_size == 1) {
        snprintf(s->init_method, sizeof(s->init_method), "tcp://127.0.0.1:0");
        return GX_OK;
    }
    if (!addr || !addr[0])
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "env:// rendezvous needs MASTER_ADDR (or "
                       "GX_MASTER_ADDR); or use GX_INIT_METHOD=file:///shared/path");
    long long p;
    if (!port || !port[0])
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "env:// rendezvous needs MASTER_PORT (or "
                       "GX_MASTER_PORT)");
    if (gx_parse_int(port, &p) != 0 || p < 0 || p > 65535)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "%s='%s' is not a port number", port_var, port);
    if (port_var[0] == 'M') { /* torch's store listens on MASTER_PORT: take the next */
        if (p == 65535)
            return gx_fail(GX_EINVAL, GX_SUB_INIT, "MASTER_PORT=65535 leaves gx no port (gx "
                           "uses MASTER_PORT + 1); set GX_MASTER_PORT");
        if (p > 0)
            p++;
    }
    bool v6 = strchr(addr, ':') != NULL && addr[0] != '[';
    snprintf(s->init_method, sizeof(s->init_method), v6 ? "tcp://[%s]:%lld" : "tcp://%s:%lld",
             addr, p);
    return GX_OK;
}

/* Warned once per process, not once per communicator or init. */
static atomic_flag warned_no_key = ATOMIC_FLAG_INIT;
static atomic_flag warned_short_key = ATOMIC_FLAG_INIT;

static int resolve_job_key(const struct gx_config *cfg, struct comm_setup *s)
{
    const char *key = cfg->job_key ? cfg->job_key : gx_param_text(&gx_param_job_key);
    const char *file = gx_param_text(&gx_param_job_key_file);
    if (!key[0] && file[0]) {
        char err[768];
        int rc = gx_auth_read_key_file(file, s->job_key, sizeof(s->job_key), err, sizeof(err));
        if (rc != GX_OK)
            return gx_fail(rc, GX_SUB_INIT, "GX_JOB_KEY_FILE: %s", err);
        key = s->job_key;
    } else if (key[0] && file[0] && !cfg->job_key) {
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "GX_JOB_KEY and GX_JOB_KEY_FILE are both set: "
                       "set only one");
    }
    if (!key[0]) {
        if (!atomic_flag_test_and_set(&warned_no_key))
            GX_WARN(GX_SUB_INIT, "no job key: any process that can reach this job's ports can "
                    "join it as a missing rank; run under gx-run (it generates a key) or set "
                    "GX_JOB_KEY_FILE to a 0600 file holding 16+ random characters "
                    "(docs/security.md)");
        snprintf(s->job_key, sizeof(s->job_key), GX_AUTH_DEFAULT_PREFIX "%s", s->init_method);
    } else {
        if (strlen(key) < 16 && !atomic_flag_test_and_set(&warned_short_key))
            GX_WARN(GX_SUB_INIT, "the job key is %zu characters long: a key shorter than 16 "
                    "characters can be guessed; use 16+ random characters, e.g. "
                    "'openssl rand -hex 16 > key; chmod 600 key; GX_JOB_KEY_FILE=key' "
                    "(docs/security.md)", strlen(key));
        if (key != s->job_key)
            snprintf(s->job_key, sizeof(s->job_key), "%s", key);
    }
    s->boot.job_key = s->job_key;
    return GX_OK;
}

int comm_setup_resolve(const struct gx_config *cfg, struct comm_setup *s)
{
    memset(s, 0, sizeof(*s));
    int rc = resolve_rank_size(cfg, s);
    if (rc == GX_OK)
        rc = resolve_method(cfg, s);
    if (rc != GX_OK)
        return rc;
    s->boot.init_method = s->init_method;

    rc = resolve_job_key(cfg, s);
    if (rc != GX_OK)
        return rc;

    if (gx_param_is_set(&gx_param_node_id))
        snprintf(s->node_id, sizeof(s->node_id), "%s", gx_param_text(&gx_param_node_id));
    else if (gethostname(s->node_id, sizeof(s->node_id)) != 0)
        snprintf(s->node_id, sizeof(s->node_id), "unknown");
    s->node_id[sizeof(s->node_id) - 1] = '\0';
    s->boot.node_id = s->node_id;

    long long v;
    if (cfg->init_timeout_ms > 0) {
        s->boot.init_timeout_ms = cfg->init_timeout_ms;
    } else {
        if ((rc = gx_param_int(&gx_param_init_timeout, &v)) != GX_OK)
            return rc;
        if (v <= 0 || v > 86400)
            return gx_fail(GX_EINVAL, GX_SUB_INIT, "GX_INIT_TIMEOUT=%lld must be 1..86400 s", v);
        s->boot.init_timeout_ms = (int)(v * 1000);
    }
    s->op_timeout_src = "GX_TIMEOUT";
    if (cfg->op_timeout_ms > 0) {
        s->op_timeout_ms = cfg->op_timeout_ms;
        s->op_timeout_src = "the op_timeout_ms of its gx_config";
    } else {
        if ((rc = gx_param_int(&gx_param_timeout, &v)) != GX_OK)
            return rc;
        if (v <= 0 || v > 86400 * 7)
            return gx_fail(GX_EINVAL, GX_SUB_INIT, "GX_TIMEOUT=%lld must be 1..604800 s", v);
        s->op_timeout_ms = (int)(v * 1000);
    }
    if ((rc = gx_spin_check()) != GX_OK)
        return rc;
    if ((rc = gx_param_int(&gx_param_rts_ahead, &v)) != GX_OK)
        return rc;
    if (v < 0 || v > RTS_AHEAD_MAX)
        return gx_fail(GX_EINVAL, GX_SUB_INIT, "GX_RTS_AHEAD=%lld must be 0 (off) .. %d steps",
                       v, RTS_AHEAD_MAX);
    s->rts_ahead = (int)v;
    s->boot.listen_fd = -1;
    if (s->boot.rank == 0 && gx_param_is_set(&gx_param_boot_listen_fd)) {
        if ((rc = gx_param_int(&gx_param_boot_listen_fd, &v)) != GX_OK)
            return rc;
        s->boot.listen_fd = (int)v;
    }
    snprintf(s->name, sizeof(s->name), "%s", cfg->name ? cfg->name : "world");
    return GX_OK;
}
