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
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    struct gx_tcp_hdr seed = { .magic = GX_TCP_MAGIC, .version = GX_TCP_VERSION,
                               .op = GX_TCP_OP_SEND, .hdr_len = sizeof(seed), .msg_len = 100,
                               .frame_len = 100 };
    uint8_t buf[sizeof(seed) + 8];
    unsigned long long runs = 0;
    time_t end = time(NULL) + (time_t)seconds;
    while (time(NULL) < end) {
        for (int k = 0; k < 10000; k++, runs++) {
            memcpy(buf, &seed, sizeof(seed));
            int flips = 1 + (int)(next() % 6);
            for (int i = 0; i < flips; i++) {
                size_t at = next() % sizeof(seed);
                switch (next() % 3) {
                case 0: buf[at] ^= (uint8_t)(1u << (next() % 8)); break;
                case 1: buf[at] = (uint8_t)next(); break;
                default: buf[at] = (next() & 1) ? 0xff : 0; break;
                }
            }
            LLVMFuzzerTestOneInput(buf, next() % (sizeof(buf) + 1));
        }
    }
    printf("tcp_proto_fuzz: %llu inputs, no failure\n", runs);
    return 0;
}
#endif
