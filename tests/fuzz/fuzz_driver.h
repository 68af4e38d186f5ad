/*
 * fuzz_driver.h - the deterministic mutation driver the fuzz targets use
 * when no libFuzzer runtime is at hand (GX_FUZZ_STANDALONE). One xorshift
 * generator, one mutation loop: each round copies a seed, changes 1-6 of
 * its mutable bytes (flip a bit, a random byte, or one of two extreme
 * values) and hands the target the whole seed or a random prefix of it.
 * Header-only so each fuzz executable stays one source file plus its parser.
 */
#ifndef GX_TESTS_FUZZ_DRIVER_H
#define GX_TESTS_FUZZ_DRIVER_H

#include <stdint.h>
#include <string.h>
#include <time.h>

struct fuzz_seed {
    const uint8_t *data;
    size_t len;
    size_t first_mutable; /* bytes before it stay as seeded (a selector byte) */
    size_t min_prefix;    /* a truncated input keeps at least this many bytes */
};

struct fuzz_plan {
    uint64_t rng;              /* nonzero start of the generator */
    uint8_t extremes[2];       /* the two "edge" byte values to plant */
    unsigned truncate_one_in;  /* 1 in N inputs is a random prefix of its seed */
};

static inline uint64_t fuzz_next(struct fuzz_plan *p)
{
    p->rng ^= p->rng << 13;
    p->rng ^= p->rng >> 7;
    p->rng ^= p->rng << 17;
    return p->rng;
}

/* Runs `target` on mutated seeds for `seconds`; buf must hold the longest
 * seed. Returns how many inputs ran. */
static inline unsigned long long fuzz_run(struct fuzz_plan *p, const struct fuzz_seed *seeds,
                                          int nseeds, uint8_t *buf, double seconds,
                                          int (*target)(const uint8_t *, size_t))
{
    unsigned long long runs = 0;
    time_t end = time(NULL) + (time_t)seconds;
    while (time(NULL) < end) {
        for (int k = 0; k < 10000; k++, runs++) {
            const struct fuzz_seed *s = &seeds[fuzz_next(p) % (uint64_t)nseeds];
            memcpy(buf, s->data, s->len);
            size_t span = s->len - s->first_mutable;
            int flips = 1 + (int)(fuzz_next(p) % 6);
            for (int i = 0; span && i < flips; i++) {
                size_t at = s->first_mutable + fuzz_next(p) % span;
                switch (fuzz_next(p) % 3) {
                case 0: buf[at] ^= (uint8_t)(1u << (fuzz_next(p) % 8)); break;
                case 1: buf[at] = (uint8_t)fuzz_next(p); break;
                default: buf[at] = p->extremes[fuzz_next(p) & 1]; break;
                }
            }
            size_t len = s->len;
            if (fuzz_next(p) % p->truncate_one_in == 0)
                len = s->min_prefix + fuzz_next(p) % (s->len - s->min_prefix + 1);
            target(buf, len);
        }
    }
    return runs;
}

#endif
