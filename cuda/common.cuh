/* common.cuh -- what the .cu files of the CUDA backend share: checked
 * launches and cuBLAS calls, the backend's context, launch geometry and
 * warp/block reductions. */
#ifndef TRIAD_CUDA_COMMON_CUH
#define TRIAD_CUDA_COMMON_CUH

#ifdef TRIAD_CUDA_EMU
#include "emu_device.h" /* regression/cuda_emu: the kernels on the host */
#endif
#include "check.h"
#include "cuda_backend.h"
#include "cuda_sizes.h"

#include <cublas_v2.h>
#include <stddef.h>

#define CUBLAS_CHECK(call)                                                        \
    do {                                                                          \
        cublasStatus_t cublas_rc_ = (call);                                       \
        if (cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                  \
            cuda_fail_at(__FILE__, __LINE__, #call, cublasGetStatusName(cublas_rc_), \
                         cublasGetStatusString(cublas_rc_));                      \
    } while (0)

/* kernel<<<grid, block>>>(args...), then the launch error if any.  (The
 * emulator of regression/cuda_emu runs the kernel on the host instead.) */
#ifdef TRIAD_CUDA_EMU
#define CUDA_KERNEL_CALL(kernel, grid, block, ...) emu_launch(kernel, (grid), (block), __VA_ARGS__)
#else
#define CUDA_KERNEL_CALL(kernel, grid, block, ...) kernel<<<(grid), (block)>>>(__VA_ARGS__)
#endif
#define CUDA_LAUNCH(kernel, grid, block, ...)                                     \
    do {                                                                          \
        CUDA_KERNEL_CALL(kernel, grid, block, __VA_ARGS__);                        \
        cudaError_t launch_rc_ = cudaGetLastError();                              \
        if (launch_rc_ != cudaSuccess)                                            \
            cuda_fail_at(__FILE__, __LINE__, "launch of " #kernel,                \
                         cudaGetErrorName(launch_rc_), cudaGetErrorString(launch_rc_)); \
    } while (0)

/* Operand slots of the 16-bit scratch: the linear layer's backward reads three. */
#define CUDA_LP_SLOTS 3

/* The backend's one piece of state (cuda_backend_init). */
struct cuda_context {
    cublasHandle_t blas;
    double *partial;               /* (REDUCE_BLOCKS) per-block partial sums */
    double *result;                /* (1) */
    unsigned long long *count;     /* (1) */
    uint16_t *lp[CUDA_LP_SLOTS];   /* 16-bit operand copies (cuda_lp_operand) */
    size_t lp_n[CUDA_LP_SLOTS];
    float *att;                    /* attention's workspace: a float per query row of one call (cuda_att_workspace) */
    size_t att_n;
};
/* At least n floats of attention's workspace (grown as needed, kept). */
float *cuda_att_workspace(size_t n);
/* The context; fails with a hint when cuda_backend_init was not called. */
const struct cuda_context *cuda_ctx(void);

/* cuBLAS's name for format lp. */
static inline cudaDataType_t cuda_lp_type(enum cuda_lp lp)
{
    return lp == CUDA_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* The n floats at x as 16-bit patterns of format lp (round to nearest even:
 * exact for values already in the format), in operand slot `slot` of the
 * context's scratch, which grows to the largest request and is kept; valid
 * until the slot is used again. */
const uint16_t *cuda_lp_operand(enum cuda_lp lp, int slot, const float *x, size_t n);

/* Elementwise kernels: BLOCK threads, grid-stride loops over at most
 * GRID_MAX blocks. */
#define BLOCK 256
#define GRID_MAX 65535u
/* Fixed grid of the deterministic reductions (sumsq). */
#define REDUCE_BLOCKS CUDA_REDUCE_BLOCKS

static inline unsigned grid_for(size_t n)
{
    size_t g = (n + BLOCK - 1) / BLOCK;
    return g == 0 ? 1u : g > GRID_MAX ? GRID_MAX : (unsigned)g;
}

/* Row kernels: one warp per row, ROWS_PER_BLOCK rows a block of BLOCK. */
#define ROWS_PER_BLOCK (BLOCK / 32)
static inline unsigned grid_for_rows(long rows)
{
    return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
}
/* This thread's row in a row kernel. */
#define WARP_ROW() ((long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32)

#define FOR_EACH(i, n)                                                            \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);        \
         i += (size_t)gridDim.x * blockDim.x)

template <typename T> __device__ inline T warp_sum(T v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ inline float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum / max over the block (blockDim.x a multiple of 32, at most 1024),
 * returned to every thread; the order is fixed, so the result is
 * reproducible.  Safe to call several times in a row. */
template <typename T> __device__ inline T block_sum(T v)
{
    __shared__ T part[32];
    int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads(); /* part[] of an earlier call has been read */
    if (lane == 0) part[w] = v;
    __syncthreads();
    return warp_sum(lane < nw ? part[lane] : T(0));
}

__device__ inline float block_max(float v)
{
    __shared__ float part[32];
    int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) part[w] = v;
    __syncthreads();
    return warp_max(lane < nw ? part[lane] : -INFINITY);
}

/* Column sums over rows: a block of (32, COL_ROWS) threads owns 32 columns;
 * thread (x, y) has summed rows y, y + COL_ROWS, ... in order and calls
 * this with its partial; thread (x, 0) gets the column's total, added up
 * over y in order.  Every thread of the block must call it. */
#define COL_ROWS 32
__device__ inline float column_total(float v)
{
    __shared__ float part[COL_ROWS][33];
    part[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    float s = 0.0f;
    if (threadIdx.y == 0)
        for (int k = 0; k < COL_ROWS; k++) s += part[k][threadIdx.x];
    __syncthreads(); /* part[] free for the next call */
    return s;
}

#endif
