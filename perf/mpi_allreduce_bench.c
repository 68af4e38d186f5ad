/*
 * mpi_allreduce_bench - MPI_Allreduce timed exactly as gx-perf times
 * gx_allreduce, for perf/compare.sh: same flags (-b -e -f -i -n -w -d -o -z
 * -c -a), same per-size warm-up, barrier, timing loop, rank averaging,
 * busbw = algbw * 2(n-1)/n, and the same table (out-of-place with separate
 * buffers, in-place with MPI_IN_PLACE) or CSV rows (--csv).
 *
 *   mpirun -np 2 --mca btl self,vader build/bin/mpi_allreduce_bench -b 4K -e 64M -f 4
 *
 * -z 0 issues MPI_Iallreduce with at most 64 in flight (gx-perf's window),
 * -z 1 calls MPI_Allreduce. Datatypes: the ones MPI has (no half, bfloat16);
 * ops: sum prod min max (MPI has no avg).
 */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64

struct dtype {
    const char *name;
    MPI_Datatype mpi;
    size_t size;
    int is_unsigned;
};

struct opts {
    size_t minb, maxb, stepb, factor;
    int iters, warmup, blocking, check, average, csv;
    const struct dtype *dt;
    MPI_Op op;
    const char *opname;
};

static int rank, nranks;

static void fail_usage(const char *flag, const char *value)
{
    if (rank == 0)
        fprintf(stderr, "mpi_allreduce_bench: %s: bad value '%s'\n", flag, value);
    MPI_Finalize();
    exit(2);
}

static size_t parse_size(const char *flag, const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno)
        fail_usage(flag, s);
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end)
        fail_usage(flag, s);
    return (size_t)v;
}

static int parse_int(const char *flag, const char *s, int lo, int hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi)
        fail_usage(flag, s);
    return (int)v;
}

static void parse(int argc, char **argv, struct opts *o)
{
    static const struct dtype dts[] = {
        { "float", MPI_FLOAT, 4, 0 },     { "double", MPI_DOUBLE, 8, 0 },
        { "int8", MPI_INT8_T, 1, 0 },     { "uint8", MPI_UINT8_T, 1, 1 },
        { "int32", MPI_INT32_T, 4, 0 },   { "uint32", MPI_UINT32_T, 4, 1 },
        { "int64", MPI_INT64_T, 8, 0 },   { "uint64", MPI_UINT64_T, 8, 1 },
    };
    *o = (struct opts){ .minb = 32 << 20, .maxb = 32 << 20, .stepb = 1 << 20, .factor = 1,
                        .iters = 20, .warmup = 5, .check = 1, .average = 1, .dt = &dts[0],
                        .op = MPI_SUM, .opname = "sum" };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--csv") == 0) {
            o->csv = 1;
            continue;
        }
        if (!v || a[0] != '-' || strlen(a) != 2)
            fail_usage("argument", a);
        i++;
        switch (a[1]) {
        case 'b': o->minb = parse_size(a, v); break;
        case 'e': o->maxb = parse_size(a, v); break;
        case 'i': o->stepb = parse_size(a, v); break;
        case 'f': o->factor = (size_t)parse_int(a, v, 1, 1 << 20); break;
        case 'n': o->iters = parse_int(a, v, 1, 100000000); break;
        case 'w': o->warmup = parse_int(a, v, 0, 100000000); break;
        case 'z': o->blocking = parse_int(a, v, 0, 1); break;
        case 'c': o->check = parse_int(a, v, 0, 1000000); break;
        case 'a': o->average = parse_int(a, v, 0, 3); break;
        case 'd': {
            size_t k;
            for (k = 0; k < sizeof(dts) / sizeof(dts[0]); k++)
                if (strcmp(v, dts[k].name) == 0)
                    break;
            if (k == sizeof(dts) / sizeof(dts[0]))
                fail_usage(a, v);
            o->dt = &dts[k];
            break;
        }
        case 'o':
            if (strcmp(v, "sum") == 0) o->op = MPI_SUM;
            else if (strcmp(v, "prod") == 0) o->op = MPI_PROD;
            else if (strcmp(v, "min") == 0) o->op = MPI_MIN;
            else if (strcmp(v, "max") == 0) o->op = MPI_MAX;
            else fail_usage(a, v);
            o->opname = v;
            break;
        default: fail_usage("option", a);
        }
    }
}

