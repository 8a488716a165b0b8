/* device_profile.h -- the time of every device operation (diag.profile_ops).
 *
 * device_profiled wraps a device table: each operation of ops.def is timed
 * on this rank (on a GPU the device is synchronised before and after each,
 * which slows it), and the products' floating-point operations are
 * counted; so are the table's roundings and 16-bit storage of a bf16/fp16
 * run (lp_round, lp_pack, lp_unpack) and its copies and zeroings.  The table says where a step's time goes that the sgemm rate
 * does not explain: norms, activations, attention, the loss, AdamW. */
#ifndef TRIAD_DEVICE_PROFILE_H
#define TRIAD_DEVICE_PROFILE_H

#include <stdio.h>

#include "device.h"

/* One operation's figures on this rank. */
struct op_profile {
    const char *name; /* as in ops.def: "matmul_forward" */
    double seconds, calls;
    double flops;     /* the products' (2 N C OC per product); 0 for the others */
};

/* A table that times k's operations and forwards everything else to k
 * (its own, static: one profiled device a process).  k must outlive it. */
const struct device *device_profiled(const struct device *k);

/* Count the operations from now on (on: 1), or not (0): the steps only,
 * so that the table adds up to their time.  Off at first. */
void device_profile_count(int on);

/* This rank's figures so far, in ops.def's order: the number of operations
 * (at most max written). */
int device_profile_get(struct op_profile *out, int max);

/* The table of figures (min, avg and max seconds over the ranks of world,
 * the share of step_seconds, calls and the products' GFLOP/s on rank 0),
 * the busiest first, then the time outside the operations; printed by rank
 * 0.  Collective over world. */
void device_profile_print(MPI_Comm world, double step_seconds, int steps, FILE *f);

#endif
