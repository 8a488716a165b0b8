/* test_cuda_device.c -- GPU selection (device_open over the CUDA table's
 * open, cuda_device.h) and host staging.
 *
 * Without a GPU: device_open fails on every rank with exactly
 * "rank R on host H: no CUDA device (cudaGetDeviceCount: <reason>)".
 * With GPUs: each rank gets node-local rank mod count; when a node has more
 * ranks than devices, selection fails with the sharing message unless
 * allow_shared; the table's pinned host memory takes device data and gives
 * it back.
 * Any number of ranks; every check must hold on all of them (rank 0 prints
 * TAP, with its own message). */
#include "check.h"
#include "cuda_backend.h"
#include "device.h"
#include "tap.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

extern const struct device cuda_device; /* cuda/table.c */

static int rank;

/* The CUDA table opened on every rank as a run opens it. */
static int open_cuda(int allow_shared, char *err, size_t errlen)
{
    struct device_options opt = {.allow_shared = allow_shared};
    return device_open(&cuda_device, MPI_COMM_WORLD, &opt, err, errlen);
}

/* tap_ok on rank 0 for "cond holds on every rank".  Collective. */
static void check_all(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check_all(int cond, const char *fmt, ...)
{
    int all;
    MPI_Allreduce(&cond, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (rank == 0) tap_ok(all, "%s", msg);
}

static void test_no_device(const char *why)
{
    char host[MPI_MAX_PROCESSOR_NAME], want[1024], err[1024] = "";
    int len;
    MPI_Get_processor_name(host, &len);
    snprintf(want, sizeof want, "rank %d on host %s: no CUDA device (%s)", rank, host, why);
    for (int shared = 0; shared <= 1; shared++) {
        int dev = open_cuda(shared, err, sizeof err);
        check_all(dev == -1, "no GPU, allow_shared %d: device_open returns -1 (got %d)", shared, dev);
        check_all(strcmp(err, want) == 0, "no GPU, allow_shared %d: message \"%s\"", shared, err);
    }
}

/* The table's memory functions, as src/grid/comm.c stages with them: device ->
 * pinned host -> device. */
static void test_staging(void)
{
    enum { n = 4099 };
    static float h[n];
    for (int i = 0; i < n; i++) h[i] = (float)i + 0.25f;
    float *d = cuda_device.alloc(sizeof h);
    cuda_device.to_device(d, h, sizeof h);
    float *s = cuda_device.host_alloc(sizeof h);
    cuda_device.to_host(s, d, sizeof h);
    int ok = memcmp(s, h, sizeof h) == 0;
    for (int i = 0; i < n; i++) s[i] *= -2.0f;
    cuda_device.to_device(d, s, sizeof h);
    cuda_device.to_host(h, d, sizeof h);
    for (int i = 0; i < n; i++) ok &= h[i] == -2.0f * ((float)i + 0.25f);
    check_all(ok, "staging: device -> pinned host -> device round trip through the table");
    cuda_device.host_release(s);
    cuda_device.release(d);
}

static void test_devices(int count)
{
    MPI_Comm node;
    int lrank, nlocal, cur = -1;
    char err[1024] = "";
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lrank);
    MPI_Comm_size(node, &nlocal);
    MPI_Comm_free(&node);
    if (nlocal > count) {
        int dev = open_cuda(0, err, sizeof err);
        check_all(dev == -1 && strstr(err, "is also used by node-local rank"),
                  "%d ranks on %d GPU(s), sharing not allowed: refused (\"%s\")", nlocal, count, err);
    }
    int dev = open_cuda(nlocal > count, err, sizeof err);
    CUDA_CHECK(cudaGetDevice(&cur));
    check_all(dev == lrank % count && cur == dev,
              "device_open: node-local rank %d of %d gets device %d of %d (got %d, current %d)",
              lrank, nlocal, lrank % count, count, dev, cur);
    test_staging();
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char why[256];
    int count = cuda_device_count(why, sizeof why);
    if (count == 0) test_no_device(why);
    else test_devices(count);
    if (rank == 0) tap_diag("MPI is %sCUDA-aware", device_mpi_cuda_aware() ? "" : "not ");
    int status = rank == 0 ? tap_done() : 0;
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}
