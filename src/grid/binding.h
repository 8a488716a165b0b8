/* binding.h -- where the ranks' OpenMP threads run: each rank's threads
 * against the physical cores of its affinity mask (hardware threads of one
 * core count once: cpu.h), and a node's ranks together against the cores
 * they share.
 *
 * At start-up rank 0 warns when threads would share a core: once for each
 * kind of mismatch, listing the ranks (and nodes) it concerns, with the
 * launcher option that fixes it (docs/performance.md, "Threads and cores").
 * Nothing is changed: the run goes on as launched. */
#ifndef TRIAD_BINDING_H
#define TRIAD_BINDING_H

#include "topo.h"

struct binding {
    int threads;       /* this rank's OpenMP threads */
    int cpus, cores;   /* its usable CPUs (cpu_usable) and their physical cores */
    double cores_used; /* the cores its threads get: each core it may run on shared with the node's other
                          ranks on it in proportion to their threads per core, at most one per thread */
};

/* This rank's binding, and the warnings (rank 0 prints them).
 * Collective over the world. */
void binding_check(struct binding *b, const struct grid *g);

#endif
