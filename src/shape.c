/* shape.c -- the shape of a run, from the deck and the world size. */
#include "shape.h"

#include <string.h>

int64_t shape_padded_vocab(int64_t V, int64_t tp)
{
    int64_t mult = 128 * tp;
    return (V + mult - 1) / mult * mult;
}

int64_t shape_params(int64_t L, int64_t C, int64_t T, int64_t V)
{
    /* a block: 2 LayerNorms (2C each), qkv (3C^2 + 3C), attproj (C^2 + C), fc (4C^2 + 4C), fcproj (4C^2 + C) */
    int64_t block = add64(mul64(12, mul64(C, C)), mul64(13, C));
    return add64(add64(mul64(V, C), mul64(T, C)), add64(mul64(L, block), mul64(2, C)));
}

void run_shape_init(struct run_shape *s, const struct config *cfg, int world, int staged)
{
    memset(s, 0, sizeof *s);
    s->world = world > 0 ? world : 0;
    s->tp = (int)cfg->parallel.tp;
    s->pp = (int)cfg->parallel.pp;
    s->v = (int)cfg->parallel.virtual_stages;
    s->dp = config_dp(cfg, world);
    s->sp = cfg->parallel.sequence_parallel && s->tp > 1;
    s->micro_batch = config_micro_batch(cfg, world);
    if (s->dp > 0 && s->micro_batch > 0)
        s->n_micro = (int)(cfg->train.batch_size / ((int64_t)s->dp * s->micro_batch));
    s->V = cfg->model.vocab_size;
    s->Vp = shape_padded_vocab(s->V, s->tp);
    s->params = shape_params(cfg->model.n_layer, cfg->model.d_model, cfg->model.seq_len, s->V);
    s->zero = cfg->parallel.zero_stage >= 1 && s->dp > 1;
    s->zero2 = cfg->parallel.zero_stage >= 2 && s->dp > 1;
    s->staged = staged;
    s->overlap = cfg->parallel.overlap_grad_reduce && s->dp > 1 && !s->zero && !staged;
}
