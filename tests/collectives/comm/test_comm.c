/* Unit test of the communicator core (collectives/comm/), one process, no
 * bootstrap or transport: allocation, the async error (first one wins,
 * caller errors do not break the communicator), the usability check and
 * its messages, sequence numbers and deadlines, child ids, the public
 * queries, and requests (gx_test, gx_wait's and the operation's deadlines,
 * an aborted communicator, discarding, the maker's tail of a request). */
#include <string.h>

#include "collectives/comm/comm_internal.h"
#include "collectives/comm/comm_view.h"
#include "collectives/comm/request.h"
#include "common/clock.h"
#include "tests/unit/check.h"

static struct gx_comm *comm_new(int rank, int size)
{
    struct gx_comm *c = gx_comm_alloc(NULL, rank, size);
    if (!c)
        return NULL;
    snprintf(c->name, sizeof(c->name), "unit");
    c->op_timeout_ms = 200;
    for (int r = 0; r < size; r++) {
        c->world_ranks[r] = r;
        c->rank_node[r] = r < size / 2 ? 0 : 1;
    }
    return c;
}

static void errors(void)
{
    struct gx_comm *c = comm_new(1, 4);
    CHECK(c != NULL, "gx_comm_alloc");
    if (!c)
        return;
    CHECK(gx_comm_rank(c) == 1 && gx_comm_size(c) == 4 && gx_comm_rank(NULL) == -1,
          "queries");
    CHECK(gx_comm_check_usable(c, "gx_op") == GX_OK, "a new communicator is usable");
    CHECK(gx_comm_note_failure(c, GX_EINVAL) == GX_EINVAL &&
              gx_comm_check_usable(c, "gx_op") == GX_OK,
          "a caller error does not break the communicator");
    CHECK(gx_comm_set_async_error(c, GX_EPEER, "rank 3 is gone") == GX_EPEER, "set");
    CHECK(gx_comm_set_async_error(c, GX_ETIMEOUT, "later") == GX_ETIMEOUT, "set again");
    char msg[128];
    CHECK(gx_comm_get_async_error(c, msg, sizeof(msg)) == GX_EPEER &&
              strcmp(msg, "rank 3 is gone") == 0,
          "the first failure wins (%s)", msg);
    CHECK(gx_comm_check_usable(c, "gx_op") == GX_EPEER &&
              strstr(gx_last_error(), "gx_op on communicator 'unit' after an earlier failure: "
                                      "rank 3 is gone"),
          "the usability check names the call, the communicator and the failure: %s",
          gx_last_error());
    atomic_store(&c->aborted, true);
    CHECK(gx_comm_check_usable(c, "gx_op") == GX_EABORTED &&
              strstr(gx_last_error(), "it was aborted"),
          "an aborted communicator: %s", gx_last_error());
    gx_comm_free(c);

    c = comm_new(0, 2);
    if (!c)
        return;
    c->finalized = true;
    CHECK(gx_comm_check_usable(c, "gx_op") == GX_ESTATE && strstr(gx_last_error(), "finalized"),
          "a finalized communicator: %s", gx_last_error());
    gx_comm_free(c);
}

static void numbers(void)
{
    struct gx_comm *c = comm_new(0, 4);
    if (!c)
        return;
    uint64_t a = gx_comm_next_seq(c), b = gx_comm_next_seq(c);
    CHECK(a == 1 && b == 2, "sequence numbers count from 1 (%llu %llu)", (unsigned long long)a,
          (unsigned long long)b);
    CHECK(gx_comm_op_timeout_ms(c) == 200, "GX_TIMEOUT of the communicator");
    uint64_t d = gx_comm_op_deadline(c);
    CHECK(gx_ms_left(d) > 0 && gx_ms_left(d) <= 200, "an operation's deadline is GX_TIMEOUT away");
    uint64_t init = gx_deadline_after_ms(5000);
    atomic_store(&c->init_deadline, init);
    CHECK(gx_comm_op_deadline(c) == init, "while init runs, every wait ends by its deadline");
    CHECK(gx_comm_same_node(c, 0, 1) && !gx_comm_same_node(c, 1, 2), "same node");
    uint64_t x = gx_comm_child_id(WORLD_COMM_ID, 7, 0), y = gx_comm_child_id(WORLD_COMM_ID, 7, 1);
    CHECK(x == gx_comm_child_id(WORLD_COMM_ID, 7, 0), "a child id is the same on every member");
    CHECK(x != y && x != gx_comm_child_id(WORLD_COMM_ID, 8, 0), "distinct per color and call");
    CHECK(x != 0 && x != WORLD_COMM_ID && y != 0 && y != WORLD_COMM_ID,
          "never 0, never the world's id");
    gx_comm_free(c);
}

/* A request done after `left` steps. */
struct counting_request {
    struct gx_request req;
    int left;
    int status;
};

static int counting_step(struct gx_request *req)
{
    struct counting_request *q = (struct counting_request *)req;
    return q->left-- > 0 ? GX_INPROGRESS : q->status;
}

static int never_step(struct gx_request *req)
{
    (void)req;
    return GX_INPROGRESS;
}

static void requests(void)
{
    struct gx_comm *c = comm_new(0, 2);
    if (!c)
        return;
    struct counting_request *q = (struct counting_request *)gx_request_alloc(
        c, "counting", counting_step, sizeof(*q));
    CHECK(q && q->req.comm == c && q->left == 0, "a zeroed request with the maker's tail");
    if (!q)
        return;
    q->left = 2;
    int done = -1;
    CHECK(gx_test(&q->req, &done) == GX_OK && !done, "in progress");
    CHECK(gx_wait(&q->req, -1) == GX_OK && q->req.done, "gx_wait drives it to the end");
    gx_request_free(&q->req);

    q = (struct counting_request *)gx_request_alloc(c, "counting", counting_step, sizeof(*q));
    q->status = GX_EPEER;
    CHECK(gx_wait(&q->req, -1) == GX_EPEER, "a failed operation's status");
    CHECK(gx_comm_check_usable(c, "gx_op") == GX_EPEER, "and the communicator is broken");
    gx_request_free(&q->req);
    gx_comm_free(c);

    c = comm_new(0, 2);
    if (!c)
        return;
    struct gx_request *r = gx_request_new(c, "stuck", never_step);
    r->seq = 9;
    CHECK(gx_wait(r, 20) == GX_ETIMEOUT && !r->done &&
              strstr(gx_last_error(), "stuck #9 still running after 20 ms"),
          "gx_wait's own timeout leaves the request valid: %s", gx_last_error());
    CHECK(gx_wait(r, -1) == GX_ETIMEOUT && r->done &&
              strstr(gx_last_error(), "did not complete within GX_TIMEOUT (200 ms)"),
          "the operation's deadline (GX_TIMEOUT) fails it, naming it: %s", gx_last_error());
    gx_request_free(r);
    gx_comm_free(c);

    c = comm_new(0, 2);
    if (!c)
        return;
    r = gx_request_new(c, "stuck", never_step);
    atomic_store(&c->aborted, true);
    CHECK(gx_wait(r, -1) == GX_EABORTED, "an aborted communicator ends its requests");
    gx_request_free(r);
    r = gx_request_new(c, "never posted", never_step);
    gx_request_discard(r); /* frees it; nothing may wait for it */
    gx_comm_free(c);
}

int main(void)
{
    errors();
    numbers();
    requests();
    CHECK_DONE("test_comm");
}
