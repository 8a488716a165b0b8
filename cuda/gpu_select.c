/* gpu_select.c -- one GPU per rank, and whether MPI takes device pointers. */
#include "check.h"
#include "cuda_backend.h"
#include "cuda_device.h"
#include "log.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI's extensions: MPIX_Query_cuda_support */
#endif
#endif

/* What each rank of a node tells the others about its pick. */
struct pick {
    int ok;
    int device;
    char uuid[16];
};

/* This rank's device: local rank mod count, made current; ok = 0 and the
 * reason in err when there is none or it cannot be used. */
static struct pick pick_device(int lrank, const char *who, char *err, size_t errlen)
{
    struct pick me = {0};
    char why[256];
    int count = cuda_device_count(why, sizeof why);
    if (count == 0) {
        snprintf(err, errlen, "%s: no CUDA device (%s)", who, why);
        return me;
    }
    me.device = lrank % count;
    struct cudaDeviceProp prop;
    cudaError_t rc = cudaSetDevice(me.device);
    if (rc == cudaSuccess) rc = cudaGetDeviceProperties(&prop, me.device);
    if (rc != cudaSuccess) {
        snprintf(err, errlen, "%s: cannot use CUDA device %d of %d: %s: %s", who, me.device, count,
                 cudaGetErrorName(rc), cudaGetErrorString(rc));
        return me;
    }
    memcpy(me.uuid, prop.uuid.bytes, sizeof me.uuid);
    me.ok = 1;
    return me;
}

int cuda_device_select(MPI_Comm world, int allow_shared, char *err, size_t errlen)
{
    int rank, lrank, nlocal, hlen;
    char host[MPI_MAX_PROCESSOR_NAME], who[MPI_MAX_PROCESSOR_NAME + 32];
    MPI_Comm node;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Get_processor_name(host, &hlen));
    MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &lrank));
    MPI_CHECK(MPI_Comm_size(node, &nlocal));
    cuda_set_log_rank(rank);
    snprintf(who, sizeof who, "rank %d on host %s", rank, host);

    struct pick me = pick_device(lrank, who, err, errlen);
    struct pick *all = calloc((size_t)nlocal, sizeof *all);
    if (!all) {
        fprintf(stderr, "[rank %d] out of memory in cuda_device_select\n", rank);
        exit(1);
    }
    MPI_CHECK(MPI_Allgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, node));
    int result = me.ok ? me.device : -1;
    for (int r = 0; me.ok && !allow_shared && r < nlocal; r++) {
        if (r == lrank || !all[r].ok || memcmp(all[r].uuid, me.uuid, sizeof me.uuid)) continue;
        snprintf(err, errlen,
                 "%s: CUDA device %d is also used by node-local rank %d (%d ranks on this node); "
                 "start at most one rank per GPU, or allow ranks to share a GPU",
                 who, me.device, r, nlocal);
        result = -1;
        break;
    }
    free(all);
    MPI_CHECK(MPI_Comm_free(&node));
    return result;
}

int cuda_mpi_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    return MPIX_Query_cuda_support() == 1; /* the library actually loaded */
#else
    return 0;
#endif
}
