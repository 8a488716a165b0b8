/* test_alloc.c -- xalloc_aligned (log.h): every block 64-byte aligned and
 * zeroed; from 8 MiB up 2 MiB aligned and advised onto transparent huge
 * pages (its mapping flagged "hg" in /proc/self/smaps, wherever the kernel
 * has them: skipped where it has none or its huge pages are not 2 MiB).
 * Whether the kernel then gave huge pages (fragmentation, a THP-disabled
 * process) is reported, not tested. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tap.h"

/* Of the mapping holding p in /proc/self/smaps: its VmFlags carry "hg"
 * (advised onto huge pages; 1, else 0) and its AnonHugePages (kB, in *kb);
 * -1 where smaps cannot be read. */
static int advised_at(const void *p, long *kb)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0, hg = -1;
    uintptr_t a = (uintptr_t)p;
    *kb = -1;
    while (hg < 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            in = a >= lo && a < hi;
            continue;
        }
        if (!in) continue;
        if (sscanf(line, "AnonHugePages: %ld kB", kb) == 1) continue;
        if (!strncmp(line, "VmFlags:", 8)) hg = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return hg;
}

/* 1 when the kernel has transparent huge pages of 2 MiB (any mode but never). */
static int thp_present(void)
{
    char mode[128] = "";
    long pmd = 0;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
    fclose(f);
    f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r");
    if (f) {
        if (fscanf(f, "%ld", &pmd) != 1) pmd = 0;
        fclose(f);
    }
    return mode[0] && !strstr(mode, "[never]") && pmd == 2L << 20;
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

int main(void)
{
    const size_t MiB = (size_t)1 << 20;
    const size_t small[] = {1, 63, 64, 1000, 4 * MiB, 8 * MiB - 64};
    for (size_t i = 0; i < sizeof small / sizeof *small; i++) {
        unsigned char *p = xalloc_aligned(small[i]);
        tap_ok((uintptr_t)p % 64 == 0 && all_zero(p, small[i]), "%zu bytes: 64-byte aligned, zeroed", small[i]);
        free(p);
    }
    const size_t large[] = {8 * MiB, 24 * MiB + 4000};
    for (size_t i = 0; i < sizeof large / sizeof *large; i++) {
        unsigned char *p = xalloc_aligned(large[i]);
        tap_ok((uintptr_t)p % (2 * MiB) == 0 && all_zero(p, large[i]), "%zu bytes: 2 MiB aligned, zeroed", large[i]);
        if (thp_present()) {
            long kb;
            tap_ok(advised_at(p, &kb) == 1, "%zu bytes: advised onto huge pages", large[i]);
            tap_diag("%zu bytes: %ld kB of its mapping on huge pages", large[i], kb);
        } else {
            tap_skip("no transparent huge pages of 2 MiB on this kernel");
        }
        free(p);
    }
    return tap_done();
}
