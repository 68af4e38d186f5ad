/*
 * win.c - the public one-sided windows (include/gx/gx_win.h): creating and
 * freeing a window collectively, put / get / accumulate in their blocking
 * and request forms, and flush. Arguments are checked here; bounds and
 * alignment against the target's window by the transport (xport_rma*.c),
 * on the origin and again on the target. The target needs no call of its
 * own: the service's poller (svc.c) keeps its transport moving.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/api/svc.h"
#include "collectives/comm/request.h"
#include "collectives/transport/xport_svc.h"
#include "common/clock.h"
#include "common/log.h"

struct gx_win {
    struct gx_comm *comm;
    struct xp_win *xw;
    size_t size;
    uint32_t id;
};

struct win_request {
    struct gx_request req; /* first: gx_request_free frees the whole */
    struct xp_rma_op *op;
};

/* A window's info travels with whether its rank could make it. */
struct win_hello {
    struct xp_win_info info;
    int32_t status;
    int32_t reserved;
};

static int sync_ranks(struct gx_comm *comm, int mine, const char *fn, int *failed_rank)
{
    int32_t *all = malloc((size_t)comm->size * sizeof(*all));
    if (!all)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "%s: out of memory", fn);
    int32_t m = mine;
    int rc = gx_comm_boot_allgather(comm, &m, all, sizeof(m));
    for (int r = 0; rc == GX_OK && r < comm->size; r++) {
        if (all[r] != GX_OK) {
            *failed_rank = r;
            rc = all[r];
            break;
        }
    }
    free(all);
    return rc;
}

GX_API int gx_win_create(struct gx_comm *comm, void *base, size_t size, struct gx_win **win)
{
    gx_clear_last_error();
    if (!comm)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_win_create: comm is NULL");
    if (!win)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_win_create: win is NULL");
    if (!base && size)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_win_create: base is NULL with size %zu",
                       size);
    int rc = gx_comm_check_usable(comm, "gx_win_create");
    if (rc != GX_OK)
        return rc;
    struct gx_svc *s = NULL;
    struct gx_win *w = calloc(1, sizeof(*w));
    struct win_hello mine = { .status = GX_OK };
    struct win_hello *all = calloc((size_t)comm->size, sizeof(*all));
    struct xp_win_info *infos = calloc((size_t)comm->size, sizeof(*infos));
    if (!w || !all || !infos)
        mine.status = gx_fail(GX_ENOMEM, GX_SUB_COLL, "gx_win_create: out of memory");
    if (mine.status == GX_OK)
        mine.status = gx_svc_get(comm, "gx_win_create", &s);
    if (mine.status == GX_OK)
        mine.status = xp_win_open(comm->xport, base, size, &w->xw, &mine.info);
    char why[400] = "";
    if (mine.status != GX_OK)
        snprintf(why, sizeof(why), "%s", gx_last_error());
    /* Collective even when this rank failed: the others learn it. */
    rc = all ? gx_comm_boot_allgather(comm, &mine, all, sizeof(mine)) : mine.status;
    for (int r = 0; rc == GX_OK && r < comm->size; r++) {
        if (all[r].status != GX_OK)
            rc = r == comm->rank ? gx_fail(all[r].status, GX_SUB_COLL, "%s", why)
                                 : gx_fail(all[r].status, GX_SUB_COLL, "gx_win_create: rank %d "
                                           "could not make its window (%s; its log says why)",
                                           r, gx_strerror(all[r].status));
        infos[r] = all[r].info;
    }
    if (rc == GX_OK)
        rc = xp_win_connect(w->xw, infos);
    /* Nobody targets a rank before it is ready to serve the window. */
    int failed = -1;
    int synced = sync_ranks(comm, rc, "gx_win_create", &failed);
    if (rc == GX_OK && synced != GX_OK)
        rc = failed >= 0 ? gx_fail(synced, GX_SUB_COLL, "gx_win_create: rank %d failed to "
                                   "connect the window", failed)
                         : synced;
    free(all);
    free(infos);
    if (rc != GX_OK) {
        if (w && w->xw)
            xp_win_close(w->xw);
        free(w);
        return gx_comm_note_failure(comm, rc);
    }
    w->comm = comm;
    w->size = size;
    w->id = xp_win_id(w->xw);
    GX_INFO(GX_SUB_COLL, "window %u of '%s': %zu bytes at %p", w->id, comm->name, size, base);
    *win = w;
    return GX_OK;
}

/* ---- flush and free --------------------------------------------------------- */

struct pending_arg {
    struct gx_win *win;
    int target;
    uint64_t left;
    int status;
    char msg[400];
};

