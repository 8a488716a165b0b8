/* topo.c -- the process grid and its communicators (docs/design.md). */
#include "topo.h"

#include <stdio.h>

#include "log.h"

int grid_rank_of(const struct grid *g, int tp_rank, int dp_rank, int pp_rank)
{
    return tp_rank + g->tp * (dp_rank + g->dp * pp_rank);
}

void grid_init(struct grid *g, int tp, int dp, int pp)
{
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &g->world_comm));
    MPI_CHECK(MPI_Comm_size(g->world_comm, &g->world));
    MPI_CHECK(MPI_Comm_rank(g->world_comm, &g->rank));
    if (tp * dp * pp != g->world)
        die("grid %d x %d x %d does not match the %d ranks launched", tp, dp, pp, g->world);
    g->tp = tp;
    g->dp = dp;
    g->pp = pp;
    g->tp_rank = g->rank % tp;
    g->dp_rank = (g->rank / tp) % dp;
    g->pp_rank = g->rank / (tp * dp);

    /* colour = the coordinates that stay fixed; key = the one that varies */
    MPI_CHECK(MPI_Comm_split(g->world_comm, g->dp_rank + dp * g->pp_rank, g->tp_rank, &g->tp_comm));
    MPI_CHECK(MPI_Comm_split(g->world_comm, g->tp_rank + tp * g->pp_rank, g->dp_rank, &g->dp_comm));
    MPI_CHECK(MPI_Comm_split(g->world_comm, g->tp_rank + tp * g->dp_rank, g->pp_rank, &g->pp_comm));

    int is_end = g->pp_rank == 0 || g->pp_rank == pp - 1;
    MPI_CHECK(MPI_Comm_split(g->world_comm, is_end ? g->tp_rank + tp * g->dp_rank : MPI_UNDEFINED,
                             g->pp_rank, &g->embed_comm));
}

void grid_free(struct grid *g)
{
    MPI_Comm *comms[] = {&g->tp_comm, &g->dp_comm, &g->pp_comm, &g->embed_comm, &g->world_comm};
    for (size_t i = 0; i < sizeof comms / sizeof comms[0]; i++)
        if (*comms[i] != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(comms[i]));
}

void grid_describe(const struct grid *g, char *buf, int len)
{
    snprintf(buf, (size_t)len, "world %d = tp %d x dp %d x pp %d (ranks ordered tp fastest, then dp, then pp)",
             g->world, g->tp, g->dp, g->pp);
}
