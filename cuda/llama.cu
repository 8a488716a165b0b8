/* llama.cu -- the CUDA kernels of the llama family's blocks (backend_ops.h)
 * beside RMSNorm (kernels.cu, with LayerNorm): the rotary position
 * embedding and SwiGLU.  Formulas as kernels_cpu.c (the same float
 * expressions, libdevice expf for the CPU's polynomial). */
#include "common.cuh"

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
