/*
 * flight_merge.c - gx-info --flight DIR: read the flight-recorder dumps
 * that ranks wrote (collectives/engine/coll_flight.c documents the format),
 * group them by communicator and say where the ranks diverged: the first
 * sequence number some rank never reached, or where ranks called different
 * collectives, and what each rank was doing last.
 *
 * Owns the reading side of the dump format only; it trusts nothing in the
 * files (malformed lines are counted and skipped, symlinks refused).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/gx-info/flight_merge.h"

#define MAX_DUMPS 4096

struct fop {
    uint64_t seq, count, issued_us, ended_us;
    int root, status;
    char kind[24], dtype[16], redop[16], algo[16], state[16];
};

struct dump {
    char comm[17], name[64], host[64], reason[64];
    int rank, size, pid;
    uint64_t now_us;
    struct fop *ops;
    size_t nops;
    unsigned bad_lines;
};

static int parse_header(const char *line, struct dump *d)
{
    return sscanf(line, "comm %16s name %63s rank %d size %d world_rank %*d host %63s pid %d "
                  "now_us %" SCNu64 " capacity %*u recorded %*u reason %63s",
                  d->comm, d->name, &d->rank, &d->size, d->host, &d->pid, &d->now_us,
                  d->reason) == 8 ? 0 : -1;
}

static int read_dump(int dirfd, const char *file, struct dump *d)
{
    int fd = openat(dirfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "gx-info: %s: %s\n", file, errno == ELOOP ? "a symbolic link, skipped"
                                                                  : strerror(errno));
        return -1;
    }
    FILE *in = fdopen(fd, "r");
    if (!in) {
        close(fd);
        return -1;
    }
    char line[512];
    int rc = -1;
    memset(d, 0, sizeof(*d));
    if (fgets(line, sizeof(line), in) && strncmp(line, "# gx-flight 1", 13) == 0 &&
        fgets(line, sizeof(line), in) && parse_header(line, d) == 0 && d->size > 0 &&
        d->rank >= 0 && d->rank < d->size)
        rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), in)) {
        struct fop o;
        if (sscanf(line, "op %" SCNu64 " %23s %" SCNu64 " %15s %15s %d %15s %15s %d %" SCNu64
                   " %" SCNu64, &o.seq, o.kind, &o.count, o.dtype, o.redop, &o.root, o.algo,
                   o.state, &o.status, &o.issued_us, &o.ended_us) != 11) {
            d->bad_lines++;
            continue;
        }
        struct fop *grown = realloc(d->ops, (d->nops + 1) * sizeof(*grown));
        if (!grown) {
            rc = -1;
            break;
        }
        d->ops = grown;
        d->ops[d->nops++] = o;
    }
    fclose(in);
    if (rc != 0) {
        fprintf(stderr, "gx-info: %s is not a gx flight-recorder dump (format 1); skipped\n",
                file);
        free(d->ops);
    }
    return rc;
}

/* Ops are written in sequence order: binary search. */
static const struct fop *find_op(const struct dump *d, uint64_t seq)
{
    size_t lo = 0, hi = d->nops;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (d->ops[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->nops && d->ops[lo].seq == seq ? &d->ops[lo] : NULL;
}

static bool same_call(const struct fop *a, const struct fop *b)
{
    return strcmp(a->kind, b->kind) == 0 && a->count == b->count &&
           strcmp(a->dtype, b->dtype) == 0 && strcmp(a->redop, b->redop) == 0 &&
           a->root == b->root;
}

static void describe(FILE *out, const struct fop *o)
{
    fprintf(out, "%s #%" PRIu64 " (count %" PRIu64 " %s%s%s", o->kind, o->seq, o->count,
            o->dtype, strcmp(o->redop, "-") ? " " : "", strcmp(o->redop, "-") ? o->redop : "");
    if (o->root >= 0)
        fprintf(out, ", root %d", o->root);
    fprintf(out, ", %s)", o->state);
}

/* What each rank did last: its newest op, and its newest completed one. */
static void print_last(FILE *out, const struct dump *d)
{
    fprintf(out, "  rank %d (%s, pid %d, dumped on %s):", d->rank, d->host, d->pid, d->reason);
    if (d->nops == 0) {
        fprintf(out, " no collective recorded\n");
        return;
    }
    const struct fop *last = &d->ops[d->nops - 1];
    fprintf(out, " last ");
    describe(out, last);
    for (size_t i = d->nops; i-- > 0;) {
        const struct fop *o = &d->ops[i];
        if (strcmp(o->state, "done") == 0) {
            if (o != last) {
                fprintf(out, "; last completed ");
                describe(out, o);
            }
            fprintf(out, " %.1f s before the dump", (double)(d->now_us - o->ended_us) / 1e6);
            break;
        }
    }
    fprintf(out, "\n");
}

/* One communicator: dumps[0..n) all of it, sorted by rank. */
static int merge_comm(FILE *out, struct dump *dumps, size_t n)
{
    int size = dumps[0].size;
    fprintf(out, "communicator '%s' (%s): %d ranks, dumps from %zu\n", dumps[0].name,
            dumps[0].comm, size, n);
    if ((int)n < size) {
        fprintf(out, "  no dump from rank(s):");
        for (int r = 0, j = 0; r < size; r++) {
            if (j < (int)n && dumps[j].rank == r)
                j++;
            else
                fprintf(out, " %d", r);
        }
        fprintf(out, " (dead, hung before it could write, or GX_FLIGHT_DIR not set there)\n");
    }
    /* Compare over the sequence numbers every dump still holds. */
    uint64_t lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        if (dumps[i].nops == 0)
            continue;
        if (dumps[i].ops[0].seq > lo)
            lo = dumps[i].ops[0].seq;
        if (dumps[i].ops[dumps[i].nops - 1].seq > hi)
            hi = dumps[i].ops[dumps[i].nops - 1].seq;
    }
    int diverged = 0;
    for (uint64_t s = lo; s && s <= hi && !diverged; s++) {
        const struct fop *ref = NULL;
        bool missing = false, differ = false;
        for (size_t i = 0; i < n; i++) {
            const struct fop *o = find_op(&dumps[i], s);
            if (!o)
                missing = true;
            else if (!ref)
                ref = o;
            else if (!same_call(ref, o))
                differ = true;
        }
        if (!ref || (!missing && !differ))
            continue;
        diverged = 1;
        fprintf(out, "  first divergence at #%" PRIu64 ":\n", s);
        for (size_t i = 0; i < n; i++) {
            const struct fop *o = find_op(&dumps[i], s);
            fprintf(out, "    rank %d: ", dumps[i].rank);
            if (o)
                describe(out, o);
            else
                fprintf(out, "never entered #%" PRIu64, s);
            fprintf(out, "\n");
        }
    }
    if (!diverged)
        fprintf(out, "  all dumps agree on every collective they hold (#%" PRIu64 "..#%" PRIu64
                ")\n", lo, hi);
    for (size_t i = 0; i < n; i++)
        print_last(out, &dumps[i]);
    return diverged;
}

static int by_comm_then_rank(const void *a, const void *b)
{
    const struct dump *x = a, *y = b;
    int c = strcmp(x->comm, y->comm);
    return c ? c : (x->rank > y->rank) - (x->rank < y->rank);
}

int gx_flight_merge(const char *dir, FILE *out)
{
    DIR *dp = opendir(dir);
    if (!dp) {
        fprintf(stderr, "gx-info: --flight %s: %s\n", dir, strerror(errno));
        return 2;
    }
    struct dump *dumps = calloc(MAX_DUMPS, sizeof(*dumps));
    size_t n = 0;
    unsigned bad = 0;
    struct dirent *de;
    while (dumps && (de = readdir(dp)) && n < MAX_DUMPS) {
        if (strncmp(de->d_name, "gx-flight-", 10) != 0)
            continue;
        if (read_dump(dirfd(dp), de->d_name, &dumps[n]) == 0) {
            bad += dumps[n].bad_lines;
            n++;
        }
    }
    closedir(dp);
    if (!dumps || n == 0) {
        fprintf(stderr, "gx-info: --flight %s: no gx-flight-*.txt dumps there\n", dir);
        free(dumps);
        return 2;
    }
    qsort(dumps, n, sizeof(*dumps), by_comm_then_rank);
    int diverged = 0;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && strcmp(dumps[j].comm, dumps[i].comm) == 0; j++) {
        }
        diverged |= merge_comm(out, dumps + i, j - i);
    }
    if (bad)
        fprintf(out, "(%u malformed lines skipped)\n", bad);
    for (size_t i = 0; i < n; i++)
        free(dumps[i].ops);
    free(dumps);
    return diverged ? 1 : 0;
}