static const struct dtype *cur_dt;

/* Small integers, as gx-perf's sum pattern: exact in every accumulation order. */
static double value(int r, size_t g)
{
    double v = (double)((5 * (size_t)r + 3 * g + g / 512) % 9);
    return cur_dt->is_unsigned ? v : v - 4;
}

static void store(void *buf, size_t j, const struct dtype *dt, double v)
{
    if (dt->mpi == MPI_FLOAT) ((float *)buf)[j] = (float)v;
    else if (dt->mpi == MPI_DOUBLE) ((double *)buf)[j] = v;
    else if (dt->size == 1) ((int8_t *)buf)[j] = (int8_t)v;
    else if (dt->size == 4) ((int32_t *)buf)[j] = (int32_t)v;
    else ((int64_t *)buf)[j] = (int64_t)v;
}

static double load(const void *buf, size_t j, const struct dtype *dt)
{
    if (dt->mpi == MPI_FLOAT) return ((const float *)buf)[j];
    if (dt->mpi == MPI_DOUBLE) return ((const double *)buf)[j];
    if (dt->mpi == MPI_UINT8_T) return ((const uint8_t *)buf)[j];
    if (dt->size == 1) return ((const int8_t *)buf)[j];
    if (dt->mpi == MPI_UINT32_T) return ((const uint32_t *)buf)[j];
    if (dt->size == 4) return ((const int32_t *)buf)[j];
    if (dt->mpi == MPI_UINT64_T) return (double)((const uint64_t *)buf)[j];
    return (double)((const int64_t *)buf)[j];
}

static void fill(void *buf, size_t count, const struct dtype *dt)
{
    for (size_t j = 0; j < count; j++)
        store(buf, j, dt, value(rank, j));
}

static long long check(const void *buf, size_t count, const struct opts *o)
{
    long long wrong = 0;
    for (size_t j = 0; j < count; j++) {
        double want = value(0, j);
        for (int r = 1; r < nranks; r++) {
            double v = value(r, j);
            if (o->op == MPI_SUM) want += v;
            else if (o->op == MPI_PROD) want *= v;
            else if (o->op == MPI_MIN) want = v < want ? v : want;
            else want = v > want ? v : want;
        }
        double tmp[1];
        store(tmp, 0, o->dt, want); /* wrap to the type */
        if (load(buf, j, o->dt) != load(tmp, 0, o->dt))
            wrong++;
    }
    return wrong;
}

static void run(const struct opts *o, const void *s, void *r, size_t count, int n)
{
    if (o->blocking) {
        for (int i = 0; i < n; i++)
            MPI_Allreduce(s, r, (int)count, o->dt->mpi, o->op, MPI_COMM_WORLD);
        return;
    }
    MPI_Request reqs[WINDOW];
    for (int i = 0; i < n + WINDOW; i++) {
        if (i >= WINDOW && i - WINDOW < n)
            MPI_Wait(&reqs[i % WINDOW], MPI_STATUS_IGNORE);
        if (i < n)
            MPI_Iallreduce(s, r, (int)count, o->dt->mpi, o->op, MPI_COMM_WORLD,
                           &reqs[i % WINDOW]);
    }
}

