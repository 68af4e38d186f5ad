/*
 * ddp.c - the DDP scheduler's lifecycle and settings: create (with the
 * cross-rank check of parameters and settings), destroy, parameter data and
 * broadcast, no_sync, comm hooks, bucket introspection.
 *
 * Owns: struct gx_ddp's allocation and its constant part (parameters,
 * config, communicator). Must not run an iteration (ddp_sched.c) or decide
 * bucket membership (ddp_buckets.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/comm_view.h"
#include "collectives/ddp/ddp_internal.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/param.h"

GX_PARAM_DEFINE(gx_param_ddp_bucket_cap, "GX_DDP_BUCKET_CAP", GX_PARAM_SIZE, "25M", NULL,
                "DDP: bucket size cap when the config leaves bucket_cap_bytes at 0");
GX_PARAM_DEFINE(gx_param_ddp_first_bucket, "GX_DDP_FIRST_BUCKET", GX_PARAM_SIZE, "1M", NULL,
                "DDP: cap of the first bucket when the config leaves first_bucket_bytes at 0");

/* Read by the Python bindings (python/gx_torch), declared here so the
 * registry knows it. */
GX_PARAM_DEFINE(gx_param_library, "GX_LIBRARY", GX_PARAM_STRING, "", NULL,
                "python/gx_torch: path of the libgx.so to load (default: libgx.so.0 from the "
                "loader's search path); not read by libgx itself");

#define DDP_MAGIC 0x67786464705f7631ull /* "gxddp_v1" */

/* What every rank must agree on, as plain integers. */
enum { H_MAGIC, H_NPARAMS, H_CAP, H_FIRST, H_OP, H_VIEW, H_UNUSED, H_REBUILD, H_COUNT };
static const char *const header_field[H_COUNT] = {
    "library version", "number of parameters", "bucket_cap_bytes", "first_bucket_bytes",
    "op", "gradient_as_bucket_view", "find_unused_parameters", "rebuild_buckets",
};

/* Per-parameter check record: the index of the first parameter that differs
 * from rank 0 (or -1) and this rank's view of it. */
struct param_check {
    int64_t index;
    uint64_t count;
    uint64_t dtype;
    uint64_t has_data;
};

/* Collective. A rank whose own arguments were invalid (local_rc) still takes
 * part, so its peers fail at once naming it instead of waiting for it. */
