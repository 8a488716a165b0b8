/* plan.h -- the memory, communication and bubble planner (docs/design.md).
 *
 * A plan is a pure function of (config, world): for every pipeline stage
 * (one rank class; the tp and dp ranks of a stage are alike) the bytes one
 * rank holds, built from the allocator's own sizes (model_tensor_size,
 * model_slot_floats, model_scratch_floats, pp_peak_bound) so that it cannot
 * drift from what a run allocates; the bytes each rank moves per step over
 * each communicator (the amounts comm.c counts); the pipeline bubble.
 * `triad plan DECK` prints it; every run checks it before it allocates. */
#ifndef TRIAD_PLAN_H
#define TRIAD_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "comm.h"
#include "config.h"
#include "shape.h"
#include "topo.h"

struct model_dims;

struct model;
struct optim;

/* The rows of a rank's memory, in bytes.  The resident ones stay for the
 * whole run; of the transient ones only one exists at a time, so the peak is
 * the resident sum plus the largest transient. */
enum plan_mem {
    PM_PARAMS,    /* fp32 parameters, every tensor 64-byte aligned */
    PM_GRADS,     /* gradients, laid out like the parameters, + the embedding's share of wte's */
    PM_OPTIM,     /* AdamW m and v (ZeRO-1: a 1/dp slice each, + the reduced gradient slice) */
    PM_ACTS,      /* activation slots (micro-batches in flight), the look-ahead receive buffers, what pending
                     weight gradients keep (zero-bubble schedules), the shared scratch */
    PM_WORK,      /* CPU: gemm packing buffers, per thread; CUDA: the backend's scratch + 16-bit operand copies;
                     llama: + the rotary tables */
    PM_RUNTIME,   /* MPI, HDF5, the libraries, the heap (a measured constant) */
    PM_SNAPSHOT,  /* io.async_checkpoint: the host copy of the state the rank writes (its own, at most all of it) */
    PM_RESIDENT,  /* -- the transient ones: */
    PM_COMM = PM_RESIDENT, /* MPI's scratch for its largest collective (Open MPI 4.1, measured) */
    PM_CKPT,      /* a checkpoint's read-back check: one tensor of the rank at a time (the largest) */
    PM_PROBE,     /* the start-up GEMM that measures the peak rate (unless train.peak_gflops is set) */
    PM_COUNT
};

struct plan_stage {
    int pp_rank, Lp;          /* Lp: layers on the rank */
    int in_flight, slots;     /* micro-batches (x chunks) the schedule holds at once; slots allocated */
    int recv;                 /* the pipeline's receive buffers (one chunk input each: the look-ahead) */
    int wslots;               /* pending weight gradients (a split backward between its B and its W) */
    size_t params;            /* parameter elements on the rank (unpadded) */
    size_t bytes[PM_COUNT];
    size_t peak;              /* the resident bytes + the largest transient */
    size_t slot_bytes, scratch_bytes, wslot_bytes;
    size_t act_by_recompute[3]; /* activations with recompute = none, selective, full (all layers) */
    double comm[CG_COUNT];    /* bytes per step this rank contributes (as comm.c counts them) */
};

struct plan {
    struct run_shape shape;   /* the grid, micro-batches, SP, ZeRO and overlap (shape.h) */
    int recompute, threads, cuda;
    double bucket_mb;         /* parallel.bucket_mb: ZeRO's pieces */
    int64_t logical_params;
    long bubble_num, bubble_den; /* the bubble fraction: (p-1)/(v*m+p-1), or simulated (pp_bubble_predicted) */
    int bubble_formula;          /* 1: by the formula */
    int cost[3];              /* F, B and W of a chunk of stage 0 in simulator time units, by FLOPs (plan_flop_costs) */
    int *rank_cost;           /* [pp][3] each stage's (the head's and the embedding's stages cost more) */
    double bubble;            /* the schedule's bubble, simulated with each stage's */
    struct plan_stage *stage; /* [pp] */
    size_t peak;              /* the largest stage peak, or rank 0's where that is larger */
    int peak_stage;           /* its stage, or -1: world rank 0's (rank0_peak) */
    /* what world rank 0 (of stage 0) alone holds for a moment, besides its
     * stage's transients: the tokenizer being parsed at start-up and MPI-IO's
     * aggregation buffer in a checkpoint's collective write (CPU only: host
     * memory); rank0_peak is stage 0's peak with them */
    size_t rank0_runtime, rank0_tokenizer, rank0_mpiio, rank0_peak;
};

/* The tokenizer's parse at its peak, per byte of its files (a
 * tokenizer.json, or a folder's as a checkpoint keeps them): the JSON tree
 * and the tokenizer built from it at once.  Measured with triad tokenize's resident set on four real files
 * (Llama 2's and 3's, Qwen3's, Gemma 3's): 6.8 to 9.6. */
#define PLAN_TOKENIZER_FACTOR 10
/* MPI-IO's buffer on an aggregating rank of a collective write (Open MPI
 * 4.1's io_ompio_bytes_per_agg; ROMIO's cb_buffer_size is 16 MiB), or the
 * largest dataset's bytes where fewer. */
#define PLAN_MPIIO_BUFFER ((size_t)32 << 20)
/* What rank 0 holds beside its stage's other ranks in a run of more than
 * one (metrics.h5 open in serial HDF5, the summaries it gathers): measured,
 * 2.4 to 2.7 MiB on 2, 4 and 8 ranks of the demo deck.  A run of one rank
 * has it in PLAN_RUNTIME_CPU, which was measured on one. */
