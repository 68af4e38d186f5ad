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
 *       --device both|send|recv|stream   buffers in CUDA device memory
 *                         (GX_CUDA_LIB): both sides, only one side (out of
 *                         place only), or both with the *_stream forms
 *   coll_check random SEED      float all-reduce of non-integer values: within
 *                               the accumulation bound and bitwise equal on
 *                               every rank
 *   coll_check interleave SEED  random outstanding non-blocking collectives,
 *                               waited in a different random order per rank
 *   coll_check mismatch WHAT    rank 1 calls something else (count, kind,
 *                               dtype, op, root, skip): every rank must fail
 *                               with GX_EMISMATCH
 *   coll_check dead [MS]        rank 2 dies in the middle of all-reduces (MS:
 *                               MS milliseconds into its 6th, in flight): the
 *                               others fail naming it within 2 x GX_TIMEOUT
 *   coll_check badinput         caller errors fail locally with GX_EINVAL
 *                               naming the argument; the comm still works
 *   coll_check bench [BYTES..]  float32 sum all-reduce: median time and
 *                               bus bandwidth per size (GX_ALGO applies)
 * Integer inputs are exact; float inputs are small integers, so sums and
 * products are exact whatever the order (the random mode covers rounding).
 */
#include "coll_check.h"
#include "../../gpu/devmem.h"

int me = -1, nranks = 0;
long checks = 0;
const char *const kind_names[NKINDS] = { "allreduce", "broadcast", "reduce", "allgather",
                                         "reduce_scatter", "gather", "scatter", "alltoall" };

/* ---- device buffers (--device) ------------------------------------------------
 * The case's whole host region (guards included) is mirrored in device
 * memory; the collective runs on the device pointers (both, or only the send
 * or only the receive side, or both with the stream form) and the region is
 * copied back before the usual checks. */
enum dev_mode { DEV_NONE, DEV_BOTH, DEV_SEND, DEV_RECV, DEV_STREAM };
static enum dev_mode dev_mode;
static struct devmem dm;
static void *dev_stream; /* --device stream: a non-blocking stream of the test's own */

static int call_kind(struct gx_comm *comm, int kind, const void *send, void *recv, size_t count,
                     enum gx_datatype t, enum gx_redop op, int root)
{
    if (dev_mode == DEV_STREAM) {
        switch (kind) {
        case ALLREDUCE: return gx_allreduce_stream(comm, send, recv, count, t, op, dev_stream);
        case BROADCAST: return gx_broadcast_stream(comm, send, recv, count, t, root, dev_stream);
        case REDUCE: return gx_reduce_stream(comm, send, recv, count, t, op, root, dev_stream);
        case ALLGATHER: return gx_allgather_stream(comm, send, recv, count, t, dev_stream);
        case REDUCE_SCATTER:
            return gx_reduce_scatter_stream(comm, send, recv, count, t, op, dev_stream);
        case ALLTOALL: return gx_alltoall_stream(comm, send, recv, count, t, dev_stream);
        default: break; /* gather, scatter: no stream form; the blocking one */
        }
    }
    switch (kind) {
    case ALLREDUCE: return gx_allreduce(comm, send, recv, count, t, op);
    case BROADCAST: return gx_broadcast(comm, send, recv, count, t, root);
    case REDUCE: return gx_reduce(comm, send, recv, count, t, op, root);
    case ALLGATHER: return gx_allgather(comm, send, recv, count, t);
    case REDUCE_SCATTER: return gx_reduce_scatter(comm, send, recv, count, t, op);
    case GATHER: return gx_gather(comm, send, recv, count, t, root);
    case SCATTER: return gx_scatter(comm, send, recv, count, t, root);
    default: return gx_alltoall(comm, send, recv, count, t);
    }
}

static int call_on_device(struct gx_comm *comm, int kind, unsigned char *region, size_t len,
                          const void *send, void *recv, size_t count, enum gx_datatype t,
                          enum gx_redop op, int root)
{
    if (dev_mode == DEV_NONE)
        return call_kind(comm, kind, send, recv, count, t, op, root);
    unsigned long long d = 0;
    CHECK(dm.alloc(&d, len) == 0, "device region");
    if (dev_mode == DEV_STREAM && kind != GATHER && kind != SCATTER) {
        /* The input arrives by an asynchronous copy on the stream: the call
         * must wait for it; the result must be waited for on the stream. */
        CHECK(dm.htod_async(d, region, len, dev_stream) == 0, "async input");
        unsigned char *dr = (unsigned char *)(uintptr_t)d;
        int rc = call_kind(comm, kind, dr + ((const unsigned char *)send - region),
                           dr + ((unsigned char *)recv - region), count, t, op, root);
        CHECK(dm.stream_sync(dev_stream) == 0 && dm.dtoh(region, d, len) == 0, "copy back");
        dm.free_(d);
        return rc;
    }
    CHECK(dm.htod(d, region, len) == 0, "device region");
    unsigned char *dr = (unsigned char *)(uintptr_t)d;
    const void *ds = send && dev_mode != DEV_RECV ? dr + ((const unsigned char *)send - region)
                                                  : send;
    void *drv = recv && dev_mode != DEV_SEND ? dr + ((unsigned char *)recv - region) : recv;
    int rc = call_kind(comm, kind, ds, drv, count, t, op, root);
    if (dev_mode != DEV_SEND) /* the result (and the guards) back for the checks */
        CHECK(dm.dtoh(region, d, len) == 0, "copy back");
    dm.free_(d);
    return rc;
}

/* ---- one matrix case ------------------------------------------------------ */

#define GUARD 64
static 
void run_case(struct gx_comm *comm, int kind, enum gx_datatype t, enum gx_redop op,
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
    if (inplace && (dev_mode == DEV_SEND || dev_mode == DEV_RECV))
        return; /* in place means one buffer: it cannot be half on the device */
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
    int rc = call_on_device(comm, kind, region, buf_n * es * 2 + 4 * GUARD, send, recv, count, t,
                            op, root);
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
static 
int parse_kinds(const char *list, bool *on)
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
static 
void mode_matrix(struct gx_comm *comm, int argc, char **argv)
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
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            const char *m = argv[++i];
            dev_mode = !strcmp(m, "both") ? DEV_BOTH : !strcmp(m, "send") ? DEV_SEND
                     : !strcmp(m, "recv") ? DEV_RECV : !strcmp(m, "stream") ? DEV_STREAM
                     : DEV_NONE;
            CHECK(dev_mode != DEV_NONE, "--device %s: expected both, send, recv or stream", m);
            if (devmem_open(&dm) != 0) {
                fprintf(stderr, "coll_check: --device: %s\n", dm.why);
                exit(77);
            }
            CHECK(dev_mode != DEV_STREAM || dm.stream_create(&dev_stream, 1) == 0, "stream");
        } else if (!strcmp(argv[i], "--roots"))
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
static 
int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static 
void mode_bench(struct gx_comm *comm, int argc, char **argv)
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
        mode_dead(comm, argc > 2 ? atol(argv[2]) : -1);
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
