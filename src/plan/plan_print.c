/* plan_print.c -- a plan written out: memory per stage, the fit, traffic, bubble. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_sizes.h"
#include "gemm.h"
#include "log.h"
#include "model.h"
#include "plan_internal.h"

/* ------------------------------------------------------------ printing */

/* Bytes in the unit of the table: GiB when the peak reaches 1 GiB, else MiB. */
static double unit_div(const struct plan *p) { return p->peak >= ((size_t)1 << 30) ? 1073741824.0 : 1048576.0; }
static const char *unit_name(const struct plan *p) { return p->peak >= ((size_t)1 << 30) ? "GiB" : "MiB"; }

void plan_human(char *buf, size_t n, double bytes)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = 0;
    while (bytes >= 1024 && i < 5) bytes /= 1024, i++;
    snprintf(buf, n, i == 0 ? "%.0f %s" : "%.1f %s", bytes, u[i]);
}

/* Stages a..b print as one row when every number of theirs is the same. */
static int same_stage(const struct plan_stage *a, const struct plan_stage *b)
{
    return a->Lp == b->Lp && a->slots == b->slots && a->in_flight == b->in_flight && a->recv == b->recv &&
           a->wslots == b->wslots && a->params == b->params &&
           !memcmp(a->bytes, b->bytes, sizeof a->bytes) &&
           !memcmp(a->act_by_recompute, b->act_by_recompute, sizeof a->act_by_recompute) &&
           !memcmp(a->comm, b->comm, sizeof a->comm);
}

static void stage_label(char *buf, size_t n, const struct plan *p, int a, int b)
{
    int v = p->shape.sched == PP_ZBV; /* (a V: rank 0 holds the first stage and the last) */
    const char *what = p->shape.pp == 1 ? "" : a == 0 ? (v ? " (embed+head)" : " (embed)")
                       : b == p->shape.pp - 1 && !v ? " (head)" : "";
    if (p->shape.pp == 1) snprintf(buf, n, "all");
    else if (a == b) snprintf(buf, n, "%d%s", a, what);
    else snprintf(buf, n, "%d-%d%s", a, b, what);
}

/* The last stage of the run of stages alike to stage a. */
static int run_end(const struct plan *p, int a)
{
    int b = a;
    while (b + 1 < p->shape.pp && same_stage(&p->stage[a], &p->stage[b + 1])) b++;
    return b;
}

