/*
 * sim_engine.h - runs a plan (sim_plan.h) on SimGrid over gx-sim's machine
 * (sim_platform.h) and returns the collective's simulated time.
 *
 * One actor per rank on its GPU's host executes its steps in dependency
 * order, as the runtime's engine does: a send or receive is posted as soon
 * as its dependencies are done (an asynchronous put or get on the mailbox
 * of its sender and receiver pair; each pair's messages are posted in
 * message-number order on both sides, so the mailbox's first-come
 * matching pairs a send with its own receive); a reduction, copy or
 * average runs on the actor (its memory traffic at mem_gbytes) while its
 * posted messages move; the time is when the last rank finishes.
 * A second actor per rank, its transmit queue, puts the rank's sends on
 * the wire: a pair's one after the other (a tcp stream, a queue pair),
 * whatever the rank's actor is doing. The links carry no latency; a
 * receive's dependants wait its pair's latency after its last byte, so a
 * pair's messages follow each other without gaps. --msg-us charges each
 * send that much of its rank's time.
 *
 * SimGrid runs once per process, so each run is a child process; the
 * parent keeps the plan and reads the answer back.
 *
 * Owns: the simulation. Must not touch: the plan's builders.
 */
#ifndef GX_SIM_ENGINE_H
#define GX_SIM_ENGINE_H

#include <stddef.h>

#include "tools/gx-sim/sim_plan.h"
#include "tools/gx-sim/sim_platform.h"

/* Simulate `plan` on `m`: 0 and *seconds, or -1 with why in err. */
int sim_engine_run(const struct sim_plan *plan, const struct sim_machine *m, double *seconds,
                   char *err, size_t errlen);

#endif
