/* topo.h -- the process grid: world = tp x dp x pp, TP fastest, then DP, then PP. */
#ifndef TRIAD_TOPO_H
#define TRIAD_TOPO_H

#include <mpi.h>

struct grid {
    int world, rank;
    int tp, dp, pp;                /* sizes */
    int tp_rank, dp_rank, pp_rank; /* this rank's coordinates */
    MPI_Comm world_comm;           /* a duplicate of MPI_COMM_WORLD */
    MPI_Comm tp_comm;              /* same (dp, pp): the tensor-parallel group */
    MPI_Comm dp_comm;              /* same (tp, pp): the replicas of one shard */
    MPI_Comm pp_comm;              /* same (tp, dp): the stages of one pipeline */
    MPI_Comm embed_comm;           /* first and last stage of one pipeline (tied
                                      embedding); MPI_COMM_NULL elsewhere */
};

/* World rank of grid coordinates. */
int grid_rank_of(const struct grid *g, int tp_rank, int dp_rank, int pp_rank);

/* Build the grid for sizes tp x dp x pp (already validated to multiply to the
 * world size).  Collective over MPI_COMM_WORLD. */
void grid_init(struct grid *g, int tp, int dp, int pp);
void grid_free(struct grid *g);

/* "world 8 = tp 2 x dp 2 x pp 2; rank 5: tp 1, dp 0, pp 1" */
void grid_describe(const struct grid *g, char *buf, int len);

#endif
