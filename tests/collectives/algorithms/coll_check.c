/*
 * coll_check - multi-process checks of the collectives, run under gx-run.
 *
 *   coll_check matrix [FLAGS]   every collective x datatype x op x size x
 *                               in/out-of-place against a reference computed
 *                               the slow obvious way on every rank
 *       --kinds a,b,...   only these collectives (allreduce broadcast reduce
 *                         allgather reduce_scatter gather scatter alltoall)
 *       --sizes small|large|all   small: 0 1 7 1023; large: 1 MiB + 3 elements
 *       --large-dtypes a,b        datatypes for the large size (default
 *                                 float32,int32,float16; "all" for every one)
 *       --roots           every root for rooted collectives (default 0 and n-1)
 *   coll_check random SEED      float all-reduce of non-integer values: within
 *                               the accumulation bound and bitwise equal on
 *                               every rank
 *   coll_check interleave SEED  random outstanding non-blocking collectives,
 *                               waited in a different random order per rank
 *   coll_check mismatch WHAT    rank 1 calls something else (count, kind,
 *                               dtype, op, root, skip): every rank must fail
 *                               with GX_EMISMATCH
 *   coll_check dead             rank 2 dies in the middle of all-reduces: the
 *                               others fail naming it within 2 x GX_TIMEOUT
 *   coll_check badinput         caller errors fail locally with GX_EINVAL
 *                               naming the argument; the comm still works
 *   coll_check bench [BYTES..]  float32 sum all-reduce: median time and
 *                               bus bandwidth per size (GX_ALGO applies)
 * Integer inputs are exact; float inputs are small integers, so sums and
 * products are exact whatever the order (the random mode covers rounding).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gx/gx.h"

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL rank %d line %d: ", me, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, " [last error: %s]\n", gx_last_error());           \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static int me = -1, nranks = 0;
static long checks = 0;

enum kind { ALLREDUCE, BROADCAST, REDUCE, ALLGATHER, REDUCE_SCATTER, GATHER, SCATTER, ALLTOALL,
            NKINDS };
static const char *const kind_names[NKINDS] = { "allreduce", "broadcast", "reduce", "allgather",
                                                "reduce_scatter", "gather", "scatter",
                                                "alltoall" };
static bool reduces(int k)
{
    return k == ALLREDUCE || k == REDUCE || k == REDUCE_SCATTER;
}
static bool rooted(int k)
{
    return k == BROADCAST || k == REDUCE || k == GATHER || k == SCATTER;
}

/* ---- values ------------------------------------------------------------- */

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

static bool is_float(enum gx_datatype t)
{
    return t == GX_FLOAT16 || t == GX_BFLOAT16 || t == GX_FLOAT32 || t == GX_FLOAT64;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {
            int e = -1;
            do {
                man <<= 1;
                e++;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Exact for the small integers and halves the tests store. */
static uint16_t float_to_half(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    uint32_t sign = (b >> 16) & 0x8000;
    int exp = (int)((b >> 23) & 0xff) - 127 + 15;
    uint32_t man = b & 0x7fffff;
    if ((b & 0x7fffffff) == 0)
        return (uint16_t)sign;
    if (exp <= 0) { /* subnormal, round to nearest even */
        man |= 0x800000;
        int shift = 14 - exp;
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1)))
            r++;
        return (uint16_t)(sign | r);
    }
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00);
    uint32_t r = ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1)))
        r++;
    return (uint16_t)(sign | r);
}

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    b += 0x7fff + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}

/* A value as double (floats) or as the integer's bits widened (ints). */
static double get_f(const void *buf, enum gx_datatype t, size_t i)
{
    switch (t) {
    case GX_FLOAT16: return half_to_float(((const uint16_t *)buf)[i]);
    case GX_BFLOAT16: return bf16_to_float(((const uint16_t *)buf)[i]);
    case GX_FLOAT32: return ((const float *)buf)[i];
    case GX_FLOAT64: return ((const double *)buf)[i];
    default: return 0;
    }
}

static void set_f(void *buf, enum gx_datatype t, size_t i, double v)
{
    switch (t) {
    case GX_FLOAT16: ((uint16_t *)buf)[i] = float_to_half((float)v); break;
    case GX_BFLOAT16: ((uint16_t *)buf)[i] = float_to_bf16((float)v); break;
    case GX_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case GX_FLOAT64: ((double *)buf)[i] = v; break;
    default: break;
    }
}

static uint64_t get_u(const void *buf, enum gx_datatype t, size_t i)
{
    switch (t) {
    case GX_INT8: case GX_UINT8: return ((const uint8_t *)buf)[i];
    case GX_INT32: case GX_UINT32: return ((const uint32_t *)buf)[i];
    default: return ((const uint64_t *)buf)[i];
    }
}