static int check_across_ranks(struct gx_ddp *ddp, int local_rc)
{
    int n = ddp->nranks, rc;
    char local_msg[512];
    snprintf(local_msg, sizeof(local_msg), "%s", gx_last_error());
    uint64_t mine[H_COUNT] = {
        local_rc == GX_OK ? DDP_MAGIC : 0, ddp->nparams, ddp->cfg.bucket_cap_bytes, ddp->cfg.first_bucket_bytes,
        (uint64_t)ddp->cfg.op, (uint64_t)ddp->cfg.gradient_as_bucket_view,
        (uint64_t)ddp->cfg.find_unused_parameters, (uint64_t)ddp->cfg.rebuild_buckets,
    };
    uint64_t *all = calloc((size_t)n * H_COUNT, sizeof(uint64_t));
    uint64_t *table = calloc(ddp->nparams * 3 + 1, sizeof(uint64_t));
    struct param_check *checks = calloc((size_t)n, sizeof(*checks));
    if (!all || !table || !checks) {
        rc = gx_fail(GX_ENOMEM, GX_SUB_DDP, "gx_ddp_create: out of memory");
        goto out;
    }
    rc = gx_allgather(ddp->comm, mine, all, H_COUNT, GX_UINT64);
    if (rc != GX_OK) {
        rc = gx_fail(rc, GX_SUB_DDP, "gx_ddp_create on rank %d: exchanging the settings "
                     "failed: %s", ddp->rank, DDP_PREV_ERROR);
        goto out;
    }
    if (local_rc != GX_OK) {
        gx_set_last_error(local_msg);
        rc = local_rc;
        goto out;
    }
    for (int r = 0; r < n; r++)
        if (all[(size_t)r * H_COUNT + H_MAGIC] != DDP_MAGIC) {
            rc = gx_fail(GX_EMISMATCH, GX_SUB_DDP, "gx_ddp_create: rank %d rejected its own "
                         "arguments (see its log)", r);
            goto out;
        }
    for (int r = 1; r < n; r++)
        for (int f = 0; f < H_COUNT; f++)
            if (all[(size_t)r * H_COUNT + f] != all[f]) {
                rc = gx_fail(GX_EMISMATCH, GX_SUB_DDP, "gx_ddp_create: rank %d has %s = %llu, "
                             "rank 0 has %llu; every rank must register the same parameters "
                             "with the same settings", r, header_field[f],
                             (unsigned long long)all[(size_t)r * H_COUNT + f],
                             (unsigned long long)all[f]);
                goto out;
            }
    /* Same number of parameters everywhere: compare each with rank 0's. */
    for (size_t i = 0; i < ddp->nparams; i++) {
        table[3 * i] = ddp->params[i].count;
        table[3 * i + 1] = (uint64_t)ddp->params[i].dtype;
        table[3 * i + 2] = ddp->params[i].data != NULL;
    }
    rc = gx_broadcast(ddp->comm, table, table, ddp->nparams * 3, GX_UINT64, 0);
    if (rc != GX_OK) {
        rc = gx_fail(rc, GX_SUB_DDP, "gx_ddp_create on rank %d: broadcast of rank 0's "
                     "parameter table failed: %s", ddp->rank, DDP_PREV_ERROR);
        goto out;
    }
    struct param_check me = { -1, 0, 0, 0 };
    for (size_t i = 0; i < ddp->nparams; i++) {
        const struct ddp_param *p = &ddp->params[i];
        if (table[3 * i] != p->count || table[3 * i + 1] != (uint64_t)p->dtype ||
            table[3 * i + 2] != (p->data != NULL)) {
            me = (struct param_check){ (int64_t)i, p->count, (uint64_t)p->dtype, p->data != NULL };
            break;
        }
    }
    rc = gx_allgather(ddp->comm, &me, checks, sizeof(me), GX_UINT8);
    if (rc != GX_OK) {
        rc = gx_fail(rc, GX_SUB_DDP, "gx_ddp_create on rank %d: exchanging the parameter "
                     "check failed: %s", ddp->rank, DDP_PREV_ERROR);
        goto out;
    }
    for (int r = 1; r < n; r++) {
        const struct param_check *c = &checks[r];
        if (c->index < 0 || (size_t)c->index >= ddp->nparams)
            continue;
        size_t i = (size_t)c->index;
        rc = gx_fail(GX_EMISMATCH, GX_SUB_DDP, "gx_ddp_create: parameter %zu '%s' differs: "
                     "rank %d has %llu x %s%s, rank 0 has %llu x %s%s", i, ddp->params[i].name,
                     r, (unsigned long long)c->count, gx_datatype_name((enum gx_datatype)c->dtype),
                     c->has_data ? " with data" : " without data",
                     (unsigned long long)table[3 * i],
                     gx_datatype_name((enum gx_datatype)table[3 * i + 1]),
                     table[3 * i + 2] ? " with data" : " without data");
        goto out;
    }
    rc = GX_OK;
out:
    free(all);
    free(table);
    free(checks);
    return rc;
}

static int resolve_config(struct gx_ddp *ddp, const struct gx_ddp_config *config)
{
    struct gx_ddp_config cfg = GX_DDP_CONFIG_INIT;
    if (config) {
        if (config->size < sizeof(size_t) || config->size > sizeof(cfg) * 4)
            return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_create: config->size is %zu; "
                           "initialise the config with GX_DDP_CONFIG_INIT", config->size);
        memcpy(&cfg, config, config->size < sizeof(cfg) ? config->size : sizeof(cfg));
        cfg.size = sizeof(cfg);
    }
    if (cfg.op != GX_AVG && cfg.op != GX_SUM)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_create: config->op is %d; use GX_AVG or "
                       "GX_SUM", (int)cfg.op);
    if (cfg.bucket_cap_bytes == 0 &&
        gx_param_size(&gx_param_ddp_bucket_cap, &cfg.bucket_cap_bytes) != GX_OK)
        return GX_EINVAL;
    if (cfg.first_bucket_bytes == 0 &&
        gx_param_size(&gx_param_ddp_first_bucket, &cfg.first_bucket_bytes) != GX_OK)
        return GX_EINVAL;
    if (cfg.bucket_cap_bytes == 0)
        cfg.bucket_cap_bytes = 1;
    if (cfg.first_bucket_bytes == 0)
        cfg.first_bucket_bytes = 1;
    snprintf(ddp->name, sizeof(ddp->name), "%s", cfg.name ? cfg.name : "ddp");
    cfg.name = NULL; /* the copy in ddp->name is the one used */
    ddp->cfg = cfg;
    return GX_OK;
}

