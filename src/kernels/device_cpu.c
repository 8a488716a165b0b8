/* device_cpu.c -- the CPU table: kernels_cpu.c and host memory. */
#include "device.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gemm.h"
#include "log.h"
#include "team.h"

static void *host_alloc(size_t bytes) { return xalloc_aligned(bytes); } /* zeroed */

/* The products of a run in precision p: bf16's in gemm_bf16 (VDPBF16PS
 * where the processor has it), fp32's and fp16's in fp32 (the sgemm). */
static enum gemm_arith arith_of(enum precision p) { return p == PREC_BF16 ? GEMM_BF16 : GEMM_FP32; }

static double cpu_peak_gflops(enum precision p) { return gemm_peak_gflops(arith_of(p)); }

static const char *cpu_matmul_name(enum precision p) { return gemm_backend_name(arith_of(p)); }

/* Zeroing (a step's gradients) on every thread from 1 MiB: one part each,
 * whole cache lines. */
static void host_zero(void *p, size_t bytes)
{
#pragma omp parallel if (bytes >= ((size_t)1 << 20))
    {
        size_t parts = (size_t)omp_get_num_threads(), me = (size_t)omp_get_thread_num();
        size_t per = ((bytes + parts - 1) / parts + 63) / 64 * 64, lo = me * per < bytes ? me * per : bytes;
        memset((char *)p + lo, 0, bytes - lo < per ? bytes - lo : per);
    }
}
static void host_copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
static int host_mpi_direct(void) { return 1; }
static void host_sync(void) {} /* the kernels have returned */

/* The operations (ops.def): kernels_isa.c's cpu_<name>, the SIMD path in use. */
#define OP(ret, name, params, args) ret cpu_##name DEVICE_PARAMS params;
#define OP_P OP
#include "ops.def"
#undef OP

static int host_mpi_staged(void) { return 0; }

/* ------------------------------------------------ outputs rounded in blocks */

/* The activations' operations with their outputs rounded (device.h's
 * acts_rounded): rows [0, N) of w output floats each, in blocks of about
 * ROUND_BLOCK floats shared by a team of the threads (team.h's team_for),
 * each computed by the operation (which opens no parallel region of its
 * own inside this one: kernels_cpu.c's TEAM_ITEMS) and then rounded while it
 * is in L1.  Each row's values are the operation's on the whole array
 * (element- or row-wise arithmetic), bit for bit. */
enum { ROUND_BLOCK = 16384 };
struct rows_op {
    void (*fn)(const struct rows_op *o, size_t r0, size_t n);
    float *out;
    const float *in, *in2, *dout, *sums, *weight, *bias;
    float *mean, *rstd;
    const int32_t *targets;
    float dloss, eps;
    int F, Vs, v0, V, C;
};

struct rounded {
    enum precision p;
    const struct rows_op *o;
    size_t N, w, rows; /* rows a block */
};

static void rounded_block(void *ctx, int b)
{
    const struct rounded *r = ctx;
    size_t r0 = (size_t)b * r->rows, n = r->N - r0 < r->rows ? r->N - r0 : r->rows;
    r->o->fn(r->o, r0, n);
    lp_round(r->p, r->o->out + r0 * r->w, n * r->w);
}

static void rounded_rows(enum precision p, const struct rows_op *o, size_t N, size_t w)
{
    size_t rows = w >= ROUND_BLOCK ? 1 : ROUND_BLOCK / w;
    struct rounded r = {p, o, N, w, rows};
    int nb = (int)((N + rows - 1) / rows);
    if (N * w >= 65536) team_for(nb, rounded_block, &r);
    else
        for (int b = 0; b < nb; b++) rounded_block(&r, b);
}

static void gelu_fwd_rows(const struct rows_op *o, size_t r0, size_t n)
{
    cpu_gelu_forward(PREC_FP32, o->out + r0, o->in + r0, n);
}

static void gelu_bwd_rows(const struct rows_op *o, size_t r0, size_t n)
{
    cpu_gelu_backward(PREC_FP32, o->out + r0, o->in + r0, o->dout + r0, n);
}

static void swiglu_fwd_rows(const struct rows_op *o, size_t r0, size_t n)
{
    size_t F = (size_t)o->F;
    cpu_swiglu_forward(PREC_FP32, o->out + r0 * F, o->in + r0 * 2 * F, n, o->F);
}

static void swiglu_bwd_rows(const struct rows_op *o, size_t r0, size_t n)
{
    size_t F = (size_t)o->F;
    cpu_swiglu_backward(PREC_FP32, o->out + r0 * 2 * F, o->in + r0 * 2 * F, o->dout + r0 * F, n, o->F);
}

