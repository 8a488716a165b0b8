/* moe.h -- a mixture of experts in place of a block's MLP (docs/moe.md):
 * the router, the choice of each token's k experts with their weights, the
 * capacity, the routed experts as one product per expert over its rows, the
 * shared experts, the load-balancing and z losses, and the statistics.
 * What the model's forward and backward call of it is declared in
 * model_internal.h (the model's private interface, which moe.c implements). */
#ifndef TRIAD_MOE_H
#define TRIAD_MOE_H

#include <stdint.h>

#include "model.h"

/* What the MoE layers of one optimizer step saw on this rank (forwards of
 * training micro-batches; a backward's recomputation counts nothing). */
struct moe_stats {
    double aux, z;          /* sums over layers and micro-batches of E sum_i f_i P_i and mean lse^2 */
    double layers;          /* layer-micro-batches summed over */
    double slots, dropped;  /* token choices, and those over capacity */
    double *tokens;         /* (Lp, E) token choices per local layer and expert */
    uint64_t signature;     /* a hash of every choice and drop: equal iff the routing was (with certainty
                               short of a hash collision) */
};

/* The host side of routing one micro-batch through one layer, and the
 * step's statistics. */
struct moe_state {
    float *logits, *probs;  /* (N, E) router logits and scores (softmax or sigmoid) */
    int32_t *expert;        /* (N, K) each token's choices, best first */
    float *weight;          /* (N, K) their weights */
    int32_t *row;           /* (N, K) each choice's routed row, -1 when dropped */
    int32_t *token;         /* (N K) the token of each routed row: rows grouped by expert, tokens in order */
    float *row_weight;      /* (N K) the weight of each routed row */
    int *first;             /* (E + 1) expert e's rows are [first[e], first[e+1]) */
    int *chosen;            /* (E) choices of expert e before the capacity */
    float *gate;            /* (N) the shared experts' gate sigmoid(x . w), or NULL */
    float *dot;             /* (N K + N) d(weight) of each choice, then d(gate) of each token */
    float *dlogits;         /* (N, E) */
    int N;                  /* the rows of the call under way (a micro-batch's, or a sampled token's) */
    int R;                  /* routed rows of this rank's tokens */
    /* where the routed rows are computed: blocks of rows of one local expert each (without expert
     * parallelism one per expert; with it one per (source rank, local expert), in that order) */
    int nblock, *block_row, *block_n, *block_expert;
    int Rx;                 /* rows this rank's experts take */
    int *sent, *recvd;      /* (ep El) rows to each rank's each expert, and from each rank to each of ours */
    int *counts;            /* (2 x 4 ep) two exchanges' send counts, receive counts, send and receive offsets */
    int replay;             /* a backward's recomputation: count no statistics */
    double *sums, Ng;       /* (2E + 1) what the auxiliary losses need, over Ng tokens (aux_sums) */
    double *work;           /* (2E) router_backward's per-token scratch */
    struct moe_stats stats;
};

void moe_stats_reset(struct model *m);

/* The same MLP on n <= N rows x (n, C) outside training (triad sample's
 * token at a time): fch and act hold (n, model_fc_cols) and (n,
 * model_hidden_cols); no statistics. */
void moe_forward_rows(struct model *m, struct comm *c, const float *x, int n, const float *const *P, float *fch,
                      float *act, float *out);
#endif