static void set_u(void *buf, enum gx_datatype t, size_t i, uint64_t v)
{
    switch (t) {
    case GX_INT8: case GX_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case GX_INT32: case GX_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    default: ((uint64_t *)buf)[i] = v; break;
    }
}

static int bits_of(enum gx_datatype t)
{
    return (int)gx_datatype_size(t) * 8;
}

static int64_t sext(uint64_t v, int bits)
{
    if (bits == 64)
        return (int64_t)v;
    uint64_t m = 1ull << (bits - 1);
    v &= (1ull << bits) - 1;
    return (int64_t)((v ^ m) - m);
}

static bool is_signed(enum gx_datatype t)
{
    return t == GX_INT8 || t == GX_INT32 || t == GX_INT64;
}

/* Input element i of rank r for a case. Floats: small integers (exact),
 * for prod only +-1 and +-2. */
static void fill(void *buf, enum gx_datatype t, enum gx_redop op, size_t n, int r, uint32_t seed,
                 size_t base)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t h = mix(seed ^ mix((uint32_t)r * 0x9e3779b1u ^ (uint32_t)(i + base)));
        if (is_float(t)) {
            double v = op == GX_PROD ? ((h & 1) ? 1.0 : 2.0) * ((h & 2) ? -1 : 1)
                                     : (double)((int)(h % 9) - 4);
            set_f(buf, t, i, v);
        } else {
            set_u(buf, t, i, ((uint64_t)h << 32) | mix(h));
        }
    }
}

/* Reference reduction of element i over all ranks' inputs (input element
 * index `src_i` of each rank), stored into out[i]. */
static void ref_reduce(void *out, size_t i, enum gx_datatype t, enum gx_redop op, int n,
                       uint32_t seed, size_t src_i)
{
    size_t es = gx_datatype_size(t);
    unsigned char v[8];
    if (is_float(t)) {
        double acc = 0;
        for (int r = 0; r < n; r++) {
            fill(v, t, op, 1, r, seed, src_i);
            double x = get_f(v, t, 0);
            if (r == 0)
                acc = x;
            else if (op == GX_SUM || op == GX_AVG)
                acc += x;
            else if (op == GX_PROD)
                acc *= x;
            else if (op == GX_MIN)
                acc = x < acc ? x : acc;
            else
                acc = x > acc ? x : acc;
        }
        if (op == GX_AVG) {
            if (t == GX_FLOAT64)
                acc = acc / n;
            else
                acc = (float)((float)acc / (float)n);
        }
        set_f(out, t, i, acc);
        return;
    }
    int bits = bits_of(t);
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    uint64_t acc = 0;
    for (int r = 0; r < n; r++) {
        fill(v, t, op, 1, r, seed, src_i);
        uint64_t x = get_u(v, t, 0) & mask;
        if (r == 0) {
            acc = x;
        } else if (op == GX_SUM || op == GX_AVG) {
            acc = (acc + x) & mask;
        } else if (op == GX_PROD) {
            acc = (acc * x) & mask;
        } else {
            bool less = is_signed(t) ? sext(x, bits) < sext(acc, bits) : x < acc;
            if ((op == GX_MIN) == less)
                acc = x;
        }
    }
    if (op == GX_AVG)
        acc = is_signed(t) ? (uint64_t)(sext(acc, bits) / n) & mask : (acc / (uint64_t)n) & mask;
    (void)es;
    set_u(out, t, i, acc);
}

static bool same_elem(const void *a, const void *b, enum gx_datatype t, size_t i)
{
    size_t es = gx_datatype_size(t);
    return memcmp((const char *)a + i * es, (const char *)b + i * es, es) == 0;
}

/* ---- one matrix case ------------------------------------------------------ */

#define GUARD 64

