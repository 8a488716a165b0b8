/* plan.c -- memory, communication and bubble planner.
 *
 * Every number comes from the code that allocates or communicates: the
 * stage's model_dims from model_dims_init on a grid with only its sizes and
 * coordinates filled in, the tensors from model_tensor_size, the activation
 * slots from model_slot_floats / model_scratch_floats and the schedule's
 * pp_peak_bound and pp_recv_bound (as pp_exec_init), the traffic from
 * the calls model.c, optim.c and pipeline_exec.c make.  regression/plan.sh
 * holds the bytes to what runs allocate and count; bench/plan_vs_rss.sh the
 * peak to the measured resident set. */
#include "plan.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_tok.h"
#include "cuda_sizes.h"
#include "dp.h"
#include "gemm.h"
#include "hf.h"
#include "log.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "pipeline.h"
#include "plan_internal.h"
#include "zero3.h"


static size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; } /* what xalloc_aligned touches */

void plan_stage_dims(struct model_dims *d, const struct config *cfg, const struct plan *p, int pp_rank)
{
    struct grid g;
    memset(&g, 0, sizeof g);
    g.world = p->shape.world;
    g.tp = p->shape.tp;
    g.cp = p->shape.cp;
    g.dp = p->shape.dp;
    g.pp = p->shape.pp;
    g.dpcp = p->shape.dpcp;
    g.ep = p->shape.ep; /* (every ep rank holds as many experts: rank 0 stands for them) */
    g.edp = p->shape.ep > 0 ? p->shape.dpcp / p->shape.ep : 0;
    g.pp_rank = pp_rank;
    g.world_comm = g.tp_comm = g.cp_comm = g.dp_comm = g.pp_comm = g.embed_comm = g.ep_comm = g.edp_comm =
        MPI_COMM_NULL;
    model_dims_init(d, cfg, &p->shape, &g);
}

/* Floats of the flat layout (model_flat_layout), and the elements in it. */
static size_t flat_floats(const struct model_dims *d, size_t *params)
{
    size_t at[NUM_PARAMS], n = 0;
    for (int i = 0; i < NUM_PARAMS; i++) n += model_tensor_size(d, (enum param_id)i);
    if (params) *params = n;
    return model_flat_layout(d, at);
}

/* ZeRO's slices of this rank's flat layout (model.zs). */
static struct zero_slices zero_slices_of(const struct model_dims *d)
{
    size_t at[NUM_PARAMS], flat = model_flat_layout(d, at);
    struct zero_slices z;
    model_zero_slices(d, at, flat, &z);
    return z;
}

static size_t act_bytes(const struct model_dims *d, int B, int slots, int nrecv, int wslots)
{
    return round64((model_slot_floats(d, B) * (size_t)slots + model_scratch_floats(d, B) +
                    model_recv_floats(d, B) * (size_t)nrecv + model_wslot_floats(d, B) * (size_t)wslots) *
                   sizeof(float));
}

/* Scratch that Open MPI 4.1's collectives take for a buffer of n bytes over
 * g ranks, measured on the worst rank (bench/plan_vs_rss.sh): an in-place
 * all-reduce n/2; a reduce-scatter n at g = 2, up to 2n beyond; the
 * non-blocking ones about the same (bench/zero_memory.sh: the overlapped
 * all-reduces, all in flight, n/2 of their sum; ZeRO-2's reduce-scatters,
 * two in flight, 2.5n at g = 2 and 4n to 5n beyond). */
static size_t allreduce_scratch(size_t n, int g) { return g < 2 ? 0 : n / 2; }
static size_t reduce_scatter_scratch(size_t n, int g) { return g < 2 ? 0 : g == 2 ? n : 2 * n; }

/* Does the data-parallel all-reduce run in buckets during the backward (dp.c, DP_OVERLAP)? */
static int overlapped(const struct plan *p, const struct model_dims *d) { return p->shape.overlap && d->Lp > 0; }

/* Per-layer gradients dp.c reduces in flight (LayerNorms under sequence parallelism wait). */
static size_t overlapped_bytes(const struct model_dims *d)
{
    size_t n = 0;
    for (int i = 0; i < NUM_PARAMS; i++)
        if (param_table[i].per_layer && !param_sp_partial(d, (enum param_id)i))
            n += model_tensor_size(d, (enum param_id)i) * 4;
    return n;
}

/* The packed blocks the CPU's attention keeps per thread (ops.h), the
 * larger of its two passes, for sequences of d->Tl rows. */
static size_t cpu_att_bytes(const struct model_dims *d)
{
    enum gemm_arith a = d->prec == PREC_BF16 ? GEMM_BF16 : GEMM_FP32;
    size_t bt = gemm_pack_b_bytes(a, d->HS, ATT_BLK), bb = gemm_pack_b_bytes(a, ATT_BLK, d->HS);
    size_t ba = gemm_pack_a_bytes(a, ATT_BLK, d->HS), bp = gemm_pack_a_bytes(a, ATT_BLK, ATT_BLK);
    int keep;
    size_t fwd = att_room_bytes(0, d->Tl, bt, bb, ba, bp, &keep), bwd = att_room_bytes(1, d->Tl, bt, bb, ba, bp, &keep);
    return fwd > bwd ? fwd : bwd;
}