#define PLAN_RANK0_RUNTIME ((size_t)5 << 19)

/* Bytes of the fixed runtime (PM_RUNTIME): on the CPU, MPI, HDF5, the
 * libraries and the heap (measured as the peak resident set of a small
 * run: Open MPI 4.1, HDF5 1.10; the same in a build with the CUDA backend,
 * whose libraries a CPU run never loads: device_load.h); on a GPU, the
 * CUDA runtime's device reserve. */
#define PLAN_RUNTIME_CPU ((size_t)22 << 20)
#define PLAN_RUNTIME_CUDA ((size_t)2 << 30)

/* Plan cfg (validated for `world`) on world ranks.  threads = OpenMP threads
 * per rank (0: the deck's train.threads, else omp_get_max_threads()).
 * Returns 0, or -1 with the reason in err. */
int plan_compute(struct plan *p, const struct config *cfg, int world, int threads, char *err, size_t errlen);
void plan_free(struct plan *p);
/* Whose the plan's peak is, for messages: "stage S", or "rank 0". */
void plan_peak_where(char *buf, size_t n, const struct plan *p);

/* The bubble fraction (idle / (pp x makespan)) of schedule s, simulated
 * (pipeline.c) with a chunk's forward, B and W taking t[0], t[1] and t[2]
 * time units (a fused backward t[1] + t[2]), or with each rank's own
 * (rank_t[3 r + i], when non-NULL); each rank's idle fraction into
 * idle[pp] when non-NULL.  -1 if the schedule cannot run. */
double plan_sim_bubble(enum pp_schedule s, const char *file, int pp, int v, int m, const int t[3], const int *rank_t,
                       double *idle);

/* A chunk's F, B and W for micro-batches of B sequences in simulator time
 * units by their FLOPs (model_action_flops), the forward of a chunk
 * without the head or the embedding PLAN_COST_UNITS. */
#define PLAN_COST_UNITS 10
void plan_flop_costs(const struct model_dims *d, int B, int t[3]);

/* triad schedule's figures beside its picture: the bubble and each rank's
 * idle with F, B and W weighted by their FLOPs, and with the times a
 * finished run of the deck measured (io.run_dir's metrics.h5), if any. */
void plan_print_schedule_costs(FILE *f, const struct config *cfg, int world);

/* config_validate for a plan: as for a run on world ranks, but any device
 * (the CUDA backend need not be built to plan for it). */
int plan_validate(const struct config *cfg, int world, struct deck_error *err);

/* Memory per rank in bytes for the fit check: train.memory_gb if set;
 * else on the CPU the physical memory (or the cgroup limit, if lower) over
 * ranks_per_node; 0 when unknown (a device without memory_gb).  *source
 * says where the number came from. */
double plan_memory_available(const struct config *cfg, int ranks_per_node, char *source, size_t len);

/* The full report of `triad plan`: the model, memory per stage (with and
 * without recomputation), the fit against `avail` bytes (0: unknown), the
 * suggestions when it does not fit, communication per step, the bubble. */
void plan_print(FILE *f, const struct plan *p, const struct config *cfg, double avail, const char *avail_source);

/* The suggestions alone: modified decks re-planned, the largest saving
 * first, each with its new peak.  Prints nothing when none helps. */
void plan_print_advice(FILE *f, const struct plan *p, const struct config *cfg, double avail);

/* train.pack_activations left unset (-1) in a bf16 or fp16 run: the stored
 * layers go packed in 16 bits (half their bytes) when that lowers the
 * plan's peak and the peak with fp32 containers is more than
 * PLAN_UNPACKED_SHARE of the memory available; else in fp32 containers
 * (no pass to pack and unpack each layer: faster, the same numbers). */
#define PLAN_UNPACKED_SHARE 0.75

/* The value an unset train.pack_activations takes for cfg (bf16 or fp16)
 * on world ranks: the rule above, for the largest stage's peaks against
 * avail bytes per rank (0: unknown: packed where that lowers the peak).
 * *why: the reason, in words. */
int plan_pack_choice(const struct config *cfg, int world, int threads, double avail, char *why, size_t len);

/* At a run's start, before anything is allocated: sets an unset
 * train.pack_activations in cfg by the rule above, applied on every rank
 * alike to the largest of the ranks' peaks over their own memory (each
 * rank's stage and node), and logs the choice and its reason.  Collective
 * over g->world_comm. */
void plan_resolve_pack(struct config *cfg, const struct grid *g);

/* Before a run allocates: if this rank's stage needs more memory than it
 * has, rank 0 prints the plan and the advice and every rank exits with
 * status 1.  Returns this rank's planned peak in bytes (printed at the end
 * of the run beside the measured one).  Collective over g->world_comm. */
size_t plan_check(const struct config *cfg, const struct grid *g);

/* The exact bytes each rank allocated (parameters, gradients, optimizer
 * state, activations), gathered to rank 0, which logs one line per stage
 * (from its tp 0, dp 0 rank) in the words `triad plan` prints them and
 * returns the world x 4 table (the caller frees it; NULL elsewhere).
 * Collective. */
unsigned long long *plan_allocated(const struct model *m, const struct optim *o, const struct grid *g);

#endif
