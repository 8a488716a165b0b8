/* cuda_device.h -- one GPU per MPI rank, and whether the MPI library takes
 * device pointers (where it does not, src/grid/comm.c stages through the pinned
 * host buffers of the table's host_alloc). */
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

#endif
