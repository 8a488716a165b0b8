/* shape.c -- the shape of a run, from the deck and the world size. */
#include "shape.h"

#include <string.h>

#include "log.h"

int shape_dp(const struct config *cfg, int world)
{
    int64_t tp_cp_pp = cfg->parallel.tp * cfg->parallel.cp * cfg->parallel.pp;
    if (cfg->parallel.dp > 0) return (int)cfg->parallel.dp;
    if (world <= 0 || world % tp_cp_pp) return 0;
    return (int)(world / tp_cp_pp);
}

int shape_micro_batch(const struct config *cfg, int world)
{
    int dp = shape_dp(cfg, world);
    if (cfg->train.micro_batch_size > 0) return (int)cfg->train.micro_batch_size;
    return dp > 0 ? (int)(cfg->train.batch_size / dp) : 0;
}

int64_t shape_padded_vocab(int64_t V, int64_t tp)
{
    int64_t mult = 128 * tp;
    return (V + mult - 1) / mult * mult;
}

void shape_family(struct model_family *f, const struct config *cfg)
{
    int64_t C = cfg->model.d_model;
    f->llama = cfg->model.arch_id == MODEL_ARCH_llama;
    f->NKV = cfg->model.n_kv_head ? cfg->model.n_kv_head : cfg->model.n_head;
    f->F = cfg->model.ffn_hidden;
    if (f->F == 0) f->F = f->llama ? (8 * C / 3 + 255) / 256 * 256 : 4 * C;
    f->tied = cfg->model.tie_embeddings < 0 ? !f->llama : cfg->model.tie_embeddings != 0;
    f->qkv_bias = !f->llama || cfg->model.qkv_bias;
    f->E = cfg->model.n_expert;
    f->K = f->E ? cfg->model.n_expert_active : 0;
    f->Fe = f->E ? (cfg->model.moe_ffn_hidden ? cfg->model.moe_ffn_hidden : f->F) : 0;
    f->Fs = f->E ? cfg->model.n_shared_expert * f->Fe : 0;
    f->Ld = f->E ? cfg->model.moe_dense_layers : 0;
}

/* The parameters of cfg's model with a vocabulary of V, its MoE blocks
 * counted with `experts` of their routed experts. */
static int64_t params_with(const struct config *cfg, int64_t V, int64_t experts)
{
    struct model_family f;
    shape_family(&f, cfg);
    int64_t L = cfg->model.n_layer, C = cfg->model.d_model, T = cfg->model.seq_len;
    int64_t KV = mul64(f.NKV, C / cfg->model.n_head), QKV = add64(C, mul64(2, KV)), F = f.F;
    /* a block: q, k and v (C + 2 KV rows of C), the attention projection (C^2), the MLP (gpt2: C -> F -> C;
     * llama: gate and up C -> F, down F -> C); gpt2 adds two LayerNorms (2C each) and the biases,
     * llama has two RMSNorms (C each).  An MoE block's MLP: the router (E x C), each expert a SwiGLU
     * of Fe, the shared experts one of Fs with its gate (C); a mixture's first Ld blocks keep the dense MLP */
    int64_t dense = mul64(mul64(f.llama ? 3 : 2, F), C), mlp = dense;
    if (f.E)
        mlp = add64(add64(mul64(f.E, C), mul64(mul64(experts, 3 * f.Fe), C)),
                    add64(mul64(3 * f.Fs, C), f.Fs && cfg->model.moe_shared_gate ? C : 0));
    int64_t attn = add64(mul64(QKV, C), mul64(C, C)); /* and the norms and biases */
    attn = f.llama ? add64(attn, add64(mul64(2, C), f.qkv_bias ? QKV : 0))
                   : add64(attn, add64(add64(mul64(4, C), QKV), add64(C, add64(F, C))));
    int64_t rest = add64(mul64(V, C), f.llama ? C : add64(mul64(T, C), mul64(2, C)));
    if (!f.tied) rest = add64(rest, mul64(V, C));
    int64_t blocks = add64(mul64(L - f.Ld, add64(attn, mlp)), mul64(f.Ld, add64(attn, dense)));
    return add64(blocks, rest);
}

int64_t shape_params(const struct config *cfg, int64_t V) { return params_with(cfg, V, cfg->model.n_expert); }

int64_t shape_active_params(const struct config *cfg, int64_t V)
{
    return params_with(cfg, V, cfg->model.n_expert ? cfg->model.n_expert_active : 0);
}

/* The deck's ENUM words are read into their enums (params.def); these are
 * the enums of the layers below that the schedule and the precision become. */
static enum pp_schedule shape_schedule(const struct config *cfg)
{
    switch (cfg->parallel.schedule_id) {
    case PARALLEL_SCHEDULE_gpipe: return PP_GPIPE;
    case PARALLEL_SCHEDULE_1f1b: return PP_1F1B;
    case PARALLEL_SCHEDULE_interleaved: return PP_INTERLEAVED;
    case PARALLEL_SCHEDULE_file: return PP_FILE;
    case PARALLEL_SCHEDULE_zb_h1: return PP_ZBH1;
    case PARALLEL_SCHEDULE_zb_h2: return PP_ZBH2;
    case PARALLEL_SCHEDULE_zbv: return PP_ZBV;
    }
    die("parallel.schedule: no enum %d (params.def and shape.c disagree)", (int)cfg->parallel.schedule_id);
}

static enum precision shape_precision(const struct config *cfg)
{
    switch (cfg->train.precision_id) {
    case TRAIN_PRECISION_fp32: return PREC_FP32;
    case TRAIN_PRECISION_bf16: return PREC_BF16;
    case TRAIN_PRECISION_fp16: return PREC_FP16;
    }
    die("train.precision: no enum %d (params.def and shape.c disagree)", (int)cfg->train.precision_id);
}

void run_shape_init(struct run_shape *s, const struct config *cfg, int world, int staged)
{
    memset(s, 0, sizeof *s);
    s->world = world > 0 ? world : 0;
    s->tp = (int)cfg->parallel.tp;
    s->pp = (int)cfg->parallel.pp;
    s->v = (int)cfg->parallel.virtual_stages;
    s->dp = shape_dp(cfg, world);
    s->cp = (int)cfg->parallel.cp;
    s->dpcp = s->dp * s->cp;
    s->ep = (int)cfg->parallel.ep;
    s->sp = cfg->parallel.sequence_parallel && s->tp > 1;
    s->sched = shape_schedule(cfg);
    s->schedule_file = s->sched == PP_FILE ? cfg->parallel.schedule_file : NULL;
    s->prec = shape_precision(cfg);
    s->micro_batch = shape_micro_batch(cfg, world);
    if (s->dp > 0 && s->micro_batch > 0)
        s->n_micro = (int)(cfg->train.batch_size / ((int64_t)s->dp * s->micro_batch));
    s->V = cfg->model.vocab_size;
    s->Vp = shape_padded_vocab(s->V, s->tp);
    shape_family(&s->fam, cfg);
    s->params = shape_params(cfg, s->V);
    s->zero_stage = s->dpcp > 1 ? (int)cfg->parallel.zero_stage : 0;
    s->staged = staged;
    s->overlap = cfg->parallel.overlap_grad_reduce && s->dpcp > 1 && !s->zero_stage && !staged;
}
