/* short_read.c -- an LD_PRELOAD shim for the fault tests: a read that stops
 * short (an I/O error partway through a file on a network file system, or
 * a file truncated while it is read).  A file whose path contains
 * $TRIAD_FAULT_PATH ends early: its first fread returns one item fewer than
 * it read (none where it read one), and every fread after it none, so that
 * a reader that asks again sees the end of the file, not the missing item;
 * other files are untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "fault_path.h"

static int targeted(FILE *f) { return fault_path(fileno(f)); }

static FILE *cut; /* the targeted stream read short: it has ended */

size_t fread(void *buf, size_t size, size_t n, FILE *f)
{
    static size_t (*next)(void *, size_t, size_t, FILE *);
    if (!next) next = (size_t (*)(void *, size_t, size_t, FILE *))dlsym(RTLD_NEXT, "fread");
    if (n == 0 || !targeted(f)) return next(buf, size, n, f);
    if (f == cut) return 0;
    size_t got = next(buf, size, n, f);
    cut = f;
    return got ? got - 1 : 0;
}

/* (a stream closed: its address may come back for another file) */
int fclose(FILE *f)
{
    static int (*next)(FILE *);
    if (!next) next = (int (*)(FILE *))dlsym(RTLD_NEXT, "fclose");
    if (f == cut) cut = NULL;
    return next(f);
}

/* (what fread compiles to with _FORTIFY_SOURCE where the buffer's size is known) */
size_t __fread_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *f)
{
    static size_t (*next)(void *, size_t, size_t, size_t, FILE *);
    if (!next) next = (size_t (*)(void *, size_t, size_t, size_t, FILE *))dlsym(RTLD_NEXT, "__fread_chk");
    if (n == 0 || !targeted(f)) return next(buf, buflen, size, n, f);
    if (f == cut) return 0;
    size_t got = next(buf, buflen, size, n, f);
    cut = f;
    return got ? got - 1 : 0;
}
