/* matmul.cu -- the linear layer on cuBLAS: fp32 (optionally TF32) forward
 * and backward; the same on bf16/fp16 tensor cores (16-bit operands, fp32
 * accumulation and results) for the mixed-precision runs.
 *
 * Row-major through column-major cuBLAS: the buffer of a row-major (R, K)
 * matrix, read column-major with the same leading dimension, is its
 * transpose (K, R).  So each product is computed transposed: out = inp @ W^T
 * as out^T = W * inp^T, where op T on W's buffer gives W and inp's buffer
 * is inp^T.  The comment at each call gives the product cuBLAS sees, with
 * the buffers' column-major shapes. */
#include "common.cuh"

#include <time.h>

/* ------------------------------------------------------------ bias */

__global__ void add_bias_kernel(float *out, const float *bias, size_t NOC, int OC)
{
    FOR_EACH(i, NOC) out[i] += bias[i % OC];
}

/* dbias (OC) += column sums of dout (N,OC), rows in order per thread. */
__global__ void bias_backward_kernel(float *dbias, const float *dout, int N, int OC)
{
    int j = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (j < OC)
        for (int n = threadIdx.y; n < N; n += COL_ROWS) s += dout[(size_t)n * OC + j];
    s = column_total(s);
    if (threadIdx.y == 0 && j < OC) dbias[j] += s;
}

/* ------------------------------------------------------------ products */

/* C (fp32, column-major) = alpha op(A) op(B) + beta C.  A and B are fp32
 * (lp < 0: cublasSgemm, TF32 as cuda_set_tf32 says) or 16-bit patterns of
 * format lp (tensor cores, fp32 accumulation). */
