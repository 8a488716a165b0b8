/* llama.cu -- the CUDA kernels of the llama family's blocks (backend_ops.h):
 * RMSNorm, rotary position embedding, SwiGLU.  Formulas as kernels_cpu.c
 * (the same float expressions, libdevice expf for the CPU's polynomial);
 * the same determinism rules as kernels.cu: a warp per row, each column sum
 * over rows in one thread's row order. */
#include "common.cuh"

/* ------------------------------------------------------------ rmsnorm */

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

/* dinp += (w*dout - norm * mean(w*dout*norm)) * rstd, a warp per row. */
__global__ void rmsnorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *weight,
                                             const float *rstd, int N, int C)
{
    int lane = threadIdx.x % 32;
    long n = WARP_ROW();
    if (n >= N) return;
    const float *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
    float *di = dinp + (size_t)n * C;
    float rs = rstd[n], b = 0.0f;
    for (int c = lane; c < C; c += 32) b += (weight[c] * d[c]) * (x[c] * rs);
    b = warp_sum(b) / C;
    for (int c = lane; c < C; c += 32) di[c] += (weight[c] * d[c] - (x[c] * rs) * b) * rs;
}

/* dweight += sum_n dout * norm: 32 channels a block. */
__global__ void rmsnorm_backward_dweight_kernel(float *dweight, const float *dout, const float *inp,
                                                const float *rstd, int N, int C)
{
    int c = blockIdx.x * 32 + threadIdx.x;
    float sw = 0.0f;
    if (c < C)
        for (int n = threadIdx.y; n < N; n += COL_ROWS)
            sw += dout[(size_t)n * C + c] * (inp[(size_t)n * C + c] * rstd[n]);
    sw = column_total(sw);
    if (threadIdx.y == 0 && c < C) dweight[c] += sw;
}

void cuda_rmsnorm_backward(float *dinp, float *dweight, const float *dout, const float *inp, const float *weight,
                           const float *rstd, int N, int C)
{
    CUDA_LAUNCH(rmsnorm_backward_dinp_kernel, grid_for_rows(N), BLOCK, dinp, dout, inp, weight, rstd, N, C);
    CUDA_LAUNCH(rmsnorm_backward_dweight_kernel, (C + 31) / 32, dim3(32, COL_ROWS), dweight, dout, inp, rstd, N, C);
}

/* ------------------------------------------------------------ rotary positions */

/* One thread per pair (row, head, i < HS/2) of the q and k heads; sign -1
 * turns back (the backward). */
__global__ void rope_kernel(float *qkv, const float *cos, const float *sin, int T, int NH, int NKV, int HS,
                            float sign, size_t pairs)
{
    int half = HS / 2, heads = NH + NKV, W = (NH + 2 * NKV) * HS;
    FOR_EACH(p, pairs) {
        size_t r = p / ((size_t)heads * half);
        int h = (int)(p / half % heads), i = (int)(p % half);
        float *x = qkv + r * W + (size_t)h * HS;
        size_t t = (r % T) * half + i;
        float x1 = x[i], x2 = x[i + half], c = cos[t], s = sign * sin[t];
        x[i] = x1 * c - x2 * s;
        x[i + half] = x2 * c + x1 * s;
    }
}

static void rope(float *qkv, const float *cos, const float *sin, int B, int T, int NH, int NKV, int HS, float sign)
{
    size_t pairs = (size_t)B * T * (NH + NKV) * (HS / 2);
    CUDA_LAUNCH(rope_kernel, grid_for(pairs), BLOCK, qkv, cos, sin, T, NH, NKV, HS, sign, pairs);
}

void cuda_rope_forward(float *qkv, const float *cos, const float *sin, int B, int T, int NH, int NKV, int HS)
{
    rope(qkv, cos, sin, B, T, NH, NKV, HS, 1.0f);
}

void cuda_rope_backward(float *dqkv, const float *cos, const float *sin, int B, int T, int NH, int NKV, int HS)
{
    rope(dqkv, cos, sin, B, T, NH, NKV, HS, -1.0f);
}

/* ------------------------------------------------------------ swiglu */

__global__ void swiglu_forward_kernel(float *out, const float *inp, int F, size_t NF)
{
    FOR_EACH(e, NF) {
        size_t n = e / F, i = e % F;
        float g = inp[n * 2 * F + i], u = inp[n * 2 * F + F + i];
        out[e] = g / (1.0f + expf(-g)) * u;
    }
}

__global__ void swiglu_backward_kernel(float *dinp, const float *inp, const float *dout, int F, size_t NF)
{
    FOR_EACH(e, NF) {
        size_t n = e / F, i = e % F;
        float g = inp[n * 2 * F + i], u = inp[n * 2 * F + F + i], d = dout[e];
        float sg = 1.0f / (1.0f + expf(-g)), silu = g * sg;
        dinp[n * 2 * F + i] = d * u * (sg * (1.0f + g * (1.0f - sg)));
        dinp[n * 2 * F + F + i] = d * silu;
    }
}

void cuda_swiglu_forward(float *out, const float *inp, size_t N, int F)
{
    size_t NF = N * (size_t)F;
    CUDA_LAUNCH(swiglu_forward_kernel, grid_for(NF), BLOCK, out, inp, F, NF);
}

void cuda_swiglu_backward(float *dinp, const float *inp, const float *dout, size_t N, int F)
{
    size_t NF = N * (size_t)F;
    CUDA_LAUNCH(swiglu_backward_kernel, grid_for(NF), BLOCK, dinp, inp, dout, F, NF);
}
