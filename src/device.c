/* device.c -- the table for the deck's train.device. */
#include "device.h"

#include <stdio.h>
#include <string.h>

#include "build_config.h"

#ifdef HAVE_CUDA
/* cuda/table.c */
extern const struct kernels cuda_kernels;
int cuda_table_open(MPI_Comm world, int allow_shared, char *err, size_t errlen);
void cuda_table_close(void);
#endif

const struct kernels *kernels_for(const char *device, char *err, size_t errlen)
{
    if (strcmp(device, "cuda") != 0) return &cpu_kernels;
#ifdef HAVE_CUDA
    (void)err, (void)errlen;
    return &cuda_kernels;
#else
    snprintf(err, errlen, "this triad was built without the CUDA backend (./configure --with-cuda)");
    return NULL;
#endif
}

int device_open(const struct kernels *k, MPI_Comm world, int allow_shared, char *err, size_t errlen)
{
#ifdef HAVE_CUDA
    if (k == &cuda_kernels) return cuda_table_open(world, allow_shared, err, errlen);
#endif
    (void)k, (void)world, (void)allow_shared, (void)err, (void)errlen;
    return 0;
}

void device_close(const struct kernels *k)
{
#ifdef HAVE_CUDA
    if (k == &cuda_kernels) cuda_table_close();
#endif
    (void)k;
}
