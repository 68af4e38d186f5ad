/*
 * dpdk_proto_fuzz.c - fuzz target for the dpdk frame parser. Whatever the
 * bytes, gx_dpdk_parse must not crash or read past the frame, and a frame it
 * accepts must obey the invariants the receive path relies on (payload
 * inside the frame, offsets inside the message, PSN range sane).
 *
 * Built as a libFuzzer target with clang; otherwise (GX_FUZZ_STANDALONE) a
 * deterministic mutation driver runs it for the number of seconds given and
 * prints how many inputs each drop reason caught. Needs no DPDK.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fabric/dpdk/dpdk_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned long long verdicts[GX_DPDK_DROP_REASONS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly `size` bytes, so ASan sees any over-read. */
    uint8_t *f = malloc(size ? size : 1);
    if (size)
        memcpy(f, data, size);
    struct gx_dpdk_hdr h;
    const uint8_t *payload = NULL;
    int rc = gx_dpdk_parse(f, size, GX_DPDK_UDP_PORT, &h, &payload);
    if (rc == 0) {
        if (h.magic != GX_DPDK_MAGIC || h.version != GX_DPDK_VERSION || !payload ||
            payload < f + GX_DPDK_HDRS_LEN || payload + h.len > f + size)
            abort();
        if (h.type == GX_DPDK_T_DATA &&
            (h.offset > h.msg_len || h.len > h.msg_len - h.offset || h.msg_len > GX_DPDK_MAX_MSG ||
             gx_dpdk_psn_lt(h.last_psn, h.psn)))
            abort();
        if (h.type == GX_DPDK_T_ACK && h.len > GX_DPDK_SACK_MAX_BYTES)
            abort();
        if (h.type != GX_DPDK_T_DATA && h.type != GX_DPDK_T_ACK && h.type != GX_DPDK_T_CLOSE)
            abort();
    } else if (rc < 0 || rc >= GX_DPDK_DROP_REASONS) {
        abort();
    }
    verdicts[rc]++;
    free(f);
    return 0;
}

#ifdef GX_FUZZ_STANDALONE
#include "tests/fuzz/fuzz_driver.h"

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    /* Seeds: a valid DATA frame with payload, an ACK with a SACK bitmap. */
    static uint8_t frames[2][GX_DPDK_HDRS_LEN + 64], buf[sizeof(frames[0])];
    struct fuzz_seed seeds[2];
    struct gx_dpdk_l2l4 a = { .src_mac = { 2, 0, 0, 0, 0, 1 }, .dst_mac = { 2, 0, 0, 0, 0, 2 },
                              .src_ip = 0x0100000a, .dst_ip = 0x0200000a,
                              .src_port = GX_DPDK_UDP_PORT, .dst_port = GX_DPDK_UDP_PORT };
    for (int s = 0; s < 2; s++) {
        struct gx_dpdk_hdr h = { .magic = GX_DPDK_MAGIC, .version = GX_DPDK_VERSION,
                                 .type = s ? GX_DPDK_T_ACK : GX_DPDK_T_DATA,
                                 .op = s ? 0 : GX_DPDK_OP_SEND, .psn = 10, .last_psn = 11,
                                 .len = s ? 16 : 64, .msg_len = s ? 0 : 128, .offset = 64 };
        size_t n = gx_dpdk_put_l2l4(frames[s], &a, sizeof(h) + h.len);
        memcpy(frames[s] + n, &h, sizeof(h));
        memset(frames[s] + n + sizeof(h), 0x5a, h.len);
        seeds[s] = (struct fuzz_seed){ frames[s], n + sizeof(h) + h.len, 0, 0 };
        verdicts[0] = 0;
        LLVMFuzzerTestOneInput(seeds[s].data, seeds[s].len);
        if (verdicts[0] != 1) {
            fprintf(stderr, "dpdk_proto_fuzz: seed %d is not accepted by the parser\n", s);
            return 1;
        }
    }
    struct fuzz_plan plan = { .rng = 0x9e3779b97f4a7c15ull, .extremes = { 0xff, 0 },
                              .truncate_one_in = 4 };
    unsigned long long runs = fuzz_run(&plan, seeds, 2, buf, seconds, LLVMFuzzerTestOneInput);
    printf("dpdk_proto_fuzz: %llu inputs, no failure; accepted %llu", runs, verdicts[0]);
    for (int r = 1; r < GX_DPDK_DROP_REASONS; r++)
        printf(", %s %llu", gx_dpdk_drop_name(r), verdicts[r]);
    printf("\n");
    for (int r = GX_DPDK_DROP_SHORT; r < GX_DPDK_DROP_REASONS; r++)
        if (!verdicts[r]) {
            fprintf(stderr, "dpdk_proto_fuzz: no input was dropped as %s: the mutations do not "
                    "reach that check\n", gx_dpdk_drop_name(r));
            return 1;
        }
    return 0;
}
#endif