static void layernorm_fwd_rows(const struct rows_op *o, size_t r0, size_t n)
{
    size_t C = (size_t)o->C;
    cpu_layernorm_forward(PREC_FP32, o->out + r0 * C, o->mean + r0, o->rstd + r0, o->in + r0 * C, o->weight,
                          o->bias, (int)n, o->C);
}

static void rmsnorm_fwd_rows(const struct rows_op *o, size_t r0, size_t n)
{
    size_t C = (size_t)o->C;
    cpu_rmsnorm_forward(PREC_FP32, o->out + r0 * C, o->rstd + r0, o->in + r0 * C, o->weight, (int)n, o->C, o->eps);
}

static void residual_fwd_rows(const struct rows_op *o, size_t r0, size_t n)
{
    cpu_residual_forward(PREC_FP32, o->out + r0, o->in + r0, o->in2 + r0, n);
}

static void ce_bwd_rows(const struct rows_op *o, size_t r0, size_t n)
{
    size_t Vs = (size_t)o->Vs;
    cpu_crossentropy_backward(PREC_FP32, o->out + r0 * Vs, o->in + r0 * Vs, o->sums + r0,
                              o->targets + r0, o->dloss, (int)n, o->Vs, o->v0, o->V);
}

static void gelu_forward_rounded(enum precision p, float *out, const float *inp, size_t N)
{
    if (p == PREC_FP32) cpu_gelu_forward(p, out, inp, N);
    else rounded_rows(p, &(struct rows_op){.fn = gelu_fwd_rows, .out = out, .in = inp}, N, 1);
}

static void gelu_backward_rounded(enum precision p, float *dinp, const float *inp, const float *dout, size_t N)
{
    if (p == PREC_FP32) cpu_gelu_backward(p, dinp, inp, dout, N);
    else rounded_rows(p, &(struct rows_op){.fn = gelu_bwd_rows, .out = dinp, .in = inp, .dout = dout}, N, 1);
}

static void swiglu_forward_rounded(enum precision p, float *out, const float *inp, size_t N, int F)
{
    if (p == PREC_FP32) cpu_swiglu_forward(p, out, inp, N, F);
    else rounded_rows(p, &(struct rows_op){.fn = swiglu_fwd_rows, .out = out, .in = inp, .F = F}, N, (size_t)F);
}

static void swiglu_backward_rounded(enum precision p, float *dinp, const float *inp, const float *dout, size_t N,
                                    int F)
{
    if (p == PREC_FP32) cpu_swiglu_backward(p, dinp, inp, dout, N, F);
    else
        rounded_rows(p, &(struct rows_op){.fn = swiglu_bwd_rows, .out = dinp, .in = inp, .dout = dout, .F = F}, N,
                     2 * (size_t)F);
}

static void layernorm_forward_rounded(enum precision p, float *out, float *mean, float *rstd, const float *inp,
                                      const float *weight, const float *bias, int N, int C)
{
    if (p == PREC_FP32) cpu_layernorm_forward(p, out, mean, rstd, inp, weight, bias, N, C);
    else
        rounded_rows(p, &(struct rows_op){.fn = layernorm_fwd_rows, .out = out, .mean = mean, .rstd = rstd,
                                          .in = inp, .weight = weight, .bias = bias, .C = C}, (size_t)N, (size_t)C);
}

static void rmsnorm_forward_rounded(enum precision p, float *out, float *rstd, const float *inp, const float *weight,
                                    int N, int C, float eps)
{
    if (p == PREC_FP32) cpu_rmsnorm_forward(p, out, rstd, inp, weight, N, C, eps);
    else
        rounded_rows(p, &(struct rows_op){.fn = rmsnorm_fwd_rows, .out = out, .rstd = rstd, .in = inp,
                                          .weight = weight, .eps = eps, .C = C}, (size_t)N, (size_t)C);
}

static void residual_forward_rounded(enum precision p, float *out, const float *a, const float *b, size_t N)
{
    if (p == PREC_FP32) cpu_residual_forward(p, out, a, b, N);
    else rounded_rows(p, &(struct rows_op){.fn = residual_fwd_rows, .out = out, .in = a, .in2 = b}, N, 1);
}

static void crossentropy_backward_rounded(enum precision p, float *dlogits, const float *exps, const float *sums,
                                          const int32_t *targets, float dloss, int N, int Vs, int v0, int V)
{
    if (p == PREC_FP32) cpu_crossentropy_backward(p, dlogits, exps, sums, targets, dloss, N, Vs, v0, V);
    else
        rounded_rows(p, &(struct rows_op){.fn = ce_bwd_rows, .out = dlogits, .in = exps, .sums = sums,
                                          .targets = targets, .dloss = dloss, .Vs = Vs, .v0 = v0, .V = V},
                     (size_t)N, (size_t)Vs);
}