static int copy_params(struct gx_ddp *ddp, const struct gx_ddp_param *params, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct gx_ddp_param *src = &params[i];
        struct ddp_param *p = &ddp->params[i];
        if (src->size < offsetof(struct gx_ddp_param, name))
            return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_create: params[%zu].size is %zu; "
                           "set it to sizeof(struct gx_ddp_param)", i, src->size);
        size_t esize = gx_datatype_size(src->dtype);
        if (esize == 0)
            return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_create: params[%zu].dtype is %d, "
                           "not a gx datatype", i, (int)src->dtype);
        if (src->count > SIZE_MAX / esize)
            return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_create: params[%zu].count %zu is too "
                           "large", i, src->count);
        const char *name = src->size > offsetof(struct gx_ddp_param, name) ? src->name : NULL;
        p->count = src->count;
        p->dtype = src->dtype;
        p->bytes = src->count * esize;
        if (name)
            snprintf(p->name, sizeof(p->name), "%s", name);
        else
            snprintf(p->name, sizeof(p->name), "param[%zu]", i);
        p->data = src->size > offsetof(struct gx_ddp_param, data) ? src->data : NULL;
        atomic_init(&p->state, DDP_PENDING);
    }
    return GX_OK;
}

GX_API int gx_ddp_create(struct gx_comm *comm, const struct gx_ddp_param *params,
                         size_t num_params, const struct gx_ddp_config *config,
                         struct gx_ddp **ddp_out)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_create: comm is NULL");
    int rc = gx_comm_check_usable(comm, "gx_ddp_create");
    if (rc != GX_OK)
        return rc;

    struct gx_ddp *ddp = calloc(1, sizeof(*ddp));
    if (!ddp)
        return gx_fail(GX_ENOMEM, GX_SUB_DDP, "gx_ddp_create: out of memory");
    ddp->comm = comm;
    ddp->rank = gx_comm_rank(comm);
    ddp->nranks = gx_comm_size(comm);
    ddp->op_timeout_ms = gx_comm_op_timeout_ms(comm);
    ddp->nparams = num_params;
    ddp->stats.size = sizeof(ddp->stats);
    ddp->params = calloc(num_params + 1, sizeof(*ddp->params));
    ddp->ready_order = calloc(num_params + 1, sizeof(*ddp->ready_order));
    ddp->agree_all = calloc((size_t)ddp->nranks, sizeof(*ddp->agree_all));
    size_t *order = calloc(num_params + 1, sizeof(*order));
    if (!ddp->params || !ddp->ready_order || !ddp->agree_all || !order) {
        rc = gx_fail(GX_ENOMEM, GX_SUB_DDP, "gx_ddp_create: out of memory for %zu parameters",
                     num_params);
        goto err_free;
    }
    pthread_mutex_init(&ddp->lock, NULL);
    pthread_mutex_init(&ddp->gx_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ddp->cond, &ca);
    pthread_condattr_destroy(&ca);

    /* Check this rank's arguments, then take part in the cross-rank check
     * either way, so a rank with bad arguments does not leave the others
     * waiting for it. */
    int local_rc = GX_OK;
    if (!params)
        local_rc = gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_create on rank %d: params is NULL",
                           ddp->rank);
    else if (num_params == 0)
        local_rc = gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_create on rank %d: num_params is 0",
                           ddp->rank);
    else if (!ddp_out)
        local_rc = gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_create on rank %d: ddp_out is NULL",
                           ddp->rank);
    if (local_rc == GX_OK)
        local_rc = resolve_config(ddp, config);
    if (local_rc == GX_OK)
        local_rc = copy_params(ddp, params, num_params);
    if (local_rc == GX_OK)
        local_rc = ddp_dev_decide(ddp); /* host or device buckets */
    if (local_rc != GX_OK)
        ddp->nparams = 0;
    rc = check_across_ranks(ddp, local_rc);
    if (rc != GX_OK)
        goto err_destroy_locks;
    ddp_default_order(order, num_params);
    rc = ddp_layout_build(ddp, order);
    if (rc != GX_OK)
        goto err_destroy_locks;
    ddp_iteration_reset(ddp);
    rc = ddp_progress_start(ddp);
    if (rc != GX_OK)
        goto err_free_layout;
    free(order);
    GX_INFO(GX_SUB_DDP, "ddp '%s': %zu parameters in %zu buckets (cap %zu, first %zu bytes, %s)",
            ddp->name, num_params, ddp->nbuckets, ddp->cfg.bucket_cap_bytes,
            ddp->cfg.first_bucket_bytes, gx_redop_name(ddp->cfg.op));
    *ddp_out = ddp;
    return GX_OK;

