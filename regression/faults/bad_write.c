/* bad_write.c -- an LD_PRELOAD shim for the fault tests: a disk that
 * accepts a write, reports success and stores something else (a lost or
 * torn write on a network file system, a failing device).  Every write of
 * 512 bytes or more to a file whose path contains $TRIAD_FAULT_PATH stores
 * the data with one byte flipped in the middle; the caller is told that
 * all went well.  Other files are untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fault_path.h"

static int targeted(int fd, size_t n) { return n >= 512 && fault_path(fd); }

/* A copy of buf with its middle byte flipped (the caller frees it). */
static void *damaged(const void *buf, size_t n)
{
    unsigned char *c = malloc(n);
    if (!c) return NULL;
    memcpy(c, buf, n);
    c[n / 2] ^= 0x5a;
    return c;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    void *c = targeted(fd, n) ? damaged(buf, n) : NULL;
    ssize_t r = NEXT(pwrite)(fd, c ? c : buf, n, off);
    free(c);
    return r;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    void *c = targeted(fd, n) ? damaged(buf, n) : NULL;
    ssize_t r = NEXT(pwrite64)(fd, c ? c : buf, n, off);
    free(c);
    return r;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    void *c = targeted(fd, n) ? damaged(buf, n) : NULL;
    ssize_t r = NEXT(write)(fd, c ? c : buf, n);
    free(c);
    return r;
}

/* the first piece of 512 bytes or more is the one damaged */
static ssize_t vector_write(ssize_t (*next)(int, const struct iovec *, int, off_t), int fd, const struct iovec *iov,
                            int cnt, off_t off)
{
    size_t total = 0;
    for (int i = 0; i < cnt; i++) total += iov[i].iov_len;
    if (cnt <= 0 || cnt > 1024 || !targeted(fd, total)) return next(fd, iov, cnt, off);
    struct iovec v[1024];
    memcpy(v, iov, (size_t)cnt * sizeof *v);
    void *c = NULL;
    for (int i = 0; i < cnt && !c; i++)
        if (v[i].iov_len >= 512 && (c = damaged(v[i].iov_base, v[i].iov_len))) v[i].iov_base = c;
    ssize_t r = next(fd, v, cnt, off);
    free(c);
    return r;
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return vector_write(NEXT(pwritev), fd, iov, cnt, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return vector_write(NEXT(pwritev64), fd, iov, cnt, off);
}
