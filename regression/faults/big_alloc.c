/* big_alloc.c -- an LD_PRELOAD shim for the fault tests: memory that runs
 * out for large blocks.  Every realloc of $TRIAD_FAULT_REALLOC bytes or
 * more, and every calloc of $TRIAD_FAULT_CALLOC bytes or more, fails as an
 * exhausted heap does (NULL, errno ENOMEM, realloc's old block kept);
 * smaller ones, and malloc, go through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

/* glibc's own calloc: dlsym may itself call calloc, so it cannot be looked
 * up while calloc is first called. */
extern void *__libc_calloc(size_t n, size_t size);

static size_t limit_of(const char *name)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 10) : 0;
}

void *realloc(void *p, size_t n)
{
    static void *(*next)(void *, size_t);
    static size_t limit;
    if (!next) {
        limit = limit_of("TRIAD_FAULT_REALLOC");
        next = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    }
    if (limit && n >= limit) {
        errno = ENOMEM;
        return NULL;
    }
    return next(p, n);
}

void *calloc(size_t n, size_t size)
{
    static int ready;
    static size_t limit;
    if (!ready) limit = limit_of("TRIAD_FAULT_CALLOC"), ready = 1;
    if (limit && size && n >= limit / size + (limit % size != 0)) { /* n * size >= limit, without overflow */
        errno = ENOMEM;
        return NULL;
    }
    return __libc_calloc(n, size);
}
