/* device_load.c -- triad-cuda.so found, opened and asked for its table. */
#include "device_load.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_config.h"

#ifndef TRIAD_PKGLIBDIR
#error "TRIAD_PKGLIBDIR (the plugin's install folder) comes from Makefile.am"
#endif

/* (a build without the CUDA backend never loads it) */
#ifndef CUDA_BUILD_VERSION
#define CUDA_BUILD_VERSION "toolkit's"
#endif
#define FIX_LIBS "install the CUDA " CUDA_BUILD_VERSION " runtime and cuBLAS (libcudart, libcublas) or add their " \
                 "folder to LD_LIBRARY_PATH; or set " DEVICE_PLUGIN_ENV " to a " DEVICE_PLUGIN_FILE " that loads; " \
                 "or train on the CPU (train.device = 'cpu')"

/* The folder of the running program, with a trailing '/'; "" if unknown. */
static void program_dir(char *dir, size_t len)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    dir[0] = 0;
    if (n <= 0) return;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) snprintf(dir, len, "%.*s", (int)(slash - exe + 1), exe);
}

/* Which file to open: the environment's, else the first of the program's
 * folder and the install's that exists.  0, or -1 with err when neither. */
static int plugin_path(char *path, size_t len, char *err, size_t errlen)
{
    const char *env = getenv(DEVICE_PLUGIN_ENV);
    if (env && env[0]) {
        snprintf(path, len, "%s", env);
        if (access(path, F_OK) == 0) return 0;
        snprintf(err, errlen, "%s = %s: no such file; set it to the path of %s (made beside triad by `make`), "
                 "or unset it", DEVICE_PLUGIN_ENV, env, DEVICE_PLUGIN_FILE);
        return -1;
    }
    char dir[4000], near[4096];
    program_dir(dir, sizeof dir);
    snprintf(near, sizeof near, "%s%s", dir, DEVICE_PLUGIN_FILE);
    if (dir[0] && access(near, F_OK) == 0) {
        snprintf(path, len, "%s", near);
        return 0;
    }
    snprintf(path, len, "%s/%s", TRIAD_PKGLIBDIR, DEVICE_PLUGIN_FILE);
    if (access(path, F_OK) == 0) return 0;
    snprintf(err, errlen,
             "the CUDA backend %s is neither next to the program (%s) nor installed (%s); build it with `make` "
             "(it is made beside triad) and install it with `make install`, or set %s to its path; "
             "or train on the CPU (train.device = 'cpu')",
             DEVICE_PLUGIN_FILE, near, path, DEVICE_PLUGIN_ENV);
    return -1;
}

const struct device *device_load(const struct device_host *host, char *err, size_t errlen)
{
    char path[4096], where[300] = "";
    if (plugin_path(path, sizeof path, err, errlen) != 0) return NULL;
    char hostname[256];
    if (gethostname(hostname, sizeof hostname) == 0) {
        hostname[sizeof hostname - 1] = 0;
        snprintf(where, sizeof where, " on host %s", hostname);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, errlen, "cannot load the CUDA backend %s%s: %s; %s", path, where, dlerror(), FIX_LIBS);
        return NULL;
    }
    /* (a function pointer from dlsym's object pointer: POSIX guarantees the conversion) */
    device_plugin_fn *entry;
    *(void **)&entry = dlsym(h, DEVICE_PLUGIN_ENTRY);
    if (!entry) {
        snprintf(err, errlen, "%s is not a triad CUDA backend: %s; set %s to the %s built with this triad", path,
                 dlerror(), DEVICE_PLUGIN_ENV, DEVICE_PLUGIN_FILE);
        dlclose(h);
        return NULL;
    }
    const struct device *k = entry(host);
    if (!k) {
        snprintf(err, errlen, "the CUDA backend %s was built for another triad (plugin interface %d expected); "
                 "set %s to the %s built with this triad", path, DEVICE_PLUGIN_ABI, DEVICE_PLUGIN_ENV,
                 DEVICE_PLUGIN_FILE);
        dlclose(h);
    }
    return k; /* (the library stays loaded until the program ends) */
}
