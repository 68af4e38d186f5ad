/*
 * coll_schedule.c - building a collective's schedule: the cs_* calls the
 * algorithm files use to append send, receive, reduce, copy and average
 * steps with their dependencies (schedule.h), and scratch space from the
 * communicator's pool (coll_scratch.c). Runs while the op is being issued,
 * before the engine sees it, so it takes no lock.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/schedule/schedule.h"

/* ---- schedule builder ---------------------------------------------------- */

static int add_step(struct coll_op *op, int kind, int d0, int d1, int d2)
{
    /* Planning memory is bounded: past COLL_MAX_STEPS the build stops
     * growing (the later calls of a huge loop cost a compare each) and the
     * op fails with GX_ENOMEM; coll_issue names the count. */
    if (op->nsteps >= COLL_MAX_STEPS) {
        if (op->build_status == GX_OK)
            op->build_status = GX_ENOMEM;
        op->steps_capped = true;
        return op->nsteps - 1; /* the last step is overwritten harmlessly */
    }
    if (op->nsteps == op->cap) {
        int cap = op->cap ? op->cap * 2 : 32;
        struct coll_step *s = realloc(op->steps, (size_t)cap * sizeof(*s));
        if (!s) {
            op->build_status = GX_ENOMEM;
            return 0; /* step 0 is overwritten harmlessly; build_status fails the op */
        }
        op->steps = s;
        op->cap = cap;
    }
    int i = op->nsteps++;
    struct coll_step *s = &op->steps[i];
    memset(s, 0, sizeof(*s));
    s->kind = (uint8_t)kind;
    s->dep[0] = d0;
    s->dep[1] = d1;
    s->dep[2] = d2;
    return i;
}

int cs_send(struct coll_op *op, int peer, uint32_t msg, const void *buf, size_t bytes, int d0,
            int d1, int d2)
{
    int i = add_step(op, CS_SEND, d0, d1, d2);
    op->steps[i].peer = peer;
    op->steps[i].msg = msg;
    op->steps[i].src = buf;
    op->steps[i].len = bytes;
    if (msg > COLL_MSG_MAX && msg != UINT32_MAX)
        op->build_status = GX_EUNSUPPORTED;
    return i;
}

int cs_recv(struct coll_op *op, int peer, uint32_t msg, void *buf, size_t bytes, int d0, int d1,
            int d2)
{
    int i = add_step(op, CS_RECV, d0, d1, d2);
    op->steps[i].peer = peer;
    op->steps[i].msg = msg;
    op->steps[i].dst = buf;
    op->steps[i].len = bytes;
    if (msg > COLL_MSG_MAX && msg != UINT32_MAX)
        op->build_status = GX_EUNSUPPORTED;
    return i;
}

int cs_reduce(struct coll_op *op, void *inout, const void *in, size_t count, int d0, int d1,
              int d2)
{
    int i = add_step(op, CS_REDUCE, d0, d1, d2);
    op->steps[i].dst = inout;
    op->steps[i].src = in;
    op->steps[i].len = count;
    return i;
}

int cs_reduce3(struct coll_op *op, void *out, const void *a, const void *b, size_t count, int d0,
               int d1, int d2)
{
    int i = add_step(op, CS_REDUCE3, d0, d1, d2);
    op->steps[i].dst = out;
    op->steps[i].src = a;
    op->steps[i].src2 = b;
    op->steps[i].len = count;
    return i;
}

int cs_copy(struct coll_op *op, void *dst, const void *src, size_t bytes, int d0, int d1, int d2)
{
    int i = add_step(op, CS_COPY, d0, d1, d2);
    op->steps[i].dst = dst;
    op->steps[i].src = src;
    op->steps[i].len = bytes;
    return i;
}

int cs_avg(struct coll_op *op, void *buf, size_t count, int d0, int d1, int d2)
{
    int i = add_step(op, CS_AVG, d0, d1, d2);
    op->steps[i].dst = buf;
    op->steps[i].len = count;
    return i;
}

int cs_nop(struct coll_op *op, int d0, int d1, int d2)
{
    return add_step(op, CS_NOP, d0, d1, d2);
}

int cs_flag_set(struct coll_op *op, uint64_t *flag, uint64_t value, int d0, int d1, int d2)
{
    int i = add_step(op, CS_FLAG_SET, d0, d1, d2);
    op->steps[i].dst = flag;
    op->steps[i].len = value;
    return i;
}

int cs_flag_wait(struct coll_op *op, const uint64_t *first, size_t stride, uint64_t value, int d0,
                 int d1, int d2)
{
    int i = add_step(op, CS_FLAG_WAIT, d0, d1, d2);
    op->steps[i].src = first;
    op->steps[i].msg = (uint32_t)stride;
    op->steps[i].len = value;
    op->steps[i].peer = -1;
    return i;
}

int cs_flag_wait_one(struct coll_op *op, const uint64_t *flag, int rank, uint64_t value, int d0,
                     int d1, int d2)
{
    int i = cs_flag_wait(op, flag, 0, value, d0, d1, d2);
    op->steps[i].peer = rank;
    return i;
}

void cs_gate(struct coll_op *op, int from, int dep)
{
    if (dep < 0)
        return;
    for (int i = from; i < op->nsteps; i++) {
        int *d = op->steps[i].dep;
        if (d[0] < 0 && d[1] < 0 && d[2] < 0)
            d[0] = dep;
    }
}

int cs_join(struct coll_op *op, int from)
{
    int n = op->nsteps - from;
    if (n <= 0)
        return -1;
    /* Steps no later step depends on (the leaves): when they are done, so
     * is everything they depend on. */
    bool *needed = calloc((size_t)n, sizeof(bool));
    if (!needed) {
        op->build_status = GX_ENOMEM;
        return -1;
    }
    for (int i = from; i < op->nsteps; i++)
        for (int k = 0; k < CS_MAX_DEPS; k++)
            if (op->steps[i].dep[k] >= from)
                needed[op->steps[i].dep[k] - from] = true;
    int join = -1, end = op->nsteps, pending[2], np = 0;
    for (int i = from; i < end; i++) {
        if (needed[i - from])
            continue;
        pending[np++] = i;
        if (np == 2) {
            join = cs_nop(op, join, pending[0], pending[1]);
            np = 0;
        }
    }
    if (np)
        join = cs_nop(op, join, pending[0], -1);
    free(needed);
    return join;
}

void *cs_scratch(struct coll_op *op, size_t bytes)
{
    if (op->scratch)
        coll_scratch_give(op->pool, op->scratch, op->scratch_size);
    /* More than the machine's memory can never be had: do not even ask
     * malloc (a sanitizer's allocator aborts on such a size). */
    static long long ram;
    if (!ram)
        ram = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
    op->scratch = ram > 0 && (double)bytes > (double)ram
                      ? NULL
                      : coll_scratch_take(op->pool, bytes ? bytes : 1, &op->scratch_size);
    if (!op->scratch) {
        op->build_status = GX_ENOMEM;
        op->scratch_failed = bytes;
    }
    return op->scratch;
}

