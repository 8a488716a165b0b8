/* cuda_sizes.h -- the CUDA backend's fixed allocations, in plain C so that
 * the planner (plan.c) counts them in every build, with the CUDA backend or
 * without it (planning for GPUs on a login node). */
#ifndef TRIAD_CUDA_SIZES_H
#define TRIAD_CUDA_SIZES_H

/* The fixed grid of the deterministic reductions (sumsq): one double per block. */
#define CUDA_REDUCE_BLOCKS 1024u
/* The context's reduction scratch: the partial sums, the result and a count, 8 bytes each. */
#define CUDA_CONTEXT_SCRATCH_BYTES (((size_t)CUDA_REDUCE_BLOCKS + 2) * 8)
/* The start-up GEMM that measures the device's rate: n x n x n. */
#define CUDA_PROBE_N 4096
/* The largest head size the fused attention's tiles hold (cuda/attention.cu). */
#define CUDA_ATT_HS_MAX 128

#endif
