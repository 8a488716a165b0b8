/* plan.c -- memory, communication and bubble planner.
 *
 * Every number comes from the code that allocates or communicates: the
 * stage's model_dims from model_dims_init on a grid with only its sizes and
 * coordinates filled in, the tensors from model_tensor_size, the activation
 * slots from model_slot_floats / model_scratch_floats and the schedule's
 * pp_peak_bound (+2 look-ahead receives, as pp_exec_init), the traffic from
 * the calls model.c, optim.c and pipeline_exec.c make.  regression/plan.sh
 * holds the bytes to what runs allocate and count; bench/plan_vs_rss.sh the
 * peak to the measured resident set. */
#include "plan.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemm.h"
#include "log.h"
#include "model.h"
#include "optim.h"
#include "pipeline.h"
#include "cuda_sizes.h"
#include "dp.h"


static size_t round64(size_t bytes) { return (bytes + 63) / 64 * 64; } /* what xalloc_aligned reserves */
static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* The dims a rank of stage pp_rank gets: model_dims_init reads the grid's
 * sizes and coordinates only. */
static void stage_dims(struct model_dims *d, const struct config *cfg, const struct plan *p, int pp_rank)
{
    struct grid g;
    memset(&g, 0, sizeof g);
    g.world = p->world;
    g.tp = p->tp;
    g.dp = p->dp;
    g.pp = p->pp;
    g.pp_rank = pp_rank;
    g.world_comm = g.tp_comm = g.dp_comm = g.pp_comm = g.embed_comm = MPI_COMM_NULL;
    model_dims_init(d, cfg, &p->shape, &g);
}

/* Floats of params_mem / grads_mem: every tensor 16-aligned, the total a
 * multiple of 16 * dp (model_init). */
static size_t flat_floats(const struct model_dims *d, size_t *params)
{
    size_t total = 0, n = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        size_t s = model_tensor_size(d, (enum param_id)i);
        total += round16(s);
        n += s;
    }
    size_t quantum = 16 * (size_t)(d->dp > 0 ? d->dp : 1);
    if (params) *params = n;
    return (total + quantum - 1) / quantum * quantum;
}

static size_t act_bytes(const struct model_dims *d, int B, int slots)
{
    return round64((model_slot_floats(d, B) * (size_t)slots + model_scratch_floats(d, B)) * sizeof(float));
}

/* Scratch that Open MPI 4.1's collectives take for a buffer of n bytes over
 * g ranks, measured on the worst rank (bench/plan_vs_rss.sh): an in-place
 * all-reduce n/2; a reduce-scatter n at g = 2, up to 2n beyond; a
 * non-blocking all-reduce n until it completes. */
static size_t allreduce_scratch(size_t n, int g) { return g < 2 ? 0 : n / 2; }
static size_t reduce_scatter_scratch(size_t n, int g) { return g < 2 ? 0 : g == 2 ? n : 2 * n; }

/* Does the data-parallel all-reduce run in buckets during the backward (dp.c, DP_OVERLAP)? */
static int overlapped(const struct plan *p, const struct model_dims *d) { return p->overlap && d->Lp > 0; }

/* Per-layer gradients dp.c reduces in flight (LayerNorms under sequence parallelism wait). */
static size_t overlapped_bytes(const struct model_dims *d)
{
    size_t n = 0;
    for (int i = 0; i < NUM_PARAMS; i++)
        if (param_table[i].per_layer && !param_sp_partial(d, (enum param_id)i))
            n += model_tensor_size(d, (enum param_id)i) * 4;
    return n;
}

/* MPI's scratch for the largest collective this rank makes (one at a time).
 * Overlapped, every bucket's non-blocking all-reduces may be in flight at
 * once before the final wait: up to all the per-layer gradients. */
static size_t comm_buffer(const struct plan *p, const struct model_dims *d, size_t flat)
{
    size_t big = 0, NC = (size_t)p->B * d->T * d->C * 4, wte = model_tensor_size(d, P_WTE) * 4, x;
    if (p->dp > 1 && p->zero2) /* a layer at a time, then each tensor outside the layers (wte the largest) */
        big = reduce_scatter_scratch((model_layer_floats(d) > model_tensor_size(d, P_WTE) ? model_layer_floats(d)
                                                                                           : model_tensor_size(d, P_WTE)) * 4,
                                     p->dp);
    else if (p->dp > 1)
        big = p->zero ? reduce_scatter_scratch(flat * 4, p->dp)
            : overlapped(p, d) ? overlapped_bytes(d) : allreduce_scratch(flat * 4, p->dp);
    if (p->dp > 1 && overlapped(p, d) && (x = allreduce_scratch(wte, p->dp)) > big) big = x; /* the rest, after */
    if (p->tp > 1 && (x = p->sp ? reduce_scatter_scratch(NC, p->tp) : allreduce_scratch(NC, p->tp)) > big) big = x;
    if (p->pp > 1 && (x = allreduce_scratch(wte, 2)) > big) big = x;
    return big;
}

