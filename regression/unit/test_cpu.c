/* test_cpu.c -- CPU sets and their physical cores (cpu.h): hardware threads
 * of one core counted once, read from a topology tree made here (an SMT
 * node: CPU c and c + 4 are one core); CPU lists and flags as ranges. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu.h"
#include "tap.h"

/* <root>/cpu<c>/topology/<file> holding text. */
static int put(const char *root, int c, const char *file, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cpu%d", root, c);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/cpu%d/topology", root, c);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/cpu%d/topology/%s", root, c, file);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

static struct cpu_mask mask_of(const int *cpus, int n)
{
    struct cpu_mask m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < n; i++) cpu_mask_add(&m, cpus[i]);
    return m;
}

static int cores(const int *cpus, int n, const char *root)
{
    struct cpu_mask m = mask_of(cpus, n), c;
    cpu_cores_of(&m, &c, root);
    return cpu_mask_count(&c);
}

int main(void)
{
    char root[256];
    tap_tmp_template(root, sizeof root, "test_cpu");
    if (!mkdtemp(root)) {
        tap_skip("cannot make a temporary directory");
        return tap_done();
    }
    /* CPUs 0-7: cores {0,4} {1,5} {2,6} {3,7}; 0-3 with today's file, 4-7 with the older name only */
    int made = 0;
    for (int c = 0; c < 4; c++) {
        char list[32];
        snprintf(list, sizeof list, "%d,%d\n", c, c + 4);
        made |= put(root, c, "core_cpus_list", list) | put(root, c + 4, "thread_siblings_list", list);
    }
    tap_ok(made == 0, "a topology tree of 8 CPUs, 2 hardware threads a core");
    const int pair[] = {0, 4}, two[] = {0, 1}, all[] = {0, 1, 2, 3, 4, 5, 6, 7}, lone[] = {2, 9};
    tap_ok(cores(pair, 2, root) == 1, "CPUs 0 and 4, the two hardware threads of one core, are 1 core");
    tap_ok(cores(two, 2, root) == 2, "CPUs 0 and 1 are 2 cores");
    tap_ok(cores(all, 8, root) == 4, "CPUs 0-7 are 4 cores (thread_siblings_list read where core_cpus_list is not)");
    tap_ok(cores(lone, 2, root) == 2, "a CPU without topology (9) counts as a core of its own");

    char text[64];
    struct cpu_mask m = mask_of(all, 8);
    cpu_mask_add(&m, 12);
    cpu_mask_add(&m, 14);
    cpu_mask_add(&m, 15);
    cpu_mask_add(&m, 1023);
    cpu_mask_list(&m, text, sizeof text);
    tap_ok(strcmp(text, "0-7,12,14-15,1023") == 0, "CPU list as ranges: %s", text);
    cpu_mask_list(&m, text, 12);
    tap_ok(strcmp(text, "0-7,12,...") == 0, "cut to fit, with ...: %s", text);
    const unsigned char on[] = {1, 0, 1, 1, 1, 1, 0, 1};
    size_t k = range_list(on, 8, text, sizeof text);
    tap_ok(strcmp(text, "0,2-5,7") == 0 && k == 7, "flags as ranges, with the length: %s (%zu)", text, k);
    k = range_list(on, 8, text, 8);
    tap_ok(strcmp(text, "0,...") == 0 && k == 5, "cut to fit, with the length: %s (%zu)", text, k);
    k = range_list(on + 1, 1, text, sizeof text);
    tap_ok(strcmp(text, "") == 0 && k == 0, "no flag set: the empty string");

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) tap_diag("could not remove %s", root);
    return tap_done();
}
