/*
 * sim_opts.h - gx-sim's command line (sim_opts.c): what to simulate and
 * the machine to simulate it on.
 */
#ifndef GX_SIM_OPTS_H
#define GX_SIM_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "collectives/algorithms/algo.h"
#include "tools/gx-sim/sim_platform.h"

#define SIM_MAX_LIST 32

/* An algorithm to run: hier with its rails' algorithm (AUTO: the cost
 * model's pick for the size), the others with rail COLL_ALGO_AUTO. */
struct sim_algo {
    enum coll_algo algo, rail;
};

struct sim_opts {
    int gpus[SIM_MAX_LIST], ngpus;
    enum coll_kind colls[COLL_KIND_COUNT];
    int ncolls;
    struct sim_algo algos[SIM_MAX_LIST];
    int nalgos;               /* 0: every algorithm that serves the collective */
    size_t sizes[64];
    int nsizes;
    bool regret;
    bool model_host;          /* --model-node host: the model keeps its host defaults */
    size_t max_steps;
    struct sim_machine machine;
};

/* Parse argv into o: 0, 1 after --help (printed), or -1 after a message on
 * stderr naming the argument. */
int sim_opts_parse(struct sim_opts *o, int argc, char **argv);

/* "ring", "hier/rhd" */
void sim_algo_name(const struct sim_algo *a, char *buf, size_t len);

#endif