/* Time per op in seconds as -a asks (0 rank 0, 1 mean, 2 min, 3 max). */
static double measure(const struct opts *o, char *sendbuf, char *recvbuf, size_t count,
                      int in_place, long long *wrong)
{
    const void *s = in_place ? MPI_IN_PLACE : sendbuf;
    void *r = recvbuf;
    fill(in_place ? recvbuf : sendbuf, count, o->dt);
    run(o, s, r, count, o->warmup);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    run(o, s, r, count, o->iters);
    double t = (MPI_Wtime() - t0) / o->iters, out = t;
    long long w = 0;
    for (int k = 0; k < o->check; k++) {
        fill(in_place ? recvbuf : sendbuf, count, o->dt);
        run(o, s, r, count, 1);
        w += check(recvbuf, count, o);
    }
    if (o->average == 0)
        MPI_Bcast(&out, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    else
        MPI_Allreduce(&t, &out, 1, MPI_DOUBLE,
                      o->average == 1 ? MPI_SUM : o->average == 2 ? MPI_MIN : MPI_MAX,
                      MPI_COMM_WORLD);
    if (o->average == 1)
        out /= nranks;
    MPI_Allreduce(&w, wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return out;
}

static void print_result(const struct opts *o, size_t size, size_t count, const char *placement,
                         double t, long long wrong, double *bw_sum, int *bw_n)
{
    double algbw = (double)count * o->dt->size / 1e9 / t;
    double busbw = algbw * 2.0 * (nranks - 1) / nranks;
    *bw_sum += busbw;
    (*bw_n)++;
    if (rank != 0)
        return;
    if (o->csv) {
        printf("mpi_allreduce,%d,,%zu,%zu,%s,%s,-1,%s,%.6g,%.6g,%.6g,", nranks, size, count,
               o->dt->name, o->opname, placement, t * 1e6, algbw, busbw);
        if (o->check)
            printf("%lld", wrong);
        printf("\n");
        return;
    }
    double us = t * 1e6;
    char ts[32];
    snprintf(ts, sizeof(ts), us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
    if (o->check)
        printf("  %7s  %6.2f  %6.2f  %5g", ts, algbw, busbw, (double)wrong);
    else
        printf("  %7s  %6.2f  %6.2f  %5s", ts, algbw, busbw, "N/A");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    struct opts o;
    parse(argc, argv, &o);
    cur_dt = o.dt;
    char *sendbuf = NULL, *recvbuf = NULL;
    if (posix_memalign((void **)&sendbuf, 4096, o.maxb + 64) ||
        posix_memalign((void **)&recvbuf, 4096, o.maxb + 64)) {
        fprintf(stderr, "mpi_allreduce_bench: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sendbuf, 0, o.maxb + 64);
    memset(recvbuf, 0, o.maxb + 64);
    int version_len;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(version, &version_len);
    if (rank == 0 && o.csv) {
        printf("collective,ranks,nodes,size,count,type,redop,root,placement,time_us,algbw_gbs,"
               "busbw_gbs,wrong\n");
    } else if (rank == 0) {
        char *nl = strchr(version, '\n');
        if (nl)
            *nl = '\0';
        printf("# mpi_allreduce_bench: nRanks %d minBytes %zu maxBytes %zu warmup iters: %d "
               "iters: %d blocking: %d\n# %s\n#\n", nranks, o.minb, o.maxb, o.warmup, o.iters,
               o.blocking, version);
        printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
               "in-place          \n", "", "", "", "", "");
        printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
               "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
               "algbw", "busbw", "#wrong");
        printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
               "(GB/s)", "");
    }
    double bw_sum = 0;
    int bw_n = 0;
    long long wrong_total = 0;
    for (size_t size = o.minb;;) {
        size_t count = size / o.dt->size;
        if (count > (size_t)INT32_MAX)
            break;
        if (rank == 0 && !o.csv)
            printf("%12zu  %12zu  %8s  %6s  %6d", count * o.dt->size, count, o.dt->name,
                   o.opname, -1);
        for (int in_place = 0; in_place < 2; in_place++) {
            long long wrong = 0;
            double t = measure(&o, sendbuf, recvbuf, count, in_place, &wrong);
            wrong_total += wrong;
            print_result(&o, count * o.dt->size, count, in_place ? "in-place" : "out-of-place",
                         t, wrong, &bw_sum, &bw_n);
        }
        if (rank == 0 && !o.csv)
            printf("\n");
        fflush(stdout);
        size_t next = o.factor > 1 ? (size ? size * o.factor : 1) : size + o.stepb;
        if (next <= size || next > o.maxb)
            break;
        size = next;
    }
    if (rank == 0 && !o.csv)
        printf("# Out of bounds values : %lld %s\n# Avg bus bandwidth    : %g \n#\n", wrong_total,
               wrong_total ? "FAILED" : "OK", bw_n ? bw_sum / bw_n : 0);
    MPI_Finalize();
    free(sendbuf);
    free(recvbuf);
    return wrong_total ? 1 : 0;
}
