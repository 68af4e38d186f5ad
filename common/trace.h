/*
 * trace.h - the timeline (GX_TRACE=DIR): events every layer records into one
 * bounded ring per process, written in the background as Chrome/Perfetto
 * trace-event JSON, DIR/gx-trace-r<world rank>.json. `gx-info --trace DIR`
 * merges the ranks' files into one (a track per rank). docs/observability.md
 * describes what is recorded and how to read it.
 *
 * It lives in common/ because every layer records into it (fabric posts,
 * the engine's steps, DDP buckets): calls into it always go downward.
 *
 * Owns: the ring, the writer thread and the files. Records hold only static
 * text (names, categories, argument keys must outlive the process's use of
 * the tracer: string literals and the tables of names). With tracing off a
 * call site costs one relaxed load and a branch (gx_trace_on()).
 *
 * The file is valid JSON after every write: events are written before a
 * closing tail, and the next write starts over that tail. A rank that is
 * killed leaves a file valid up to its last write (a write every
 * GX_TRACE_FLUSH_MS, and at failure, finalize and exit).
 */
#ifndef GX_COMMON_TRACE_H
#define GX_COMMON_TRACE_H

#include <stdbool.h>
#include <stdint.h>

/* The tracks of one rank (thread ids in the JSON; their names are written
 * as metadata). */
enum gx_trace_lane {
    GX_LANE_CALLS = 1,  /* collectives and point-to-point calls */
    GX_LANE_STEPS,      /* the schedule's steps: send, receive, reduce, copy */
    GX_LANE_WIRE,       /* provider posts and completions */
    GX_LANE_GPU,        /* staging copies and kernels */
    GX_LANE_DDP,        /* DDP buckets: ready, launched, done */
    GX_LANE_BACKWARD,   /* the backward pass a DDP step overlapped */
    GX_LANE_EVENTS,     /* stalls, faults, failures */
    GX_LANE_COUNT
};

enum gx_trace_kind {
    GX_TR_SPAN = 1,  /* a complete event ("X"): spans on one lane nest */
    GX_TR_ASYNC,     /* an async span ("b"/"e"): may overlap others on its lane */
    GX_TR_INSTANT,   /* a point in time ("i") */
};

#define GX_TRACE_ARGS 6

/* One event. Every string is static text (see above); a NULL key ends the
 * integer arguments. */
struct gx_trace_rec {
    uint64_t ts;                    /* gx_now_ns() at its start */
    uint64_t dur;                   /* spans: ns; instants: 0 */
    const char *name;
    const char *cat;
    const char *key[GX_TRACE_ARGS]; /* integer arguments */
    int64_t val[GX_TRACE_ARGS];
    const char *skey, *sval;        /* one text argument, or NULL */
    uint8_t lane;                   /* enum gx_trace_lane */
    uint8_t kind;                   /* enum gx_trace_kind */
};

/* Nonzero while a trace is being taken (read with gx_trace_on()). */
extern int gx_trace_active;

static inline bool gx_trace_on(void)
{
    return __builtin_expect(__atomic_load_n(&gx_trace_active, __ATOMIC_RELAXED) != 0, 0);
}

/** True when GX_TRACE is set (a trace will be taken at the world
 *  communicator's init). */
bool gx_trace_wanted(void);

/** Start tracing when GX_TRACE names a directory (first call only; later
 *  calls return false at once): open DIR/gx-trace-r<rank>.json through the
 *  safe-open helper and start the writer. `host` names the rank's process
 *  track. A failure to open is logged and leaves tracing off. True for the
 *  first call, tracing or not (its communicator's rank 0 is the trace's
 *  clock: the caller measures offsets to it, on every rank alike). */
bool gx_trace_start(int world_rank, int world_size, const char *host);

/** This process's clock minus rank 0's (ns), measured over the bootstrap
 *  with a round trip of `rtt_ns`; applied to every time written. */
void gx_trace_set_clock_offset(int64_t offset_ns, uint64_t rtt_ns);

/** Record one event (copied; dropped and counted when the ring is full). */
void gx_trace_emit(const struct gx_trace_rec *rec);

/** Write what the ring holds now (at finalize and failure; `why` goes into
 *  the file's metadata). Safe from any thread; a no-op when off. */
void gx_trace_flush(const char *why);

/** Events recorded and dropped so far (tests and gx-info). */
void gx_trace_counts(uint64_t *recorded, uint64_t *dropped);

/** gx_now_ns(), for the inline helper below. */
uint64_t gx_trace_now(void);

/* Convenience for the common shape: a point in time with two arguments. */
static inline void gx_trace_instant(enum gx_trace_lane lane, const char *cat, const char *name,
                                    const char *k0, int64_t v0, const char *k1, int64_t v1)
{
    struct gx_trace_rec r = { .ts = gx_trace_now(), .name = name, .cat = cat,
                              .key = { k0, k1 }, .val = { v0, v1 }, .lane = (uint8_t)lane,
                              .kind = GX_TR_INSTANT };
    gx_trace_emit(&r);
}

#endif
