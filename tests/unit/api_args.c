/* Every public entry point rejects bad arguments with a caller error whose
 * message names the argument, and never writes outputs on failure. */
#include <string.h>

#include "check.h"
#include "gx/gx.h"

#define EXPECT_EINVAL(call, word)                                                   \
    do {                                                                            \
        int rc_ = (call);                                                           \
        CHECK(rc_ == GX_EINVAL, "%s returned %s", #call, gx_strerror(rc_));         \
        CHECK(strstr(gx_last_error(), word) != NULL, "%s: message '%s' lacks '%s'", \
              #call, gx_last_error(), word);                                        \
    } while (0)

int main(void)
{
    struct gx_comm *comm = (struct gx_comm *)0x1;
    struct gx_config cfg = GX_CONFIG_INIT;
    EXPECT_EINVAL(gx_comm_init(NULL, &comm), "config");
    EXPECT_EINVAL(gx_comm_init(&cfg, NULL), "comm_out");
    cfg.size = 8;
    EXPECT_EINVAL(gx_comm_init(&cfg, &comm), "config->size");
    CHECK(comm == (struct gx_comm *)0x1, "output written on failure");
    cfg = (struct gx_config)GX_CONFIG_INIT;
    cfg.rank = 3;
    cfg.world_size = 2;
    EXPECT_EINVAL(gx_comm_init(&cfg, &comm), "out of range");
    cfg.rank = 0;
    cfg.world_size = 0;
    EXPECT_EINVAL(gx_comm_init(&cfg, &comm), "world_size");
    cfg.world_size = 1;
    cfg.init_method = "carrier-pigeon://x";
    EXPECT_EINVAL(gx_comm_init(&cfg, &comm), "carrier-pigeon");
    cfg.init_method = "tcp://no-port-here";
    EXPECT_EINVAL(gx_comm_init(&cfg, &comm), "no-port-here");

    struct gx_comm *out;
    struct gx_request *req;
    int done;
    EXPECT_EINVAL(gx_comm_split(NULL, 0, 0, &out), "comm");
    EXPECT_EINVAL(gx_comm_finalize(NULL), "comm");
    EXPECT_EINVAL(gx_barrier(NULL), "comm");
    EXPECT_EINVAL(gx_ibarrier(NULL, &req), "comm");
    EXPECT_EINVAL(gx_test(NULL, &done), "req");
    EXPECT_EINVAL(gx_wait(NULL, 10), "req");
    gx_comm_destroy(NULL);
    gx_comm_abort(NULL);
    gx_request_free(NULL);
    CHECK(gx_comm_rank(NULL) == -1 && gx_comm_size(NULL) == -1, "queries on NULL");
    CHECK(gx_comm_get_async_error(NULL, NULL, 0) == GX_EINVAL, "async error on NULL");
    struct gx_comm_stats st = GX_COMM_STATS_INIT;
    EXPECT_EINVAL(gx_comm_stats(NULL, &st), "comm");

    /* A real single-rank communicator, then misuse of it. */
    cfg = (struct gx_config)GX_CONFIG_INIT;
    cfg.rank = 0;
    cfg.world_size = 1;
    cfg.init_method = "tcp://127.0.0.1:0";
    CHECK(gx_comm_init(&cfg, &comm) == GX_OK, "single rank init: %s", gx_last_error());
    EXPECT_EINVAL(gx_comm_split(comm, 0, 0, NULL), "out");
    EXPECT_EINVAL(gx_comm_stats(comm, NULL), "stats");
    st.size = 8;
    EXPECT_EINVAL(gx_comm_stats(comm, &st), "GX_COMM_STATS_INIT");
    st = (struct gx_comm_stats)GX_COMM_STATS_INIT;
    CHECK(gx_comm_stats(comm, &st) == GX_OK && st.endpoints == 0 && st.boot_sockets >= 1,
          "stats of one rank: %d endpoints, %d bootstrap sockets", st.endpoints, st.boot_sockets);
    EXPECT_EINVAL(gx_ibarrier(comm, NULL), "req");
    /* Windows and remote calls (gx_win.h, gx_rpc.h). */
    struct gx_win *win = NULL;
    char wbuf[8];
    void *res = NULL;
    size_t rlen = 0;
    EXPECT_EINVAL(gx_win_create(NULL, wbuf, 8, &win), "comm");
    EXPECT_EINVAL(gx_win_create(comm, wbuf, 8, NULL), "win");
    EXPECT_EINVAL(gx_win_create(comm, NULL, 8, &win), "base");
    CHECK(win == NULL, "window written on failure");
    EXPECT_EINVAL(gx_win_flush(NULL, 0), "win");
    EXPECT_EINVAL(gx_put(NULL, wbuf, 1, GX_UINT8, 0, 0), "win");
    EXPECT_EINVAL(gx_rpc_register(NULL, 1, NULL, NULL), "comm");
    EXPECT_EINVAL(gx_rpc_call(NULL, 0, 1, NULL, 0, &res, &rlen, NULL), "comm");
    EXPECT_EINVAL(gx_rpc_call(comm, 5, 1, NULL, 0, &res, &rlen, NULL), "rank 5");
    EXPECT_EINVAL(gx_rpc_call(comm, 0, 1, NULL, 5, &res, &rlen, NULL), "args");
    EXPECT_EINVAL(gx_rpc_call(comm, 0, 1, NULL, 0, NULL, &rlen, NULL), "result");
    EXPECT_EINVAL(gx_rpc_call_async(comm, 0, 1, NULL, 0, NULL, NULL), "req");
    CHECK(res == NULL && rlen == 0, "result written on failure");
    CHECK(gx_ibarrier(comm, &req) == GX_OK, "ibarrier");
    EXPECT_EINVAL(gx_test(req, NULL), "done");
    CHECK(gx_wait(req, 1000) == GX_OK, "wait");
    gx_request_free(req);
    gx_comm_abort(comm);
    CHECK(gx_barrier(comm) == GX_EABORTED, "barrier after abort");
    char msg[128];
    CHECK(gx_comm_get_async_error(comm, msg, sizeof(msg)) == GX_EABORTED && strstr(msg, "abort"),
          "async error after abort: %s", msg);
    gx_comm_destroy(comm);

    /* Status helpers. */
    CHECK(GX_IS_PEER_ERROR(GX_EPEER) && GX_IS_CALLER_ERROR(GX_EINVAL) &&
              GX_IS_TIMEOUT(GX_ETIMEOUT) && GX_IS_MISMATCH(GX_EMISMATCH) &&
              GX_IS_ABORTED(GX_EABORTED) && GX_IS_UNSUPPORTED(GX_EUNSUPPORTED) &&
              GX_IS_SYSTEM_ERROR(GX_ENOMEM),
          "status groups");
    CHECK(strstr(gx_strerror(GX_EPEER), "GX_EPEER") != NULL, "strerror");
    CHECK(gx_datatype_size(GX_BFLOAT16) == 2 && gx_datatype_size(GX_FLOAT64) == 8 &&
              gx_datatype_size((enum gx_datatype)99) == 0,
          "datatype sizes");
    CHECK(strcmp(gx_redop_name(GX_AVG), "avg") == 0, "redop name");
    CHECK_DONE("api_args");
}
