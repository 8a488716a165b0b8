/* cpu.c -- the SIMD path of the hot kernels and the processor's nominal peak. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "cpu.h"

#include <omp.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CPU_X86 1
#else
#define CPU_X86 0
#endif

static const char *const names[ISA_COUNT] = {"generic", "avx2", "avx512", "avx512bf16"};

static _Atomic int active = -1;
static char reason[160];

const char *isa_name(enum isa i) { return i >= 0 && i < ISA_COUNT ? names[i] : "?"; }

int isa_supported(enum isa i)
{
    switch (i) {
    case ISA_GENERIC: return 1;
#if CPU_X86
    /* (__builtin_cpu_supports also checks that the OS saves the registers) */
    case ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case ISA_AVX512:
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma");
    case ISA_AVX512BF16: return isa_supported(ISA_AVX512) && __builtin_cpu_supports("avx512bf16");
#endif
    default: return 0;
    }
}

static enum isa isa_best(void)
{
    for (int i = ISA_COUNT - 1; i > 0; i--)
        if (isa_supported((enum isa)i)) return (enum isa)i;
    return ISA_GENERIC;
}

static const char *has_text(enum isa i)
{
    return i == ISA_AVX512BF16 ? "AVX-512 F/BW/DQ/VL and AVX512-BF16"
           : i == ISA_AVX512   ? "AVX-512 F/BW/DQ/VL, no AVX512-BF16"
           : i == ISA_AVX2     ? "AVX2 and FMA, no AVX-512"
                               : "no AVX2";
}

int isa_init(char *err, size_t errlen)
{
    if (atomic_load(&active) >= 0) return 0;
    const char *force = getenv("TRIAD_ISA");
    enum isa best = isa_best(), pick = best;
    if (force && *force) {
        int found = -1;
        for (int i = 0; i < ISA_COUNT; i++)
            if (!strcmp(force, names[i])) found = i;
        if (found < 0) {
            snprintf(err, errlen, "TRIAD_ISA=%s is not a SIMD path: use generic, avx2, avx512 or avx512bf16 (or unset it)",
                     force);
            return -1;
        }
        if (!isa_supported((enum isa)found)) {
            snprintf(err, errlen, "TRIAD_ISA=%s: this processor cannot run it (it has %s): use %s or lower, or "
                     "unset TRIAD_ISA", force, has_text(best), names[best]);
            return -1;
        }
        pick = (enum isa)found;
        snprintf(reason, sizeof reason, "forced by TRIAD_ISA (the processor has %s)", has_text(best));
    } else {
        snprintf(reason, sizeof reason, "the best this processor runs: it has %s", has_text(best));
    }
    atomic_store(&active, (int)pick);
    return 0;
}

enum isa isa_active(void)
{
    int a = atomic_load(&active);
    if (a >= 0) return (enum isa)a;
    char err[256];
#pragma omp critical(triad_isa_init)
    if (isa_init(err, sizeof err) != 0) {
        fprintf(stderr, "error: %s\n", err);
        exit(1);
    }
    return (enum isa)atomic_load(&active);
}

const char *isa_reason(void)
{
    isa_active();
    return reason;
}

int isa_force(enum isa i)
{
    if (!isa_supported(i)) return -1;
    snprintf(reason, sizeof reason, "set by the program");
    atomic_store(&active, (int)i);
    return 0;
}

/* ------------------------------------------------------------ the processor */

/* The value of the first "key : value" line of /proc/cpuinfo, or "". */
static void cpuinfo_field(const char *key, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) != 0) continue;
        char *colon = strchr(line, ':');
        if (!colon || strspn(line + kl, " \t") != (size_t)(colon - line - (long)kl)) continue;
        char *v = colon + 1 + strspn(colon + 1, " \t");
        v[strcspn(v, "\n")] = '\0';
        snprintf(out, outlen, "%s", v);
        break;
    }
    fclose(f);
}

const char *cpu_model_name(void)
{
    static char name[128];
    static _Atomic int done;
    if (!atomic_load(&done)) {
        cpuinfo_field("model name", name, sizeof name);
        atomic_store(&done, 1);
    }
    return name;
}

/* The clock a core runs at, timed on a chain of dependent integer adds (one
 * cycle each on every x86-64 and aarch64 core): the best of 7 runs of about
 * 1 ms, rounded down to 50 MHz so that repeated runs agree.  0 elsewhere. */
static double timed_clock_ghz(void)
{
#if CPU_X86 || defined(__aarch64__)
    enum { ITER = 250000, ADDS = 16 };
    double best = 0;
    for (int rep = 0; rep < 7; rep++) {
        uint64_t x = 0;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (long i = 0; i < ITER; i++)
#if CPU_X86
#define ADD1 "add $1, %0\n\t"
#else
#define ADD1 "add %0, %0, #1\n\t"
#endif
            __asm__ volatile(ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1
                             : "+r"(x));
#undef ADD1
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        double ghz = dt > 0 ? (double)ITER * ADDS / dt / 1e9 : 0;
        if (ghz > best) best = ghz;
    }
    return (double)(long)(best * 20) / 20;
#else
    return 0;
#endif
}

/* The highest clock in GHz: sysfs's cpuinfo_max_freq (the rated boost);
 * else /proc/cpuinfo's "cpu MHz" (a virtual machine's is often the base
 * clock) or, when higher, the clock timed above; else 0. */
