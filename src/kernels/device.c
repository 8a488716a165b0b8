/* device.c -- the table for the deck's train.device. */
#include "device.h"

#include <stdio.h>
#include <string.h>

#include "build_config.h"

/* The CUDA table: a --with-cuda build, or the emulator's (regression/cuda_emu). */
#if defined(HAVE_CUDA) || defined(TRIAD_CUDA_EMU)
#define CUDA_TABLE 1
/* cuda/table.c */
extern const struct device cuda_device;
#endif

int device_built(int cuda)
{
#ifdef CUDA_TABLE
    (void)cuda;
    return 1;
#else
    return !cuda;
#endif
}

const struct device *device_for(int cuda, int staged, char *err, size_t errlen)
{
    if (!cuda) return staged ? &cpu_staged_device : &cpu_device;
#ifdef CUDA_TABLE
    (void)err, (void)errlen;
    return &cuda_device;
#else
    snprintf(err, errlen, "this triad was built without the CUDA backend (./configure --with-cuda)");
    return NULL;
#endif
}

int device_staged(const struct device *k) { return k->on_device && !k->mpi_direct(); }