static void run_case(struct gx_comm *comm, int kind, enum gx_datatype t, enum gx_redop op,
                     size_t count, bool inplace, int root, uint32_t seed)
{
    int n = nranks;
    size_t es = gx_datatype_size(t);
    bool blocks = kind == ALLGATHER || kind == REDUCE_SCATTER || kind == GATHER ||
                  kind == SCATTER || kind == ALLTOALL;
    size_t all = blocks ? count * (size_t)n : count;
    size_t send_n = (kind == REDUCE_SCATTER || kind == SCATTER || kind == ALLTOALL) ? all : count;
    size_t recv_n = (kind == ALLGATHER || kind == GATHER || kind == ALLTOALL) ? all : count;
    size_t buf_n = send_n > recv_n ? send_n : recv_n;
    unsigned char *region = malloc(buf_n * es * 2 + 4 * GUARD);
    CHECK(region, "malloc");
    memset(region, 0xa5, buf_n * es * 2 + 4 * GUARD);
    unsigned char *sb = region + GUARD, *rb = region + 3 * GUARD + buf_n * es;
    unsigned char *expect = malloc(recv_n * es + 1);
    /* Inputs. */
    if (kind == SCATTER) {
        if (me == root)
            for (int b = 0; b < n; b++)
                fill(sb + (size_t)b * count * es, t, op, count, root, seed, (size_t)b * count);
    } else if (kind == REDUCE_SCATTER || kind == ALLTOALL) {
        fill(sb, t, op, send_n, me, seed, 0);
    } else {
        fill(sb, t, op, count, me, seed, 0);
    }
    const void *send = sb;
    void *recv = rb;
    if (inplace) {
        switch (kind) {
        case ALLREDUCE: case BROADCAST: case REDUCE: case ALLTOALL:
            memcpy(rb, sb, send_n * es);
            send = rb;
            break;
        case ALLGATHER: case GATHER:
            if (kind == ALLGATHER || me == root) {
                memcpy(rb + (size_t)me * count * es, sb, count * es);
                send = rb + (size_t)me * count * es;
            }
            break;
        case REDUCE_SCATTER: case SCATTER:
            if (kind == REDUCE_SCATTER || me == root) {
                memcpy(rb, sb, send_n * es);
                send = rb;
                recv = rb + (size_t)me * count * es;
            }
            break;
        }
    }
    int rc;
    switch (kind) {
    case ALLREDUCE: rc = gx_allreduce(comm, send, recv, count, t, op); break;
    case BROADCAST: rc = gx_broadcast(comm, send, recv, count, t, root); break;
    case REDUCE: rc = gx_reduce(comm, send, recv, count, t, op, root); break;
    case ALLGATHER: rc = gx_allgather(comm, send, recv, count, t); break;
    case REDUCE_SCATTER: rc = gx_reduce_scatter(comm, send, recv, count, t, op); break;
    case GATHER: rc = gx_gather(comm, send, recv, count, t, root); break;
    case SCATTER: rc = gx_scatter(comm, send, recv, count, t, root); break;
    default: rc = gx_alltoall(comm, send, recv, count, t); break;
    }
    CHECK(rc == GX_OK, "%s %s %s count %zu %s root %d: %s", kind_names[kind],
          gx_datatype_name(t), gx_redop_name(op), count, inplace ? "in-place" : "out-of-place",
          root, gx_strerror(rc));
    /* Expected result on this rank (NULL: nothing to check). */
    bool check = true;
    unsigned char tmp[8];
    switch (kind) {
    case ALLREDUCE:
        for (size_t i = 0; i < count; i++)
            ref_reduce(expect, i, t, op, n, seed, i);
        break;
    case REDUCE:
        check = me == root;
        for (size_t i = 0; check && i < count; i++)
            ref_reduce(expect, i, t, op, n, seed, i);
        break;
    case BROADCAST:
        fill(expect, t, op, count, root, seed, 0);
        break;
    case ALLGATHER:
    case GATHER:
        check = kind == ALLGATHER || me == root;
        for (int b = 0; check && b < n; b++)
            fill(expect + (size_t)b * count * es, t, op, count, b, seed, 0);
        break;
    case REDUCE_SCATTER:
        for (size_t i = 0; i < count; i++)
            ref_reduce(expect, i, t, op, n, seed, (size_t)me * count + i);
        break;
    case SCATTER:
        fill(expect, t, op, count, root, seed, (size_t)me * count);
        break;
    case ALLTOALL:
        for (int b = 0; b < n; b++)
            for (size_t i = 0; i < count; i++) {
                fill(tmp, t, op, 1, b, seed, (size_t)me * count + i);
                memcpy(expect + ((size_t)b * count + i) * es, tmp, es);
            }
        break;
    }
    const unsigned char *got = recv;
    for (size_t i = 0; check && i < recv_n; i++) {
        if (same_elem(got, expect, t, i))
            continue;
        /* GX_AVG of floats rounds once; allow one unit in the last place. */
        if (op == GX_AVG && is_float(t) && reduces(kind)) {
            double g = get_f(got, t, i), e = get_f(expect, t, i);
            double tol = t == GX_FLOAT64 ? 1e-15 : t == GX_FLOAT32 ? 1e-7 : 1e-2;
            if (g - e <= tol * (e < 0 ? -e : e) + tol && e - g <= tol * (e < 0 ? -e : e) + tol)
                continue;
        }
        CHECK(0, "%s %s %s count %zu %s root %d: element %zu wrong (got %g/0x%llx, expected "
              "%g/0x%llx)", kind_names[kind], gx_datatype_name(t), gx_redop_name(op), count,
              inplace ? "in-place" : "out-of-place", root, i, get_f(got, t, i),
              (unsigned long long)get_u(got, t, i), get_f(expect, t, i),
              (unsigned long long)get_u(expect, t, i));
    }
    /* Guards around both buffers and, out of place, the untouched input. */
    for (int g = 0; g < GUARD; g++) {
        CHECK(region[g] == 0xa5 && rb[-GUARD + g] == 0xa5 && sb[buf_n * es + g] == 0xa5 &&
                  rb[buf_n * es + g] == 0xa5,
              "%s count %zu: wrote outside the buffers", kind_names[kind], count);
    }
    checks++;
    free(expect);
    free(region);
}

