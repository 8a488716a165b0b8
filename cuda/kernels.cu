/* kernels.cu -- the CUDA versions of the element- and row-wise kernels of
 * backend_ops.h: encoder, layernorm and RMSNorm, GELU, residual, AdamW,
 * sumsq, scale.
 * Formulas as kernels_cpu.c (same float expressions, libdevice expf for
 * the CPU's polynomial).
 *
 * Determinism without atomics: row kernels give one warp a row; sums over
 * rows (dwte, dwpe, dweight, dbias) give each output to one thread, which
 * adds the rows in order; sumsq reduces over a fixed grid. */
#include "common.cuh"

/* ------------------------------------------------------------ encoder */

__global__ void encoder_forward_kernel(float *out, const int32_t *inp, const float *wte,
                                       const float *wpe, int T, int C, int v0, int Vs, size_t NC)
{
    FOR_EACH(i, NC) {
        size_t n = i / C, c = i % C;
        long tok = (long)inp[n] - v0;
        float w = (tok >= 0 && tok < Vs) ? wte[(size_t)tok * C + c] : 0.0f;
        float p = wpe ? wpe[(n % T) * C + c] : 0.0f;
        out[i] = w + p;
    }
}

void cuda_encoder_forward(float *out, const int32_t *inp, const float *wte, const float *wpe,
                          int B, int T, int C, int v0, int Vs)
{
    size_t NC = (size_t)B * T * C;
    CUDA_LAUNCH(encoder_forward_kernel, grid_for(NC), BLOCK, out, inp, wte, wpe, T, C, v0, Vs, NC);
}

/* dwte: block (x, s) owns 128 channels of the rows tok with tok % S == s and
 * scans all tokens in order, so a row hit by several tokens is summed in
 * token order, as on the CPU. */
#define ENC_CH 128
#define ENC_SPLIT 64

__global__ void encoder_backward_wte_kernel(float *dwte, const float *dout, const int32_t *inp,
                                            long N, int C, int v0, int Vs)
{
    int c = blockIdx.x * ENC_CH + threadIdx.x;
    if (c >= C) return;
    for (long n = 0; n < N; n++) {
        long tok = (long)inp[n] - v0;
        if (tok < 0 || tok >= Vs || tok % ENC_SPLIT != blockIdx.y) continue;
        dwte[(size_t)tok * C + c] += dout[(size_t)n * C + c];
    }
}

/* dwpe (T,C): position t adds its B rows in batch order. */
__global__ void encoder_backward_wpe_kernel(float *dwpe, const float *dout, int B, int T, int C)
{
    FOR_EACH(i, (size_t)T * C) {
        float s = dwpe[i];
        for (int b = 0; b < B; b++) s += dout[(size_t)b * T * C + i];
        dwpe[i] = s;
    }
}

void cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int32_t *inp,
                           int B, int T, int C, int v0, int Vs)
{
    dim3 grid((C + ENC_CH - 1) / ENC_CH, ENC_SPLIT);
    CUDA_LAUNCH(encoder_backward_wte_kernel, grid, ENC_CH, dwte, dout, inp, (long)B * T, C, v0, Vs);
    if (dwpe)
        CUDA_LAUNCH(encoder_backward_wpe_kernel, grid_for((size_t)T * C), BLOCK, dwpe, dout, B, T, C);
}

/* ------------------------------------------------------------ layernorm, rmsnorm */

/* One warp per row: mean, then the biased variance of the centred values. */
__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp,
                                         const float *weight, const float *bias, int N, int C)
{
    int lane = threadIdx.x % 32;
    long n = WARP_ROW();
    if (n >= N) return;
    const float *x = inp + (size_t)n * C;   // (C)
    float *o = out + (size_t)n * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c];
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - m;
        v += d * d;
    }
    v = warp_sum(v) / C;
    float rs = 1.0f / sqrtf(v + 1e-5f);
    for (int c = lane; c < C; c += 32) o[c] = (x[c] - m) * rs * weight[c] + bias[c];
    if (lane == 0) {
        mean[n] = m;
        rstd[n] = rs;
    }
}

void cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                            const float *weight, const float *bias, int N, int C)
{
    CUDA_LAUNCH(layernorm_forward_kernel, grid_for_rows(N), BLOCK, out, mean, rstd, inp, weight, bias,
                N, C);
}

/* RMSNorm: x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps), a warp per row. */
__global__ void rmsnorm_forward_kernel(float *out, float *rstd, const float *inp, const float *weight, int N, int C,
                                       float eps)
{
    int lane = threadIdx.x % 32;
    long n = WARP_ROW();
    if (n >= N) return;
    const float *x = inp + (size_t)n * C;
    float *o = out + (size_t)n * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += x[c] * x[c];
    float rs = 1.0f / sqrtf(warp_sum(s) / C + eps);
    for (int c = lane; c < C; c += 32) o[c] = x[c] * rs * weight[c];
    if (lane == 0) rstd[n] = rs;
}

void cuda_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *weight, int N, int C, float eps)
{
    CUDA_LAUNCH(rmsnorm_forward_kernel, grid_for_rows(N), BLOCK, out, rstd, inp, weight, N, C, eps);
}

/* The backward of both norms (mean NULL: RMSNorm, no centring and no
 * bias): dinp += (w*dout - mean(w*dout) - norm * mean(w*dout*norm)) * rstd,
 * a warp per row. */
__global__ void layernorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                               const float *weight, const float *mean,
                                               const float *rstd, int N, int C)
{
    int lane = threadIdx.x % 32;
    long n = WARP_ROW();
    if (n >= N) return;
    const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
    float *di = dinp + (size_t)n * C;
    float m = mean ? mean[n] : 0.0f, rs = rstd[n], a = 0.0f, b = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float dn = weight[c] * d[c];
        a += dn;
        b += dn * ((x[c] - m) * rs);
    }
    a = mean ? warp_sum(a) / C : 0.0f;
    b = warp_sum(b) / C;
    for (int c = lane; c < C; c += 32) {
        float norm = (x[c] - m) * rs;
        di[c] += (weight[c] * d[c] - a - norm * b) * rs;
    }
}

/* dweight += sum_n dout * norm, dbias += sum_n dout: 32 channels a block. */
__global__ void layernorm_backward_dparams_kernel(float *dweight, float *dbias, const float *dout,
                                                  const float *inp, const float *mean,
                                                  const float *rstd, int N, int C)
{
    int c = blockIdx.x * 32 + threadIdx.x;
    float sw = 0.0f, sb = 0.0f;
    if (c < C)
        for (int n = threadIdx.y; n < N; n += COL_ROWS) {
            float d = dout[(size_t)n * C + c];
            sw += d * ((inp[(size_t)n * C + c] - (mean ? mean[n] : 0.0f)) * rstd[n]);
            sb += d;
        }
    sw = column_total(sw);
    sb = column_total(sb);
    if (threadIdx.y == 0 && c < C) {
        dweight[c] += sw;
        if (dbias) dbias[c] += sb;
    }
}

void cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, const float *mean,
                             const float *rstd, int N, int C)
{
    if (dinp) /* (NULL: a zero-bubble pipeline's W, dinp done in its B) */
        CUDA_LAUNCH(layernorm_backward_dinp_kernel, grid_for_rows(N), BLOCK, dinp, dout, inp, weight, mean,
                    rstd, N, C);
    if (dweight)
        CUDA_LAUNCH(layernorm_backward_dparams_kernel, (C + 31) / 32, dim3(32, COL_ROWS), dweight, dbias,
                dout, inp, mean, rstd, N, C);
}

void cuda_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                           const float *rstd, int N, int C)
{
    cuda_layernorm_backward(dinp, dweight, NULL, dout, inp, weight, NULL, rstd, N, C);
}