/* The products with their outputs rounded (device.h): a bf16 run's by
 * gemm_bf16's epilogue; the others' (fp32: nothing to round) after. */
static void cpu_matmul_forward_rounded(enum precision p, float *out, const float *inp, const float *weight,
                                       const float *bias, int N, int C, int OC)
{
    if (p != PREC_BF16) {
        cpu_matmul_forward(p, out, inp, weight, bias, N, C, OC);
        lp_round(p, out, (size_t)N * OC);
        return;
    }
    gemm_bf16_ep(0, 1, N, OC, C, inp, C, weight, C, out, OC, &(struct gemm_epilogue){bias, 1});
}

static void cpu_matmul_backward_rounded(enum precision p, float *dinp, float *dweight, float *dbias, const float *dout,
                                        const float *inp, const float *weight, int N, int C, int OC)
{
    if (p != PREC_BF16) {
        cpu_matmul_backward(p, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
        if (dinp) lp_round(p, dinp, (size_t)N * C);
        return;
    }
    if (dinp) gemm_bf16_ep(0, 0, N, C, OC, dout, OC, weight, C, dinp, C, &(struct gemm_epilogue){NULL, 1});
    if (dweight || dbias) cpu_matmul_backward(p, NULL, dweight, dbias, dout, inp, weight, N, C, OC);
}

/* AdamW with the updated parameters rounded into low (device.h), in
 * blocks of ROUND_BLOCK shared by a team of the threads (team_for): each
 * block updated by the kernel (its own region not opened inside this one:
 * kernels_cpu.c's TEAM_ITEMS), then rounded while it is in L2.  Element-wise:
 * the bits of the whole-array update and rounding. */
struct adamw_rounded {
    enum precision p;
    float *param, *low, *grad, *m, *v, gscale, lr, beta1, beta2, eps, wd;
    size_t n;
    int t, clear;
};

static void adamw_rounded_block(void *ctx, int blk)
{
    const struct adamw_rounded *a = ctx;
    size_t b = (size_t)blk * ROUND_BLOCK, len = a->n - b < ROUND_BLOCK ? a->n - b : ROUND_BLOCK;
    cpu_adamw_update(a->p, a->param + b, a->grad + b, a->gscale, a->m + b, a->v + b, len, a->lr, a->beta1, a->beta2,
                     a->eps, a->wd, a->t, a->clear);
    lp_round_to(a->p, a->low + b, a->param + b, len);
}

static void cpu_adamw_update_rounded(enum precision p, float *param, float *low, float *grad, float gscale,
                                     float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
                                     float wd, int t, int clear)
{
    struct adamw_rounded a = {p, param, low, grad, m, v, gscale, lr, beta1, beta2, eps, wd, n, t, clear};
    team_for((int)((n + ROUND_BLOCK - 1) / ROUND_BLOCK), adamw_rounded_block, &a); /* (one block: in place) */
}

/* The members shared by the two CPU tables: the operations (ops.def, included
 * in each table) and these. */
#define OP(ret, name, params, args) .name = cpu_##name,
#define CPU_MEMBERS                                                                                      \
    .lp_round = lp_round, .lp_round_to = lp_round_to, .lp_pack = lp_pack_far, .lp_unpack = lp_unpack,    \
    .count_nonfinite = count_nonfinite,                                                                  \
    .matmul_forward_rounded = cpu_matmul_forward_rounded, .matmul_backward_rounded = cpu_matmul_backward_rounded, \
    .adamw_update_rounded = cpu_adamw_update_rounded,                                                    \
    .peak_gflops = cpu_peak_gflops, .matmul_name = cpu_matmul_name, .alloc = host_alloc,              \
    .release = free, .zero = host_zero, .copy = host_copy, .to_device = host_copy, .to_host = host_copy, \
    .host_alloc = host_alloc, .host_release = free, .sync = host_sync, .acts_rounded = 1
/* (the activations' operations: their rounded wrappers above) */
#define OP_A(ret, name, params, args) .name = name##_rounded,
const struct device cpu_device = {
    .name = "cpu",
    .on_device = 0,
    .mpi_direct = host_mpi_direct,
#include "ops.def"
    CPU_MEMBERS,
};

/* diag.stage_through_host: the same, with the model's memory handled as a
 * device's that MPI cannot read, so every transfer and staged collective a
 * GPU without CUDA-aware MPI takes runs (and is tested) on the CPU. */
const struct device cpu_staged_device = {
    .name = "cpu, staged through the host as a device",
    .on_device = 1,
    .mpi_direct = host_mpi_staged,
#include "ops.def"
    CPU_MEMBERS,
};
#undef OP
#undef OP_P
#undef OP_A