err_free_layout:
    ddp_layout_free(ddp);
err_destroy_locks:
    pthread_cond_destroy(&ddp->cond);
    pthread_mutex_destroy(&ddp->gx_lock);
    pthread_mutex_destroy(&ddp->lock);
err_free:
    free(order);
    free(ddp->params);
    free(ddp->ready_order);
    free(ddp->agree_all);
    free(ddp);
    return rc;
}

GX_API void gx_ddp_destroy(struct gx_ddp *ddp)
{
    if (!ddp)
        return;
    ddp_progress_stop(ddp);
    /* Only a failed finish leaves requests behind; freeing waits for them. */
    for (size_t k = 0; k < ddp->nbuckets; k++)
        if (ddp->buckets[k].req) {
            gx_request_free(ddp->buckets[k].req);
            ddp->buckets[k].req = NULL;
        }
    gx_request_free(ddp->agree_inflight);
    ddp_layout_free(ddp);
    pthread_cond_destroy(&ddp->cond);
    pthread_mutex_destroy(&ddp->gx_lock);
    pthread_mutex_destroy(&ddp->lock);
    free(ddp->params);
    free(ddp->ready_order);
    free(ddp->agree_all);
    free(ddp);
}

/* Calls that change settings are only allowed between iterations. */
static int check_between_iterations(struct gx_ddp *ddp, const char *fn)
{
    if (!ddp)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "%s: ddp is NULL", fn);
    if (ddp->broken)
        return gx_fail(GX_ESTATE, GX_SUB_DDP, "%s: ddp '%s' is unusable after a failed "
                       "gx_ddp_finish (%s)", fn, ddp->name, gx_strerror(ddp->broken));
    pthread_mutex_lock(&ddp->lock);
    size_t ready = ddp->ready;
    pthread_mutex_unlock(&ddp->lock);
    if (ready)
        return gx_fail(GX_ESTATE, GX_SUB_DDP, "%s: called during an iteration (%zu gradient(s) "
                       "already marked ready on rank %d); call it before backward or after "
                       "gx_ddp_finish", fn, ready, ddp->rank);
    return GX_OK;
}

GX_API int gx_ddp_set_param_data(struct gx_ddp *ddp, size_t param, void *data)
{
    gx_clear_last_error();
    if (!ddp)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_set_param_data: ddp is NULL");
    if (param >= ddp->nparams)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_set_param_data: parameter index %zu out "
                       "of range (ddp '%s' has %zu parameters)", param, ddp->name, ddp->nparams);
    ddp->params[param].data = data;
    return GX_OK;
}

GX_API int gx_ddp_broadcast_params(struct gx_ddp *ddp, int root)
{
    gx_clear_last_error();
    int rc = check_between_iterations(ddp, "gx_ddp_broadcast_params");
    if (rc != GX_OK)
        return rc;
    if (root < 0 || root >= ddp->nranks)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_broadcast_params: root rank %d out of "
                       "range (the communicator has %d ranks)", root, ddp->nranks);
    struct gx_request **reqs = calloc(ddp->nparams, sizeof(*reqs));
    if (!reqs)
        return gx_fail(GX_ENOMEM, GX_SUB_DDP, "gx_ddp_broadcast_params: out of memory");
    uint64_t deadline = gx_deadline_after_ms(ddp->op_timeout_ms);
    pthread_mutex_lock(&ddp->gx_lock);
    size_t i;
    for (i = 0; i < ddp->nparams && rc == GX_OK; i++) {
        struct ddp_param *p = &ddp->params[i];
        if (p->data)
            rc = gx_ibroadcast(ddp->comm, p->data, p->data, p->count, p->dtype, root, &reqs[i]);
        if (rc != GX_OK)
            rc = gx_fail(rc, GX_SUB_DDP, "gx_ddp_broadcast_params: parameter %zu '%s' on rank "
                         "%d: %s", i, p->name, ddp->rank, DDP_PREV_ERROR);
    }
    for (size_t j = 0; j < i; j++) {
        if (!reqs[j])
            continue;
        int wrc = gx_wait(reqs[j], gx_ms_left(deadline));
        if (wrc != GX_OK && rc == GX_OK)
            rc = gx_fail(wrc, GX_SUB_DDP, "gx_ddp_broadcast_params: parameter %zu '%s' from "
                         "rank %d: %s", j, ddp->params[j].name, root, DDP_PREV_ERROR);
        if (wrc != GX_ETIMEOUT)
            gx_request_free(reqs[j]);
        /* a timed-out request is left allocated: it may still write p->data */
    }
    pthread_mutex_unlock(&ddp->gx_lock);
    free(reqs);
    return rc;
}