/* ------------------------------------------------------------ gelu */

#define GELU_S 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

/* 0.5x(1 + tanh u) = x / (1 + exp(-2u)), as the CPU float kernel. */
__global__ void gelu_forward_kernel(float *out, const float *inp, size_t N)
{
    FOR_EACH(i, N) {
        float x = inp[i];
        float u = GELU_S * (x + GELU_A * x * x * x);
        out[i] = x / (1.0f + expf(-2.0f * u));
    }
}

__global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t N)
{
    FOR_EACH(i, N) {
        float x = inp[i];
        float u = GELU_S * (x + GELU_A * x * x * x);
        float du = GELU_S * (1.0f + 3.0f * GELU_A * x * x);
        float mu = -2.0f * u;
        float e = expf(mu < 80.0f ? mu : 80.0f); /* e sig stays finite */
        float sig = 1.0f / (1.0f + e);
        dinp[i] = (sig + 2.0f * x * sig * (e * sig) * du) * dout[i];
    }
}

void cuda_gelu_forward(float *out, const float *inp, size_t N)
{
    CUDA_LAUNCH(gelu_forward_kernel, grid_for(N), BLOCK, out, inp, N);
}

void cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t N)
{
    CUDA_LAUNCH(gelu_backward_kernel, grid_for(N), BLOCK, dinp, inp, dout, N);
}

/* ------------------------------------------------------------ residual */

__global__ void residual_forward_kernel(float *out, const float *a, const float *b, size_t N)
{
    FOR_EACH(i, N) out[i] = a[i] + b[i];
}

void cuda_residual_forward(float *out, const float *a, const float *b, size_t N)
{
    CUDA_LAUNCH(residual_forward_kernel, grid_for(N), BLOCK, out, a, b, N);
}

/* ------------------------------------------------------------ AdamW */

__global__ void adamw_kernel(float *param, float *grad, float gscale, float *m, float *v, size_t n,
                             float step, float bc2s, float decay, float beta1, float beta2,
                             float eps, int clear)
{
    float w1 = 1.0f - beta1, w2 = 1.0f - beta2;
    FOR_EACH(i, n) {
        float g = grad[i] * gscale;
        float mi = m[i] + w1 * (g - m[i]);
        float vi = v[i] * beta2 + w2 * (g * g);
        float denom = sqrtf(vi) / bc2s + eps;
        param[i] = param[i] * decay - step * (mi / denom);
        m[i] = mi;
        v[i] = vi;
        if (clear) grad[i] = 0.0f;
    }
}

/* Bias corrections in double on the host, as the CPU kernel. */
void cuda_adamw_update(float *param, float *grad, float gscale, float *m, float *v, size_t n,
                       float lr, float beta1, float beta2, float eps, float wd, int t, int clear)
{
    double bc1 = 1.0 - pow((double)beta1, t), bc2 = 1.0 - pow((double)beta2, t);
    float step = (float)((double)lr / bc1), bc2s = (float)sqrt(bc2);
    float decay = (float)(1.0 - (double)lr * (double)wd);
    CUDA_LAUNCH(adamw_kernel, grid_for(n), BLOCK, param, grad, gscale, m, v, n, step, bc2s, decay, beta1,
                beta2, eps, clear);
}

/* ------------------------------------------------------------ norms */

