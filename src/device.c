/* device.c -- the table for the deck's train.device. */
#include "device.h"

#include <stdio.h>
#include <string.h>

#include "build_config.h"

/* The CUDA table: a --with-cuda build, or the emulator's (regression/cuda_emu). */
#if defined(HAVE_CUDA) || defined(TRIAD_CUDA_EMU)
#define CUDA_TABLE 1
/* cuda/table.c */
extern const struct kernels cuda_kernels;
int cuda_table_open(MPI_Comm world, const struct device_options *opt, char *err, size_t errlen);
void cuda_table_close(void);
#endif

int device_built(const char *device)
{
#ifdef CUDA_TABLE
    (void)device;
    return 1;
#else
    return strcmp(device, "cuda") != 0;
#endif
}

const struct kernels *kernels_for(const struct config *cfg, char *err, size_t errlen)
{
    if (cfg->train.device_id != TRAIN_DEVICE_cuda) return cfg->diag.stage_through_host ? &cpu_staged_kernels : &cpu_kernels;
#ifdef CUDA_TABLE
    (void)err, (void)errlen;
    return &cuda_kernels;
#else
    snprintf(err, errlen, "this triad was built without the CUDA backend (./configure --with-cuda)");
    return NULL;
#endif
}

int kernels_staged(const struct kernels *k) { return k->on_device && !k->mpi_direct(); }

int device_open(const struct kernels *k, MPI_Comm world, const struct device_options *opt, char *err,
                size_t errlen)
{
#ifdef CUDA_TABLE
    if (k == &cuda_kernels) return cuda_table_open(world, opt, err, errlen);
#endif
    (void)k, (void)world, (void)opt, (void)err, (void)errlen;
    return 0;
}

void device_close(const struct kernels *k)
{
#ifdef CUDA_TABLE
    if (k == &cuda_kernels) cuda_table_close();
#endif
    (void)k;
}
