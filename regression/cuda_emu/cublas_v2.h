/* cublas_v2.h (emulator) -- the cuBLAS calls the backend makes, as reference
 * loops in runtime.cpp (sums in double: the emulator checks indexing, shapes
 * and leading dimensions, not cuBLAS's rounding). */
#ifndef EMU_CUBLAS_V2_H
#define EMU_CUBLAS_V2_H
#include "cuda_runtime_api.h"
#include <stdint.h>
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef struct emu_blas *cublasHandle_t;
#ifdef __cplusplus
extern "C" {
#endif
const char *cublasGetStatusName(cublasStatus_t);
const char *cublasGetStatusString(cublasStatus_t);
cublasStatus_t cublasCreate(cublasHandle_t *);
cublasStatus_t cublasDestroy(cublasHandle_t);
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t);
cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
                                         const float *alpha, const float *A, int lda, long long sA, const float *B,
                                         int ldb, long long sB, const float *beta, float *C, int ldc, long long sC,
                                         int count);
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t Atype, int lda, const void *B,
                            cudaDataType_t Btype, int ldb, const void *beta, void *C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t, cublasGemmAlgo_t);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType_t Atype, int lda,
                                          long long sA, const void *B, cudaDataType_t Btype, int ldb, long long sB,
                                          const void *beta, void *C, cudaDataType_t Ctype, int ldc, long long sC,
                                          int count, cublasComputeType_t, cublasGemmAlgo_t);
#ifdef __cplusplus
}
#endif
#endif
