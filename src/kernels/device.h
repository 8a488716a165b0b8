/* device.h -- where the model's numbers live and which kernels compute on
 * them: the operations of backend.h, the precision helpers and memory
 * management behind one table.  The CPU table (device_cpu.c) calls the
 * kernels of kernels_cpu.c on host memory; the CUDA table (cuda/table.c,
 * built with ./configure --with-cuda into the plugin triad-cuda.so, loaded
 * by device_load.c when a run asks for it) calls cuda/ on device memory.
 * The model, the optimizer, the checkpoints and the collectives reach the
 * numbers only through it. */
#ifndef TRIAD_DEVICE_H
#define TRIAD_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>


#include "ops.h"
#include "precision.h"

/* How a device is used (train.share_gpus, train.tf32). */
struct device_options {
    int allow_shared; /* several ranks of a node on one GPU */
    int tf32;         /* fp32 products on TF32 tensor cores */
};

/* Where a rank opens its device. */
struct device_place {
    int local_rank;  /* its rank among the ranks of its node */
    const char *who; /* "rank R on host H", for messages */
};

struct device {
    const char *name;
    int on_device;  /* buffers are device memory: the host reads them only through to_host */

    /* the operations of ops.def, each taking the run's precision first: the
     * products' operands hold values of that precision, and a device with
     * 16-bit units multiplies them there (the CUDA table: tensor cores, fp32
     * accumulation); the results are fp32 either way */
#define OP(ret, name, params, args) ret (*name) DEVICE_PARAMS params;
#define OP_P OP
#include "ops.def"
#undef OP
#undef OP_P

    /* precision.h */
    void (*lp_round)(enum precision p, float *x, size_t n);
    void (*lp_round_to)(enum precision p, float *dst, const float *src, size_t n); /* dst = src rounded, one pass */
    void (*lp_pack)(enum precision p, uint16_t *dst, const float *src, size_t n); /* a layer kept for the backward */
    void (*lp_unpack)(enum precision p, float *dst, const uint16_t *src, size_t n);
    size_t (*count_nonfinite)(const float *x, size_t n);
    /* Optional (NULL: not offered, the caller rounds): matmul_forward and
     * matmul_backward whose out / dinp come back rounded to the run's
     * precision, the bits of the operation followed by lp_round; the CPU's
     * GEMM rounds each tile of its output while it is in L1, which saves
     * a bf16 run a pass over every product's output. */
    void (*matmul_forward_rounded)(enum precision p, float *out, const float *inp, const float *weight,
                                   const float *bias, int N, int C, int OC);
    void (*matmul_backward_rounded)(enum precision p, float *dinp, float *dweight, float *dbias, const float *dout,
                                    const float *inp, const float *weight, int N, int C, int OC);
    /* The activations' operations (ops.def's OP_A: the norms' forward,
     * residual_forward, gelu and swiglu both ways, crossentropy_backward)
     * return their output rounded to the run's precision p (the CPU's: a
     * block at a time, rounded while it is in L1), so the caller need not
     * (0: it rounds).  A sum of fp32 gradients passes PREC_FP32. */
    int acts_rounded;
    /* Optional (NULL: not offered, the caller rounds): adamw_update that
     * also leaves the updated parameters rounded to the run's precision p in
     * low (a bf16 or fp16 run's working copy of its fp32 master weights),
     * the bits of adamw_update followed by lp_round_to(p, low, param, n);
     * the CPU's rounds each block while it is in L2, which saves the
     * optimizer a pass over the master weights (optim_update). */
    void (*adamw_update_rounded)(enum precision p, float *param, float *low, float *grad, float gscale, float *m,
                                 float *v, size_t n, float lr, float beta1, float beta2, float eps, float wd, int t,
                                 int clear);

    /* The device's measured dense product rate in GFLOP/s for a run in
     * precision p (the MFU reference), and what multiplies in it ("triad
     * AVX-512 sgemm ...", "cuBLAS on NVIDIA H200, bf16 tensor cores ..."). */
    double (*peak_gflops)(enum precision p);
    const char *(*matmul_name)(enum precision p);

