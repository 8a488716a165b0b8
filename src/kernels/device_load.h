/* device_load.h -- the CUDA backend as a plugin: triad-cuda.so, opened only
 * when a run asks for train.device = 'cuda' (docs/cuda.md, "Loaded on
 * demand"), so that a CPU run never maps the CUDA libraries.
 *
 * The plugin exports one function, DEVICE_PLUGIN_ENTRY, of type
 * device_plugin_fn: given the host's callbacks it returns its table.  It
 * links neither MPI nor triad's own code: what it needs from the host
 * comes through struct device_host. */
#ifndef TRIAD_DEVICE_LOAD_H
#define TRIAD_DEVICE_LOAD_H

#include <stddef.h>

struct device;

/* Raised when struct device or struct device_host change, or what an
 * operation accepts (2: matmul_backward and the norms' backwards take NULL
 * for the input or the weight gradient, the zero-bubble B and W; 3:
 * attention_cached, generation's attention over a cache; 4:
 * crossentropy_sumexp leaves the exponentials over the logits, and
 * crossentropy_backward takes them, without the maxima; 5:
 * adamw_update_rounded, and gelu_backward's dinp may be its dout). */
#define DEVICE_PLUGIN_ABI 5
#define DEVICE_PLUGIN_ENTRY "triad_device_plugin"
#define DEVICE_PLUGIN_FILE "triad-cuda.so"
/* the environment variable naming the plugin's path */
#define DEVICE_PLUGIN_ENV "TRIAD_CUDA_BACKEND"

/* What the host lends the plugin. */
struct device_host {
    int abi; /* DEVICE_PLUGIN_ABI of the host */
    /* Stop the whole job on a failure this rank saw: the host's fatal error
     * ("[rank r] error at file:line: msg", the hint, MPI_Abort). */
    void (*fail)(const char *file, int line, const char *hint, const char *msg) __attribute__((noreturn));
    /* Does the MPI library take device pointers (a CUDA-aware MPI)? */
    int mpi_device_pointers;
};

/* The plugin's entry: its table, with host kept for the run; NULL when
 * host->abi is not the plugin's DEVICE_PLUGIN_ABI. */
typedef const struct device *device_plugin_fn(const struct device_host *host);
/* (cuda/table.c; the emulator of regression/cuda_emu links it in) */
device_plugin_fn triad_device_plugin;

/* Load the plugin and return its table.  The file: $TRIAD_CUDA_BACKEND if
 * set (and then only it), else triad-cuda.so next to the running program
 * (the build tree), else in the install's library folder.  NULL, with err
 * naming the file and the loader's reason (e.g. libcublas.so.13 not found)
 * and how to fix it, when it cannot be loaded.  This rank only. */
const struct device *device_load(const struct device_host *host, char *err, size_t errlen);

#endif
