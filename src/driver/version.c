/* version.c -- the build and its libraries, for --version and the run log. */
#include "version.h"

#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "build_config.h"
#include "cpu.h"
#include "device_load.h"
#include "gemm.h"
#include "version_git.h" /* TRIAD_GIT_COMMIT, made by make */

#ifdef HAVE_OPENBLAS_GET_CONFIG
char *openblas_get_config(void);
#endif

const char *version_string(void)
{
    static char s[96];
    snprintf(s, sizeof s, "%s (commit %s)", PACKAGE_VERSION, TRIAD_GIT_COMMIT);
    return s;
}

static const char *compiler(void)
{
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#else
    return "unknown compiler";
#endif
}

void version_print(FILE *f)
{
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, mv = 0, ms = 0;
    MPI_Get_library_version(mpi, &len);
    mpi[strcspn(mpi, "\n")] = '\0';
    MPI_Get_version(&mv, &ms);
    unsigned hmaj = 0, hmin = 0, hrel = 0;
    H5get_libversion(&hmaj, &hmin, &hrel);
    const char *model = cpu_model_name();

    fprintf(f, "triad %s\n", version_string());
    fprintf(f, "compiler: %s as %s, flags %s %s%s\n", compiler(), BUILD_CC, BUILD_CFLAGS, TRIAD_NUMERIC_FLAGS,
#if defined(TRIAD_KERNELS_X86)
            "; kernels compiled for generic, avx2 and avx512"
#else
            "; kernels compiled for generic"
#endif
    );
    fprintf(f, "simd:     %s (%s%s%s); TRIAD_ISA=generic|avx2|avx512|avx512bf16 forces another\n", isa_name(isa_active()),
            isa_reason(), *model ? "; " : "", model);
    fprintf(f, "matmul:   %s\n", gemm_backend_name(GEMM_FP32));
    fprintf(f, "bf16:     %s\n", gemm_backend_name(GEMM_BF16));
#ifdef HAVE_OPENBLAS_GET_CONFIG
    fprintf(f, "blas:     %s (%s)\n", BLAS_NAME, openblas_get_config());
#else
    fprintf(f, "blas:     %s\n", BLAS_NAME);
#endif
    fprintf(f, "mpi:      %s (MPI %d.%d)\n", mpi, mv, ms);
    fprintf(f, "hdf5:     %u.%u.%u, parallel\n", hmaj, hmin, hrel);
#ifdef HAVE_CUDA
    fprintf(f, "cuda:     backend built with CUDA %s, %s loaded for train.device = 'cuda'\n", CUDA_BUILD_VERSION,
            DEVICE_PLUGIN_FILE);
#else
    fprintf(f, "cuda:     not built (./configure --with-cuda)\n");
#endif
}
