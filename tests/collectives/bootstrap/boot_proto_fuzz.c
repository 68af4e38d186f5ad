/*
 * boot_proto_fuzz.c - fuzz target for what the bootstrap parses from
 * strangers: the job-key hello (gx_auth_check_hello, common/auth.c) and a
 * line of a file:// rendezvous file (boot_parse_file_line). The first input
 * byte picks the parser. Whatever the bytes: no crash, no hello accepted
 * without the key's MAC, no record accepted with a rank outside the job.
 *
 * A libFuzzer target when built with clang (-fsanitize=fuzzer); otherwise
 * (GX_FUZZ_STANDALONE) a deterministic mutation driver runs it for the
 * number of seconds given, from seeds of both kinds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives/bootstrap/boot_internal.h"
#include "common/auth.h"
#include "gx/gx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gx_auth_key key;
static struct gx_auth_challenge ch = { .magic = GX_AUTH_MAGIC_CHALLENGE,
                                       .version = GX_AUTH_VERSION };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (!key.key[0] && !key.key[1])
        gx_auth_key_derive("gxk1-00112233445566778899aabbccddeeff", &key);
    if (data[0] & 1) {
        struct gx_auth_hello out;
        int rc = gx_auth_check_hello(&key, &ch, data + 1, size - 1, &out);
        if (rc == GX_OK) /* random bytes never carry the key's MAC */
            abort();
        if (rc != GX_INPROGRESS && rc != GX_EPROTO && rc != GX_EAUTH)
            abort();
        if (rc == GX_INPROGRESS && size - 1 >= sizeof(struct gx_auth_hello))
            abort();
    } else {
        char line[1200];
        size_t n = size - 1 < sizeof(line) - 1 ? size - 1 : sizeof(line) - 1;
        memcpy(line, data + 1, n);
        line[n] = '\0';
        int rank = -7;
        struct boot_rank_record rec;
        if (boot_parse_file_line(line, "00112233aabbccdd", 4, &rank, &rec) == 0) {
            if (rank < 0 || rank >= 4 || rec.host[sizeof(rec.host) - 1] != '\0' ||
                rec.node_id[sizeof(rec.node_id) - 1] != '\0')
                abort();
        }
    }
    return 0;
}

#ifdef GX_FUZZ_STANDALONE
#include "tests/fuzz/fuzz_driver.h"

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 5;
    /* Seeds: a valid-looking record line and a hello with the right header;
     * byte 0 selects the parser and is never mutated. */
    static uint8_t line[1024], hello[1 + sizeof(struct gx_auth_hello)], buf[1024];
    int w = snprintf((char *)line + 1, sizeof(line) - 1, "gx1 00112233aabbccdd 2 ");
    for (size_t i = 0; i < 2 * sizeof(struct boot_rank_record); i++)
        line[1 + w + i] = "0123456789abcdef"[i % 16];
    struct gx_auth_hello h = { .magic = GX_AUTH_MAGIC_HELLO, .version = GX_AUTH_VERSION };
    hello[0] = 1;
    memcpy(hello + 1, &h, sizeof(h));
    struct fuzz_seed seeds[] = {
        { line, 1 + (size_t)w + 2 * sizeof(struct boot_rank_record), 1, 1 },
        { hello, sizeof(hello), 1, 1 },
    };
    struct fuzz_plan plan = { .rng = 0x2545f4914f6cdd1dull, .extremes = { ' ', 0 },
                              .truncate_one_in = 4 };
    unsigned long long runs = fuzz_run(&plan, seeds, 2, buf, seconds, LLVMFuzzerTestOneInput);
    printf("boot_proto_fuzz: %llu inputs, no failure\n", runs);
    return 0;
}
#endif
