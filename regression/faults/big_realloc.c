/* big_realloc.c -- an LD_PRELOAD shim for the fault tests: memory that runs
 * out for large blocks.  Every realloc of $TRIAD_FAULT_REALLOC bytes or more
 * fails as an exhausted heap does (NULL, errno ENOMEM, the old block kept);
 * smaller ones, and malloc and calloc, go through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

void *realloc(void *p, size_t n)
{
    static void *(*next)(void *, size_t);
    static size_t limit;
    if (!next) {
        const char *s = getenv("TRIAD_FAULT_REALLOC");
        limit = s && *s ? strtoull(s, NULL, 10) : 0;
        next = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    }
    if (limit && n >= limit) {
        errno = ENOMEM;
        return NULL;
    }
    return next(p, n);
}