/* MPI's scratch for the largest collective this rank makes (one at a time).
 * Overlapped, every bucket's non-blocking all-reduces may be in flight at
 * once before the final wait: up to all the per-layer gradients; ZeRO-2
 * keeps two layers' reduce-scatters in flight. */
static size_t comm_buffer(const struct plan *p, const struct model_dims *d, size_t flat)
{
    size_t big = 0, NC = (size_t)p->shape.micro_batch * d->Tl * d->C * 4, wte = model_tensor_size(d, P_WTE) * 4, x;
    size_t piece = optim_zero_piece(p->bucket_mb, p->shape.dpcp); /* ZeRO's pieces, a rank */
    /* (ZeRO-2 and 3 reduce by rings of messages, comm_ring: their scratch is counted with the gradients) */
    if (p->shape.dpcp > 1 && p->shape.zero_stage == 1) {
        struct zero_slices z = zero_slices_of(d);
        for (int k = 0; k < z.n; k++) { /* each part's, in pieces over its replicas */
            size_t bucket = piece * (size_t)z.part[k].ranks, n = z.part[k].n < bucket ? z.part[k].n : bucket;
            if ((x = reduce_scatter_scratch(n * 4, z.part[k].ranks)) > big) big = x;
        }
    } else if (p->shape.dpcp > 1 && p->shape.zero_stage == 0)
        big = overlapped(p, d) ? allreduce_scratch(overlapped_bytes(d), p->shape.dpcp) : allreduce_scratch(flat * 4, p->shape.dpcp);
    if (p->shape.dpcp > 1 && overlapped(p, d) && (x = allreduce_scratch(wte, p->shape.dpcp)) > big) big = x; /* the rest, after */
    if (p->shape.tp > 1 && (x = p->shape.sp ? reduce_scatter_scratch(NC, p->shape.tp) : allreduce_scratch(NC, p->shape.tp)) > big) big = x;
    if (model_wte_on_two_ranks(d) && (x = allreduce_scratch(wte, 2)) > big) big = x; /* (the embedding group's) */
    return big;
}

/* A mixture of experts' messages (moe.c) per step: under tp each MoE
 * layer's backward sums the d(weight)s of its N K choices and d(gate)s of
 * its N tokens; under cp each routing (forward, recomputation, backward)
 * sums its 2E + 1 sums for the auxiliary losses; the step's statistics
 * (5 + L E doubles) are summed over tp, pp and dp (dp x cp); under expert
 * parallelism the experts' gradients travel over their replicas (edp)
 * instead of dp, the gradient norm over ep, and each layer's all-to-alls
 * over ep carry the choices' counts (E ints, forward and backward), the
 * rows to the experts (N K C: the inputs forward and again backward, the
 * output gradients), their weights (N K) and, back, what the experts
 * computed (Rx C forward and backward, Rx d(weight)s); a split backward's
 * W sends the counts, the output gradients and the weights once more.
 * Rx, the rows this rank's experts take, is N K at perfect balance, which
 * the count here assumes (the one estimate of the plan's traffic). */
static void moe_comm(struct plan_stage *s, const struct plan *p, const struct model_dims *d, size_t flat, double norms)
{
    double N = (double)p->shape.micro_batch * d->Tl, K = d->K, C = d->C, m = p->shape.n_micro;
    double stats = 8.0 * (5 + (double)d->L * d->E);
    /* the rank's MoE layers (its last Lp - Lpd), and of them those recomputed (the first Lr of each chunk) */
    double Lm = d->Lp - d->Lpd, Lrm = 0;
    for (int j = 0; j < d->Lp; j++) Lrm += j >= d->Lpd && j % d->Lc < d->Lr;
    if (d->tp > 1) s->comm[CG_TP] += m * Lm * (N * K + N) * 4 + stats;
    if (p->shape.pp > 1) s->comm[CG_PP] += stats;
    if (d->cp > 1) /* each routing's sums for the auxiliary losses (forward, recomputation, backward), the statistics */
        s->comm[CG_CP] += m * (2.0 * Lm + Lrm) * (2.0 * d->E + 1) * 8;
    s->comm[CG_DP] += stats;
    if (d->ep < 2) return;
    double experts = 0;
    size_t at[NUM_PARAMS];
    model_flat_layout(d, at);
    for (int i = 0; i < NUM_PARAMS; i++)
        if (param_group(d, (enum param_id)i) == CG_EDP) experts += (double)model_tensor_size(d, (enum param_id)i) * 4;
    if (!overlapped(p, d)) experts = (double)(flat - model_experts_at(d, at, flat)) * 4;
    if (p->shape.zero_stage == 0) { /* (ZeRO's traffic is counted by part: stage_comm) */
        s->comm[CG_DP] -= experts;
        s->comm[CG_EDP] = experts;
    }
    s->comm[CG_EP] = (p->shape.zero_stage ? 0 : norms) + m * (Lm + Lrm) * (4.0 * d->E + 2 * N * K * C * 4) +
                     m * Lm * (4.0 * d->E + N * K * (3 * C + 2) * 4);
    if (s->wslots) /* a split backward's W routes again: the counts, the rows' output gradients and weights once
                      more, and the inputs there instead of in B */
        s->comm[CG_EP] += m * Lm * (4.0 * d->E + N * K * (C + 1) * 4);
}

