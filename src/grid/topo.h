/* topo.h -- the process grid: world = tp x cp x dp x pp, TP fastest, then
 * CP, then DP, then PP (docs/design.md); expert parallelism groups the
 * dp * cp ranks in blocks of ep (Megatron's order tp, cp, ep, dp, pp). */
#ifndef TRIAD_TOPO_H
#define TRIAD_TOPO_H

#include <mpi.h>

struct grid {
    int world, rank;
    int tp, cp, dp, pp;                     /* sizes */
    int tp_rank, cp_rank, dp_rank, pp_rank; /* this rank's coordinates */
    int dpcp, dpcp_rank;                    /* dp * cp, and this rank's place among them: cp_rank + cp * dp_rank */
    int ep, ep_rank;                        /* expert parallelism: the dp * cp ranks in groups of ep, adjacent in
                                               dpcp_rank (ep_rank = dpcp_rank mod ep), each holding E / ep experts */
    int edp, edp_rank;                      /* dp * cp / ep: the ranks holding replicas of one rank's experts */
    MPI_Comm world_comm;           /* a duplicate of MPI_COMM_WORLD */
    MPI_Comm tp_comm;              /* same (cp, dp, pp): the tensor-parallel group */
    MPI_Comm cp_comm;              /* same (tp, dp, pp): the ranks sharing the positions of one sequence */
    MPI_Comm dp_comm;              /* same (tp, pp): the dp * cp ranks holding replicas of one shard's
                                      parameters (gradients reduced, ZeRO sharded over them), in
                                      dpcp_rank order */
    MPI_Comm pp_comm;              /* same (tp, cp, dp): the stages of one pipeline */
    MPI_Comm embed_comm;           /* first and last stage of one pipeline (tied
                                      embedding); MPI_COMM_NULL elsewhere */
    MPI_Comm ep_comm;              /* same (tp, pp, edp_rank): the ranks a mixture's tokens are exchanged
                                      over (all-to-all), in ep_rank order */
    MPI_Comm edp_comm;             /* same (tp, pp, ep_rank): the replicas of one rank's experts (their
                                      gradients reduced over it), in edp_rank order */
};

/* World rank of grid coordinates. */
int grid_rank_of(const struct grid *g, int tp_rank, int cp_rank, int dp_rank, int pp_rank);

/* Build the grid for sizes tp x cp x dp x pp (already validated to multiply
 * to the world size), with expert parallelism ep over the dp * cp ranks
 * (dividing dp * cp).  Collective over MPI_COMM_WORLD. */
void grid_init(struct grid *g, int tp, int cp, int dp, int pp, int ep);
void grid_free(struct grid *g);

/* "world 8 = tp 2 x dp 2 x pp 2 (...)" (cp named where it is > 1) */
void grid_describe(const struct grid *g, char *buf, int len);

#endif
