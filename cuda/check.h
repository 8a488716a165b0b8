/* check.h -- checked CUDA calls for the CUDA backend (C and C++).
 *
 * A failed call prints "[rank r] CUDA error at file:line: call: name: text"
 * and exits with status 1 (under mpirun the launcher then stops the job).
 * The backend has no MPI of its own; cuda_device_select records the rank. */
#ifndef TRIAD_CUDA_CHECK_H
#define TRIAD_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The rank named in error messages (-1, the default: none). */
void cuda_set_log_rank(int rank);
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

#endif