/* Bytes this rank contributes per step to each communicator, counted as
 * comm.c counts them (all-gather and reduce-scatter: the full buffer). */
/* Bytes of local layer j's per-layer tensors in part k of ZeRO's slices z. */
static double layer_part_bytes(const struct model_dims *d, const struct zero_slices *z, int j, int k)
{
    double n = 0;
    for (int i = 0; i < NUM_PARAMS; i++)
        if ((z->n > 1 && param_table[i].expert) == k) n += (double)param_layer_floats(d, (enum param_id)i, j) * 4;
    return n;
}

/* gathers: ZeRO-3's of each local layer in a step */
static void stage_comm(struct plan_stage *s, const struct plan *p, const struct model_dims *d, size_t flat,
                       const long *gathers)
{
    double N = (double)p->shape.micro_batch * d->Tl, NC = N * d->C * 4, Ns = d->sp ? N / d->tp : N;
    int E = model_has_embedding(d), H = model_has_head(d);
    double norms = 8.0 * model_norm_terms(d); /* one double per logical tensor and layer (optim_grad_norm) */
    double m = p->shape.n_micro;
    memset(s->comm, 0, sizeof s->comm);
    if (d->tp > 1) {
        /* per micro-batch: per layer one reduction per TP region forward and one backward, one more per
         * region of a layer recomputed in full, the embedding's forward, the head's backward; with
         * sequence parallelism each is a reduce-scatter with an all-gather beside it */
        double red = 2.0 * MODEL_TP_REGIONS * d->Lp + (double)MODEL_TP_REGIONS * d->v * d->Lr + E + H;
        s->comm[CG_TP] = m * red * NC * (d->sp ? 2 : 1) + H * m * 3 * N * 4 + norms;
        if (d->sp) { /* the norms' gradients, partial under SP (ZeRO-2: the layers' per micro-batch) */
            double layers = 0, rest = 0;
            for (int i = 0; i < NUM_PARAMS; i++)
                if (param_table[i].sp_partial)
                    *(param_table[i].per_layer ? &layers : &rest) += (double)model_tensor_size(d, (enum param_id)i);
            s->comm[CG_TP] += ((p->shape.zero_stage >= 2 ? m : 1) * layers + rest) * 4;
        }
    }
    s->comm[CG_DP] = 8; /* the loss */
    struct zero_slices z = zero_slices_of(d);
    if (p->shape.dpcp > 1 && p->shape.zero_stage >= 2) { /* every layer per micro-batch, the rest once; the parameters
                                                           gathered; each part over its replicas */
        double rest = 0;
        for (int i = 0; i < NUM_PARAMS; i++)
            if (!param_table[i].per_layer) rest += (double)model_tensor_size(d, (enum param_id)i) * 4;
        s->comm[CG_DP] += rest + norms;
        for (int k = 0; k < z.n; k++) {
            double layers = 0, gathered = 0;
            for (int j = 0; j < d->Lp; j++) {
                layers += layer_part_bytes(d, &z, j, k);
                gathered += d->zero_stage == 3 ? (double)gathers[j] * layer_part_bytes(d, &z, j, k) : 0;
            }
            s->comm[z.part[k].group] += m * layers;
            /* the updated parameters: all of them gathered, or (ZeRO-3) the rest, and each layer when used */
            s->comm[z.part[k].group] += d->zero_stage == 3 ? gathered : (double)z.part[k].n * 4;
        }
        if (d->zero_stage == 3) s->comm[CG_DP] += rest;
    } else if (p->shape.dpcp > 1 && p->shape.zero_stage) {
        s->comm[CG_DP] += norms;
        for (int k = 0; k < z.n; k++) s->comm[z.part[k].group] += 2.0 * z.part[k].n * 4;
    }
    else if (p->shape.dpcp > 1 && overlapped(p, d)) s->comm[CG_DP] += (double)s->params * 4; /* tensor by tensor */
    else if (p->shape.dpcp > 1) s->comm[CG_DP] += (double)flat * 4;                          /* the padded buffer */
    if (p->shape.pp > 1) {
        int S = d->pp * d->v;
        double msgs = 0;
        for (int c = 0; c < d->v; c++) {
            int vs = model_virtual_stage(d, c);
            msgs += 2 * (vs > 0) + 2 * (vs < S - 1); /* activation in and gradient out; out and in */
        }
        s->comm[CG_PP] = m * msgs * Ns * d->C * 4 + 8 + norms;
        if ((E || H) && model_wte_on_two_ranks(d)) s->comm[CG_EMBED] = (double)model_tensor_size(d, P_WTE) * 4;
    }
    if (d->cp > 1) { /* ring attention (cp.c): each block sent and received cp-1 times a forward (and a
                      * recomputation), the backward's as often and its gradients cp times */
        double P = d->cp, kv = N * 2 * model_kv_heads(d) * d->HS * 4;
        double layers = 2 * (P - 1) * (d->Lp + (double)d->v * d->Lr) + 2 * (P - 1) * d->Lp + 2 * P * d->Lp;
        s->comm[CG_CP] = m * layers * kv;
    }
    if (d->E) moe_comm(s, p, d, flat, norms);
}

