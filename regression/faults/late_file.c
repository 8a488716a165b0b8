/* late_file.c -- an LD_PRELOAD shim for the fault tests: another process
 * creates a file while the process under test is writing beside it.  Just
 * before a link() whose new name contains $TRIAD_FAULT_PATH, the shim
 * creates that name itself, holding "another process's\n" (as a second
 * run writing to the same place would have), then lets link() go on. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int link(const char *from, const char *to)
{
    static int (*next)(const char *, const char *);
    if (!next) next = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "link");
    const char *want = getenv("TRIAD_FAULT_PATH");
    if (want && *want && strstr(to, want)) {
        FILE *f = fopen(to, "wx");
        if (f) fputs("another process's\n", f), fclose(f);
    }
    return next(from, to);
}