/* ---- modes ---------------------------------------------------------------------- */

static int parse_kinds(const char *list, bool *on)
{
    for (int k = 0; k < NKINDS; k++)
        on[k] = list == NULL;
    if (!list)
        return 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int k;
        for (k = 0; k < NKINDS && strcmp(kind_names[k], tok); k++)
            ;
        if (k == NKINDS)
            return -1;
        on[k] = true;
    }
    return 0;
}

static void mode_matrix(struct gx_comm *comm, int argc, char **argv)
{
    const char *kinds = NULL, *sizes = "all", *large_dt = "float32,int32,float16";
    bool all_roots = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--kinds") && i + 1 < argc)
            kinds = argv[++i];
        else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
            sizes = argv[++i];
        else if (!strcmp(argv[i], "--large-dtypes") && i + 1 < argc)
            large_dt = argv[++i];
        else if (!strcmp(argv[i], "--roots"))
            all_roots = true;
    }
    bool on[NKINDS];
    CHECK(parse_kinds(kinds, on) == 0, "bad --kinds %s", kinds);
    bool small = strcmp(sizes, "large") != 0, large = strcmp(sizes, "small") != 0;
    static const size_t small_sizes[] = { 0, 1, 7, 1023 };
    uint32_t seed = 1;
    for (int k = 0; k < NKINDS; k++) {
        if (!on[k])
            continue;
        int nroots = rooted(k) ? (all_roots ? nranks : (nranks > 1 ? 2 : 1)) : 1;
        for (int t = 0; t < GX_DATATYPE_COUNT; t++) {
            bool big = large && (!strcmp(large_dt, "all") ||
                                 strstr(large_dt, gx_datatype_name((enum gx_datatype)t)));
            /* strstr: "float16" also matches "bfloat16"; check the boundary. */
            if (big && strcmp(large_dt, "all")) {
                const char *p = strstr(large_dt, gx_datatype_name((enum gx_datatype)t));
                big = p && (p == large_dt || p[-1] == ',');
            }
            for (int op = 0; op < (reduces(k) ? GX_REDOP_COUNT : 1); op++) {
                for (int s = 0; s < 5; s++) {
                    size_t count;
                    if (s < 4) {
                        if (!small)
                            continue;
                        count = small_sizes[s];
                    } else {
                        /* the large size: a few ops only (sum, avg; all for reduce-free) */
                        if (!big || (reduces(k) && op != GX_SUM && op != GX_AVG && op != GX_MAX))
                            continue;
                        count = (1u << 20) / gx_datatype_size((enum gx_datatype)t) + 3;
                        if (k == ALLGATHER || k == GATHER || k == SCATTER || k == ALLTOALL ||
                            k == REDUCE_SCATTER)
                            count = count / (size_t)nranks + 3;
                    }
                    for (int ri = 0; ri < nroots; ri++) {
                        int root = rooted(k) ? (all_roots ? ri : (ri ? nranks - 1 : 0)) : -1;
                        for (int ip = 0; ip < 2; ip++)
                            run_case(comm, k, (enum gx_datatype)t, (enum gx_redop)op, count,
                                     ip == 1, root, seed++);
                    }
                }
            }
        }
    }
}

/* Float all-reduce of random non-integer values: within the accumulation
 * bound, and the same bits on every rank. */
