/* gpu_select.c -- the GPU of a rank, by its rank on the node. */
#include "check.h"
#include "cuda_backend.h"
#include "cuda_device.h"

#include <stdio.h>
#include <string.h>

int cuda_device_pick(int lrank, const char *who, unsigned char uuid[16], char *err, size_t errlen)
{
    char why[256];
    int count = cuda_device_count(why, sizeof why);
    if (count == 0) {
        snprintf(err, errlen, "%s: no CUDA device (%s)", who, why);
        return -1;
    }
    int device = lrank % count;
    struct cudaDeviceProp prop;
    cudaError_t rc = cudaSetDevice(device);
    if (rc == cudaSuccess) rc = cudaGetDeviceProperties(&prop, device);
    if (rc != cudaSuccess) {
        snprintf(err, errlen, "%s: cannot use CUDA device %d of %d: %s: %s", who, device, count,
                 cudaGetErrorName(rc), cudaGetErrorString(rc));
        return -1;
    }
    memcpy(uuid, prop.uuid.bytes, 16);
    return device;
}
