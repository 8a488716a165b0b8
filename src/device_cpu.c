/* device_cpu.c -- the CPU table: kernels_cpu.c and host memory. */
#include "device.h"

#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gemm.h"
#include "log.h"

static void *host_alloc(size_t bytes) { return xalloc_aligned(bytes); } /* zeroed */

/* The CPU multiplies in fp32 in every precision: its sgemm, at its rate. */
static double cpu_peak_gflops(enum precision p)
{
    (void)p;
    return gemm_peak_gflops();
}

static const char *cpu_matmul_name(enum precision p)
{
    (void)p;
    return gemm_backend_name();
}

static void host_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void host_copy(void *dst, const void *src, size_t bytes) { memmove(dst, src, bytes); }
static int host_mpi_direct(void) { return 1; }
static void host_sync(void) {} /* the kernels have returned */

/* The CPU multiplies in fp32 whatever the precision: the operands hold the
 * format's values, so the products are exact and only the sums' rounding
 * differs from 16-bit units with fp32 accumulation. */
static void cpu_matmul_forward(enum precision p, float *out, const float *inp, const float *weight,
                               const float *bias, int N, int C, int OC)
{
    (void)p;
    matmul_forward(out, inp, weight, bias, N, C, OC);
}

static void cpu_matmul_backward(enum precision p, float *dinp, float *dweight, float *dbias, const float *dout,
                                const float *inp, const float *weight, int N, int C, int OC)
{
    (void)p;
    matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

static void cpu_attention_forward(enum precision p, float *out, float *att, const float *qkv, int B, int T, int C,
                                  int NH)
{
    (void)p;
    attention_forward(out, att, qkv, B, T, C, NH);
}

static void cpu_attention_backward(enum precision p, float *dqkv, float *scratch, const float *dout,
                                   const float *qkv, const float *att, int B, int T, int C, int NH)
{
    (void)p;
    attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
}
static int host_mpi_staged(void) { return 0; }

/* The operations, shared by the two CPU tables. */
#define CPU_OPERATIONS                                                                                   \
    .encoder_forward = encoder_forward, .encoder_backward = encoder_backward,                          \
    .layernorm_forward = layernorm_forward, .layernorm_backward = layernorm_backward,                  \
    .matmul_forward = cpu_matmul_forward, .matmul_backward = cpu_matmul_backward,                      \
    .attention_forward = cpu_attention_forward, .attention_backward = cpu_attention_backward,          \
    .gelu_forward = gelu_forward, .gelu_backward = gelu_backward, .residual_forward = residual_forward, \
    .crossentropy_max = crossentropy_max, .crossentropy_sumexp = crossentropy_sumexp,                  \
    .crossentropy_loss = crossentropy_loss, .crossentropy_backward = crossentropy_backward,            \
    .adamw_update = adamw_update, .sumsq = sumsq, .scale_inplace = scale_inplace, .lp_round = lp_round, \
    .lp_pack = lp_pack, .lp_unpack = lp_unpack, .count_nonfinite = count_nonfinite,                     \
    .peak_gflops = cpu_peak_gflops, .matmul_name = cpu_matmul_name, .alloc = host_alloc,              \
    .release = free, .zero = host_zero, .copy = host_copy, .to_device = host_copy, .to_host = host_copy, \
    .host_alloc = host_alloc, .host_release = free, .sync = host_sync

const struct device cpu_device = {
    .name = "cpu",
    .on_device = 0,
    .mpi_direct = host_mpi_direct,
    CPU_OPERATIONS,
};

/* diag.stage_through_host: the same, with the model's memory handled as a
 * device's that MPI cannot read, so every transfer and staged collective a
 * GPU without CUDA-aware MPI takes runs (and is tested) on the CPU. */
const struct device cpu_staged_device = {
    .name = "cpu, staged through the host as a device",
    .on_device = 1,
    .mpi_direct = host_mpi_staged,
    CPU_OPERATIONS,
};
