/* lowp.cu -- bf16 and fp16 storage: rounding (in place or into another
 * array), packing to 16-bit patterns and back, and the count of
 * non-finite values for the loss scaler.  The conversions are CUDA's
 * __float2bfloat16_rn / __float2half_rn (IEEE round-to-nearest-even,
 * overflow to infinity, NaN kept), which the unit test checks bit for bit
 * against a reference on every pattern. */
#include "common.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

__global__ void round_bf16_kernel(float *dst, const float *src, size_t n)
{
    FOR_EACH(i, n) dst[i] = __bfloat162float(__float2bfloat16_rn(src[i]));
}

__global__ void round_fp16_kernel(float *dst, const float *src, size_t n)
{
    FOR_EACH(i, n) dst[i] = __half2float(__float2half_rn(src[i]));
}

__global__ void pack_bf16_kernel(uint16_t *dst, const float *src, size_t n)
{
    FOR_EACH(i, n) dst[i] = __bfloat16_as_ushort(__float2bfloat16_rn(src[i]));
}

__global__ void unpack_bf16_kernel(float *dst, const uint16_t *src, size_t n)
{
    FOR_EACH(i, n) dst[i] = __bfloat162float(__ushort_as_bfloat16(src[i]));
}

__global__ void pack_fp16_kernel(uint16_t *dst, const float *src, size_t n)
{
    FOR_EACH(i, n) dst[i] = __half_as_ushort(__float2half_rn(src[i]));
}

__global__ void unpack_fp16_kernel(float *dst, const uint16_t *src, size_t n)
{
    FOR_EACH(i, n) dst[i] = __half2float(__ushort_as_half(src[i]));
}

void cuda_round_bf16(float *x, size_t n) { cuda_round_to(CUDA_BF16, x, x, n); }
void cuda_round_fp16(float *x, size_t n) { cuda_round_to(CUDA_FP16, x, x, n); }

void cuda_round_to(enum cuda_lp lp, float *dst, const float *src, size_t n)
{
    if (lp == CUDA_BF16) CUDA_LAUNCH(round_bf16_kernel, grid_for(n), BLOCK, dst, src, n);
    else CUDA_LAUNCH(round_fp16_kernel, grid_for(n), BLOCK, dst, src, n);
}

void cuda_pack_bf16(uint16_t *dst, const float *src, size_t n)
{
    CUDA_LAUNCH(pack_bf16_kernel, grid_for(n), BLOCK, dst, src, n);
}

void cuda_unpack_bf16(float *dst, const uint16_t *src, size_t n)
{
    CUDA_LAUNCH(unpack_bf16_kernel, grid_for(n), BLOCK, dst, src, n);
}

void cuda_pack_fp16(uint16_t *dst, const float *src, size_t n)
{
    CUDA_LAUNCH(pack_fp16_kernel, grid_for(n), BLOCK, dst, src, n);
}

void cuda_unpack_fp16(float *dst, const uint16_t *src, size_t n)
{
    CUDA_LAUNCH(unpack_fp16_kernel, grid_for(n), BLOCK, dst, src, n);
}

void cuda_pack(enum cuda_lp lp, uint16_t *dst, const float *src, size_t n)
{
    if (lp == CUDA_BF16) cuda_pack_bf16(dst, src, n);
    else cuda_pack_fp16(dst, src, n);
}

/* Integer atomics are exact, so the count is the same in any order. */
__global__ void count_nonfinite_kernel(unsigned long long *count, const float *x, size_t n)
{
    unsigned long long k = 0;
    FOR_EACH(i, n) k += !isfinite(x[i]);
    k = block_sum(k);
    if (threadIdx.x == 0 && k) atomicAdd(count, k);
}

size_t cuda_count_nonfinite(const float *x, size_t n)
{
    const struct cuda_context *c = cuda_ctx();
    CUDA_CHECK(cudaMemset(c->count, 0, sizeof *c->count));
    CUDA_LAUNCH(count_nonfinite_kernel, grid_for(n), BLOCK, c->count, x, n);
    unsigned long long k;
    CUDA_CHECK(cudaMemcpy(&k, c->count, sizeof k, cudaMemcpyDeviceToHost));
    return (size_t)k;
}