/* partial (gridDim.x) = per-block sums of squares in double. */
__global__ void sumsq_partial_kernel(double *partial, const float *x, size_t n)
{
    double s = 0.0;
    FOR_EACH(i, n) s += (double)x[i] * (double)x[i];
    s = block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sumsq_total_kernel(double *result, const double *partial, unsigned nblocks)
{
    double s = 0.0;
    for (unsigned i = threadIdx.x; i < nblocks; i += blockDim.x) s += partial[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *result = s;
}

/* As many blocks as the elements fill, at most REDUCE_BLOCKS: a fixed
 * grid for a given n, so the same bits every time. */
double cuda_sumsq(const float *x, size_t n)
{
    const struct cuda_context *c = cuda_ctx();
    unsigned nblocks = grid_for(n) < REDUCE_BLOCKS ? grid_for(n) : REDUCE_BLOCKS;
    CUDA_LAUNCH(sumsq_partial_kernel, nblocks, BLOCK, c->partial, x, n);
    CUDA_LAUNCH(sumsq_total_kernel, 1, BLOCK, c->result, c->partial, nblocks);
    double s;
    CUDA_CHECK(cudaMemcpy(&s, c->result, sizeof s, cudaMemcpyDeviceToHost));
    return s;
}

__global__ void scale_kernel(float *x, size_t n, float s)
{
    FOR_EACH(i, n) x[i] *= s;
}

void cuda_scale_inplace(float *x, size_t n, float s)
{
    CUDA_LAUNCH(scale_kernel, grid_for(n), BLOCK, x, n, s);
}

__global__ void copy_cols_kernel(float *dst, int ldd, const float *src, int lds, size_t rows, int cols, int add)
{
    FOR_EACH(e, rows * (size_t)cols) {
        size_t r = e / (size_t)cols, c = e % (size_t)cols;
        float x = src[r * (size_t)lds + c];
        dst[r * (size_t)ldd + c] = add ? dst[r * (size_t)ldd + c] + x : x;
    }
}

void cuda_copy_cols(float *dst, int ldd, const float *src, int lds, size_t rows, int cols, int add)
{
    CUDA_LAUNCH(copy_cols_kernel, grid_for(rows * (size_t)cols), BLOCK, dst, ldd, src, lds, rows, cols, add);
}

/* A mixture of experts' rows (backend_ops.h): one thread an element; the
 * combine's and the dot's sums run in the CPU's order. */
__global__ void rows_gather_kernel(float *dst, const float *src, const int32_t *idx, const float *w, int R, int C)
{
    FOR_EACH(e, (size_t)R * C) {
        size_t r = e / (size_t)C, c = e % (size_t)C;
        dst[e] = (w ? w[r] : 1.0f) * src[(size_t)(idx ? idx[r] : (int32_t)r) * C + c];
    }
}

void cuda_rows_gather(float *dst, const float *src, const int32_t *idx, const float *w, int R, int C)
{
    CUDA_LAUNCH(rows_gather_kernel, grid_for((size_t)R * C), BLOCK, dst, src, idx, w, R, C);
}

__global__ void rows_combine_kernel(float *out, const float *src, const int32_t *idx, const float *w, int N, int K,
                                    int C, int add)
{
    FOR_EACH(e, (size_t)N * C) {
        size_t t = e / (size_t)C, c = e % (size_t)C;
        float o = add ? out[e] : 0.0f;
        for (int k = 0; k < K; k++) {
            int32_t r = idx[t * K + k];
            if (r >= 0) o += (w ? w[t * K + k] : 1.0f) * src[(size_t)r * C + c];
        }
        out[e] = o;
    }
}

void cuda_rows_combine(float *out, const float *src, const int32_t *idx, const float *w, int N, int K, int C, int add)
{
    CUDA_LAUNCH(rows_combine_kernel, grid_for((size_t)N * C), BLOCK, out, src, idx, w, N, K, C, add);
}

__global__ void rows_dot_kernel(float *out, const float *a, const float *b, int R, int C)
{
    FOR_EACH(r, (size_t)R) {
        float sum = 0.0f;
        for (int c = 0; c < C; c++) sum += a[r * (size_t)C + c] * b[r * (size_t)C + c];
        out[r] = sum;
    }
}

void cuda_rows_dot(float *out, const float *a, const float *b, int R, int C)
{
    CUDA_LAUNCH(rows_dot_kernel, grid_for((size_t)R), BLOCK, out, a, b, R, C);
}
