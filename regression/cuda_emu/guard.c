/* guard.c -- the emulator's own check (emu_device.h): device memory is out
 * of the host's reach.  guard MODE, MODE one of
 *   copy        device memory written and read through cudaMemcpy: exit 0;
 *   host-read   a device pointer read on the host: the emulator stops it;
 *   mpi         a device pointer handed to MPI unstaged: stopped likewise;
 *   wrong-kind  cudaMemcpy with a kind that does not match: an error.
 * regression/cuda_emu/guard.sh runs each. */
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "copy";
    float h[64], *d = NULL;
    for (int i = 0; i < 64; i++) h[i] = (float)i;
    if (cudaMalloc((void **)&d, sizeof h) != cudaSuccess) return 2;
    int rc = 0;
    if (strcmp(mode, "copy") == 0) {
        float back[64];
        rc = cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice) != cudaSuccess ||
             cudaMemcpy(back, d, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess || memcmp(back, h, sizeof h) != 0;
    } else if (strcmp(mode, "host-read") == 0) {
        volatile float x = d[3];
        printf("read %g from device memory on the host\n", (double)x);
    } else if (strcmp(mode, "mpi") == 0) {
        MPI_Allreduce(d, h, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* reads d even on one rank */
        printf("MPI read device memory\n");
    } else if (strcmp(mode, "wrong-kind") == 0) {
        rc = cudaMemcpy(h, d, sizeof h, cudaMemcpyHostToDevice) == cudaSuccess ? 0 : 4;
    }
    cudaFree(d);
    MPI_Finalize();
    return rc;
}