static bool none_pending(void *arg)
{
    struct pending_arg *a = arg;
    a->status = xp_win_pending(a->win->xw, a->target, &a->left, a->msg, sizeof(a->msg));
    return a->left == 0;
}

static int flush(struct gx_win *win, int target, const char *fn)
{
    struct pending_arg a = { .win = win, .target = target };
    int rc = gx_svc_wait(win->comm, none_pending, &a, gx_comm_op_deadline(win->comm));
    if (rc == GX_ETIMEOUT)
        return gx_fail(GX_ETIMEOUT, GX_SUB_COLL, "%s: %llu operation(s) on window %u to %s%d "
                       "still incomplete after GX_TIMEOUT (%d ms)", fn,
                       (unsigned long long)a.left, win->id, target < 0 ? "ranks other than " : "rank ",
                       target < 0 ? -1 : target, win->comm->op_timeout_ms);
    if (rc != GX_OK)
        return rc;
    if (a.status != GX_OK)
        gx_set_last_error(a.msg); /* logged where it failed */
    return a.status;
}

GX_API int gx_win_flush(struct gx_win *win, int target)
{
    gx_clear_last_error();
    if (!win)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_win_flush: win is NULL");
    if (target != GX_WIN_ALL && (target < 0 || target >= win->comm->size))
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "gx_win_flush: target %d is out of range for a "
                       "communicator of %d ranks (or GX_WIN_ALL)", target, win->comm->size);
    return gx_comm_note_failure(win->comm, flush(win, target, "gx_win_flush"));
}

GX_API int gx_win_free(struct gx_win *win)
{
    gx_clear_last_error();
    if (!win)
        return GX_OK;
    struct gx_comm *comm = win->comm;
    int rc = flush(win, GX_WIN_ALL, "gx_win_free");
    char keep[512] = "";
    if (rc != GX_OK)
        snprintf(keep, sizeof(keep), "%s", gx_last_error());
    /* Every rank is done with this window before any rank lets go of it. */
    int failed = -1;
    int synced = sync_ranks(comm, GX_OK, "gx_win_free", &failed);
    xp_win_close(win->xw);
    free(win);
    if (rc != GX_OK) {
        gx_set_last_error(keep);
        return gx_comm_note_failure(comm, rc);
    }
    return gx_comm_note_failure(comm, synced);
}

GX_API size_t gx_win_size(const struct gx_win *win)
{
    return win ? win->size : 0;
}

GX_API const char *gx_win_path(const struct gx_win *win, int target)
{
    return win ? xp_win_path(win->xw, target, false) : NULL;
}

/* ---- operations ---------------------------------------------------------------- */

static int start(struct gx_win *win, int kind, void *buf, size_t count, enum gx_datatype dtype,
                 enum gx_redop op, int target, size_t offset, const char *fn,
                 struct xp_rma_op **out)
{
    if (!win)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: win is NULL", fn);
    size_t es = gx_datatype_size(dtype);
    if (es == 0)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: dtype %d is not a gx_datatype", fn,
                       (int)dtype);
    if (count > SIZE_MAX / es)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: count %zu of %s overflows size_t bytes", fn,
                       count, gx_datatype_name(dtype));
    if (!buf && count)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: buf is NULL with count %zu", fn, count);
    if (target < 0 || target >= win->comm->size)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: target %d is out of range for a "
                       "communicator of %d ranks", fn, target, win->comm->size);
    if (kind == XP_RMA_ACC && op != GX_SUM && op != GX_PROD && op != GX_MIN && op != GX_MAX &&
        op != GX_REPLACE)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: op %s (%d) does not apply: use GX_SUM, "
                       "GX_PROD, GX_MIN, GX_MAX or GX_REPLACE", fn, gx_redop_name(op), (int)op);
    int rc = gx_comm_check_usable(win->comm, fn);
    if (rc != GX_OK)
        return rc;
    struct xp_rma_args a = { .kind = kind, .target = target, .buf = buf, .count = count,
                             .dtype = dtype, .redop = op, .offset = offset, .fn = fn };
    rc = xp_rma_start(win->xw, &a, out);
    return rc == GX_OK ? rc : gx_comm_note_failure(win->comm, rc);
}

struct op_arg {
    struct xp_rma_op *op;
    bool need_done;
    int status;
    const char *err;
};

static bool op_ready(void *arg)
{
    struct op_arg *a = arg;
    bool local, done;
    xp_rma_op_state(a->op, &local, &done, &a->status, &a->err);
    return done || (!a->need_done && local);
}

/* Blocking forms: until `buf` may be reused (put, accumulate) or the data
 * is there (get); a later failure of a put goes to the next flush. */
