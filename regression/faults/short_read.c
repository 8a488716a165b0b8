/* short_read.c -- an LD_PRELOAD shim for the fault tests: a read that stops
 * short (an I/O error partway through a file on a network file system, or
 * a file truncated while it is read).  Every fread from a file whose path
 * contains $TRIAD_FAULT_PATH returns one item fewer than asked for (none
 * when one was asked for); other files are untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int targeted(FILE *f)
{
    const char *want = getenv("TRIAD_FAULT_PATH");
    if (!want || !*want) return 0;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fileno(f));
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (len <= 0) return 0;
    path[len] = '\0';
    return strstr(path, want) != NULL;
}

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
