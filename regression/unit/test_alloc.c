/* test_alloc.c -- xalloc_aligned (log.h): every block 64-byte aligned and
 * zeroed; from 8 MiB up 2 MiB aligned and on transparent huge pages, where
 * the kernel gives them on request (its "madvise" or "always" mode; the
 * check is skipped where it gives none). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tap.h"

/* The huge-page kB /proc/self/smaps shows for the mapping holding p; -1
 * where it cannot be read. */
static long huge_kb_at(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0;
    long kb = -1;
    uintptr_t a = (uintptr_t)p;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            in = a >= lo && a < hi;
            continue;
        }
        if (in && sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    }
    fclose(f);
    return kb;
}

/* 1 when the kernel gives huge pages to a region that asks (mode madvise or always). */
static int thp_on_request(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    if (!f) return 0;
    if (!fgets(mode, sizeof mode, f)) mode[0] = 0;
    fclose(f);
    return strstr(mode, "[madvise]") || strstr(mode, "[always]");
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
        if (thp_on_request()) {
            long kb = huge_kb_at(p);
            tap_ok(kb >= 2048, "%zu bytes: on huge pages (%ld kB of its mapping)", large[i], kb);
        } else {
            tap_skip("transparent huge pages are off on this kernel");
        }
        free(p);
    }
    return tap_done();
}
