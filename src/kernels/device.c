/* device.c -- the table for the deck's train.device. */
#include "device.h"

#include <stdio.h>
#include <string.h>

#include "build_config.h"
#include "device_load.h"
#include "log.h"

/* The CUDA table: the plugin of a --with-cuda build, or the emulator's
 * backend linked in (regression/cuda_emu), through the same entry. */
#if defined(HAVE_CUDA) || defined(TRIAD_CUDA_EMU)
#define CUDA_TABLE 1

/* The plugin's failures end through the host's fatal error (MPI_Abort). */
__attribute__((noreturn)) static void host_fail(const char *file, int line, const char *hint, const char *msg)
{
    die_at(file, line, hint, "%s", msg);
}

static const struct device *cuda_table(char *err, size_t errlen)
{
    static struct device_host host; /* the plugin keeps it */
    static const struct device *k;
    if (k) return k;
    host = (struct device_host){.abi = DEVICE_PLUGIN_ABI, .fail = host_fail,
                                .mpi_device_pointers = device_mpi_cuda_aware()};
#ifdef TRIAD_CUDA_EMU
    (void)err, (void)errlen;
    k = triad_device_plugin(&host);
#else
    k = device_load(&host, err, errlen);
#endif
    return k;
}
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
    return cuda_table(err, errlen);
#else
    snprintf(err, errlen, "this triad was built without the CUDA backend (./configure --with-cuda)");
    return NULL;
#endif
}

int device_staged(const struct device *k) { return k->on_device && !k->mpi_direct(); }
