/* optim.h -- clipping, AdamW, the ZeRO slice and the learning-rate schedule (the
 * reduction over dp: dp.h). */
#ifndef TRIAD_OPTIM_H
#define TRIAD_OPTIM_H

#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "model.h"

/* AdamW state.  Without ZeRO m and v are laid out like the parameters.
 * With precision bf16/fp16 the parameters the model computes with hold
 * values of that format; the optimizer keeps fp32 master weights (laid out
 * like m and v), updates them, and rounds them into the parameters.
 * With ZeRO (zero_stage >= 1) each rank keeps and updates its shares of
 * the flat parameter buffer (model.zs: a share of the dense tensors over
 * the dp * cp ranks, and under expert parallelism one of its experts' over
 * their replicas): the gradients are reduce-scattered into gshard, the
 * shares are updated, and the parameters are all-gathered. */
struct optim {
    const struct device *k;       /* the model's: where the state lives */
    float *m_mem, *v_mem;          /* moments: flat, or the shares */
    int zero_stage;                /* the shape's: from 1 the state is sliced (z); from 2 the gradients are
                                      reduced into gshard layer by layer (dp.h); at 3 the shares of master
                                      weights are the model's shard (m->shard_mem), in fp32 too, and the
                                      only copy of the layers' parameters */
    struct zero_slices z;          /* the model's: what this rank updates, where it keeps it (z.floats) */
    float *gshard;                 /* (z.floats) its reduced gradient */
    size_t piece;                  /* ZeRO: floats per rank of one piece of its collectives (comm_*_sliced) */
    size_t pack_floats;            /* and their staging buffer (0: the slice fits in one piece) */
    float *pack;
    enum precision prec;
    float *master_mem;             /* fp32 master weights (bf16/fp16): flat, or the slice */
    int64_t updates;               /* AdamW steps applied (skipped steps do not count) */
    double lr, beta1, beta2, eps, weight_decay, grad_clip;
};

/* ZeRO's collectives run in pieces of parallel.bucket_mb over all dp ranks
 * (at least 16 floats a rank); the staging buffer they need, in floats
 * (0 when every share of z fits in one). */
size_t optim_zero_piece(double bucket_mb, int dp);
size_t optim_zero_pack_floats(const struct zero_slices *z, double bucket_mb, int dp);

void optim_init(struct optim *o, const struct model *m, const struct config *cfg, const struct run_shape *s);
void optim_free(struct optim *o);

/* Mixed precision: take the master weights from the parameters (a fresh
 * start, init_from), and round them into the parameters (after a start or
 * restart, and after an update under ZeRO-3 or on a device without
 * adamw_update_rounded: elsewhere optim_update rounds them as it updates;
 * with ZeRO all-gathered).  No-ops in fp32. */
void optim_master_from_params(struct optim *o, const struct model *m);
void optim_params_from_master(struct optim *o, struct model *m, struct comm *c);

/* How many elements of the ranges r[0..k) (increasing, packed back to
 * back, all in one part of the slices) fall into each of the part's ranks'
 * shares (counts), and where each rank's run starts in the packed ranges
 * (displs, if not NULL); the part returned. */
const struct zero_part *optim_slice_counts(const struct optim *o, const struct flat_range *r, int k, int *counts,
                                           int *displs);

/* Each local layer's per-layer tensors packed back to back in table order
 * (model_layer_ranges: ZeRO-2's working buffers, ZeRO-3's gathers), cut
 * into the parts of the slices they lie in: the dense tensors, then under
 * expert parallelism the experts' (last in the table).  Part k's ranges
 * are [first[k], first[k + 1]) of a layer's nranges (empty where the layer
 * has no such tensor: a mixture's dense and MoE layers); they start at
 * zero_layer_off(j, k) in the packed layer; zero_layer_runs gives each rank
 * of the part's group its run (counts) and where it starts (displs, from
 * that offset). */
struct zero_layers {
    int Lp, nranges, nparts, stride;
    struct flat_range *ranges;     /* [Lp][nranges] */
    int first[3];
    size_t *off;                   /* [Lp][2] */
    const struct zero_part *part[2];
    int *counts, *displs;          /* [Lp][nparts][stride] */
};
void optim_zero_layers(const struct optim *o, const struct model *m, struct zero_layers *zl);
void optim_zero_layers_free(struct zero_layers *zl);
static inline const struct flat_range *zero_layer_ranges(const struct zero_layers *zl, int j, int k)
{
    return zl->ranges + (size_t)j * zl->nranges + zl->first[k];
}
static inline size_t zero_layer_off(const struct zero_layers *zl, int j, int k) { return zl->off[2 * (size_t)j + k]; }
static inline size_t zero_layer_run(const struct zero_layers *zl, int j, int k)
{
    return ((size_t)j * zl->nparts + k) * zl->stride;
}

/* The part [*lo, *hi) of flat range [a, a + n) that this rank updates (all
 * of it without ZeRO), and where its state is kept (*s: the index into
 * m_mem, v_mem, master_mem and gshard); 0 if none. */
static inline int optim_slice_part(const struct optim *o, size_t a, size_t n, size_t *lo, size_t *hi, size_t *s)
{
    return zero_slice_part(&o->z, a, n, lo, hi, s);
}

/* Divide the reduced gradients by the loss scale (times inv). */
void optim_unscale(struct optim *o, struct model *m, float inv);
/* One gradient element this rank's update reads and its norm counts (testing aid: an injected
 * overflow; a device address where the model lives on one). */
float *optim_some_grad(struct optim *o, struct model *m);

/* Learning rate at step s (0-based): linear warm-up, then cosine decay to
 * min_lr at the last step (or constant). */
double lr_at(const struct config *cfg, int64_t step);

/* Global gradient L2 norm over the grid, replicated parameters counted once.
 * *local_nonfinite (if not NULL) tells whether this rank's own share held a
 * NaN or infinity; *local_ss (if not NULL) is that share, squared (its
 * terms before the sums over ranks). */
double optim_grad_norm(const struct optim *o, const struct model *m, struct comm *c, int *local_nonfinite,
                       double *local_ss);

/* Clip to grad_clip (if > 0) given the norm, then one AdamW step with lr
 * (bias correction for o->updates + 1 steps). */
void optim_update(struct optim *o, struct model *m, struct comm *c, double grad_norm, double lr);

#endif
