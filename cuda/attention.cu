/* attention.cu -- causal self-attention with NH query heads sharing NKV
 * key/value heads (group G = NH/NKV; G = 1 is multi-head attention): the
 * products on cuBLAS, batched over the kv heads of one sequence, one batch
 * per member r of a group (strided batches: query head g*G + r starts G*HS
 * floats after the previous one in qkv and out, G*T*T in att; kv head g HS
 * after its predecessor), the causal softmax and its backward a warp per
 * row.  A kv head's gradients add its query heads' shares in order r.
 *
 * The probabilities live only during a call, in the context's workspace
 * (cuda_att_workspace: (B,NH,T,T), two of them in the backward); what is
 * kept for the backward is each row's log-sum-exp, from which the backward
 * recomputes them, as the CPU's fused kernel does (a fused kernel without
 * the workspace is still to come on the GPU).  The products cover the full
 * (T,T) square; the softmax writes the probabilities on and below the
 * diagonal and zeros above it.
 * Matrix shapes in the comments are the column-major views cuBLAS sees
 * (see matmul.cu): q, k, v, dout buffers of one head are (HS,T), att (T,T)
 * read column-major is att^T.
 *
 * The _tc versions (mixed precision) give the products 16-bit copies of
 * their operands (the probabilities and the softmax gradient rounded to the
 * format on the way) and keep the softmax, its backward and every result in
 * fp32. */
#include "common.cuh"

/* Row r of the (B*NH*T, T) scores: probabilities for j <= i = r % T, zeros
 * above, and the row's log-sum-exp into lse[r]. */
__global__ void softmax_causal_kernel(float *att, float *lse, long rows, int T)
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
    s = warp_sum(s);
    float inv = 1.0f / s;
    for (int j = lane; j <= i; j += 32) a[j] *= inv;
    for (int j = i + 1 + lane; j < T; j += 32) a[j] = 0.0f;
    if (lane == 0) lse[r] = mx + logf(s);
}