static double max_clock_ghz(char *src, size_t srclen)
{
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    long khz = 0;
    if (f) {
        if (fscanf(f, "%ld", &khz) != 1) khz = 0;
        fclose(f);
    }
    if (khz > 0) {
        snprintf(src, srclen, "cpufreq's cpuinfo_max_freq");
        return khz / 1e6;
    }
    char v[64];
    cpuinfo_field("cpu MHz", v, sizeof v);
    double listed = atof(v) / 1e3, timed = timed_clock_ghz();
    if (timed > listed * 1.02) {
        if (listed > 0)
            snprintf(src, srclen, "timed on dependent adds; /proc/cpuinfo lists %.2f", listed);
        else
            snprintf(src, srclen, "timed on dependent adds");
        return timed;
    }
    snprintf(src, srclen, listed > 0 ? "/proc/cpuinfo's cpu MHz" : "unknown");
    return listed;
}

void cpu_core_peak(enum isa i, int bf16, struct cpu_peak *out)
{
    char src[96];
    out->ghz = max_clock_ghz(src, sizeof src);
    /* Two FMA pipes of the path's width, 2 flops per lane each (VDPBF16PS:
     * 2 products per lane); Zen 4 (AMD family 0x19) runs AVX-512 on 256-bit
     * pipes. */
    int wide = i == ISA_AVX512 || i == ISA_AVX512BF16, pairs = bf16 && i == ISA_AVX512BF16 ? 2 : 1;
    int lanes = wide ? 16 : i == ISA_AVX2 ? 8 : 4;
    const char *note = "";
#if CPU_X86
    if (wide && __builtin_cpu_is("amd")) {
        char fam[16];
        cpuinfo_field("cpu family", fam, sizeof fam);
        if (atoi(fam) == 0x19) lanes = 8, note = " (AMD family 0x19: AVX-512 on 256-bit pipes)";
    }
#endif
    out->flops_per_cycle = 2 * lanes * pairs * 2;
    snprintf(out->how, sizeof out->how, "%.2f GHz (%s) x 2 FMA pipes x %d fp32 lanes x %s2 flops%s", out->ghz, src,
             lanes, pairs == 2 ? "2 bf16 products (VDPBF16PS) x " : "", note);
}

/* ----------------------------------------------------- CPUs and cores */

int cpu_mask_count(const struct cpu_mask *m)
{
    int n = 0;
    for (int w = 0; w < CPU_MASK_MAX / 64; w++) n += __builtin_popcountll(m->bits[w]);
    return n;
}

int cpu_mask_has(const struct cpu_mask *m, int cpu)
{
    return cpu >= 0 && cpu < CPU_MASK_MAX && (m->bits[cpu / 64] >> (cpu % 64) & 1);
}

void cpu_mask_add(struct cpu_mask *m, int cpu)
{
    if (cpu >= 0 && cpu < CPU_MASK_MAX) m->bits[cpu / 64] |= 1ull << (cpu % 64);
}

size_t range_list(const unsigned char *on, int n, char *out, size_t len)
{
    size_t at = 0;
    if (len == 0) return 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (!on[i]) continue;
        int e = i;
        while (e + 1 < n && on[e + 1]) e++;
        char item[32];
        int k = e == i ? snprintf(item, sizeof item, "%s%d", at ? "," : "", i)
                       : snprintf(item, sizeof item, "%s%d-%d", at ? "," : "", i, e);
        if (at + (size_t)k + 5 >= len) { /* (room kept for ",...") */
            snprintf(out + at, len - at, "%s...", at ? "," : "");
            return at + strlen(out + at);
        }
        memcpy(out + at, item, (size_t)k + 1);
        at += (size_t)k;
        i = e;
    }
    return at;
}

void cpu_mask_list(const struct cpu_mask *m, char *out, size_t len)
{
    unsigned char on[CPU_MASK_MAX];
    for (int c = 0; c < CPU_MASK_MAX; c++) on[c] = (unsigned char)cpu_mask_has(m, c);
    range_list(on, CPU_MASK_MAX, out, len);
}

void cpu_usable(struct cpu_mask *m)
{
    memset(m, 0, sizeof *m);
    if (omp_get_proc_bind() != omp_proc_bind_false && omp_get_num_places() > 0) {
        for (int p = 0; p < omp_get_num_places(); p++) {
            int n = omp_get_place_num_procs(p), ids[CPU_MASK_MAX];
            if (n <= 0 || n > CPU_MASK_MAX) continue;
            omp_get_place_proc_ids(p, ids);
            for (int i = 0; i < n; i++) cpu_mask_add(m, ids[i]);
        }
        if (cpu_mask_count(m) > 0) return;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && c < CPU_MASK_MAX; c++)
            if (CPU_ISSET(c, &set)) cpu_mask_add(m, c);
    if (cpu_mask_count(m) == 0) { /* (no mask to read: every online CPU) */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (int c = 0; c < (n > 0 ? n : 1) && c < CPU_MASK_MAX; c++) cpu_mask_add(m, c);
    }
}

/* The core of CPU c: the first CPU in its core's list, or c itself. */
static int core_of(int c, const char *sysfs_cpu)
{
    static const char *const lists[] = {"core_cpus_list", "thread_siblings_list"};
    for (int i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/cpu%d/topology/%s", sysfs_cpu, c, lists[i]);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int first = -1;
        if (fscanf(f, "%d", &first) != 1) first = -1;
        fclose(f);
        if (first >= 0 && first < CPU_MASK_MAX) return first;
    }
    return c;
}

void cpu_cores_of(const struct cpu_mask *cpus, struct cpu_mask *cores, const char *sysfs_cpu)
{
    memset(cores, 0, sizeof *cores);
    for (int c = 0; c < CPU_MASK_MAX; c++)
        if (cpu_mask_has(cpus, c)) cpu_mask_add(cores, core_of(c, sysfs_cpu ? sysfs_cpu : "/sys/devices/system/cpu"));
}