static void mode_random(struct gx_comm *comm, uint32_t seed)
{
    static const enum gx_datatype types[] = { GX_FLOAT32, GX_FLOAT64, GX_FLOAT16, GX_BFLOAT16 };
    static const size_t counts[] = { 1, 7, 1023, 100003, 300001 };
    for (size_t ti = 0; ti < 4; ti++) {
        enum gx_datatype t = types[ti];
        size_t es = gx_datatype_size(t);
        double eps = t == GX_FLOAT64 ? 1.2e-16 : t == GX_FLOAT32 ? 6e-8 : t == GX_FLOAT16 ? 4.9e-4
                                                                                          : 3.9e-3;
        for (size_t ci = 0; ci < 5; ci++) {
            size_t count = counts[ci];
            unsigned char *in = malloc(count * es), *out = malloc(count * es);
            unsigned char *all = malloc(count * es * (size_t)nranks);
            for (size_t i = 0; i < count; i++) {
                uint32_t h = mix(seed ^ mix((uint32_t)me * 7919u + (uint32_t)i));
                set_f(in, t, i, ((double)h / 4294967296.0 - 0.5) * 8);
            }
            CHECK(gx_allreduce(comm, in, out, count, t, GX_SUM) == GX_OK, "random allreduce");
            CHECK(gx_allgather(comm, in, all, count, t) == GX_OK, "allgather of the inputs");
            for (size_t i = 0; i < count; i++) {
                double exact = 0, mag = 0;
                for (int r = 0; r < nranks; r++) {
                    double x = get_f(all + (size_t)r * count * es, t, i);
                    exact += x;
                    mag += x < 0 ? -x : x;
                }
                /* n-1 roundings of partial sums, plus the final rounding */
                double bound = (nranks + 1) * eps * mag + 1e-300;
                double err = get_f(out, t, i) - exact;
                CHECK(err <= bound && -err <= bound, "%s sum element %zu: %g vs exact %g "
                      "(bound %g)", gx_datatype_name(t), i, get_f(out, t, i), exact, bound);
            }
            /* bitwise equal on every rank: gather everyone's result */
            CHECK(gx_allgather(comm, out, all, count, t) == GX_OK, "allgather of the results");
            for (int r = 0; r < nranks; r++)
                CHECK(memcmp(all + (size_t)r * count * es, out, count * es) == 0,
                      "%s sum of %zu: rank %d's result differs from rank %d's",
                      gx_datatype_name(t), count, r, me);
            checks++;
            free(in);
            free(out);
            free(all);
        }
    }
}

struct pending {
    struct gx_request *req;
    int kind;
    enum gx_datatype t;
    enum gx_redop op;
    size_t count;
    int root;
    uint32_t seed;
    unsigned char *send, *recv;
};

static void verify_pending(struct pending *p)
{
    int n = nranks;
    size_t es = gx_datatype_size(p->t), count = p->count;
    unsigned char *expect = malloc(count * es * (size_t)n + 1);
    bool check = true;
    size_t len = count;
    switch (p->kind) {
    case ALLREDUCE:
        for (size_t i = 0; i < count; i++)
            ref_reduce(expect, i, p->t, p->op, n, p->seed, i);
        break;
    case BROADCAST:
        fill(expect, p->t, p->op, count, p->root, p->seed, 0);
        break;
    case REDUCE:
        check = me == p->root;
        for (size_t i = 0; check && i < count; i++)
            ref_reduce(expect, i, p->t, p->op, n, p->seed, i);
        break;
    default: /* ALLGATHER */
        for (int b = 0; b < n; b++)
            fill(expect + (size_t)b * count * es, p->t, p->op, count, b, p->seed, 0);
        len = count * (size_t)n;
        break;
    }
    for (size_t i = 0; check && i < len; i++) {
        if (same_elem(p->recv, expect, p->t, i))
            continue;
        if (p->op == GX_AVG && is_float(p->t)) {
            double g = get_f(p->recv, p->t, i), e = get_f(expect, p->t, i);
            if (g - e < 1e-2 * (e < 0 ? -e : e) + 1e-2 && e - g < 1e-2 * (e < 0 ? -e : e) + 1e-2)
                continue;
        }
        CHECK(0, "interleaved %s %s count %zu seed %u: element %zu wrong", kind_names[p->kind],
              gx_datatype_name(p->t), count, p->seed, i);
    }
    free(expect);
}

