/*
 * tcp_proto_fuzz.c - fuzz target for the tcp wire-header parser. Whatever the
 * bytes, gx_tcp_hdr_parse must not crash, and a header it accepts must obey
 * the invariants the receive path relies on.
 *
 * Built as a libFuzzer target with clang; otherwise (GX_FUZZ_STANDALONE) a
 * deterministic mutation driver runs it for the number of seconds given.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/auth.h"
#include "fabric/tcp/tcp_proto.h"
#include "gx/gx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gx_tcp_hdr h;
    const char *why = NULL;
    int rc = gx_tcp_hdr_parse(data, size, &h, &why);
    if (rc == GX_OK) {
        if (h.magic != GX_TCP_MAGIC || h.version != GX_TCP_VERSION || h.offset > h.msg_len ||
            h.frame_len > h.msg_len - h.offset || h.msg_len > GX_TCP_MAX_MSG)
            abort();
        if (h.op == GX_TCP_OP_WRITE_IMM && h.raddr + h.msg_len < h.raddr)
            abort();
    } else if (rc == GX_INPROGRESS) {
        if (size >= sizeof(h))
            abort();
    } else if (rc != GX_EPROTO || !why || !*why) {
        abort();
    }
    return 0;
}

#ifdef GX_FUZZ_STANDALONE
#include "tests/fuzz/fuzz_driver.h"

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    struct gx_tcp_hdr hdr = { .magic = GX_TCP_MAGIC, .version = GX_TCP_VERSION,
                              .op = GX_TCP_OP_SEND, .hdr_len = sizeof(hdr), .msg_len = 100,
                              .frame_len = 100 };
    /* The header and 8 trailing bytes, every one mutable; any prefix. */
    uint8_t seed[sizeof(hdr) + 8] = { 0 }, buf[sizeof(seed)];
    memcpy(seed, &hdr, sizeof(hdr));
    struct fuzz_seed seeds[] = { { seed, sizeof(seed), 0, 0 } };
    struct fuzz_plan plan = { .rng = 0x9e3779b97f4a7c15ull, .extremes = { 0xff, 0 },
                              .truncate_one_in = 1 };
    unsigned long long runs = fuzz_run(&plan, seeds, 1, buf, seconds, LLVMFuzzerTestOneInput);
    printf("tcp_proto_fuzz: %llu inputs, no failure\n", runs);
    return 0;
}
#endif