static void gemm(int lp, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
               const void *A, int lda, const void *B, int ldb, float beta, float *Cm, int ldc)
{
    cublasHandle_t h = cuda_ctx()->blas;
    if (lp < 0) {
        CUBLAS_CHECK(cublasSgemm(h, ta, tb, m, n, k, &alpha, (const float *)A, lda, (const float *)B, ldb,
                                 &beta, Cm, ldc));
        return;
    }
    cudaDataType_t t = cuda_lp_type((enum cuda_lp)lp);
    CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &alpha, A, t, lda, B, t, ldb, &beta, Cm, CUDA_R_32F, ldc,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* x[i] = a pseudo-random value in [-1, 1) from i and seed (a hash: no state). */
__global__ void fill_kernel(float *x, size_t n, unsigned seed)
{
    FOR_EACH(i, n)
    {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 16;
        h *= 0x7feb352du;
        h ^= h >> 15;
        x[i] = (float)(h >> 8) * 0x1.0p-23f - 1.0f;
    }
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Random operands (a constant pattern would switch few bits and draw too
 * little power); about WARM_S of products for the clocks to settle, then
 * as many as fill TIME_S, timed. */
#define WARM_S 0.05
#define TIME_S 0.2
double cuda_peak_gflops(int lp, int n)
{
    size_t nn = (size_t)n * n;
    float *Cm;
    void *A, *B;
    CUDA_DEVICE_ALLOC(cudaMalloc(&Cm, nn * sizeof(float)));
    if (lp < 0) {
        CUDA_DEVICE_ALLOC(cudaMalloc(&A, nn * sizeof(float)));
        CUDA_DEVICE_ALLOC(cudaMalloc(&B, nn * sizeof(float)));
        CUDA_LAUNCH(fill_kernel, grid_for(nn), BLOCK, (float *)A, nn, 1u);
        CUDA_LAUNCH(fill_kernel, grid_for(nn), BLOCK, (float *)B, nn, 2u);
    } else { /* filled through C, then packed */
        CUDA_DEVICE_ALLOC(cudaMalloc(&A, nn * sizeof(uint16_t)));
        CUDA_DEVICE_ALLOC(cudaMalloc(&B, nn * sizeof(uint16_t)));
        CUDA_LAUNCH(fill_kernel, grid_for(nn), BLOCK, Cm, nn, 1u);
        cuda_pack((enum cuda_lp)lp, (uint16_t *)A, Cm, nn);
        CUDA_LAUNCH(fill_kernel, grid_for(nn), BLOCK, Cm, nn, 2u);
        cuda_pack((enum cuda_lp)lp, (uint16_t *)B, Cm, nn);
    }
    double t = 0;
    long reps = 0;
    for (int timing = 0; timing <= 1; timing++) {
        double until = timing ? TIME_S : WARM_S;
        reps = 0;
        double t0 = seconds();
        do {
            for (int i = 0; i < 4; i++) gemm(lp, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, 1.0f, A, n, B, n, 0.0f, Cm, n);
            reps += 4;
            CUDA_CHECK(cudaDeviceSynchronize());
            t = seconds() - t0;
        } while (t < until);
    }
    CUDA_CHECK(cudaFree(B));
    CUDA_CHECK(cudaFree(A));
    CUDA_CHECK(cudaFree(Cm));
    return 2.0 * (double)n * n * n * (double)reps / t / 1e9;
}

/* ------------------------------------------------------------ linear layer */

/* lp < 0: fp32 operands as given; else their 16-bit copies. */
static void linear_forward(int lp, float *out, const float *inp, const float *weight, const float *bias, int N,
                           int C, int OC)
{
    const void *w = weight, *x = inp;
    if (lp >= 0) {
        w = cuda_lp_operand((enum cuda_lp)lp, 0, weight, (size_t)OC * C);
        x = cuda_lp_operand((enum cuda_lp)lp, 1, inp, (size_t)N * C);
    }
    /* out^T (OC,N) = op_T(weight buffer, (C,OC) ld C) * inp buffer (C,N) ld C */
    gemm(lp, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, 1.0f, w, C, x, C, 0.0f, out, OC);
    if (bias) {
        size_t NOC = (size_t)N * OC;
        CUDA_LAUNCH(add_bias_kernel, grid_for(NOC), BLOCK, out, bias, NOC, OC);
    }
}

static void linear_backward(int lp, float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, int N, int C, int OC)
{
    const void *w = weight, *x = inp, *dy = dout;
    if (lp >= 0) {
        dy = cuda_lp_operand((enum cuda_lp)lp, 2, dout, (size_t)N * OC);
        if (dweight) x = cuda_lp_operand((enum cuda_lp)lp, 1, inp, (size_t)N * C);
        if (dinp) w = cuda_lp_operand((enum cuda_lp)lp, 0, weight, (size_t)OC * C);
    }
    /* dinp = dout @ weight: dinp^T (C,N) = weight buffer (C,OC) * dout buffer (OC,N) */
    if (dinp) gemm(lp, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, 1.0f, w, C, dy, OC, 0.0f, dinp, C);
    /* dweight += dout^T @ inp: dweight^T (C,OC) += inp buffer (C,N) * op_T(dout buffer (OC,N)) */
    if (dweight) gemm(lp, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, 1.0f, x, C, dy, OC, 1.0f, dweight, C);
    if (dbias)
        CUDA_LAUNCH(bias_backward_kernel, (OC + 31) / 32, dim3(32, COL_ROWS), dbias, dout, N, OC);
}

void cuda_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                         int N, int C, int OC)
{
    linear_forward(-1, out, inp, weight, bias, N, C, OC);
}

void cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, int N, int C, int OC)
{
    linear_backward(-1, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

void cuda_matmul_forward_tc(enum cuda_lp lp, float *out, const float *inp, const float *weight,
                            const float *bias, int N, int C, int OC)
{
    linear_forward((int)lp, out, inp, weight, bias, N, C, OC);
}

void cuda_matmul_backward_tc(enum cuda_lp lp, float *dinp, float *dweight, float *dbias,
                             const float *dout, const float *inp, const float *weight, int N, int C,
                             int OC)
{
    linear_backward((int)lp, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}