static void mode_interleave(struct gx_comm *comm, uint32_t seed, int total, int window)
{
    struct pending *q = calloc((size_t)window, sizeof(*q));
    uint32_t shared = seed;                       /* same sequence on every rank */
    uint32_t local = seed ^ mix((uint32_t)me + 1); /* differs per rank */
    int issued = 0, live = 0;
    static const size_t sizes[] = { 0, 1, 5, 300, 4099, 70000, 300007 };
    static const enum gx_datatype dts[] = { GX_FLOAT32, GX_INT32, GX_FLOAT16, GX_UINT8, GX_INT64,
                                            GX_FLOAT64 };
    while (issued < total || live > 0) {
        local = mix(local + 1);
        bool issue = issued < total && (live == 0 || (live < window && (local & 3) != 0));
        if (issue) {
            shared = mix(shared + 7);
            struct pending *p = NULL;
            for (int i = 0; i < window; i++)
                if (!q[i].req) {
                    p = &q[i];
                    break;
                }
            p->kind = (int)(shared % 4); /* allreduce, broadcast, reduce, allgather */
            p->t = dts[(shared >> 4) % 6];
            p->op = (enum gx_redop)((shared >> 8) % GX_REDOP_COUNT);
            p->count = sizes[(shared >> 12) % 7];
            p->root = (int)((shared >> 16) % (uint32_t)nranks);
            p->seed = shared;
            size_t es = gx_datatype_size(p->t);
            size_t rn = p->kind == ALLGATHER ? p->count * (size_t)nranks : p->count;
            p->send = malloc(p->count * es + 1);
            p->recv = malloc(rn * es + 1);
            fill(p->send, p->t, p->op, p->count, me, p->seed, 0);
            int rc;
            switch (p->kind) {
            case ALLREDUCE:
                rc = gx_iallreduce(comm, p->send, p->recv, p->count, p->t, p->op, &p->req);
                break;
            case BROADCAST:
                fill(p->send, p->t, p->op, p->count, p->root, p->seed, 0);
                if (me != p->root)
                    fill(p->send, p->t, p->op, p->count, me + 100, p->seed, 0);
                rc = gx_ibroadcast(comm, p->send, p->recv, p->count, p->t, p->root, &p->req);
                break;
            case REDUCE:
                rc = gx_ireduce(comm, p->send, p->recv, p->count, p->t, p->op, p->root, &p->req);
                break;
            default:
                rc = gx_iallgather(comm, p->send, p->recv, p->count, p->t, &p->req);
                break;
            }
            CHECK(rc == GX_OK, "issue #%d: %s", issued, gx_strerror(rc));
            issued++;
            live++;
            continue;
        }
        /* Complete a random outstanding one (rank-specific order), or test. */
        int pick = (int)(local % (uint32_t)window);
        for (int i = 0; i < window; i++) {
            struct pending *p = &q[(pick + i) % window];
            if (!p->req)
                continue;
            int rc;
            if ((local >> 8) & 1) {
                int done = 0;
                rc = gx_test(p->req, &done);
                if (!done)
                    break;
            } else {
                rc = gx_wait(p->req, -1);
            }
            CHECK(rc == GX_OK, "interleaved %s: %s", kind_names[p->kind], gx_strerror(rc));
            verify_pending(p);
            gx_request_free(p->req);
            free(p->send);
            free(p->recv);
            memset(p, 0, sizeof(*p));
            live--;
            checks++;
            break;
        }
    }
    free(q);
}

