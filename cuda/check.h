/* check.h -- checked CUDA calls for the CUDA backend (C and C++).
 *
 * A failed call ends the job through the host's fatal error (struct
 * device_host's fail: "[rank r] error at file:line: CUDA error: call:
 * name: text", MPI_Abort).  A program that links the backend without a
 * host (the kernel tests, the GEMM benchmark) prints "CUDA error at
 * file:line: call: name: text" and exits with status 1. */
#ifndef TRIAD_CUDA_CHECK_H
#define TRIAD_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

struct device_host;
/* The host's callbacks (the plugin's entry keeps them for the run). */
void cuda_set_host(const struct device_host *host);
void cuda_fail_at(const char *file, int line, const char *call, const char *name,
                  const char *text) __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#define CUDA_CHECK(call)                                                          \
    do {                                                                          \
        cudaError_t cuda_rc_ = (call);                                            \
        if (cuda_rc_ != cudaSuccess)                                              \
            cuda_fail_at(__FILE__, __LINE__, #call, cudaGetErrorName(cuda_rc_),    \
                         cudaGetErrorString(cuda_rc_));                           \
    } while (0)

/* An allocation: a full device (or no pinned host memory left) is said as
 * such, with what to do, not as the runtime's error name alone. */
#define CUDA_OOM_HINT "`triad plan DECK` shows what each rank needs; set train.memory_gb to the GPU's memory"
#define CUDA_PINNED_HINT                                                                                     \
    "pinned host memory holds the MPI staging buffers and io.async_checkpoint's snapshot: check the node's " \
    "free host memory (other ranks and jobs on the node), or set io.async_checkpoint = .false."
#define CUDA_ALLOC_CHECK(call, what, hint)                                        \
    do {                                                                          \
        cudaError_t cuda_alloc_rc_ = (call);                                      \
        if (cuda_alloc_rc_ == cudaErrorMemoryAllocation)                          \
            cuda_fail_at(__FILE__, __LINE__, #call, what, hint);                  \
        CUDA_CHECK(cuda_alloc_rc_);                                               \
    } while (0)
#define CUDA_DEVICE_ALLOC(call) CUDA_ALLOC_CHECK(call, "out of device memory", CUDA_OOM_HINT)

#endif