static int run_blocking(struct gx_win *win, int kind, void *buf, size_t count,
                        enum gx_datatype dtype, enum gx_redop redop, int target, size_t offset,
                        const char *fn)
{
    gx_clear_last_error();
    struct xp_rma_op *op = NULL;
    int rc = start(win, kind, buf, count, dtype, redop, target, offset, fn, &op);
    if (rc != GX_OK)
        return rc;
    struct op_arg a = { .op = op, .need_done = kind == XP_RMA_GET };
    rc = gx_svc_wait(win->comm, op_ready, &a, gx_comm_op_deadline(win->comm));
    if (rc == GX_ETIMEOUT)
        rc = gx_fail(GX_ETIMEOUT, GX_SUB_COLL, "%s to rank %d (window %u, offset %zu) did not "
                     "complete within GX_TIMEOUT (%d ms)", fn, target, win->id, offset,
                     win->comm->op_timeout_ms);
    else if (rc == GX_OK && a.status != GX_OK) {
        rc = a.status;
        gx_set_last_error(a.err); /* logged where it failed */
    }
    if (rc == GX_ETIMEOUT && kind == XP_RMA_GET)
        gx_comm_abort(win->comm); /* it would still write into buf */
    xp_rma_release(op);
    return gx_comm_note_failure(win->comm, rc);
}

GX_API int gx_put(struct gx_win *win, const void *buf, size_t count, enum gx_datatype dtype,
                  int target, size_t offset)
{
    return run_blocking(win, XP_RMA_PUT, (void *)buf, count, dtype, GX_SUM, target, offset,
                        "gx_put");
}

GX_API int gx_get(struct gx_win *win, void *buf, size_t count, enum gx_datatype dtype,
                  int target, size_t offset)
{
    return run_blocking(win, XP_RMA_GET, buf, count, dtype, GX_SUM, target, offset, "gx_get");
}

GX_API int gx_accumulate(struct gx_win *win, const void *buf, size_t count,
                         enum gx_datatype dtype, enum gx_redop op, int target, size_t offset)
{
    return run_blocking(win, XP_RMA_ACC, (void *)buf, count, dtype, op, target, offset,
                        "gx_accumulate");
}

static int win_step(struct gx_request *req)
{
    struct win_request *r = (struct win_request *)req;
    int rc = gx_svc_progress(req->comm);
    if (rc < 0)
        return rc;
    struct op_arg a = { .op = r->op, .need_done = true };
    if (!op_ready(&a))
        return GX_INPROGRESS;
    if (a.status != GX_OK)
        gx_set_last_error(a.err);
    return a.status;
}

static void win_release(struct gx_request *req)
{
    struct win_request *r = (struct win_request *)req;
    if (r->op)
        xp_rma_release(r->op);
    r->op = NULL;
}

static int start_request(struct gx_win *win, int kind, void *buf, size_t count,
                         enum gx_datatype dtype, enum gx_redop redop, int target, size_t offset,
                         const char *fn, struct gx_request **req)
{
    gx_clear_last_error();
    if (!req)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: req is NULL", fn);
    if (!win)
        return gx_fail(GX_EINVAL, GX_SUB_COLL, "%s: win is NULL", fn);
    struct win_request *r = (struct win_request *)gx_request_alloc(
        win->comm, fn + 3 /* "put", "get", "accumulate" */, win_step, sizeof(*r));
    if (!r)
        return gx_fail(GX_ENOMEM, GX_SUB_COLL, "%s: out of memory", fn);
    r->req.release = win_release;
    int rc = start(win, kind, buf, count, dtype, redop, target, offset, fn, &r->op);
    if (rc != GX_OK) {
        gx_request_discard(&r->req);
        return rc;
    }
    *req = &r->req;
    return GX_OK;
}

GX_API int gx_iput(struct gx_win *win, const void *buf, size_t count, enum gx_datatype dtype,
                   int target, size_t offset, struct gx_request **req)
{
    return start_request(win, XP_RMA_PUT, (void *)buf, count, dtype, GX_SUM, target, offset,
                         "gx_iput", req);
}

GX_API int gx_iget(struct gx_win *win, void *buf, size_t count, enum gx_datatype dtype,
                   int target, size_t offset, struct gx_request **req)
{
    return start_request(win, XP_RMA_GET, buf, count, dtype, GX_SUM, target, offset, "gx_iget",
                         req);
}

GX_API int gx_iaccumulate(struct gx_win *win, const void *buf, size_t count,
                          enum gx_datatype dtype, enum gx_redop op, int target, size_t offset,
                          struct gx_request **req)
{
    return start_request(win, XP_RMA_ACC, (void *)buf, count, dtype, op, target, offset,
                         "gx_iaccumulate", req);
}
