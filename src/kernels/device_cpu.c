/* device_cpu.c -- the CPU table: kernels_cpu.c and host memory. */
#include "device.h"

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gemm.h"
#include "log.h"

static void *host_alloc(size_t bytes) { return xalloc_aligned(bytes); } /* zeroed */

/* The products of a run in precision p: bf16's in gemm_bf16 (VDPBF16PS
 * where the processor has it), fp32's and fp16's in fp32 (the sgemm). */
static enum gemm_arith arith_of(enum precision p) { return p == PREC_BF16 ? GEMM_BF16 : GEMM_FP32; }

static double cpu_peak_gflops(enum precision p) { return gemm_peak_gflops(arith_of(p)); }

static const char *cpu_matmul_name(enum precision p) { return gemm_backend_name(arith_of(p)); }

static void host_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void host_copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
static int host_mpi_direct(void) { return 1; }
static void host_sync(void) {} /* the kernels have returned */

/* The operations (ops.def): kernels_isa.c's cpu_<name>, the SIMD path in use. */
#define OP(ret, name, params, args) ret cpu_##name DEVICE_PARAMS params;
#define OP_P OP
#include "ops.def"
#undef OP

static int host_mpi_staged(void) { return 0; }

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

/* The members shared by the two CPU tables: the operations (ops.def, included
 * in each table) and these. */
#define OP(ret, name, params, args) .name = cpu_##name,
#define CPU_MEMBERS                                                                                      \
    .lp_round = lp_round, .lp_pack = lp_pack, .lp_unpack = lp_unpack, .count_nonfinite = count_nonfinite, \
    .matmul_forward_rounded = cpu_matmul_forward_rounded, .matmul_backward_rounded = cpu_matmul_backward_rounded, \
    .peak_gflops = cpu_peak_gflops, .matmul_name = cpu_matmul_name, .alloc = host_alloc,              \
    .release = free, .zero = host_zero, .copy = host_copy, .to_device = host_copy, .to_host = host_copy, \
    .host_alloc = host_alloc, .host_release = free, .sync = host_sync

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