void plan_print_memory(FILE *f, const struct plan *p)
{
    double u = unit_div(p);
    fprintf(f, "memory per rank (%s):\n", unit_name(p));
    int ck = 0, sn = 0;
    for (int r = 0; r < p->shape.pp; r++) {
        ck |= p->stage[r].bytes[PM_CKPT] > 0;
        sn |= p->stage[r].bytes[PM_SNAPSHOT] > 0;
    }
    int lw = 11; /* the stage column: as wide as its longest label */
    for (int a = 0, b = 0; a < p->shape.pp; a = b + 1) {
        char lab[48];
        b = run_end(p, a);
        stage_label(lab, sizeof lab, p, a, b);
        if ((int)strlen(lab) > lw) lw = (int)strlen(lab);
    }
    fprintf(f, "  %-*s %6s %9s %8s %8s %9s %11s %9s %7s%s %8s%s %8s\n", lw, "stage", "layers", "in flight", "params",
            "grads", "optimizer", "activations", "workspace", "runtime", sn ? " snapshot" : "", "comm buf",
            ck ? " ckpt check" : "", "peak");
    for (int a = 0, b = 0; a < p->shape.pp; a = b + 1) {
        b = run_end(p, a);
        const struct plan_stage *s = &p->stage[a];
        char lab[48], inf[24], cks[24] = "", sns[24] = "";
        stage_label(lab, sizeof lab, p, a, b);
        int k = snprintf(inf, sizeof inf, "%d", s->slots);
        if (s->recv) k += snprintf(inf + k, sizeof inf - (size_t)k, "+%dr", s->recv);
        if (s->wslots) snprintf(inf + k, sizeof inf - (size_t)k, "+%dw", s->wslots);
        if (ck) snprintf(cks, sizeof cks, " %10.2f", s->bytes[PM_CKPT] / u);
        if (sn) snprintf(sns, sizeof sns, " %8.2f", s->bytes[PM_SNAPSHOT] / u);
        fprintf(f, "  %-*s %6d %9s %8.2f %8.2f %9.2f %11.2f %9.2f %7.2f%s %8.2f%s %8.2f\n", lw, lab, s->Lp, inf,
                s->bytes[PM_PARAMS] / u, s->bytes[PM_GRADS] / u, s->bytes[PM_OPTIM] / u, s->bytes[PM_ACTS] / u,
                s->bytes[PM_WORK] / u, s->bytes[PM_RUNTIME] / u, sns, s->bytes[PM_COMM] / u, cks, s->peak / u);
    }
    int w = 0;
    for (int r = 0; r < p->shape.pp; r++) w |= p->stage[r].wslots > 0;
    fprintf(f, "  in flight: activation slots, the micro-batches (x chunks) the schedule holds at once%s\n",
            p->shape.pp > 1 ? "; +Nr: N receive\n  buffers of one chunk input each (the look-ahead: received before its slot is taken)" : "");
    if (w)
        fprintf(f, "  +Nw: N pending weight gradients (a backward split into B and W: what W needs, kept from B;\n"
                   "  the slot itself is held until W)\n");
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
    if (sn)
        fprintf(f, "  snapshot: io.async_checkpoint's host copy of the state a rank writes (pinned on a GPU;\n"
                   "  ranks that own less hold less: data-parallel replicas other than the first, without ZeRO)\n");
    fprintf(f, "  peak = the resident columns + the largest temporary, one at a time: comm buf (MPI's scratch for\n"
               "        the largest collective)%s%s\n",
            ck ? ", ckpt check (one tensor read back to verify a checkpoint)" : "", probe);
    if (p->rank0_peak > p->stage[0].peak) { /* (rank0_moments) */
        char tok[96] = "", io[96] = "";
        if (p->rank0_tokenizer)
            snprintf(tok, sizeof tok, "the tokenizer's parse at start-up %.2f (%dx its files)", p->rank0_tokenizer / u,
                     PLAN_TOKENIZER_FACTOR);
        if (p->rank0_mpiio)
            snprintf(io, sizeof io, "MPI-IO's aggregation of a checkpoint's largest dataset %.2f", p->rank0_mpiio / u);
        fprintf(f, "  rank 0 holds more than its stage: metrics.h5 and the run's summaries %.2f%s%s%s%s;\n"
                   "    its peak %.2f\n", p->rank0_runtime / u,
                tok[0] && io[0] ? ", + the larger of " : tok[0] || io[0] ? ", + " : "", tok,
                tok[0] && io[0] ? "\n    and " : "", io, p->rank0_peak / u);
    }
    fprintf(f, "\nactivations per rank (%s) by recomputation%s:\n", unit_name(p),
            p->recompute == RECOMPUTE_FULL ? " (full: all layers)" : "");
    fprintf(f, "  %-14s %10s%s %10s %12s %10s %10s\n", "stage", "per slot", w ? "      per W" : "", "scratch", "none",
            "selective", "full");
    for (int a = 0, b = 0; a < p->shape.pp; a = b + 1) {
        b = run_end(p, a);
        const struct plan_stage *s = &p->stage[a];
        char lab[48], pw[24] = "";
        stage_label(lab, sizeof lab, p, a, b);
        if (w) snprintf(pw, sizeof pw, " %10.2f", s->wslot_bytes / u);
        fprintf(f, "  %-14s %10.2f%s %10.2f %12.2f %10.2f %10.2f\n", lab, s->slot_bytes / u, pw, s->scratch_bytes / u,
                s->act_by_recompute[0] / u, s->act_by_recompute[1] / u, s->act_by_recompute[2] / u);
    }
}

void plan_print_fit(FILE *f, const struct plan *p, double avail, const char *source)
{
    char need[32], have[32], where[32];
    plan_human(need, sizeof need, (double)p->peak);
    plan_peak_where(where, sizeof where, p);
    if (avail <= 0) {
        fprintf(f, "\nmemory available: %s; peak %s per rank (%s): fit not checked\n", source, need, where);
        return;
    }
    plan_human(have, sizeof have, avail);
    fprintf(f, "\nmemory available: %s per rank (%s)\n", have, source);
    if ((double)p->peak <= avail)
        fprintf(f, "FITS: peak %s per rank (%s), %.0f%% of the memory\n", need, where, 100.0 * p->peak / avail);
    else
        fprintf(f, "DOES NOT FIT: %s needs %s per rank, %.2fx the %s available\n", where, need, p->peak / avail, have);
}

