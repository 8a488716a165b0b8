/* cuda_gemm_bench.cu -- the card's dense matmul rate: bf16 and fp16 with
 * 16-bit operands and output (cuBLASLt, fp32 accumulation, tensor cores:
 * the peak that tools/gpu_check.sh divides the model's rate by for MFU), and
 * the backend's own cuda_matmul_forward in fp32 and TF32 (cuBLAS), on an
 * S x S x S product (default 8192).
 *
 * Build (a --with-cuda build; tools/gpu_check.sh does this):
 *   make bench/cuda_gemm_bench [CUDA_GENCODE=-arch=sm_90]
 * Run:  ./cuda_gemm_bench [S] [reps]      (default 8192 20; about 10 s on an H200)
 *
 * Inputs are random (a matmul of zeros runs faster on tensor cores, the
 * power draw being lower); each format gets 3 warm-up products, then reps
 * timed back to back with CUDA events; the rate is 2 S^3 reps / time. */
#include "common.cuh"

#include <cublasLt.h>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Random floats in [-1, 1) (a fixed LCG), then packed where needed. */
static float *random_device(size_t n)
{
    float *h = (float *)malloc(n * sizeof(float)), *d;
    if (!h) {
        fprintf(stderr, "cuda_gemm_bench: out of host memory\n");
        exit(1);
    }
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = (float)((double)(s >> 11) * 0x1.0p-52 - 1.0);
    }
    CUDA_CHECK(cudaMalloc(&d, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    free(h);
    return d;
}

enum mode { FP32, TF32, BF16, FP16 };
static const char *mode_name[] = {"fp32", "tf32", "bf16", "fp16"};

struct operands {
    int S;
    float *a, *b, *c;       /* fp32 (S,S) */
    uint16_t *a16, *b16, *c16;
};

/* The bench's own cuBLASLt (the backend has none: training multiplies
 * 16-bit operands into fp32 results with cublasGemmEx); the workspace is
 * NVIDIA's recommendation for Hopper. */
static cublasLtHandle_t lt;
static void *lt_work;
static const size_t lt_work_bytes = (size_t)32 << 20;

/* c (S,S) = a (S,S) @ b (S,S)^T, all three in format lp (cudaMalloc's
 * 256-byte alignment). */
static void product16(enum cuda_lp lp, uint16_t *c, const uint16_t *a, const uint16_t *b, int S)
{
    cudaDataType_t t = cuda_lp_type(lp);
    cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    cublasLtMatmulDesc_t desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
    cublasLtMatrixLayout_t l;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, S, S, S));
    uint64_t work64 = lt_work_bytes;
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &work64,
                                                      sizeof work64));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, l, l, l, l, pref, 1, &heur, &found));
    if (found == 0) {
        fprintf(stderr, "cuda_gemm_bench: cuBLASLt has no %s kernel for S = %d\n", lp == CUDA_BF16 ? "bf16" : "fp16",
                S);
        exit(1);
    }
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(lt, desc, &one, b, l, a, l, &zero, c, l, c, l, &heur.algo, lt_work,
                                lt_work_bytes, 0));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(l));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
}

static void product(const struct operands *o, enum mode m)
{
    if (m == BF16 || m == FP16)
        product16(m == BF16 ? CUDA_BF16 : CUDA_FP16, o->c16, o->a16, o->b16, o->S);
    else
        cuda_matmul_forward(o->c, o->a, o->b, NULL, o->S, o->S, o->S);
}

/* TFLOP/s of reps products after 3 warm-ups. */
static double rate(struct operands *o, enum mode m, int reps)
{
    cuda_set_tf32(m == TF32);
    if (m == BF16 || m == FP16) {
        size_t n = (size_t)o->S * o->S;
        void (*pack)(uint16_t *, const float *, size_t) = m == BF16 ? cuda_pack_bf16 : cuda_pack_fp16;
        pack(o->a16, o->a, n);
        pack(o->b16, o->b, n);
    }
    for (int i = 0; i < 3; i++) product(o, m);
    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));
    CUDA_CHECK(cudaEventRecord(t0, 0));
    for (int i = 0; i < reps; i++) product(o, m);
    CUDA_CHECK(cudaEventRecord(t1, 0));
    CUDA_CHECK(cudaEventSynchronize(t1));
    float ms;
    CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    CUDA_CHECK(cudaEventDestroy(t0));
    CUDA_CHECK(cudaEventDestroy(t1));
    return 2.0 * o->S * (double)o->S * o->S * reps / (ms * 1e-3) / 1e12;
}

int main(int argc, char **argv)
{
    int S = argc > 1 ? atoi(argv[1]) : 8192, reps = argc > 2 ? atoi(argv[2]) : 20;
    char why[256];
    if (cuda_device_count(why, sizeof why) == 0) {
        fprintf(stderr, "cuda_gemm_bench: no CUDA device (%s)\n", why);
        return 1;
    }
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    CUDA_CHECK(cudaSetDevice(0));
    cuda_backend_init();
    CUBLAS_CHECK(cublasLtCreate(&lt));
    CUDA_CHECK(cudaMalloc(&lt_work, lt_work_bytes));
    size_t n = (size_t)S * S;
    struct operands o = {S, random_device(n), random_device(n), NULL, NULL, NULL, NULL};
    CUDA_CHECK(cudaMalloc(&o.c, n * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&o.a16, n * sizeof(uint16_t)));
    CUDA_CHECK(cudaMalloc(&o.b16, n * sizeof(uint16_t)));
    CUDA_CHECK(cudaMalloc(&o.c16, n * sizeof(uint16_t)));
    printf("cuda_gemm_bench: %s (sm_%d%d), %d x %d x %d, %d reps\n", prop.name, prop.major,
           prop.minor, S, S, S, reps);
    const enum mode order[] = {BF16, FP16, FP32, TF32};
    for (int i = 0; i < 4; i++)
        printf("  %-4s %8.1f TFLOP/s\n", mode_name[order[i]], rate(&o, order[i], reps));
    CUDA_CHECK(cudaFree(o.a));
    CUDA_CHECK(cudaFree(o.b));
    CUDA_CHECK(cudaFree(o.c));
    CUDA_CHECK(cudaFree(o.a16));
    CUDA_CHECK(cudaFree(o.b16));
    CUDA_CHECK(cudaFree(o.c16));
    CUDA_CHECK(cudaFree(lt_work));
    CUBLAS_CHECK(cublasLtDestroy(lt));
    cuda_backend_finalize();
    return 0;
}
