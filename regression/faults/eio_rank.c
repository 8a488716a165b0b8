/* eio_rank.c -- an LD_PRELOAD shim for the fault tests: one rank's mount of
 * the run folder failing (a network file system's client evicted, a
 * node's failing link), the others' still good.  On the process whose
 * rank (the launcher's OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or
 * SLURM_PROCID) is $TRIAD_FAULT_RANK, every write ($TRIAD_FAULT_OPS =
 * write, the default) or read (read) of 512 bytes or more to or from a file
 * whose path contains $TRIAD_FAULT_PATH fails with EIO; other ranks and
 * other files are untouched.  The first failure creates the file
 * $TRIAD_FAULT_MARK, where it is set (the test's proof that one happened). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fault_path.h"

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

static int this_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v);
    }
    return -1;
}

/* Does this call fail?  reading: 1 for a read, 0 for a write. */
static int failing(int fd, size_t n, int reading)
{
    const char *want = getenv("TRIAD_FAULT_RANK"), *ops = getenv("TRIAD_FAULT_OPS");
    int reads = ops && !strcmp(ops, "read");
    if (reading != reads || n < 512 || !want || atoi(want) != this_rank() || !fault_path(fd)) return 0;
    static int marked;
    const char *mark = getenv("TRIAD_FAULT_MARK");
    if (mark && !marked++) {
        int m = open(mark, O_WRONLY | O_CREAT, 0644);
        if (m >= 0) close(m);
    }
    errno = EIO;
    return 1;
}

static size_t total(const struct iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt; i++) n += iov[i].iov_len;
    return n;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    return failing(fd, n, 0) ? -1 : NEXT(pwrite)(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    return failing(fd, n, 0) ? -1 : NEXT(pwrite64)(fd, buf, n, off);
}

ssize_t write(int fd, const void *buf, size_t n) { return failing(fd, n, 0) ? -1 : NEXT(write)(fd, buf, n); }

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return failing(fd, total(iov, cnt), 0) ? -1 : NEXT(pwritev)(fd, iov, cnt, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return failing(fd, total(iov, cnt), 0) ? -1 : NEXT(pwritev64)(fd, iov, cnt, off);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off) { return failing(fd, n, 1) ? -1 : NEXT(pread)(fd, buf, n, off); }

ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
    return failing(fd, n, 1) ? -1 : NEXT(pread64)(fd, buf, n, off);
}

ssize_t read(int fd, void *buf, size_t n) { return failing(fd, n, 1) ? -1 : NEXT(read)(fd, buf, n); }

ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return failing(fd, total(iov, cnt), 1) ? -1 : NEXT(preadv)(fd, iov, cnt, off);
}

ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return failing(fd, total(iov, cnt), 1) ? -1 : NEXT(preadv64)(fd, iov, cnt, off);
}