/* Bytes this rank contributes per step to each communicator, counted as
 * comm.c counts them (all-gather and reduce-scatter: the full buffer). */
static void stage_comm(struct plan_stage *s, const struct plan *p, const struct model_dims *d, size_t flat)
{
    double N = (double)p->B * d->T, NC = N * d->C * 4, Ns = d->sp ? N / d->tp : N;
    int E = model_has_embedding(d), H = model_has_head(d);
    double norms = 8.0 * (4 + 12.0 * d->L); /* one double per logical tensor (optim_grad_norm) */
    double m = p->m;
    memset(s->comm, 0, sizeof s->comm);
    if (d->tp > 1) {
        /* per micro-batch: 4 reductions per layer (2 forward, 2 backward), 2 more per layer recomputed in
         * full, the embedding's forward, the head's backward; with sequence parallelism each is a
         * reduce-scatter with an all-gather beside it */
        double red = 4.0 * d->Lp + 2.0 * d->v * d->Lr + E + H;
        s->comm[CG_TP] = m * red * NC * (d->sp ? 2 : 1) + H * m * 3 * N * 4 + norms;
        if (d->sp) /* LayerNorm gradients (ZeRO-2: the layers' per micro-batch) */
            s->comm[CG_TP] += ((p->zero2 ? m : 1) * 4.0 * d->Lp + 2.0 * H) * d->C * 4;
    }
    s->comm[CG_DP] = 8; /* the loss */
    if (p->dp > 1 && p->zero2) { /* every layer per micro-batch, the rest once; the parameters gathered */
        double rest = 0;
        for (int i = 0; i < NUM_PARAMS; i++)
            if (!param_table[i].per_layer) rest += (double)model_tensor_size(d, (enum param_id)i) * 4;
        s->comm[CG_DP] += m * d->Lp * (double)model_layer_floats(d) * 4 + rest + (double)flat * 4 + norms;
    } else if (p->dp > 1 && p->zero) s->comm[CG_DP] += 2.0 * flat * 4 + norms;
    else if (p->dp > 1 && overlapped(p, d)) s->comm[CG_DP] += (double)s->params * 4; /* tensor by tensor */
    else if (p->dp > 1) s->comm[CG_DP] += (double)flat * 4;                          /* the padded buffer */
    if (p->pp > 1) {
        int S = d->pp * d->v;
        double msgs = 0;
        for (int c = 0; c < d->v; c++) {
            int vs = c * d->pp + d->pp_rank;
            msgs += 2 * (vs > 0) + 2 * (vs < S - 1); /* activation in and gradient out; out and in */
        }
        s->comm[CG_PP] = m * msgs * Ns * d->C * 4 + 8 + norms;
        if (E || H) s->comm[CG_EMBED] = (double)model_tensor_size(d, P_WTE) * 4;
    }
}

/* The gradients: the flat layout, or (ZeRO-2) the tensors outside the
 * layers and the per-layer working buffers; + dwte_embed. */
static size_t grad_bytes(const struct model_dims *d, size_t flat, int zero2)
{
    size_t wte = model_tensor_size(d, P_WTE);
    size_t main = zero2 ? round64(model_rest_grad_floats(d) * 4) : round64(flat * 4);
    size_t buffers = zero2 && d->Lp > 0 ? round64(dp_zero2_buffer_floats(d) * 4) : 0;
    return main + buffers + round64((wte ? wte : 1) * 4);
}

/* The CUDA table's 16-bit copies of the products' operands in a bf16/fp16
 * run (cuda_lp_operand): four slots, each as large as the largest operand
 * it takes: weights or qkv; layer inputs or the attention probabilities;
 * output gradients; the softmax gradient. */
static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

