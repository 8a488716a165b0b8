/* cblas_stub.c -- naive cblas_sgemm and cblas_dgemm (double accumulation) for
 * regression/aarch64.sh: only test_gemm's BLAS checks call them. */
#include "cblas.h"
#define GEMM(name, T) \
void name(enum CBLAS_ORDER o, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K, T alpha, \
          const T *A, int lda, const T *B, int ldb, T beta, T *C, int ldc) { (void)o; \
  for (int i = 0; i < M; i++) for (int j = 0; j < N; j++) { double s = 0; \
    for (int k = 0; k < K; k++) s += (double)(ta == CblasTrans ? A[k * lda + i] : A[i * lda + k]) * (tb == CblasTrans ? B[j * ldb + k] : B[k * ldb + j]); \
    C[i * ldc + j] = (T)(alpha * s + (beta != 0 ? beta * C[i * ldc + j] : 0)); } }
GEMM(cblas_sgemm, float)
GEMM(cblas_dgemm, double)