/* The probabilities again from the scores and the forward's log-sum-exp. */
__global__ void softmax_from_lse_kernel(float *att, const float *lse, long rows, int T)
{
    int lane = threadIdx.x % 32;
    long r = WARP_ROW();
    if (r >= rows) return;
    float *a = att + (size_t)r * T, l = lse[r];
    int i = (int)(r % T);
    for (int j = lane; j <= i; j += 32) a[j] = expf(a[j] - l);
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

/* C = alpha op(A) op(B) for each of the NH heads of one sequence: fp32
 * operands (lp < 0) or 16-bit ones of format lp on tensor cores; element
 * offsets and strides are the same either way. */
static void heads_gemm(int lp, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                       const void *A, int lda, long long sa, const void *B, int ldb, long long sb, float beta,
                       float *Cm, int ldc, long long sc, int NH)
{
    cublasHandle_t h = cuda_ctx()->blas;
    if (lp < 0) {
        CUBLAS_CHECK(cublasSgemmStridedBatched(h, ta, tb, m, n, k, &alpha, (const float *)A, lda, sa,
                                               (const float *)B, ldb, sb, &beta, Cm, ldc, sc, NH));
        return;
    }
    cudaDataType_t t = cuda_lp_type((enum cuda_lp)lp);
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &alpha, A, t, lda, sa, B, t, ldb, sb, &beta, Cm,
                                            CUDA_R_32F, ldc, sc, NH, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* Element e of operand x: fp32 or 16-bit. */
static const void *at(int lp, const void *x, size_t e)
{
    return lp < 0 ? (const void *)((const float *)x + e) : (const void *)((const uint16_t *)x + e);
}

/* The operand the products read: x itself, or its 16-bit copy in slot. */
static const void *operand(int lp, int slot, const float *x, size_t n)
{
    return lp < 0 ? (const void *)x : (const void *)cuda_lp_operand((enum cuda_lp)lp, slot, x, n);
}

/* att = the scores q k^T * scale of every head (B,NH,T,T). */
static void scores(int lp, float *att, const void *x, int B, int T, int NH, int NKV, int HS)
{
    int W = (NH + 2 * NKV) * HS, G = NH / NKV;
    long long TT = (long long)T * T, qs = (long long)G * HS, as = G * TT;
    float scale = 1.0f / sqrtf((float)HS);
    const cublasOperation_t N_ = CUBLAS_OP_N, T_ = CUBLAS_OP_T;
    for (int b = 0; b < B; b++)
        for (int r = 0; r < G; r++) {
            size_t q = (size_t)b * T * W + (size_t)r * HS, k = (size_t)b * T * W + (size_t)NH * HS;
            /* scores = q k^T * scale: (T,T) = op_T(k (HS,T)) * q (HS,T) */
            heads_gemm(lp, T_, N_, T, T, HS, scale, at(lp, x, k), W, HS, at(lp, x, q), W, qs, 0.0f,
                       att + ((size_t)b * NH + r) * TT, T, as, NKV);
        }
}

static void attention_forward(int lp, float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV,
                              int HS)
{
    int W = (NH + 2 * NKV) * HS, C = NH * HS, G = NH / NKV;
    long long TT = (long long)T * T, qs = (long long)G * HS, as = G * TT;
    const cublasOperation_t N_ = CUBLAS_OP_N;
    const void *x = operand(lp, 0, qkv, (size_t)B * T * W);
    float *att = cuda_att_workspace((size_t)B * NH * TT);
    scores(lp, att, x, B, T, NH, NKV, HS);
    long rows = (long)B * NH * T;
    CUDA_LAUNCH(softmax_causal_kernel, grid_for_rows(rows), BLOCK, att, lse, rows, T);
    const void *p = operand(lp, 1, att, (size_t)B * NH * TT);
    for (int b = 0; b < B; b++)
        for (int r = 0; r < G; r++) {
            size_t v = (size_t)b * T * W + (size_t)(NH + NKV) * HS;
            /* out = att v: out (HS,T) = v (HS,T) * att buffer (T,T) */
            heads_gemm(lp, N_, N_, HS, T, T, 1.0f, at(lp, x, v), W, HS, at(lp, p, ((size_t)b * NH + r) * TT), T, as,
                       0.0f, out + (size_t)b * T * C + (size_t)r * HS, C, qs, NKV);
        }
}

static void attention_backward(int lp, float *dqkv, const float *dout, const float *lse, const float *qkv,
                               int B, int T, int NH, int NKV, int HS)
{
    int W = (NH + 2 * NKV) * HS, C = NH * HS, G = NH / NKV;
    long long TT = (long long)T * T, qs = (long long)G * HS, as = G * TT;
    float scale = 1.0f / sqrtf((float)HS);
    const cublasOperation_t N_ = CUBLAS_OP_N, T_ = CUBLAS_OP_T;
    const void *x = operand(lp, 0, qkv, (size_t)B * T * W), *dy = operand(lp, 2, dout, (size_t)B * T * C);
    float *att = cuda_att_workspace(2 * (size_t)B * NH * TT), *scratch = att + (size_t)B * NH * TT;
    long rows = (long)B * NH * T;
    scores(lp, att, x, B, T, NH, NKV, HS); /* the probabilities again, from the scores and lse */
    CUDA_LAUNCH(softmax_from_lse_kernel, grid_for_rows(rows), BLOCK, att, lse, rows, T);
    for (int b = 0; b < B; b++)
        for (int r = 0; r < G; r++) {
            size_t v = (size_t)b * T * W + (size_t)(NH + NKV) * HS, dy_h = (size_t)b * T * C + (size_t)r * HS;
            /* datt = dout v^T: (T,T) = op_T(v (HS,T)) * dout (HS,T) */
            heads_gemm(lp, T_, N_, T, T, HS, 1.0f, at(lp, x, v), W, HS, at(lp, dy, dy_h), C, qs, 0.0f,
                       scratch + ((size_t)b * NH + r) * TT, T, as, NKV);
        }
    CUDA_LAUNCH(softmax_causal_backward_kernel, grid_for_rows(rows), BLOCK, scratch, att, rows, T,
                scale);
    const void *p = operand(lp, 1, att, (size_t)B * NH * TT), *ds = operand(lp, 3, scratch, (size_t)B * NH * TT);
    for (int b = 0; b < B; b++)
        for (int r = 0; r < G; r++) {
            size_t base = (size_t)b * T * W, q = base + (size_t)r * HS, k = base + (size_t)NH * HS;
            size_t v = k + (size_t)NKV * HS, dy_h = (size_t)b * T * C + (size_t)r * HS, a = ((size_t)b * NH + r) * TT;
            float beta = r == 0 ? 0.0f : 1.0f; /* the group's first query head overwrites dk, dv */
            /* dq = d k: dq (HS,T) = k (HS,T) * d buffer (T,T) */
            heads_gemm(lp, N_, N_, HS, T, T, 1.0f, at(lp, x, k), W, HS, at(lp, ds, a), T, as, 0.0f, dqkv + q, W, qs,
                       NKV);
            /* dk += d^T q: dk (HS,T) = q (HS,T) * op_T(d buffer) */
            heads_gemm(lp, N_, T_, HS, T, T, 1.0f, at(lp, x, q), W, qs, at(lp, ds, a), T, as, beta, dqkv + k, W, HS,
                       NKV);
            /* dv += att^T dout: dv (HS,T) = dout (HS,T) * op_T(att buffer) */
            heads_gemm(lp, N_, T_, HS, T, T, 1.0f, at(lp, dy, dy_h), C, qs, at(lp, p, a), T, as, beta, dqkv + v, W,
                       HS, NKV);
        }
}

void cuda_attention_forward(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV, int HS)
{
    attention_forward(-1, out, lse, qkv, B, T, NH, NKV, HS);
}

void cuda_attention_backward(float *dqkv, const float *dout, const float *lse, const float *qkv, int B, int T,
                             int NH, int NKV, int HS)
{
    attention_backward(-1, dqkv, dout, lse, qkv, B, T, NH, NKV, HS);
}

void cuda_attention_forward_tc(enum cuda_lp lp, float *out, float *lse, const float *qkv, int B, int T, int NH,
                               int NKV, int HS)
{
    attention_forward((int)lp, out, lse, qkv, B, T, NH, NKV, HS);
}

void cuda_attention_backward_tc(enum cuda_lp lp, float *dqkv, const float *dout, const float *lse,
                                const float *qkv, int B, int T, int NH, int NKV, int HS)
{
    attention_backward((int)lp, dqkv, dout, lse, qkv, B, T, NH, NKV, HS);
}