/* The parameters: the flat layout, or (ZeRO-3) the tensors outside the
 * layers, the fp32 slice of the flat layout and the two layer gather
 * buffers. */
static size_t param_bytes(const struct model_dims *d, size_t flat)
{
    if (d->zero_stage != 3) return round64(flat * 4);
    return round64(model_rest_floats(d) * 4) + round64(zero_slices_of(d).floats * 4) +
           (d->Lp > 0 ? round64(zero3_buffer_floats(d) * 4) : 0);
}

/* The gradients: the flat layout, or (ZeRO-2 and 3) the tensors outside
 * the layers, the per-layer working buffers and their rings' scratch; +
 * dwte_embed. */
static size_t grad_bytes(const struct model_dims *d, size_t flat, size_t piece)
{
    size_t wte = model_tensor_size(d, P_WTE);
    int sharded = d->zero_stage >= 2;
    size_t main = sharded ? round64(model_rest_floats(d) * 4) : round64(flat * 4);
    size_t buffers = sharded && d->Lp > 0 ? round64(dp_layer_buffer_floats(d) * 4) : 0;
    size_t ring = sharded ? round64(dp_layer_ring_floats(d, piece) * 4) : 0;
    return main + buffers + ring + round64((wte ? wte : 1) * 4);
}

/* The CUDA table's 16-bit copies of the matmuls' operands in a bf16/fp16
 * run (cuda_lp_operand): three slots, each as large as the largest operand
 * it takes: the weights; the layers' inputs; the output gradients
 * (attention is fused, its fp32 FMAs in shared memory: none of its own). */
static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

static size_t lp_operand_bytes(const struct model_dims *d, int B)
{
    if (d->prec == PREC_FP32) return 0;
    size_t N = (size_t)B * d->Tl, C = (size_t)d->C, Cl = C / (size_t)d->tp;
    size_t QKV = (size_t)model_qkv_cols(d), FC = (size_t)model_fc_cols(d), Fl = (size_t)model_hidden_cols(d);
    size_t Vs = model_has_head(d) ? (size_t)d->Vp / (size_t)d->tp : 0;
    size_t slot[3] = {
        C * max_size(max_size(QKV, FC), max_size(Vs, max_size(Cl, Fl))), /* weights: (out, C), and (C, Cl), (C, Fl) */
        N * max_size(C, max_size(Cl, Fl)),                               /* layer inputs */
        N * max_size(max_size(QKV, FC), max_size(C, Vs)),                /* output gradients */
    };
    return 2 * (slot[0] + slot[1] + slot[2]);
}

/* The CUDA backend's attention workspace (cuda_att_workspace): the
 * backward's dout . out of each query row of one call, (B, NH/tp, n): n
 * = T for the whole sequence, a chunk of T/(2cp) rows on the cp ring. */
static size_t cuda_att_bytes(const struct model_dims *d, int B)
{
    size_t n = d->cp > 1 ? (size_t)d->Tl / 2 : (size_t)d->Tl;
    return (size_t)B * (size_t)(d->NH / d->tp) * n * 4;
}