static size_t lp_operand_bytes(const struct model_dims *d, int B)
{
    if (d->prec == PREC_FP32) return 0;
    size_t N = (size_t)B * d->T, C = (size_t)d->C, Cl = C / (size_t)d->tp;
    size_t att = (size_t)B * (size_t)(d->NH / d->tp) * (size_t)d->T * (size_t)d->T;
    size_t Vs = model_has_head(d) ? (size_t)d->Vp / (size_t)d->tp : 0;
    size_t slot[4] = {
        max_size(max_size(4 * Cl * C, Vs * C), N * 3 * Cl), /* weights, qkv */
        max_size(max_size(N * 4 * Cl, N * C), att),         /* layer inputs, probabilities */
        max_size(max_size(N * 4 * Cl, N * C), N * Vs),      /* output gradients */
        att,                                                /* the softmax gradient */
    };
    return 2 * (slot[0] + slot[1] + slot[2] + slot[3]);
}

static void plan_stage(struct plan_stage *s, const struct plan *p, const struct config *cfg, int r)
{
    struct model_dims d;
    stage_dims(&d, cfg, p, r);
    memset(s, 0, sizeof *s);
    s->pp_rank = r;
    s->Lp = d.Lp;
    enum pp_schedule sched = pp_schedule_from_name(cfg->parallel.schedule);
    s->in_flight = pp_peak_bound(sched, p->pp, p->v, p->m, r);
    s->slots = s->in_flight + (p->pp > 1 ? 2 : 0); /* pp_exec_init */

    size_t flat = flat_floats(&d, &s->params), shard = p->zero ? flat / (size_t)p->dp : flat;
    int lp = d.prec != PREC_FP32; /* + fp32 master weights beside m and v */
    s->bytes[PM_PARAMS] = round64(flat * 4); /* bf16/fp16 values in fp32 containers, on the GPU too (so far) */
    s->bytes[PM_GRADS] = grad_bytes(&d, flat, p->zero2);
    s->bytes[PM_OPTIM] = (2 + (size_t)lp) * round64(shard * 4) + (p->zero ? round64(shard * 4) : 0);
    int ckpt = cfg->io.save_final || cfg->io.checkpoint_every > 0 || cfg->io.restart[0];
    s->bytes[PM_CKPT] = p->zero && ckpt ? (2 + (size_t)lp) * round64(flat * 4) : 0; /* optim_gather_full */
    s->slot_bytes = model_slot_floats(&d, p->B) * 4;
    s->scratch_bytes = model_scratch_floats(&d, p->B) * 4;
    s->bytes[PM_ACTS] = act_bytes(&d, p->B, s->slots);
    for (int rc = RECOMPUTE_NONE; rc <= RECOMPUTE_FULL; rc++) {
        struct model_dims e = d;
        e.recompute = rc;
        e.Lr = rc == RECOMPUTE_FULL ? d.Lc : 0;
        s->act_by_recompute[rc] = act_bytes(&e, p->B, s->slots);
    }
    s->bytes[PM_COMM] = comm_buffer(p, &d, flat);
    s->bytes[PM_WORK] = p->cuda ? lp_operand_bytes(&d, p->B) + CUDA_CONTEXT_SCRATCH_BYTES
                                : (size_t)p->threads * gemm_pack_bytes();
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
    stage_comm(s, p, &d, flat);
}

int plan_compute(struct plan *p, const struct config *cfg, int world, int threads, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    char why[256];
    const struct kernels *k = kernels_for(cfg, why, sizeof why); /* (NULL: planned for an unbuilt device) */
    struct run_shape *s = &p->shape;
    run_shape_init(s, cfg, world, k ? kernels_staged(k) : 0);
    p->tp = s->tp;
    p->pp = s->pp;
    p->dp = s->dp;
    p->B = s->micro_batch;
    if (p->dp <= 0 || p->B <= 0 || (int64_t)p->tp * p->pp * p->dp != world) {
        snprintf(err, errlen, "%d ranks do not make a grid of tp = %d x pp = %d x dp", world, p->tp, p->pp);
        return -1;
    }
    p->world = world;
    p->v = s->v;
    p->m = s->n_micro;
    p->sp = s->sp;
    p->zero = s->zero;
    p->zero2 = s->zero2;
    p->overlap = s->overlap;
    p->cuda = config_is(cfg->train.device, "cuda");
    p->threads = threads > 0 ? threads : cfg->train.threads > 0 ? (int)cfg->train.threads : omp_get_max_threads();
    p->bubble = pp_bubble_formula(p->pp, p->v, p->m, &p->bubble_num, &p->bubble_den);
    p->stage = xcalloc((size_t)p->pp, sizeof *p->stage);
    for (int r = 0; r < p->pp; r++) {
        plan_stage(&p->stage[r], p, cfg, r);
        if (p->stage[r].peak > p->peak) p->peak = p->stage[r].peak, p->peak_stage = r;
    }
    struct model_dims d;
    stage_dims(&d, cfg, p, 0);
    p->logical_params = model_logical_params(&d);
    p->recompute = d.recompute;
    return 0;
}