void plan_peak_where(char *buf, size_t n, const struct plan *p)
{
    if (p->peak_stage < 0) snprintf(buf, n, "rank 0");
    else snprintf(buf, n, "stage %d", p->peak_stage);
}

static void print_comm(FILE *f, const struct plan *p)
{
    const enum comm_group cg[] = {CG_TP, CG_DP, CG_PP, CG_EMBED, CG_CP};
    int ncol = p->shape.cp > 1 ? 5 : 4; /* (the cp column where there is context parallelism) */
    fprintf(f, "\ncommunication per step and rank (payload bytes, as the run's counters count them):\n");
    fprintf(f, "  %-14s", "stage");
    for (int i = 0; i < ncol; i++) fprintf(f, " %12s", comm_group_name(cg[i]));
    fprintf(f, "\n");
    for (int a = 0, b = 0; a < p->shape.pp; a = b + 1) {
        b = run_end(p, a);
        char lab[48], v[32];
        stage_label(lab, sizeof lab, p, a, b);
        fprintf(f, "  %-14s", lab);
        for (int i = 0; i < ncol; i++) {
            plan_human(v, sizeof v, p->stage[a].comm[cg[i]]);
            fprintf(f, " %12s", v);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "  tp: per micro-batch (%d x layers + embedding + head) x B*T*C*4 bytes (x2 with sequence\n"
               "      parallelism: all-gather + reduce-scatter), + %d per layer recomputed in full, + the\n"
               "      cross-entropy statistics; dp: the whole gradient all-reduced (ZeRO-1: reduce-scatter +\n"
               "      all-gather of the parameters; ZeRO-2: each layer's gradients reduce-scattered per\n"
               "      micro-batch, the rest once per step, + the all-gather; ZeRO-3: as ZeRO-2, but only the\n"
               "      rest all-gathered, and each layer's parameters whenever a pass needs them and the two\n"
               "      gather buffers do not hold them); pp: B*T*C*4 (/tp with sequence parallelism) per\n"
               "      micro-batch and chunk boundary, sent and received, forward and backward; embed: wte's\n"
               "      gradient all-reduced between the first and the last stage.\n",
            2 * MODEL_TP_REGIONS, MODEL_TP_REGIONS);
    if (p->shape.cp > 1)
        fprintf(f, "  cp: ring attention, per micro-batch and layer each rank's packed keys and values (B*T/cp*\n"
                   "      2*kv heads/tp*HS*4 bytes) sent and received cp-1 times forward (and again when recomputed),\n"
                   "      cp-1 times backward, and their gradients cp times; dp spans the dp * cp ranks.\n");
}

void plan_print(FILE *f, const struct plan *p, const struct config *cfg, double avail, const char *avail_source)
{
    struct model_dims d;
    plan_stage_dims(&d, cfg, p, 0);
    char full[32];
    plan_human(full, sizeof full, (double)p->logical_params * 4);
    char cp[32] = "";
    if (p->shape.cp > 1) snprintf(cp, sizeof cp, " x cp %d", p->shape.cp);
    fprintf(f, "plan for %d ranks = tp %d%s x dp %d x pp %d (device '%s', %s)\n", p->shape.world, p->shape.tp, cp,
            p->shape.dp, p->shape.pp, cfg->train.device, cfg->train.precision);
    int big = p->logical_params >= 1000000000;
    fprintf(f, "model: L=%d C=%d NH=%d T=%d V=%d (padded %d): %lld parameters (%.1f %s), %s in fp32 (%.1f GB)\n",
            d.L, d.C, d.NH, d.T, d.V, d.Vp, (long long)p->logical_params, p->logical_params / (big ? 1e9 : 1e6),
            big ? "billion" : "million", full, p->logical_params * 4 / 1e9);
    fprintf(f, "batch: %lld sequences per step: %d micro-batch(es) of %d per replica; schedule %s, %d chunk(s) "
               "per rank, %d layers per chunk; recompute '%s'%s\n", (long long)cfg->train.batch_size, p->shape.n_micro, p->shape.micro_batch,
            cfg->parallel.schedule, p->shape.v, d.Lc, cfg->train.recompute, p->shape.sp ? "; sequence parallel" : "");
    if (p->shape.pp > 1)
        fprintf(f, "pipeline bubble: %s = %ld/%ld = %.1f%% (simulated with F:B:W = %d:%d:%d by FLOPs: %.1f%%)\n",
                p->bubble_formula ? "(p-1)/(v*m+p-1)" : "simulated (F = B = W = 1, triad schedule)", p->bubble_num,
                p->bubble_den, 100 * (double)p->bubble_num / (double)p->bubble_den, p->cost[0], p->cost[1],
                p->cost[2], 100 * p->bubble);
    int lp = d.prec != PREC_FP32;
    fprintf(f, "optimizer: AdamW m and v%s in fp32, %s\n", lp ? " and the master weights" : "",
            p->shape.zero_stage == 3
                ? "ZeRO-3: a 1/dp slice per rank, and of the gradients and of the layers' parameters (each layer "
                  "gathered before its forward and its backward; each rank writes and reads its slice of a "
                  "checkpoint itself)"
            : p->shape.zero_stage == 2
                ? "ZeRO-2: a 1/dp slice per rank, and of the gradients (each rank writes and reads its slice of a "
                  "checkpoint itself)"
            : p->shape.zero_stage == 1
                ? "ZeRO-1: a 1/dp slice per rank (each rank writes and reads its slice of a checkpoint itself)"
                : "replicated on every data-parallel rank (zero_stage = 0)");
    if (lp)
        fprintf(f, "precision: %s parameters (values of the format in fp32 containers) and activations (stored "
                   "layers %s), fp32 gradients\n", cfg->train.precision,
                cfg->train.pack_activations ? "packed in 16 bits" : "in fp32 containers");
    fputc('\n', f);
    plan_print_memory(f, p);
    plan_print_fit(f, p, avail, avail_source);
    if (avail > 0 && (double)p->peak > avail) plan_print_advice(f, p, cfg, avail);
    plan_print_bubble(f, p, cfg, avail);
    print_comm(f, p);
    fprintf(f, "\nexact bytes per rank (what a run allocates, as its log prints them; what it counts):\n");
    for (int r = 0; r < p->shape.pp; r++) {
        const struct plan_stage *s = &p->stage[r];
        fprintf(f, "  stage %d: parameters %zu, gradients %zu, optimizer %zu, activations %zu bytes\n", r,
                s->bytes[PM_PARAMS], s->bytes[PM_GRADS], s->bytes[PM_OPTIM], s->bytes[PM_ACTS]);
    }
    for (int r = 0; p->cuda && r < p->shape.pp; r++) {
        const struct plan_stage *s = &p->stage[r];
        fprintf(f, "  stage %d device memory: %zu bytes (parameters to workspace; not the CUDA runtime's own)\n", r,
                s->bytes[PM_PARAMS] + s->bytes[PM_GRADS] + s->bytes[PM_OPTIM] + s->bytes[PM_ACTS] + s->bytes[PM_WORK]);
    }
    for (int r = 0; r < p->shape.pp; r++)
        fprintf(f, "  stage %d peak: %zu bytes\n", r, p->stage[r].peak);
    fprintf(f, "  rank 0 peak: %zu bytes (runtime %zu, tokenizer %zu, MPI-IO %zu)\n", p->rank0_peak, p->rank0_runtime,
            p->rank0_tokenizer, p->rank0_mpiio);
    for (int r = 0; r < p->shape.pp; r++) {
        fprintf(f, "  stage %d traffic per step: tp %.0f, dp %.0f, pp %.0f, embed %.0f, cp %.0f", r,
                p->stage[r].comm[CG_TP], p->stage[r].comm[CG_DP], p->stage[r].comm[CG_PP], p->stage[r].comm[CG_EMBED],
                p->stage[r].comm[CG_CP]);
        if (p->shape.ep > 1) /* (ep: the all-to-alls at perfect balance, the one estimate) */
            fprintf(f, ", ep %.0f (at balance), edp %.0f", p->stage[r].comm[CG_EP], p->stage[r].comm[CG_EDP]);
        fprintf(f, " bytes\n");
    }
}

