/* topo.c -- the process grid and its communicators (docs/design.md). */
#include "topo.h"

#include <stdio.h>

#include "log.h"

int grid_rank_of(const struct grid *g, int tp_rank, int cp_rank, int dp_rank, int pp_rank)
{
    return tp_rank + g->tp * (cp_rank + g->cp * (dp_rank + g->dp * pp_rank));
}

void grid_init(struct grid *g, int tp, int cp, int dp, int pp, int ep)
{
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &g->world_comm));
    MPI_CHECK(MPI_Comm_size(g->world_comm, &g->world));
    MPI_CHECK(MPI_Comm_rank(g->world_comm, &g->rank));
    if (tp * cp * dp * pp != g->world)
        die("grid %d x %d x %d x %d does not match the %d ranks launched", tp, cp, dp, pp, g->world);
    g->tp = tp;
    g->cp = cp;
    g->dp = dp;
    g->pp = pp;
    g->tp_rank = g->rank % tp;
    g->cp_rank = (g->rank / tp) % cp;
    g->dp_rank = (g->rank / (tp * cp)) % dp;
    g->pp_rank = g->rank / (tp * cp * dp);
    g->dpcp = dp * cp;
    g->dpcp_rank = g->cp_rank + cp * g->dp_rank;
    if (ep < 1 || g->dpcp % ep) die("expert parallelism ep = %d does not divide dp * cp = %d", ep, g->dpcp);
    g->ep = ep;
    g->ep_rank = g->dpcp_rank % ep;
    g->edp = g->dpcp / ep;
    g->edp_rank = g->dpcp_rank / ep;

    /* colour = the coordinates that stay fixed; key = the one that varies */
    int t = g->tp_rank, c = g->cp_rank, d = g->dp_rank, p = g->pp_rank;
    MPI_CHECK(MPI_Comm_split(g->world_comm, c + cp * (d + dp * p), t, &g->tp_comm));
    MPI_CHECK(MPI_Comm_split(g->world_comm, t + tp * (d + dp * p), c, &g->cp_comm));
    MPI_CHECK(MPI_Comm_split(g->world_comm, t + tp * p, g->dpcp_rank, &g->dp_comm));
    MPI_CHECK(MPI_Comm_split(g->world_comm, t + tp * (c + cp * d), p, &g->pp_comm));
    MPI_CHECK(MPI_Comm_split(g->world_comm, t + tp * (g->edp_rank + g->edp * p), g->ep_rank, &g->ep_comm));
    MPI_CHECK(MPI_Comm_split(g->world_comm, t + tp * (g->ep_rank + ep * p), g->edp_rank, &g->edp_comm));

    int is_end = p == 0 || p == pp - 1;
    MPI_CHECK(MPI_Comm_split(g->world_comm, is_end ? t + tp * (c + cp * d) : MPI_UNDEFINED, p, &g->embed_comm));
}

void grid_free(struct grid *g)
{
    MPI_Comm *comms[] = {&g->tp_comm, &g->cp_comm, &g->dp_comm, &g->pp_comm, &g->embed_comm,
                         &g->ep_comm, &g->edp_comm, &g->world_comm};
    for (size_t i = 0; i < sizeof comms / sizeof comms[0]; i++)
        if (*comms[i] != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(comms[i]));
}

void grid_describe(const struct grid *g, char *buf, int len)
{
    char ep[48] = "";
    if (g->ep > 1) snprintf(ep, sizeof ep, ", experts over ep %d of the dp ranks", g->ep);
    if (g->cp > 1)
        snprintf(buf, (size_t)len,
                 "world %d = tp %d x cp %d x dp %d x pp %d (ranks ordered tp fastest, then cp, dp, pp)%s", g->world,
                 g->tp, g->cp, g->dp, g->pp, ep);
    else
        snprintf(buf, (size_t)len, "world %d = tp %d x dp %d x pp %d (ranks ordered tp fastest, then dp, then pp)%s",
                 g->world, g->tp, g->dp, g->pp, ep);
}
