/* cuda_device.h -- the GPU of an MPI rank.  (The ranks of a node are
 * compared by the host, src/kernels/device_open.c: the backend has no MPI.) */
#ifndef TRIAD_CUDA_DEVICE_H
#define TRIAD_CUDA_DEVICE_H

#include <stddef.h>

/* Give the rank of node-local rank lrank a GPU: lrank mod the number of
 * devices it sees, made current.  Returns the device index, with its UUID
 * in uuid, or -1 with the reason in err: "WHO: no CUDA device
 * (cudaGetDeviceCount: ...)" (who: "rank R on host H"), or that the device
 * cannot be used. */
int cuda_device_pick(int lrank, const char *who, unsigned char uuid[16], char *err, size_t errlen);

#endif
