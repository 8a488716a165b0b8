/* cpu.h -- the processor: which SIMD path the hot kernels take, and its
 * nominal peak (the MFU reference on the CPU).
 *
 * Paths, lowest first: generic (plain C, any 64-bit CPU), avx2 (AVX2 + FMA),
 * avx512 (AVX-512 F/BW/DQ/VL), avx512bf16 (avx512 with AVX512-BF16: a bf16
 * run's products on VDPBF16PS; everything else as avx512).  The best one
 * the processor runs is chosen at start-up;
 * TRIAD_ISA=generic|avx2|avx512|avx512bf16 forces one (a path the processor
 * cannot run is an error), so one machine can test every lower path.
 * Every path computes bitwise the same numbers (gemm_kernels.h says how). */
#ifndef TRIAD_CPU_H
#define TRIAD_CPU_H

#include <stddef.h>
#include <stdint.h>

enum isa { ISA_GENERIC, ISA_AVX2, ISA_AVX512, ISA_AVX512BF16, ISA_COUNT };

const char *isa_name(enum isa i);
/* 1 if this processor (and this build) can run path i. */
int isa_supported(enum isa i);

/* Resolve the path once: TRIAD_ISA if set, else the best supported.
 * Returns 0, or -1 with the reason in err (unknown or unsupported value). */
int isa_init(char *err, size_t errlen);
/* The path in use (resolved on first use: a bad TRIAD_ISA stops the
 * process with the message of isa_init). */
enum isa isa_active(void);
/* Why: "forced by TRIAD_ISA", "best this processor runs: it has ...". */
const char *isa_reason(void);
/* Run path i from now on (tests): 0, or -1 when the processor cannot. */
int isa_force(enum isa i);

/* The processor's name (from /proc/cpuinfo), "" if unknown. */
const char *cpu_model_name(void);

/* Nominal peak of one core on path i: clock x flop/cycle, with the clock
 * and the per-cycle rate it took (why: "2 FMA pipes x 8 lanes"); fp32's,
 * or with bf16 set a bf16 run's products' (twice fp32's on avx512bf16,
 * whose VDPBF16PS adds two products per fp32 lane; fp32's on the paths
 * that emulate it). */
struct cpu_peak {
    double ghz;            /* maximum clock, 0 when unknown */
    int flops_per_cycle;   /* per core */
    char how[240];         /* where the figures came from */
};
void cpu_core_peak(enum isa i, int bf16, struct cpu_peak *out);

/* A set of logical CPUs (or of cores, each named by its first CPU). */
enum { CPU_MASK_MAX = 1024 };
struct cpu_mask {
    uint64_t bits[CPU_MASK_MAX / 64];
};
int cpu_mask_count(const struct cpu_mask *m);
int cpu_mask_has(const struct cpu_mask *m, int cpu);
void cpu_mask_add(struct cpu_mask *m, int cpu);
/* m as a list of ranges ("0-3,8"), cut with "..." to fit len. */
void cpu_mask_list(const struct cpu_mask *m, char *out, size_t len);
/* The indices i < n where on[i] as a list of ranges ("0,2-5,7"), cut with
 * ",..." (or "..." alone) to fit len bytes with its NUL; returns the
 * string's length (0, writing nothing, when len is 0). */
size_t range_list(const unsigned char *on, int n, char *out, size_t len);

/* The CPUs this process may run on: its affinity mask (a launcher's
 * binding, a Slurm allocation's cpuset), or with OMP_PROC_BIND the
 * processors of its OpenMP places (the runtime has bound the first thread
 * to one of them already). */
void cpu_usable(struct cpu_mask *m);

/* The physical cores of a set of CPUs: the hardware threads of one core
 * (sysfs's topology/core_cpus_list, or thread_siblings_list on older
 * kernels, under sysfs_cpu; NULL: /sys/devices/system/cpu) are one core,
 * named by its first CPU; a CPU whose topology cannot be read counts as a
 * core of its own. */
void cpu_cores_of(const struct cpu_mask *cpus, struct cpu_mask *cores, const char *sysfs_cpu);

#endif
