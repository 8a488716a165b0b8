/* short_read.c -- an LD_PRELOAD shim for the fault tests: a read that stops
 * short (an I/O error partway through a file on a network file system, or
 * a file truncated while it is read).  Every fread from a file whose path
 * contains $TRIAD_FAULT_PATH returns one item fewer than asked for (none
 * when one was asked for); other files are untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "fault_path.h"

static int targeted(FILE *f) { return fault_path(fileno(f)); }

size_t fread(void *buf, size_t size, size_t n, FILE *f)
{
    static size_t (*next)(void *, size_t, size_t, FILE *);
    if (!next) next = (size_t (*)(void *, size_t, size_t, FILE *))dlsym(RTLD_NEXT, "fread");
    if (n > 0 && targeted(f)) n--;
    return next(buf, size, n, f);
}

/* (what fread compiles to with _FORTIFY_SOURCE where the buffer's size is known) */
size_t __fread_chk(void *buf, size_t buflen, size_t size, size_t n, FILE *f)
{
    static size_t (*next)(void *, size_t, size_t, size_t, FILE *);
    if (!next) next = (size_t (*)(void *, size_t, size_t, size_t, FILE *))dlsym(RTLD_NEXT, "__fread_chk");
    if (n > 0 && targeted(f)) n--;
    return next(buf, buflen, size, n, f);
}