    /* memory: alloc returns zeroed, 64-byte aligned memory (or stops the run) */
    void *(*alloc)(size_t bytes);
    void (*release)(void *p);
    void (*zero)(void *p, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);     /* within the device */
    void (*to_device)(void *dst, const void *src, size_t bytes); /* from host memory */
    void (*to_host)(void *dst, const void *src, size_t bytes);   /* to host memory */
    /* Host memory for MPI to use on the device's behalf (staging): pinned
     * for a GPU, so the copies run at full speed.  Not zeroed. */
    void *(*host_alloc)(size_t bytes);
    void (*host_release)(void *p);
    /* May MPI be handed these buffers (host memory; device memory with a
     * CUDA-aware MPI)?  Else comm.c stages them through the host. */
    int (*mpi_direct)(void);
    /* Wait until the device has finished the work queued so far: before MPI
     * reads or writes device memory itself (a CUDA-aware MPI copies on its
     * own streams, unordered with the kernels that fill the buffers). */
    void (*sync)(void);
    /* Bytes of the device's memory in use, as its driver counts them (the
     * runtime's own reserve and any other process on it included; what
     * nvidia-smi shows): sampled after every step for the run's measured
     * device peak.  NULL: the model lives in host memory (the resident set
     * measures it). */
    size_t (*memory_in_use)(void);

    /* Make the device usable on this rank (CUDA: device at->local_rank mod
     * the number it sees, made current, a clear error when there is none;
     * NULL: nothing to do), and release it.  Returns the device's index,
     * with its identity in id (the same for two ranks on one device), or
     * -1 with err filled.  This rank only: device_open compares a node's. */
    int (*open)(const struct device_place *at, const struct device_options *opt, unsigned char id[16], char *err,
                size_t errlen);
    void (*close)(void);
};

extern const struct device cpu_device, cpu_staged_device;

/* 1 if this build has the backend: the CUDA one (cuda) or the CPU's. */
int device_built(int cuda);

/* The table of the CUDA backend (cuda: the plugin, loaded on first use), or
 * of the CPU (with staged, the one whose memory MPI reaches through host
 * buffers only: diag.stage_through_host); NULL with the reason in err (a
 * build without the CUDA backend, or a plugin that does not load: which
 * file, why, how to fix it).  The deck's train.device and
 * diag.stage_through_host choose.  This rank only. */
const struct device *device_for(int cuda, int staged, char *err, size_t errlen);

/* Open k on every rank of world (device_open.c): each rank's device by its
 * rank on the node; unless opt->allow_shared, refused where two ranks of a
 * node got the same one (compared by identity, so a launcher that gives
 * each rank its own device through CUDA_VISIBLE_DEVICES passes).  Returns
 * the device index (0 for a table without open), or -1 with err (this rank
 * only: agree with mpi_agree_error).  Collective over world. */
int device_open(const struct device *k, MPI_Comm world, const struct device_options *opt, char *err, size_t errlen);
/* The hint for device_open's refusals: a node without a usable device, or
 * two ranks on one. */
#define DEVICE_OPEN_HINT                                                                                               \
    "each rank needs a GPU of its own: check that the node's GPUs are visible (nvidia-smi, CUDA_VISIBLE_DEVICES), "   \
    "launch as many ranks per node as it has GPUs, or set train.share_gpus; train.device = 'cpu' needs none"

/* 1 if the MPI library takes device pointers (Open MPI's
 * MPIX_Query_cuda_support, asking the library actually loaded), else 0;
 * always 0 for an MPI without the query. */
int device_mpi_cuda_aware(void);

/* Does MPI reach k's memory only through host buffers (a device MPI cannot
 * read: comm.c stages, and the reduction cannot overlap)? */
int device_staged(const struct device *k);


#endif
