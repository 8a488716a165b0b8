/* attention.cu -- causal self-attention: the products on cuBLAS, batched
 * over the NH heads of one sequence (strided batches: head h starts HS
 * floats after head h-1 in qkv and out, T*T after it in att), the causal
 * softmax and its backward a warp per row.
 *
 * The products cover the full (T,T) square; the softmax then writes the
 * probabilities on and below the diagonal and zeros above it, so att and
 * the results equal the CPU kernel's, which computes only the lower blocks.
 * Matrix shapes in the comments are the column-major views cuBLAS sees
 * (see matmul.cu): q, k, v, dout buffers of one head are (HS,T), att (T,T)
 * read column-major is att^T. */
#include "common.cuh"

/* Row r of the (B*NH*T, T) scores: probabilities for j <= i = r % T, zeros above. */
__global__ void softmax_causal_kernel(float *att, long rows, int T)
{
    int lane = threadIdx.x % 32;
    long r = WARP_ROW();
    if (r >= rows) return;
    float *a = att + (size_t)r * T;   // (T)
    int i = (int)(r % T);
    float mx = -INFINITY;
    for (int j = lane; j <= i; j += 32) mx = fmaxf(mx, a[j]);
    mx = warp_max(mx);
    float s = 0.0f;
    for (int j = lane; j <= i; j += 32) {
        float e = expf(a[j] - mx);
        a[j] = e;
        s += e;
    }
    float inv = 1.0f / warp_sum(s);
    for (int j = lane; j <= i; j += 32) a[j] *= inv;
    for (int j = i + 1 + lane; j < T; j += 32) a[j] = 0.0f;
}

/* d = att * (datt - sum_j att datt) * scale on and below the diagonal, 0 above. */
__global__ void softmax_causal_backward_kernel(float *d, const float *att, long rows, int T,
                                               float scale)
{
    int lane = threadIdx.x % 32;
    long r = WARP_ROW();
    if (r >= rows) return;
    const float *a = att + (size_t)r * T;
    float *dr = d + (size_t)r * T;
    int i = (int)(r % T);
    float s = 0.0f;
    for (int j = lane; j <= i; j += 32) s += a[j] * dr[j];
    s = warp_sum(s);
    for (int j = lane; j <= i; j += 32) dr[j] = a[j] * (dr[j] - s) * scale;
    for (int j = i + 1 + lane; j < T; j += 32) dr[j] = 0.0f;
}

/* C = alpha op(A) op(B) for each of the NH heads of one sequence. */
static void heads_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                       const float *A, int lda, long long sa, const float *B, int ldb, long long sb,
                       float *Cm, int ldc, long long sc, int NH)
{
    const float beta = 0.0f;
    CUBLAS_CHECK(cublasSgemmStridedBatched(cuda_ctx()->blas, ta, tb, m, n, k, &alpha, A, lda, sa,
                                           B, ldb, sb, &beta, Cm, ldc, sc, NH));
}

void cuda_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    int HS = C / NH, C3 = 3 * C;
    long long TT = (long long)T * T;
    float scale = 1.0f / sqrtf((float)HS);
    const cublasOperation_t N_ = CUBLAS_OP_N, T_ = CUBLAS_OP_T;
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        float *a = att + (size_t)b * NH * TT;
        /* scores = q k^T * scale: (T,T) = op_T(k (HS,T)) * q (HS,T) */
        heads_gemm(T_, N_, T, T, HS, scale, k, C3, HS, q, C3, HS, a, T, TT, NH);
    }
    long rows = (long)B * NH * T;
    CUDA_LAUNCH(softmax_causal_kernel, grid_for_rows(rows), BLOCK, att, rows, T);
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + 2 * C;
        const float *a = att + (size_t)b * NH * TT;
        /* out = att v: out (HS,T) = v (HS,T) * att buffer (T,T) */
        heads_gemm(N_, N_, HS, T, T, 1.0f, v, C3, HS, a, T, TT, out + (size_t)b * T * C, C, HS, NH);
    }
}

void cuda_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                             const float *att, int B, int T, int C, int NH)
{
    int HS = C / NH, C3 = 3 * C;
    long long TT = (long long)T * T;
    float scale = 1.0f / sqrtf((float)HS);
    const cublasOperation_t N_ = CUBLAS_OP_N, T_ = CUBLAS_OP_T;
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + 2 * C, *dout_b = dout + (size_t)b * T * C;
        /* datt = dout v^T: (T,T) = op_T(v (HS,T)) * dout (HS,T) */
        heads_gemm(T_, N_, T, T, HS, 1.0f, v, C3, HS, dout_b, C, HS, scratch + (size_t)b * NH * TT,
                   T, TT, NH);
    }
    long rows = (long)B * NH * T;
    CUDA_LAUNCH(softmax_causal_backward_kernel, grid_for_rows(rows), BLOCK, scratch, att, rows, T,
                scale);
    for (int b = 0; b < B; b++) {
        size_t off = (size_t)b * T * C3;
        const float *q = qkv + off, *k = q + C, *dout_b = dout + (size_t)b * T * C;
        const float *d = scratch + (size_t)b * NH * TT, *a = att + (size_t)b * NH * TT;
        float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
        /* dq = d k: dq (HS,T) = k (HS,T) * d buffer (T,T) */
        heads_gemm(N_, N_, HS, T, T, 1.0f, k, C3, HS, d, T, TT, dq, C3, HS, NH);
        /* dk = d^T q: dk (HS,T) = q (HS,T) * op_T(d buffer) */
        heads_gemm(N_, T_, HS, T, T, 1.0f, q, C3, HS, d, T, TT, dk, C3, HS, NH);
        /* dv = att^T dout: dv (HS,T) = dout (HS,T) * op_T(att buffer) */
        heads_gemm(N_, T_, HS, T, T, 1.0f, dout_b, C, HS, a, T, TT, dv, C3, HS, NH);
    }
}