GX_API int gx_ddp_no_sync(struct gx_ddp *ddp, int on)
{
    gx_clear_last_error();
    int rc = check_between_iterations(ddp, "gx_ddp_no_sync");
    if (rc != GX_OK)
        return rc;
    pthread_mutex_lock(&ddp->lock);
    ddp->no_sync = on != 0;
    pthread_mutex_unlock(&ddp->lock);
    return GX_OK;
}

GX_API int gx_ddp_set_comm_hook(struct gx_ddp *ddp, const struct gx_ddp_comm_hook *hook,
                                void *state)
{
    gx_clear_last_error();
    int rc = check_between_iterations(ddp, "gx_ddp_set_comm_hook");
    if (rc != GX_OK)
        return rc;
    struct gx_ddp_comm_hook h = GX_DDP_COMM_HOOK_INIT;
    if (hook) {
        if (hook->size < offsetof(struct gx_ddp_comm_hook, complete) || hook->size > 4 * sizeof(h))
            return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_set_comm_hook: hook->size is %zu; "
                           "start from GX_DDP_COMM_HOOK_INIT", hook->size);
        memcpy(&h, hook, hook->size < sizeof(h) ? hook->size : sizeof(h));
        h.size = sizeof(h);
        if (!h.start)
            return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_set_comm_hook: hook '%s' has no start "
                           "function", h.name ? h.name : "?");
        if (!h.name)
            h.name = "unnamed";
        if (ddp->dev)
            return gx_fail(GX_EUNSUPPORTED, GX_SUB_DDP, "gx_ddp_set_comm_hook: ddp '%s' keeps "
                           "its buckets in CUDA device memory; comm hook '%s' would read them "
                           "with the CPU (use device_buckets = -1 for hooks)", ddp->name,
                           h.name);
    }
    pthread_mutex_lock(&ddp->gx_lock);
    for (size_t k = 0; k < ddp->nbuckets; k++)
        ddp_bucket_release_hook_data(ddp, &ddp->buckets[k]);
    ddp->hook = h;
    ddp->hook_state = state;
    ddp->hook_hash = h.start ? ddp_hash_name(h.name) : 0;
    pthread_mutex_unlock(&ddp->gx_lock);
    return GX_OK;
}

GX_API int gx_ddp_bucket_count(const struct gx_ddp *ddp)
{
    return ddp ? (int)ddp->nbuckets : -1;
}

GX_API int gx_ddp_bucket_info(const struct gx_ddp *ddp, int index, struct gx_ddp_bucket *out)
{
    gx_clear_last_error();
    if (!ddp)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_bucket_info: ddp is NULL");
    if (!out || out->size < sizeof(size_t))
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_bucket_info: out is NULL or out->size is "
                       "not set (set it to sizeof(struct gx_ddp_bucket))");
    if (index < 0 || (size_t)index >= ddp->nbuckets)
        return gx_fail(GX_EINVAL, GX_SUB_DDP, "gx_ddp_bucket_info: bucket %d out of range "
                       "(%zu buckets)", index, ddp->nbuckets);
    struct gx_ddp_bucket b = ddp->buckets[index].pub;
    b.hook_data = NULL;
    size_t n = out->size < sizeof(b) ? out->size : sizeof(b);
    b.size = out->size;
    memcpy(out, &b, n);
    return GX_OK;
}
