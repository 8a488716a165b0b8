/* context.cu -- the CUDA backend's state: the cuBLAS handle, the reduction
 * scratch and the 16-bit operand scratch,
 * created once per process on the current device.  The kernels take the same arguments as the CPU ones,
 * so this is the only place a handle can live. */
#include "common.cuh"

#include <stdio.h>

static struct cuda_context ctx;
static int ctx_ready = 0;
static int tf32 = 0;

const char *cuda_device_name(void)
{
    static char name[256];
    int dev = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
        return "a CUDA device";
    snprintf(name, sizeof name, "%s", prop.name);
    return name;
}

int cuda_device_count(char *why, size_t whylen)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) {
        snprintf(why, whylen, "cudaGetDeviceCount: %s: %s", cudaGetErrorName(rc),
                 cudaGetErrorString(rc));
        return 0;
    }
    if (n == 0) snprintf(why, whylen, "cudaGetDeviceCount: 0 devices");
    return n;
}

static void apply_math_mode(void)
{
    CUBLAS_CHECK(cublasSetMathMode(ctx.blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

void cuda_backend_init(void)
{
    if (ctx_ready) return;
    CUBLAS_CHECK(cublasCreate(&ctx.blas));
    CUDA_DEVICE_ALLOC(cudaMalloc(&ctx.partial, REDUCE_BLOCKS * sizeof(double)));
    CUDA_DEVICE_ALLOC(cudaMalloc(&ctx.result, sizeof(double)));
    CUDA_DEVICE_ALLOC(cudaMalloc(&ctx.count, sizeof(unsigned long long)));
    ctx_ready = 1;
    apply_math_mode();
}

void cuda_backend_finalize(void)
{
    if (!ctx_ready) return;
    for (int i = 0; i < CUDA_LP_SLOTS; i++) {
        if (ctx.lp[i]) CUDA_CHECK(cudaFree(ctx.lp[i]));
        ctx.lp[i] = NULL;
        ctx.lp_n[i] = 0;
    }
    if (ctx.att) CUDA_CHECK(cudaFree(ctx.att));
    ctx.att = NULL;
    ctx.att_n = 0;
    CUDA_CHECK(cudaFree(ctx.count));
    CUDA_CHECK(cudaFree(ctx.result));
    CUDA_CHECK(cudaFree(ctx.partial));
    CUBLAS_CHECK(cublasDestroy(ctx.blas));
    ctx_ready = 0;
}

const uint16_t *cuda_lp_operand(enum cuda_lp lp, int slot, const float *x, size_t n)
{
    cuda_ctx(); /* initialised */
    if (slot < 0 || slot >= CUDA_LP_SLOTS)
        cuda_fail_at(__FILE__, __LINE__, "cuda_lp_operand", "bad slot", "slots are 0 .. CUDA_LP_SLOTS - 1");
    if (n > ctx.lp_n[slot]) {
        if (ctx.lp[slot]) CUDA_CHECK(cudaFree(ctx.lp[slot]));
        ctx.lp[slot] = NULL;
        CUDA_DEVICE_ALLOC(cudaMalloc(&ctx.lp[slot], n * sizeof(uint16_t)));
        ctx.lp_n[slot] = n;
    }
    cuda_pack(lp, ctx.lp[slot], x, n);
    return ctx.lp[slot];
}

float *cuda_att_workspace(size_t n)
{
    cuda_ctx(); /* initialised */
    if (n > ctx.att_n) {
        if (ctx.att) CUDA_CHECK(cudaFree(ctx.att));
        ctx.att = NULL;
        CUDA_DEVICE_ALLOC(cudaMalloc(&ctx.att, n * sizeof(float)));
        ctx.att_n = n;
    }
    return ctx.att;
}

void cuda_set_tf32(int on)
{
    tf32 = on != 0;
    if (ctx_ready) apply_math_mode();
}

const struct cuda_context *cuda_ctx(void)
{
    if (!ctx_ready)
        cuda_fail_at(__FILE__, __LINE__, "cuda_ctx", "the CUDA backend used before cuda_backend_init()",
                     "select the device, then call cuda_backend_init() once");
    return &ctx;
}
