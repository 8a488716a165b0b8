/* lock_race.c -- an LD_PRELOAD shim for the fault tests: another job takes
 * over a stale run-directory lock at the same moment as the process under
 * test.  The first time the process renames or removes a file named
 * triad.lock, the shim first writes $TRIAD_FAULT_HOLDER into it (the other
 * job, having removed the stale lock too, made its own), then lets the call
 * go on. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void other_job_first(const char *path)
{
    static int done;
    const char *holder = getenv("TRIAD_FAULT_HOLDER");
    size_t n = strlen(path);
    if (done || !holder || n < 10 || strcmp(path + n - 10, "triad.lock") != 0) return;
    done = 1;
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%s\n", holder), fclose(f);
}

int rename(const char *from, const char *to)
{
    static int (*next)(const char *, const char *);
    if (!next) next = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    other_job_first(from);
    return next(from, to);
}

int unlink(const char *path)
{
    static int (*next)(const char *);
    if (!next) next = (int (*)(const char *))dlsym(RTLD_NEXT, "unlink");
    other_job_first(path);
    return next(path);
}