void plan_free(struct plan *p)
{
    free(p->stage);
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
    if (config_is(cfg->train.device, "cuda")) {
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

/* ------------------------------------------------------------ printing */

/* Bytes in the unit of the table: GiB when the peak reaches 1 GiB, else MiB. */
static double unit_div(const struct plan *p) { return p->peak >= ((size_t)1 << 30) ? 1073741824.0 : 1048576.0; }
static const char *unit_name(const struct plan *p) { return p->peak >= ((size_t)1 << 30) ? "GiB" : "MiB"; }

static void human(char *buf, size_t n, double bytes)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = 0;
    while (bytes >= 1024 && i < 5) bytes /= 1024, i++;
    snprintf(buf, n, i == 0 ? "%.0f %s" : "%.1f %s", bytes, u[i]);
}

/* Stages a..b print as one row when every number of theirs is the same. */
static int same_stage(const struct plan_stage *a, const struct plan_stage *b)
{
    return a->Lp == b->Lp && a->slots == b->slots && a->in_flight == b->in_flight && a->params == b->params &&
           !memcmp(a->bytes, b->bytes, sizeof a->bytes) &&
           !memcmp(a->act_by_recompute, b->act_by_recompute, sizeof a->act_by_recompute) &&
           !memcmp(a->comm, b->comm, sizeof a->comm);
}

static void stage_label(char *buf, size_t n, const struct plan *p, int a, int b)
{
    const char *what = p->pp == 1 ? "" : a == 0 ? " (embed)" : b == p->pp - 1 ? " (head)" : "";
    if (p->pp == 1) snprintf(buf, n, "all");
    else if (a == b) snprintf(buf, n, "%d%s", a, what);
    else snprintf(buf, n, "%d-%d%s", a, b, what);
}

/* The last stage of the run of stages alike to stage a. */
static int run_end(const struct plan *p, int a)
{
    int b = a;
    while (b + 1 < p->pp && same_stage(&p->stage[a], &p->stage[b + 1])) b++;
    return b;
}

static void print_memory(FILE *f, const struct plan *p)
{
    double u = unit_div(p);
    int ck = 0;
    for (int r = 0; r < p->pp; r++) ck |= p->stage[r].bytes[PM_CKPT] > 0;
    fprintf(f, "memory per rank (%s):\n", unit_name(p));
    fprintf(f, "  %-11s %6s %9s %8s %8s %9s %11s %9s %7s %8s%s %8s\n", "stage", "layers", "in flight", "params",
            "grads", "optimizer", "activations", "workspace", "runtime", "comm buf", ck ? "  ZeRO ckpt" : "", "peak");
    for (int a = 0, b = 0; a < p->pp; a = b + 1) {
        b = run_end(p, a);
        const struct plan_stage *s = &p->stage[a];
        char lab[48], inf[24], cks[24] = "";
        stage_label(lab, sizeof lab, p, a, b);
        snprintf(inf, sizeof inf, "%d/%d", s->in_flight, s->slots);
        if (ck) snprintf(cks, sizeof cks, " %10.2f", s->bytes[PM_CKPT] / u);
        fprintf(f, "  %-11s %6d %9s %8.2f %8.2f %9.2f %11.2f %9.2f %7.2f %8.2f%s %8.2f\n", lab, s->Lp, inf,
                s->bytes[PM_PARAMS] / u, s->bytes[PM_GRADS] / u, s->bytes[PM_OPTIM] / u, s->bytes[PM_ACTS] / u,
                s->bytes[PM_WORK] / u, s->bytes[PM_RUNTIME] / u, s->bytes[PM_COMM] / u, cks, s->peak / u);
    }
    fprintf(f, "  in flight: micro-batches (x chunks) the schedule holds at once / slots allocated%s\n",
            p->pp > 1 ? " (+2 look-ahead receives)" : "");
    if (p->cuda)
        fprintf(f, "  workspace: the backend's reduction scratch and the 16-bit copies of the products' operands\n"
                   "  (bf16/fp16); runtime: CUDA context, cuBLAS, allocator (an estimate, 2 GiB: not yet measured\n"
                   "  on a GPU)\n");
    else
        fprintf(f, "  workspace: gemm packing, %d thread(s); runtime: MPI, HDF5, the libraries (measured)\n",
                p->threads);
    char probe[96] = "";
    if (p->stage[0].bytes[PM_PROBE] && p->cuda)
        snprintf(probe, sizeof probe, ", the start-up GEMM that measures the peak (%d^2)", CUDA_PROBE_N);
    else if (p->stage[0].bytes[PM_PROBE])
        snprintf(probe, sizeof probe, ", the start-up sgemm probe (%.0f MiB)", gemm_probe_bytes() / 1048576.0);
    fprintf(f, "  peak = the resident columns + the largest temporary, one at a time: comm buf (MPI's scratch for\n"
               "        the largest collective)%s%s\n",
            ck ? ", ZeRO ckpt (the full m and v while a checkpoint is written)" : "", probe);
    fprintf(f, "\nactivations per rank (%s) by recomputation%s:\n", unit_name(p),
            p->recompute == RECOMPUTE_FULL ? " (full: all layers)" : "");
    fprintf(f, "  %-14s %10s %10s %12s %10s %10s\n", "stage", "per slot", "scratch", "none", "selective", "full");
    for (int a = 0, b = 0; a < p->pp; a = b + 1) {
        b = run_end(p, a);
        const struct plan_stage *s = &p->stage[a];
        char lab[48];
        stage_label(lab, sizeof lab, p, a, b);
        fprintf(f, "  %-14s %10.2f %10.2f %12.2f %10.2f %10.2f\n", lab, s->slot_bytes / u, s->scratch_bytes / u,
                s->act_by_recompute[0] / u, s->act_by_recompute[1] / u, s->act_by_recompute[2] / u);
    }
}

static void print_fit(FILE *f, const struct plan *p, double avail, const char *source)
{
    char need[32], have[32];
    human(need, sizeof need, (double)p->peak);
    if (avail <= 0) {
        fprintf(f, "\nmemory available: %s; peak %s per rank (stage %d): fit not checked\n", source, need,
                p->peak_stage);
        return;
    }
    human(have, sizeof have, avail);
    fprintf(f, "\nmemory available: %s per rank (%s)\n", have, source);
    if ((double)p->peak <= avail)
        fprintf(f, "FITS: peak %s per rank (stage %d), %.0f%% of the memory\n", need, p->peak_stage,
                100.0 * p->peak / avail);
    else
        fprintf(f, "DOES NOT FIT: stage %d needs %s per rank, %.2fx the %s available\n", p->peak_stage, need,
                p->peak / avail, have);
}

/* ------------------------------------------------------------ suggestions */

int plan_validate(const struct config *cfg, int world, struct config_error *err)
{
    struct config c = *cfg;
    snprintf(c.train.device, CONFIG_STRLEN, "cpu"); /* the plan's arithmetic is the same on any device */
    return config_validate(&c, world, err);
}

struct change {
    struct config cfg;
    int world;
    char what[160];
    size_t peak;
};

/* Re-plan c; 0 if it is a valid deck that lowers the peak below `than`. */
static int replan(struct change *c, size_t than)
{
    struct config_error err;
    struct plan q;
    char e[256];
    if (plan_validate(&c->cfg, c->world, &err) != 0) return -1;
    if (plan_compute(&q, &c->cfg, c->world, 0, e, sizeof e) != 0) return -1;
    c->peak = q.peak;
    plan_free(&q);
    return c->peak < than ? 0 : -1;
}

/* The single changes worth trying on cfg (world ranks). */
static int candidates(struct change *out, int max, const struct config *cfg, int world)
{
    int n = 0, dp = config_dp(cfg, world), B = config_micro_batch(cfg, world);
    int64_t tp = cfg->parallel.tp, pp = cfg->parallel.pp;
#define ADD(...)                                                                  \
    do {                                                                          \
        if (n < max) {                                                            \
            out[n].cfg = *cfg;                                                    \
            out[n].cfg.parallel.dp = dp;                                          \
            out[n].world = world;                                                 \
            snprintf(out[n].what, sizeof out[n].what, __VA_ARGS__);               \
            n++;                                                                  \
        }                                                                         \
    } while (0)
#define LAST (&out[n - 1].cfg)
    for (int nb = B / 2; nb >= 1; nb = nb > 1 ? 1 : 0) {
        ADD("micro_batch_size %d -> %d", B, nb);
        LAST->train.micro_batch_size = nb;
        if (nb == 1) break;
    }
    if (!config_is(cfg->train.recompute, "selective") && !config_is(cfg->train.recompute, "full")) {
        ADD("recompute '%.16s' -> 'selective'", cfg->train.recompute);
        snprintf(LAST->train.recompute, CONFIG_STRLEN, "selective");
    }
    if (!config_is(cfg->train.recompute, "full") || cfg->train.recompute_layers > 0) {
        ADD("recompute '%.16s' -> 'full'%s", cfg->train.recompute, cfg->train.recompute_layers ? " (all layers)" : "");
        snprintf(LAST->train.recompute, CONFIG_STRLEN, "full");
        LAST->train.recompute_layers = 0;
    }
    if (tp > 1 && !cfg->parallel.sequence_parallel) {
        ADD("sequence_parallel .false. -> .true.");
        LAST->parallel.sequence_parallel = 1;
    }
    if (!config_is(cfg->parallel.schedule, "1f1b") && cfg->parallel.virtual_stages == 1) {
        ADD("schedule '%.16s' -> '1f1b'", cfg->parallel.schedule);
        snprintf(LAST->parallel.schedule, CONFIG_STRLEN, "1f1b");
    }
    if (dp > 1 && cfg->parallel.zero_stage == 0) {
        ADD("zero_stage 0 -> 1 (optimizer state sharded over dp = %d)", dp);
        LAST->parallel.zero_stage = 1;
    }
    if (dp > 1 && cfg->parallel.zero_stage < 2) {
        ADD("zero_stage %lld -> 2 (optimizer state and gradients sharded over dp = %d)",
            (long long)cfg->parallel.zero_stage, dp);
        LAST->parallel.zero_stage = 2;
    }
    if (config_is(cfg->train.precision, "fp32")) { /* halves the activations kept for backward */
        ADD("precision 'fp32' -> 'bf16'");
        snprintf(LAST->train.precision, CONFIG_STRLEN, "bf16");
    }
    if (dp % 2 == 0) {
        ADD("pp %lld -> %lld, dp %d -> %d (same %d ranks)", (long long)pp, (long long)pp * 2, dp, dp / 2, world);
        LAST->parallel.pp = pp * 2;
        LAST->parallel.dp = dp / 2;
        ADD("tp %lld -> %lld, dp %d -> %d (same %d ranks)", (long long)tp, (long long)tp * 2, dp, dp / 2, world);
        LAST->parallel.tp = tp * 2;
        LAST->parallel.dp = dp / 2;
    }
    ADD("pp %lld -> %lld (%d -> %d ranks)", (long long)pp, (long long)pp * 2, world, world * 2);
    LAST->parallel.pp = pp * 2;
    out[n - 1].world = world * 2;
    ADD("tp %lld -> %lld (%d -> %d ranks)", (long long)tp, (long long)tp * 2, world, world * 2);
    LAST->parallel.tp = tp * 2;
    out[n - 1].world = world * 2;
#undef ADD
#undef LAST
    return n;
}

static int by_peak(const void *a, const void *b)
{
    size_t x = ((const struct change *)a)->peak, y = ((const struct change *)b)->peak;
    return x < y ? -1 : x > y;
}

enum { MAX_CHANGES = 16 };

void plan_print_advice(FILE *f, const struct plan *p, const struct config *cfg, double avail)
{
    struct change *c = xcalloc(MAX_CHANGES, sizeof *c);
    int n = candidates(c, MAX_CHANGES, cfg, p->world), k = 0;
    for (int i = 0; i < n; i++)
        if (replan(&c[i], p->peak) == 0) c[k++] = c[i];
    qsort(c, (size_t)k, sizeof *c, by_peak);
    if (k == 0) {
        fprintf(f, "\nno single change to the deck lowers the peak\n");
        free(c);
        return;
    }
    char h[32];
    fprintf(f, "\nsuggestions (each deck re-planned; lowest peak first):\n");
    for (int i = 0; i < k; i++) {
        human(h, sizeof h, (double)c[i].peak);
        fprintf(f, "  %-58s %10s%s\n", c[i].what, h, avail <= 0 ? "" : c[i].peak <= avail ? "  fits" : "");
    }
    /* nothing fits alone: apply the best change, re-plan, repeat */
    if (avail > 0 && c[0].peak > avail) {
        struct change cur = c[0];
        char chain[640];
        snprintf(chain, sizeof chain, "%s", c[0].what);
        for (int step = 0; step < 4 && cur.peak > avail; step++) {
            struct change *d = xcalloc(MAX_CHANGES, sizeof *d);
            int m = candidates(d, MAX_CHANGES, &cur.cfg, cur.world), best = -1;
            for (int i = 0; i < m; i++)
                if (replan(&d[i], cur.peak) == 0 && (best < 0 || d[i].peak < d[best].peak)) best = i;
            if (best >= 0) {
                snprintf(chain + strlen(chain), sizeof chain - strlen(chain), " + %s", d[best].what);
                cur = d[best];
            }
            free(d);
            if (best < 0) break;
        }
        human(h, sizeof h, (double)cur.peak);
        fprintf(f, "  together: %s: %s%s\n", chain, h, cur.peak <= avail ? "  fits" : "  (still does not fit)");
    }
    free(c);
}

static void print_comm(FILE *f, const struct plan *p)
{
    const enum comm_group cg[] = {CG_TP, CG_DP, CG_PP, CG_EMBED};
    fprintf(f, "\ncommunication per step and rank (payload bytes, as the run's counters count them):\n");
    fprintf(f, "  %-14s %12s %12s %12s %12s\n", "stage", "tp", "dp", "pp", "embed");
    for (int a = 0, b = 0; a < p->pp; a = b + 1) {
        b = run_end(p, a);
        char lab[48], v[4][32];
        stage_label(lab, sizeof lab, p, a, b);
        for (int i = 0; i < 4; i++) human(v[i], sizeof v[i], p->stage[a].comm[cg[i]]);
        fprintf(f, "  %-14s %12s %12s %12s %12s\n", lab, v[0], v[1], v[2], v[3]);
    }
    fprintf(f, "  tp: per micro-batch (4 x layers + embedding + head) x B*T*C*4 bytes (x2 with sequence\n"
               "      parallelism: all-gather + reduce-scatter), + 2 per layer recomputed in full, + the\n"
               "      cross-entropy statistics; dp: the whole gradient all-reduced (ZeRO-1: reduce-scatter +\n"
               "      all-gather of the parameters; ZeRO-2: each layer's gradients reduce-scattered per\n"
               "      micro-batch, the rest once per step, + the all-gather); pp: B*T*C*4 (/tp with sequence\n"
               "      parallelism) per micro-batch\n"
               "      and chunk boundary, sent and received, forward and backward; embed: wte's gradient\n"
               "      all-reduced between the first and the last stage.\n");
}

void plan_print(FILE *f, const struct plan *p, const struct config *cfg, double avail, const char *avail_source)
{
    struct model_dims d;
    stage_dims(&d, cfg, p, 0);
    char full[32];
    human(full, sizeof full, (double)p->logical_params * 4);
    fprintf(f, "plan for %d ranks = tp %d x dp %d x pp %d (device '%s', %s)\n", p->world, p->tp, p->dp, p->pp,
            cfg->train.device, cfg->train.precision);
    int big = p->logical_params >= 1000000000;
    fprintf(f, "model: L=%d C=%d NH=%d T=%d V=%d (padded %d): %lld parameters (%.1f %s), %s in fp32 (%.1f GB)\n",
            d.L, d.C, d.NH, d.T, d.V, d.Vp, (long long)p->logical_params, p->logical_params / (big ? 1e9 : 1e6),
            big ? "billion" : "million", full, p->logical_params * 4 / 1e9);
    fprintf(f, "batch: %lld sequences per step: %d micro-batch(es) of %d per replica; schedule %s, %d chunk(s) "
               "per rank, %d layers per chunk; recompute '%s'%s\n", (long long)cfg->train.batch_size, p->m, p->B,
            cfg->parallel.schedule, p->v, d.Lc, cfg->train.recompute, p->sp ? "; sequence parallel" : "");
    if (p->pp > 1)
        fprintf(f, "pipeline bubble: (p-1)/(v*m+p-1) = %ld/%ld = %.1f%%\n", p->bubble_num, p->bubble_den,
                100 * p->bubble);
    int lp = d.prec != PREC_FP32;
    fprintf(f, "optimizer: AdamW m and v%s in fp32, %s\n", lp ? " and the master weights" : "",
            p->zero2  ? "ZeRO-2: a 1/dp slice per rank, and of the gradients (the full state is gathered while "
                        "a checkpoint is written or read: column 'ckpt')"
            : p->zero ? "ZeRO-1: a 1/dp slice per rank (the full state is gathered while a checkpoint is "
                        "written or read: column 'ckpt')"
                      : "replicated on every data-parallel rank (zero_stage = 0)");
    if (lp)
        fprintf(f, "precision: %s parameters (values of the format in fp32 containers) and activations (stored "
                   "layers packed in 16 bits), fp32 gradients\n", cfg->train.precision);
    fputc('\n', f);
    print_memory(f, p);
    print_fit(f, p, avail, avail_source);
    if (avail > 0 && (double)p->peak > avail) plan_print_advice(f, p, cfg, avail);
    print_comm(f, p);
    fprintf(f, "\nexact bytes per rank (what a run allocates, as its log prints them; what it counts):\n");
    for (int r = 0; r < p->pp; r++) {
        const struct plan_stage *s = &p->stage[r];
        fprintf(f, "  stage %d: parameters %zu, gradients %zu, optimizer %zu, activations %zu bytes\n", r,
                s->bytes[PM_PARAMS], s->bytes[PM_GRADS], s->bytes[PM_OPTIM], s->bytes[PM_ACTS]);
    }
    for (int r = 0; p->cuda && r < p->pp; r++) {
        const struct plan_stage *s = &p->stage[r];
        fprintf(f, "  stage %d device memory: %zu bytes (parameters to workspace; not the CUDA runtime's own)\n", r,
                s->bytes[PM_PARAMS] + s->bytes[PM_GRADS] + s->bytes[PM_OPTIM] + s->bytes[PM_ACTS] + s->bytes[PM_WORK]);
    }
    for (int r = 0; r < p->pp; r++)
        fprintf(f, "  stage %d peak: %zu bytes\n", r, p->stage[r].peak);
    for (int r = 0; r < p->pp; r++)
        fprintf(f, "  stage %d traffic per step: tp %.0f, dp %.0f, pp %.0f, embed %.0f bytes\n", r,
                p->stage[r].comm[CG_TP], p->stage[r].comm[CG_DP], p->stage[r].comm[CG_PP], p->stage[r].comm[CG_EMBED]);
}

/* ------------------------------------------------------------ in a run */

void plan_check(const struct config *cfg, const struct grid *g)
{
    struct plan p;
    char err[512], source[256];
    if (plan_compute(&p, cfg, g->world, omp_get_max_threads(), err, sizeof err) != 0)
        die_all(NULL, "memory plan: %s", err);
    MPI_Comm node;
    int per_node;
    MPI_CHECK(MPI_Comm_split_type(g->world_comm, MPI_COMM_TYPE_SHARED, g->rank, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_size(node, &per_node));
    MPI_CHECK(MPI_Comm_free(&node));
    double avail = plan_memory_available(cfg, per_node, source, sizeof source);
    double need = (double)p.stage[g->pp_rank].peak;
    int mine = avail > 0 && need > avail, any;
    double have = avail > 0 ? avail : INFINITY, least;
    MPI_CHECK(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, g->world_comm));
    MPI_CHECK(MPI_Allreduce(&have, &least, 1, MPI_DOUBLE, MPI_MIN, g->world_comm));
    char h_need[32], h_have[32];
    human(h_need, sizeof h_need, (double)p.peak);
    human(h_have, sizeof h_have, isinf(least) ? 0 : least);
    if (!any) {
        if (isinf(least)) log_info("memory plan: peak %s per rank (stage %d); memory available: %s\n", h_need,
                                   p.peak_stage, source);
        else log_info("memory plan: peak %s per rank (stage %d) of %s available (%s)\n", h_need, p.peak_stage,
                      h_have, source);
        plan_free(&p);
        return;
    }
    /* everything printed before any rank leaves: mpirun aborts the job on the first exit status 1 */
    if (g->rank == 0) {
        print_memory(stdout, &p);
        print_fit(stdout, &p, least, source);
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

void plan_log_allocated(const struct model *m, const struct optim *o, const struct grid *g)
{
    unsigned long long mine[4] = {
        round64(m->flat * 4),
        grad_bytes(&m->d, m->flat, o->zero2),
        (2 + (o->master_mem ? 1ull : 0ull)) * round64(o->shard * 4) + (o->gshard ? round64(o->shard * 4) : 0),
        round64(m->act_bytes),
    };
    unsigned long long *all = g->rank == 0 ? xmalloc((size_t)g->world * sizeof mine) : NULL;
    MPI_CHECK(MPI_Gather(mine, 4, MPI_UNSIGNED_LONG_LONG, all, 4, MPI_UNSIGNED_LONG_LONG, 0, g->world_comm));
    if (g->rank != 0) return;
    for (int r = 0; r < g->pp; r++) {
        const unsigned long long *s = all + 4 * grid_rank_of(g, 0, 0, r);
        log_info("memory allocated, stage %d: parameters %llu, gradients %llu, optimizer %llu, activations %llu "
                 "bytes\n", r, s[0], s[1], s[2], s[3]);
    }
    free(all);
}
