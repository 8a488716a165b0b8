/* cuda_device.h -- one GPU per MPI rank, and MPI on device buffers: whether
 * the MPI library takes device pointers, and host staging where it does not. */
#ifndef TRIAD_CUDA_DEVICE_H
#define TRIAD_CUDA_DEVICE_H

#include <mpi.h>
#include <stddef.h>

/* Give this rank a GPU: node-local rank (MPI_COMM_TYPE_SHARED) mod the
 * number of devices it sees, and make it current.  Returns the device
 * index, or -1 with the reason in err: "rank R on host H: no CUDA device
 * (cudaGetDeviceCount: ...)", or, unless allow_shared, when another rank of
 * the node got the same physical GPU (compared by UUID, so a launcher that
 * hands each rank its own device through CUDA_VISIBLE_DEVICES is fine).
 * Collective over world; a rank can fail alone (agree with mpi_agree_error). */
int cuda_device_select(MPI_Comm world, int allow_shared, char *err, size_t errlen);

/* 1 if the MPI library accepts device pointers (Open MPI's
 * MPIX_Query_cuda_support), else 0; always 0 for an MPI without the query. */
int cuda_mpi_aware(void);

/* A reusable pinned host buffer for MPI calls on device data when the MPI
 * is not CUDA-aware; it grows to the largest request.  Zero-initialise. */
struct cuda_stage {
    void *host;
    size_t bytes;
};

/* The staging buffer, at least bytes long (contents undefined after growth). */
void *cuda_stage_reserve(struct cuda_stage *s, size_t bytes);
/* Copy bytes from device memory into the staging buffer; returns it. */
void *cuda_stage_to_host(struct cuda_stage *s, const void *dev, size_t bytes);
/* Copy the first bytes of the staging buffer to device memory. */
void cuda_stage_from_host(const struct cuda_stage *s, void *dev, size_t bytes);
void cuda_stage_free(struct cuda_stage *s);

#endif