static void plan_stage(struct plan_stage *s, const struct plan *p, const struct config *cfg, int r)
{
    struct model_dims d;
    plan_stage_dims(&d, cfg, p, r);
    memset(s, 0, sizeof *s);
    s->pp_rank = r;
    s->Lp = d.Lp;
    enum pp_schedule sched = p->shape.sched;
    s->in_flight = pp_peak_bound(sched, p->shape.schedule_file, p->shape.pp, p->shape.v, p->shape.n_micro, r);
    s->slots = s->in_flight; /* pp_exec_init */
    s->recv = pp_recv_bound(sched, p->shape.schedule_file, p->shape.pp, p->shape.v, p->shape.n_micro, r);
    s->wslots = pp_wpeak_bound(sched, p->shape.schedule_file, p->shape.pp, p->shape.v, p->shape.n_micro, r);

    struct zero_slices z = zero_slices_of(&d);
    size_t flat = flat_floats(&d, &s->params), shard = z.floats;
    int lp = d.prec != PREC_FP32; /* + fp32 master weights beside m and v */
    s->bytes[PM_PARAMS] = param_bytes(&d, flat); /* bf16/fp16 values in fp32 containers, on the GPU too (so far) */
    s->bytes[PM_GRADS] = grad_bytes(&d, flat, optim_zero_piece(p->bucket_mb, p->shape.dpcp));
    s->bytes[PM_OPTIM] = (2 + (size_t)(lp && p->shape.zero_stage != 3)) * round64(shard * 4) + /* (ZeRO-3: the master is
                                                                                           the parameters' slice) */
                         (p->shape.zero_stage ? round64(shard * 4) +
                                              (p->shape.zero_stage == 3 ? 0 : round64(optim_zero_pack_floats(&z, p->bucket_mb, p->shape.dpcp) * 4))
                                        : 0);
    s->slot_bytes = model_slot_floats(&d, p->shape.micro_batch) * 4;
    s->scratch_bytes = model_scratch_floats(&d, p->shape.micro_batch) * 4;
    s->wslot_bytes = model_wslot_floats(&d, p->shape.micro_batch) * 4;
    s->bytes[PM_ACTS] = act_bytes(&d, p->shape.micro_batch, s->slots, s->recv, s->wslots);
    for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc++) {
        struct model_dims e = d;
        e.recompute = rc;
        e.Lr = rc == RECOMPUTE_FULL ? d.Lc : 0;
        s->act_by_recompute[rc] = act_bytes(&e, p->shape.micro_batch, s->slots, s->recv, s->wslots);
    }
    s->bytes[PM_COMM] = comm_buffer(p, &d, flat);
    s->bytes[PM_WORK] = p->cuda ? lp_operand_bytes(&d, p->shape.micro_batch) + CUDA_CONTEXT_SCRATCH_BYTES +
                                      cuda_att_bytes(&d, p->shape.micro_batch)
                                : (size_t)p->threads * (gemm_pack_bytes() + cpu_att_bytes(&d));
    if (d.llama) s->bytes[PM_WORK] += (size_t)d.Tl * (size_t)d.HS * 4; /* the rotary tables, cos and sin (Tl, HS/2) */
    int ckpt = cfg->io.save_final || cfg->io.checkpoint_every > 0;
    size_t largest = 0; /* ckpt.c's verify_written reads back one tensor (one layer's) at a time */
    for (int id = 0; id < NUM_PARAMS && ckpt; id++) {
        int slices = param_local_slices(&d, (enum param_id)id);
        size_t n = model_tensor_size(&d, (enum param_id)id) / (size_t)(slices ? slices : 1);
        if (n > largest) largest = n;
    }
    s->bytes[PM_CKPT] = round64(largest * 4);
    /* ckpt_async.c: what the rank owns of each state, in host memory (on a GPU: not the device's) */
    if (cfg->io.async_checkpoint && cfg->io.checkpoint_every > 0 && !p->cuda)
        s->bytes[PM_SNAPSHOT] = ((lp || p->shape.zero_stage == 3 ? shard : flat) + 2 * shard) * 4;
    s->bytes[PM_PROBE] = cfg->train.peak_gflops > 0 ? 0
                         : p->cuda ? (size_t)CUDA_PROBE_N * CUDA_PROBE_N * (d.prec == PREC_FP32 ? 12 : 8) /* A, B, C */
                                   : gemm_probe_bytes();
    s->bytes[PM_RUNTIME] = p->cuda ? PLAN_RUNTIME_CUDA : PLAN_RUNTIME_CPU;
    size_t transient = 0;
    for (int i = 0; i < PM_COUNT; i++) {
        if (i < PM_RESIDENT) s->peak += s->bytes[i];
        else if (s->bytes[i] > transient) transient = s->bytes[i];
    }
    s->peak += transient;
    /* ZeRO-3: the layer gathers of a step (zero3.c's policy over this rank's schedule) */
    long *gathers = xcalloc((size_t)d.Lp + 1, sizeof *gathers);
    struct pp_action *acts = NULL;
    int nacts = 0;
    char err[256];
    if (d.zero_stage == 3 && d.Lp > 0 &&
        pp_schedule_build(sched, p->shape.schedule_file, p->shape.pp, p->shape.v, p->shape.n_micro, r, &acts, &nacts, err, sizeof err) == 0)
        zero3_gathers(acts, nacts, d.Lc, gathers);
    free(acts);
    stage_comm(s, p, &d, flat, gathers);
    free(gathers);
}

/* The bytes of the tokenizer's files at path: a tokenizer.json, or a
 * folder's files as a checkpoint would keep them (ckpt_tokenizer_bytes). */