static void mode_mismatch(struct gx_comm *comm, const char *what)
{
    float buf[64] = { 0 }, out[64 * 16];
    int rc;
    bool odd = me == 1;
    /* A few good collectives first, to be sure state carries over. */
    CHECK(gx_allreduce(comm, buf, out, 8, GX_FLOAT32, GX_SUM) == GX_OK, "warm-up");
    if (!strcmp(what, "count"))
        rc = gx_allreduce(comm, buf, out, odd ? 40 : 8, GX_FLOAT32, GX_SUM);
    else if (!strcmp(what, "kind"))
        rc = odd ? gx_broadcast(comm, buf, out, 8, GX_FLOAT32, 0)
                 : gx_allreduce(comm, buf, out, 8, GX_FLOAT32, GX_SUM);
    else if (!strcmp(what, "dtype"))
        rc = gx_allreduce(comm, buf, out, 8, odd ? GX_INT32 : GX_FLOAT32, GX_SUM);
    else if (!strcmp(what, "op"))
        rc = gx_allreduce(comm, buf, out, 8, GX_FLOAT32, odd ? GX_MAX : GX_SUM);
    else if (!strcmp(what, "root"))
        rc = gx_broadcast(comm, buf, out, 8, GX_FLOAT32, odd ? 1 : 0);
    else if (!strcmp(what, "skip")) {
        /* rank 1's call fails its argument checks; its next one pairs with
         * the others' first */
        if (odd) {
            rc = gx_allreduce(comm, NULL, out, 8, GX_FLOAT32, GX_SUM);
            CHECK(rc == GX_EINVAL, "NULL sendbuf: %s", gx_strerror(rc));
        }
        rc = gx_allreduce(comm, buf, out, 8, GX_FLOAT32, GX_SUM);
    } else {
        CHECK(0, "unknown mismatch '%s'", what);
    }
    if (rc == GX_OK) {
        /* A rank whose own neighbours agreed with it (e.g. the root of a
         * broadcast that only sends) may complete; the ranks that detected
         * the mismatch report it, and its next call fails with it. */
        rc = gx_allreduce(comm, buf, out, 8, GX_FLOAT32, GX_SUM);
    }
    const char *msg = gx_last_error();
    CHECK(rc == GX_EMISMATCH, "mismatch %s: got %s, expected GX_EMISMATCH", what,
          gx_strerror(rc));
    CHECK(strstr(msg, "mismatch") || strstr(msg, "disagree") || strstr(msg, "expected"),
          "message does not explain: %s", msg);
    printf("PASS rank %d mismatch %s: %s\n", me, what, msg);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void mode_dead(struct gx_comm *comm)
{
    size_t count = 1 << 20;
    float *in = calloc(count, 4), *out = calloc(count, 4);
    const char *to = getenv("GX_TIMEOUT");
    double timeout = to ? atof(to) / 1000.0 : 30.0;
    for (int it = 0;; it++) {
        struct gx_request *req;
        if (me == 2 && it == 5)
            raise(SIGKILL);
        double t0 = now_s();
        int rc = gx_iallreduce(comm, in, out, count, GX_FLOAT32, GX_SUM, &req);
        if (rc == GX_OK) {
            rc = gx_wait(req, -1);
            gx_request_free(req);
        }
        if (rc == GX_OK) {
            CHECK(it < 1000, "all-reduces keep succeeding with rank 2 dead");
            continue;
        }
        double took = now_s() - t0;
        const char *msg = gx_last_error();
        char async[512];
        int as = gx_comm_get_async_error(comm, async, sizeof(async));
        CHECK(strstr(msg, "rank 2"), "error does not name rank 2: %s", msg);
        CHECK(took < 2 * timeout, "took %.1f s (GX_TIMEOUT %.1f s)", took, timeout);
        CHECK(as != GX_OK, "no async error after the failure");
        printf("DEADCHECK ok rank %d after %.2f s: %s (%s)\n", me, took, gx_strerror(rc), msg);
        fflush(stdout);
        exit(0);
    }
}

static void expect_einval(int rc, const char *what, const char *word)
{
    CHECK(rc == GX_EINVAL, "%s: got %s, expected GX_EINVAL", what, gx_strerror(rc));
    CHECK(strstr(gx_last_error(), word), "%s: message '%s' does not name '%s'", what,
          gx_last_error(), word);
    checks++;
}

static void mode_badinput(struct gx_comm *comm)
{
    int n = nranks;
    float a[64] = { 0 }, b[64 * 16] = { 0 };
    struct gx_request *req = NULL;
    /* Every rank makes the same bad calls, so their sequence numbers stay in
     * step and the communicator remains usable. */
    expect_einval(gx_allreduce(NULL, a, b, 4, GX_FLOAT32, GX_SUM), "NULL comm", "comm");
    expect_einval(gx_allreduce(comm, NULL, b, 4, GX_FLOAT32, GX_SUM), "NULL sendbuf", "sendbuf");
    expect_einval(gx_allreduce(comm, a, NULL, 4, GX_FLOAT32, GX_SUM), "NULL recvbuf", "recvbuf");
    CHECK(gx_allreduce(comm, NULL, NULL, 0, GX_FLOAT32, GX_SUM) == GX_OK, "NULL with count 0");
    expect_einval(gx_allreduce(comm, a, b, 4, (enum gx_datatype)99, GX_SUM), "bad dtype",
                  "dtype");
    expect_einval(gx_allreduce(comm, a, b, 4, GX_FLOAT32, (enum gx_redop)-3), "bad op", "op");
    expect_einval(gx_allreduce(comm, a, b, SIZE_MAX / 2, GX_FLOAT32, GX_SUM), "overflow",
                  "overflows");
    expect_einval(gx_allgather(comm, a, b, SIZE_MAX / 4 / (size_t)n + 1, GX_FLOAT32),
                  "allgather overflow", "overflows");
    expect_einval(gx_allreduce(comm, a, a + 1, 4, GX_FLOAT32, GX_SUM), "overlap", "overlap");
    expect_einval(gx_alltoall(comm, a, a + 1, 2, GX_FLOAT32), "alltoall overlap", "overlap");
    if (n > 1)
        expect_einval(gx_allgather(comm, b + 1, b, 2, GX_FLOAT32), "allgather wrong in-place",
                      "overlap");
    expect_einval(gx_broadcast(comm, a, b, 4, GX_FLOAT32, n), "root too big", "root");
    expect_einval(gx_reduce(comm, a, b, 4, GX_FLOAT32, GX_SUM, -1), "negative root", "root");
    expect_einval(gx_gather(comm, a, NULL, 4, GX_FLOAT32, me), "NULL gather recvbuf at root",
                  "recvbuf");
    expect_einval(gx_scatter(comm, NULL, b, 4, GX_FLOAT32, me), "NULL scatter sendbuf at root",
                  "sendbuf");
    expect_einval(gx_iallreduce(comm, a, b, 4, GX_FLOAT32, GX_SUM, NULL), "NULL req", "req");
    (void)req;
    /* Still usable, and nothing was sent by the bad calls. */
    for (int i = 0; i < 64; i++)
        a[i] = (float)(me + i);
    CHECK(gx_allreduce(comm, a, b, 64, GX_FLOAT32, GX_SUM) == GX_OK, "allreduce after bad input");
    for (int i = 0; i < 64; i++)
        CHECK(b[i] == (float)(n * (n - 1) / 2 + n * i), "element %d wrong after bad input", i);
    /* sendbuf is ignored (may be NULL) on ranks other than the root */
    CHECK(gx_broadcast(comm, me == n - 1 ? a : NULL, b, 4, GX_FLOAT32, n - 1) == GX_OK,
          "broadcast with NULL sendbuf on non-roots");
    CHECK(b[3] == (float)(n - 1 + 3), "broadcast result");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void mode_bench(struct gx_comm *comm, int argc, char **argv)
{
    static const size_t defaults[] = { 4, 4096, 65536, 1 << 20, 16 << 20, 64 << 20 };
    int nsizes = argc > 0 ? argc : 6;
    for (int s = 0; s < nsizes; s++) {
        size_t bytes = argc > 0 ? (size_t)atoll(argv[s]) : defaults[s];
        size_t count = bytes / 4 ? bytes / 4 : 1;
        float *in = calloc(count, 4), *out = calloc(count, 4);
        int iters = bytes <= 65536 ? 30 : bytes <= (1 << 20) ? 40 : 10;
        double t[200];
        for (int w = 0; w < 3; w++)
            CHECK(gx_allreduce(comm, in, out, count, GX_FLOAT32, GX_SUM) == GX_OK, "warm-up");
        /* Rounds of back-to-back calls (as nccl-tests): a barrier before
         * each call would add the bootstrap's skew to every sample. */
        int per = bytes <= 65536 ? 20 : 1;
        for (int i = 0; i < iters; i++) {
            gx_barrier(comm);
            double t0 = now_s();
            for (int k = 0; k < per; k++)
                CHECK(gx_allreduce(comm, in, out, count, GX_FLOAT32, GX_SUM) == GX_OK, "bench");
            t[i] = (now_s() - t0) / per;
        }
        qsort(t, (size_t)iters, sizeof(double), cmp_double);
        double med = t[iters / 2];
        if (me == 0)
            printf("%12zu bytes  %10.1f us  busbw %7.3f GB/s\n", count * 4, med * 1e6,
                   (double)count * 4 / med * 2 * (nranks - 1) / nranks / 1e9);
        free(in);
        free(out);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: coll_check matrix|random|interleave|mismatch|dead|badinput ...\n");
        return 2;
    }
    struct gx_comm *comm;
    int rc = gx_comm_init_env(&comm);
    if (rc != GX_OK) {
        fprintf(stderr, "init: %s: %s\n", gx_strerror(rc), gx_last_error());
        return 1;
    }
    me = gx_comm_rank(comm);
    nranks = gx_comm_size(comm);
    double t0 = now_s();
    const char *mode = argv[1];
    if (!strcmp(mode, "matrix"))
        mode_matrix(comm, argc - 2, argv + 2);
    else if (!strcmp(mode, "random"))
        mode_random(comm, argc > 2 ? (uint32_t)atoi(argv[2]) : 1);
    else if (!strcmp(mode, "interleave"))
        mode_interleave(comm, argc > 2 ? (uint32_t)atoi(argv[2]) : 1,
                        argc > 3 ? atoi(argv[3]) : 200, argc > 4 ? atoi(argv[4]) : 8);
    else if (!strcmp(mode, "mismatch")) {
        mode_mismatch(comm, argc > 2 ? argv[2] : "count");
        gx_comm_destroy(comm);
        return 0;
    } else if (!strcmp(mode, "dead"))
        mode_dead(comm);
    else if (!strcmp(mode, "badinput"))
        mode_badinput(comm);
    else if (!strcmp(mode, "bench"))
        mode_bench(comm, argc - 2, argv + 2);
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    rc = gx_comm_finalize(comm);
    CHECK(rc == GX_OK, "finalize: %s", gx_strerror(rc));
    gx_comm_destroy(comm);
    if (me == 0)
        printf("PASS %s: %ld checks on %d ranks in %.1f s\n", mode, checks, nranks,
               now_s() - t0);
    return 0;
}
