/* device_open.c -- one device per rank: the ranks of a node, their picks
 * compared; whether MPI takes device pointers.  (The MPI of the device
 * lives here, on the host: the CUDA plugin links no MPI.) */
#include "device.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI's extensions: MPIX_Query_cuda_support */
#endif
#endif

/* What each rank of a node tells the others about its device. */
struct pick {
    int ok;
    int device;
    unsigned char id[16];
};

/* Refuse a device another rank of the node got too (-1 with err), else
 * return mine. */
static int check_unshared(const struct pick *me, const struct pick *all, int lrank, int nlocal, const char *who,
                          char *err, size_t errlen)
{
    for (int r = 0; r < nlocal; r++) {
        if (r == lrank || !all[r].ok || memcmp(all[r].id, me->id, sizeof me->id)) continue;
        snprintf(err, errlen,
                 "%s: CUDA device %d is also used by node-local rank %d (%d ranks on this node); "
                 "start at most one rank per GPU, or allow ranks to share a GPU",
                 who, me->device, r, nlocal);
        return -1;
    }
    return me->device;
}

int device_open(const struct device *k, MPI_Comm world, const struct device_options *opt, char *err, size_t errlen)
{
    if (!k->open) return 0;
    int rank, lrank, nlocal, hlen;
    char host[MPI_MAX_PROCESSOR_NAME], who[MPI_MAX_PROCESSOR_NAME + 32];
    MPI_Comm node;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Get_processor_name(host, &hlen));
    MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    MPI_CHECK(MPI_Comm_rank(node, &lrank));
    MPI_CHECK(MPI_Comm_size(node, &nlocal));
    snprintf(who, sizeof who, "rank %d on host %s", rank, host);

    struct device_place at = {.local_rank = lrank, .who = who};
    struct pick me = {0};
    me.device = k->open(&at, opt, me.id, err, errlen);
    me.ok = me.device >= 0;
    struct pick *all = xcalloc((size_t)nlocal, sizeof *all);
    MPI_CHECK(MPI_Allgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, node));
    int result = !me.ok ? -1 : opt->allow_shared ? me.device : check_unshared(&me, all, lrank, nlocal, who, err, errlen);
    free(all);
    MPI_CHECK(MPI_Comm_free(&node));
    return result;
}

int device_mpi_cuda_aware(void)
{
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    return MPIX_Query_cuda_support() == 1;
#else
    return 0;
#endif
}