static size_t tokenizer_file_bytes(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return 0;
    return S_ISDIR(sb.st_mode) ? (size_t)ckpt_tokenizer_bytes(path) : (size_t)sb.st_size;
}

/* Rank 0's moments beyond its stage's plan (struct plan): the tokenizer the
 * run checks at start-up (data.tokenizer, io.init_from's folder's, or on a
 * restart the run's copy; one kept only inside a triad checkpoint is not
 * counted), and the aggregation buffer of a checkpoint written by more than
 * one rank. */
static void rank0_moments(struct plan *p, const struct config *cfg, int world)
{
    const struct plan_stage *s = &p->stage[0];
    char path[4096];
    if (!p->cuda && hf_tokenizer_of(cfg, NULL, path, sizeof path))
        p->rank0_tokenizer = PLAN_TOKENIZER_FACTOR * tokenizer_file_bytes(path);
    else if (!p->cuda && cfg->io.restart[0]) /* (a restart parses the copy its run keeps: hf_run_tokenizer) */
        p->rank0_tokenizer = PLAN_TOKENIZER_FACTOR * tokenizer_file_bytes(cfg->io.run_dir);
    /* a dataset's collective write gathers the whole of it (one layer's) on the aggregator: the largest,
     * tp slices of the largest a rank holds (ckpt check's) */
    size_t whole = 0;
    for (int r = 0; r < p->shape.pp; r++) {
        size_t w = p->stage[r].bytes[PM_CKPT] * (size_t)p->shape.tp;
        if (w > whole) whole = w;
    }
    if (!p->cuda && world > 1) p->rank0_mpiio = whole < PLAN_MPIIO_BUFFER ? whole : PLAN_MPIIO_BUFFER;
    /* (each measured on top of the stage's peak, not in place of its transient: the resident set of rank 0
     * above its stage's other ranks is the buffer's whole size) */
    p->rank0_runtime = !p->cuda && world > 1 ? PLAN_RANK0_RUNTIME : 0;
    p->rank0_peak = s->peak + p->rank0_runtime +
                    (p->rank0_tokenizer > p->rank0_mpiio ? p->rank0_tokenizer : p->rank0_mpiio);
    if (p->rank0_peak > p->peak) p->peak = p->rank0_peak, p->peak_stage = -1;
}

int plan_compute(struct plan *p, const struct config *cfg, int world, int threads, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    char why[256];
    const struct device *k = device_for(cfg->train.device_id == TRAIN_DEVICE_cuda, cfg->diag.stage_through_host, why, sizeof why); /* (NULL: planned for an unbuilt device) */
    struct run_shape *s = &p->shape;
    run_shape_init(s, cfg, world, k ? device_staged(k) : 0);
    if (p->shape.dp <= 0 || p->shape.micro_batch <= 0 ||
        (int64_t)p->shape.tp * p->shape.cp * p->shape.pp * p->shape.dp != world) {
        snprintf(err, errlen, "%d ranks do not make a grid of tp = %d x cp = %d x pp = %d x dp", world, p->shape.tp,
                 p->shape.cp, p->shape.pp);
        return -1;
    }
    p->cuda = cfg->train.device_id == TRAIN_DEVICE_cuda;
    p->bucket_mb = cfg->parallel.bucket_mb;
    p->threads = threads > 0 ? threads : cfg->train.threads > 0 ? (int)cfg->train.threads : omp_get_max_threads();
    pp_bubble_predicted(p->shape.sched, p->shape.schedule_file, p->shape.pp, p->shape.v, p->shape.n_micro,
                        &p->bubble_num, &p->bubble_den, &p->bubble_formula);
    p->stage = xcalloc((size_t)p->shape.pp, sizeof *p->stage);
    for (int r = 0; r < p->shape.pp; r++) {
        plan_stage(&p->stage[r], p, cfg, r);
        if (p->stage[r].peak > p->peak) p->peak = p->stage[r].peak, p->peak_stage = r;
    }
    struct model_dims d;
    plan_stage_dims(&d, cfg, p, 0);
    plan_flop_costs(&d, p->shape.micro_batch, p->cost);
    p->rank_cost = xcalloc(3 * (size_t)p->shape.pp, sizeof *p->rank_cost);
    for (int r = 0; r < p->shape.pp; r++) {
        struct model_dims e;
        plan_stage_dims(&e, cfg, p, r);
        plan_flop_costs(&e, p->shape.micro_batch, p->rank_cost + 3 * r);
    }
    p->bubble = p->shape.pp > 1 ? plan_sim_bubble(p->shape.sched, p->shape.schedule_file, p->shape.pp, p->shape.v,
                                                  p->shape.n_micro, p->cost, p->rank_cost, NULL)
                                : 0;
    p->logical_params = model_logical_params(&d);
    p->recompute = d.recompute;
    rank0_moments(p, cfg, world);
    return 0;
}

