/* table.c -- the CUDA table of device.h: cuda/ kernels on device memory,
 * one GPU per rank; the products of bf16/fp16 runs on tensor cores.  The
 * plugin's entry (device_load.h) hands it to the host. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "check.h"
#include "cuda_backend.h"
#include "cuda_sizes.h"
#include "cuda_device.h"
#include "device.h"
#include "device_load.h"

static void *dev_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_DEVICE_ALLOC(cudaMalloc(&p, bytes ? bytes : 256));
    CUDA_CHECK(cudaMemset(p, 0, bytes));
    return p;
}

static void dev_release(void *p) { CUDA_CHECK(cudaFree(p)); }
static void dev_zero(void *p, size_t bytes) { CUDA_CHECK(cudaMemset(p, 0, bytes)); }
static void dev_copy(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}
static void dev_to_device(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
static void dev_sync(void) { CUDA_CHECK(cudaDeviceSynchronize()); }

static size_t dev_memory_in_use(void)
{
    size_t avail = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&avail, &total));
    return total - avail;
}

static void dev_to_host(void *dst, const void *src, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

/* Pinned host memory (page-locked: DMA straight from and to it). */
static void *pinned_alloc(size_t bytes)
{
    void *p = NULL;
    CUDA_ALLOC_CHECK(cudaMallocHost(&p, bytes ? bytes : 64), "out of pinned host memory", CUDA_PINNED_HINT);
    return p;
}

static void pinned_release(void *p) { CUDA_CHECK(cudaFreeHost(p)); }

static enum cuda_lp lp_of(enum precision p) { return p == PREC_BF16 ? CUDA_BF16 : CUDA_FP16; }

/* The operations that multiply in the run's precision (OP_P of ops.def):
 * fp32 runs in fp32 (TF32 if switched on), bf16 and fp16 runs on the
 * format's tensor cores. */
static void dev_matmul_forward(enum precision p, float *out, const float *inp, const float *weight, const float *bias,
                       int N, int C, int OC)
{
    if (p == PREC_FP32) cuda_matmul_forward(out, inp, weight, bias, N, C, OC);
    else cuda_matmul_forward_tc(lp_of(p), out, inp, weight, bias, N, C, OC);
}

static void dev_matmul_backward(enum precision p, float *dinp, float *dweight, float *dbias, const float *dout,
                       const float *inp, const float *weight, int N, int C, int OC)
{
    if (p == PREC_FP32) cuda_matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    else cuda_matmul_backward_tc(lp_of(p), dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

/* Attention in fp32 on the format's values; a bf16 run's probabilities and
 * dS rounded to bf16 before their products, as the CPU's gemm_bf16 packs
 * them (fp16 runs: fp32, as on the CPU). */
static void dev_attention_forward(enum precision p, float *out, float *lse, const float *qkv, const float *kv, int ldkv,
                                  int B, int T, int q0, int k0, int n, int NH, int NKV, int HS, int flags)
{
    cuda_attention_forward(p == PREC_BF16, out, lse, qkv, kv, ldkv, B, T, q0, k0, n, NH, NKV, HS, flags);
}

static void dev_attention_backward(enum precision p, float *dqkv, float *dkv, const float *dout, const float *out,
                                   const float *qkv, const float *kv, int ldkv, const float *lse, int B, int T, int q0,
                                   int k0, int n, int NH, int NKV, int HS, int flags)
{
    cuda_attention_backward(p == PREC_BF16, dqkv, dkv, dout, out, qkv, kv, ldkv, lse, B, T, q0, k0, n, NH, NKV, HS,
                            flags);
}

/* The rate of the products a run in precision p makes (CUDA_PROBE_N^3). */
static double peak_gflops(enum precision p)
{
    return cuda_peak_gflops(p == PREC_FP32 ? -1 : (int)lp_of(p), CUDA_PROBE_N);
}

static int tf32_on; /* train.tf32, set at open */

static const char *matmul_name(enum precision p)
{
    static char s[300];
    snprintf(s, sizeof s, "cuBLAS on %s, %s", cuda_device_name(),
             p == PREC_BF16   ? "bf16 tensor cores, fp32 accumulation"
             : p == PREC_FP16 ? "fp16 tensor cores, fp32 accumulation"
             : tf32_on        ? "TF32 tensor cores"
                              : "fp32");
    return s;
}

static void round_lp_to(enum precision p, float *dst, const float *src, size_t n)
{
    if (p == PREC_FP32) {
        if (dst != src) dev_copy(dst, src, n * sizeof *dst);
    } else
        cuda_round_to(lp_of(p), dst, src, n);
}

static void round_lp(enum precision p, float *x, size_t n) { round_lp_to(p, x, x, n); }

static void pack_lp(enum precision p, uint16_t *dst, const float *src, size_t n)
{
    cuda_pack(lp_of(p), dst, src, n);
}

static void unpack_lp(enum precision p, float *dst, const uint16_t *src, size_t n)
{
    if (p == PREC_BF16) cuda_unpack_bf16(dst, src, n);
    else cuda_unpack_fp16(dst, src, n);
}

static int table_open(const struct device_place *at, const struct device_options *opt, unsigned char id[16],
                      char *err, size_t errlen)
{
    int device = cuda_device_pick(at->local_rank, at->who, id, err, errlen);
    if (device < 0) return -1;
    cuda_backend_init();
    tf32_on = opt->tf32;
    cuda_set_tf32(tf32_on);
    return device;
}

static int mpi_aware; /* the host's word: does its MPI take device pointers? */
static int mpi_direct(void) { return mpi_aware; }

static void table_close(void) { cuda_backend_finalize(); }

/* The operations whose arithmetic is the same in every precision: cuda/'s
 * kernel of the same name. */
#define OP(ret, name, params, args) \
    static ret dev_##name DEVICE_PARAMS params { (void)p; DEVICE_FORWARD(ret, cuda_##name args); }
#define OP_P(ret, name, params, args)
#include "ops.def"
#undef OP
#undef OP_P

#define OP(ret, name, params, args) .name = dev_##name,
#define OP_P OP
const struct device cuda_device = {
    .name = "cuda",
    .on_device = 1,
#include "ops.def"
    .lp_round = round_lp,
    .lp_round_to = round_lp_to,
    .lp_pack = pack_lp,
    .lp_unpack = unpack_lp,
    .count_nonfinite = cuda_count_nonfinite,
    .peak_gflops = peak_gflops,
    .matmul_name = matmul_name,
    .alloc = dev_alloc,
    .release = dev_release,
    .zero = dev_zero,
    .copy = dev_copy,
    .to_device = dev_to_device,
    .to_host = dev_to_host,
    .host_alloc = pinned_alloc,
    .host_release = pinned_release,
    .mpi_direct = mpi_direct,
    .sync = dev_sync,
    .memory_in_use = dev_memory_in_use,
    .open = table_open,
    .close = table_close,
};
#undef OP
#undef OP_P

const struct device *triad_device_plugin(const struct device_host *host)
{
    if (host->abi != DEVICE_PLUGIN_ABI) return NULL;
    cuda_set_host(host);
    mpi_aware = host->mpi_device_pointers;
    return &cuda_device;
}