void plan_free(struct plan *p)
{
    free(p->stage);
    free(p->rank_cost);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------ available memory */

/* The cgroup's memory limit (v2, then v1), or 0 when there is none. */
static double cgroup_limit(void)
{
    const char *paths[] = {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        FILE *f = fopen(paths[i], "r");
        if (!f) continue;
        char buf[64] = "";
        int ok = fgets(buf, sizeof buf, f) != NULL;
        fclose(f);
        double v = ok ? strtod(buf, NULL) : 0;
        if (v > 0 && v < 1e18) return v; /* "max" or v1's huge "unlimited" */
    }
    return 0;
}

double plan_memory_available(const struct config *cfg, int ranks_per_node, char *source, size_t len)
{
    if (cfg->train.memory_gb > 0) {
        snprintf(source, len, "train.memory_gb");
        return cfg->train.memory_gb * 1073741824.0;
    }
    if (cfg->train.device_id == TRAIN_DEVICE_cuda) {
        snprintf(source, len, "unknown: set train.memory_gb to the device memory");
        return 0;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    double phys = pages > 0 && page > 0 ? (double)pages * (double)page : 0, lim = cgroup_limit();
    if (phys <= 0) {
        snprintf(source, len, "unknown: set train.memory_gb");
        return 0;
    }
    int n = ranks_per_node > 0 ? ranks_per_node : 1;
    snprintf(source, len, "%s %.1f GiB / %d rank%s on the node", lim > 0 && lim < phys ? "cgroup limit" : "physical memory",
             (lim > 0 && lim < phys ? lim : phys) / 1073741824.0, n, n == 1 ? "" : "s");
    return (lim > 0 && lim < phys ? lim : phys) / n;
}

/* ------------------------------------------------------------ train.pack_activations unset */

/* The planned peak of stage pp_rank (-1: the largest, world rank 0's
 * included; PLAN_RANK0: world rank 0's) with the stored layers packed or
 * not; 0 with the reason in err when cfg does not plan. */
#define PLAN_RANK0 (-2)
static double peak_packed(const struct config *cfg, int pack, int world, int threads, int pp_rank, char *err,
                          size_t len)
{
    struct config *c = xmalloc(sizeof *c);
    *c = *cfg;
    c->train.pack_activations = pack;
    struct plan p;
    double peak = 0;
    if (plan_compute(&p, c, world, threads, err, len) == 0) {
        peak = (double)(pp_rank >= 0 ? p.stage[pp_rank].peak : pp_rank == PLAN_RANK0 ? p.rank0_peak : p.peak);
        plan_free(&p);
    }
    free(c);
    return peak;
}

/* The rule on the largest peak with fp32 containers (u) and packed (p):
 * fractions of a rank's memory where it is known, else bytes. */
static int pack_rule(double u, double p, int known, char *why, size_t len)
{
    if (p >= u) { /* a stage of few layers: the scratch layer packing needs outweighs its savings */
        snprintf(why, len, "in fp32 containers: packed, the planned peak would not be lower");
        return 0;
    }
    if (!known) {
        snprintf(why, len, "packed in 16 bits: the memory available is unknown (set train.memory_gb)");
        return 1;
    }
    int pack = u > PLAN_UNPACKED_SHARE;
    snprintf(why, len, "%s: the planned peak with fp32 containers is %.1f%% of a rank's memory (%.1f%% packed), %s "
             "3/4", pack ? "packed in 16 bits" : "in fp32 containers", 100 * u, 100 * p,
             pack ? "more than" : "within");
    return pack;
}

int plan_pack_choice(const struct config *cfg, int world, int threads, double avail, char *why, size_t len)
{
    char err[512];
    double u = peak_packed(cfg, 0, world, threads, -1, err, sizeof err);
    double p = u > 0 ? peak_packed(cfg, 1, world, threads, -1, err, sizeof err) : 0;
    if (u <= 0 || p <= 0) {
        snprintf(why, len, "packed in 16 bits: %s", err);
        return 1;
    }
    return avail > 0 ? pack_rule(u / avail, p / avail, 1, why, len) : pack_rule(u, p, 0, why, len);
}

/* ------------------------------------------------------------ in a run */

/* The ranks that share g's rank's node (MPI_COMM_TYPE_SHARED).  Collective. */
static int node_ranks(const struct grid *g)
{
    MPI_Comm node;
    int per_node;
    MPI_CHECK(MPI_Comm_split_type(g->world_comm, MPI_COMM_TYPE_SHARED, g->rank, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_size(node, &per_node));
    MPI_CHECK(MPI_Comm_free(&node));
    return per_node;
}

void plan_resolve_pack(struct config *cfg, const struct grid *g)
{
    if (cfg->train.pack_activations >= 0) return;
    if (cfg->train.precision_id == TRAIN_PRECISION_fp32) { /* nothing to pack */
        cfg->train.pack_activations = 0;
        return;
    }
    char source[256], why[512], err[512] = "";
    double avail = plan_memory_available(cfg, node_ranks(g), source, sizeof source);
    /* this rank's stage's peaks, as fractions of its memory (or bytes where it is unknown); the rule then
     * applied once, on every rank alike, to the largest of each (as triad plan does on the largest stage) */
    int who = g->rank == 0 ? PLAN_RANK0 : g->pp_rank; /* (rank 0 as plan_check counts it) */
    double u = peak_packed(cfg, 0, g->world, omp_get_max_threads(), who, err, sizeof err);
    double p = u > 0 ? peak_packed(cfg, 1, g->world, omp_get_max_threads(), who, err, sizeof err) : 0;
    int failed = u <= 0 || p <= 0;
    double m[5] = {avail > 0 ? u / avail : 0, avail > 0 ? p / avail : 0, avail > 0 ? 0 : 1, u, p};
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, m, 5, MPI_DOUBLE, MPI_MAX, g->world_comm));
    char msg[600];
    snprintf(msg, sizeof msg, "memory plan: %s", err);
    die_all_if(g->world_comm, failed, msg, NULL);
    int known = m[2] == 0;
    cfg->train.pack_activations = known ? pack_rule(m[0], m[1], 1, why, sizeof why) : pack_rule(m[3], m[4], 0, why,
                                                                                                  sizeof why);
    log_info("train.pack_activations unset: %s, the stored layers %s (memory: %s)\n",
             cfg->train.pack_activations ? ".true." : ".false.", why, source);
}

size_t plan_check(const struct config *cfg, const struct grid *g)
{
    struct plan p;
    char err[512], source[256];
    if (plan_compute(&p, cfg, g->world, omp_get_max_threads(), err, sizeof err) != 0)
        die_all(NULL, "memory plan: %s", err);
    double avail = plan_memory_available(cfg, node_ranks(g), source, sizeof source);
    double need = (double)(g->rank == 0 ? p.rank0_peak : p.stage[g->pp_rank].peak);
    int mine = avail > 0 && need > avail, any;
    double have = avail > 0 ? avail : INFINITY, least;
    MPI_CHECK(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, g->world_comm));
    MPI_CHECK(MPI_Allreduce(&have, &least, 1, MPI_DOUBLE, MPI_MIN, g->world_comm));
    char h_need[32], h_have[32];
    plan_human(h_need, sizeof h_need, (double)p.peak);
    plan_human(h_have, sizeof h_have, isinf(least) ? 0 : least);
    char where[32];
    plan_peak_where(where, sizeof where, &p);
    if (!any) {
        if (isinf(least)) log_info("memory plan: peak %s per rank (%s); memory available: %s\n", h_need, where,
                                   source);
        else log_info("memory plan: peak %s per rank (%s) of %s available (%s)\n", h_need, where, h_have, source);
        plan_free(&p);
        return (size_t)need;
    }
    /* everything printed before any rank leaves: mpirun aborts the job on the first exit status 1 */
    if (g->rank == 0) {
        plan_print_memory(stdout, &p);
        plan_print_fit(stdout, &p, least, source);
        plan_print_advice(stdout, &p, cfg, least);
        fflush(stdout);
        fprintf(stderr, "error: not enough memory: the plan needs %s per rank, %s is available (%s)\n"
                        "  hint: change the deck as suggested above (`triad plan DECK` shows the whole plan), or set "
                        "train.memory_gb if the memory detected is wrong\n", h_need, h_have, source);
        fflush(stderr);
    }
    MPI_CHECK(MPI_Barrier(g->world_comm));
    plan_free(&p);
    exit_all(1);
}

unsigned long long *plan_allocated(const struct model *m, const struct optim *o, const struct grid *g)
{
    unsigned long long mine[4] = {
        param_bytes(&m->d, m->flat),
        grad_bytes(&m->d, m->flat, o->piece),
        (2 + (o->master_mem && o->zero_stage != 3 ? 1ull : 0ull)) * round64(o->z.floats * 4) +
            (o->gshard ? round64(o->z.floats * 4) : 0) + (o->pack ? round64(o->pack_floats * 4) : 0),
        round64(m->act_bytes),
    };
    unsigned long long *all = g->rank == 0 ? xmalloc((size_t)g->world * sizeof mine) : NULL;
    MPI_CHECK(MPI_Gather(mine, 4, MPI_UNSIGNED_LONG_LONG, all, 4, MPI_UNSIGNED_LONG_LONG, 0, g->world_comm));
    if (g->rank != 0) return NULL;
    for (int r = 0; r < g->pp; r++) {
        const unsigned long long *s = all + 4 * grid_rank_of(g, 0, 0, 0, r);
        log_info("memory allocated, stage %d: parameters %llu, gradients %llu, optimizer %llu, activations %llu "
                 "bytes\n", r, s[0], s[1], s[2], s[3]);
    }
    return all;
}
