/* ro_trigger.c -- an LD_PRELOAD shim for the read-only tests: the first
 * write of 512 bytes or more to a file whose path contains
 * $TRIAD_FAULT_PATH first writes "1" to $TRIAD_FAULT_TRIGGER (an ext4 file
 * system's /sys/fs/ext4/<dev>/trigger_fs_error), so that a file system
 * mounted with errors=remount-ro goes read-only as an error found in the
 * middle of that write would make it, and then lets the write go on (it
 * fails with EROFS).  One process of the job triggers it; the others find
 * the file system read-only. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fault_path.h"

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

static void maybe_trigger(int fd, size_t n)
{
    static int done;
    const char *trigger = getenv("TRIAD_FAULT_TRIGGER");
    if (done || n < 512 || !trigger || !fault_path(fd)) return;
    done = 1;
    int t = open(trigger, O_WRONLY);
    if (t < 0) return;
    if (NEXT(write)(t, "1", 1) != 1) { /* (the test sees the file system still writable) */ }
    close(t);
}

static size_t total(const struct iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt; i++) n += iov[i].iov_len;
    return n;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    maybe_trigger(fd, n);
    return NEXT(pwrite)(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    maybe_trigger(fd, n);
    return NEXT(pwrite64)(fd, buf, n, off);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    maybe_trigger(fd, n);
    return NEXT(write)(fd, buf, n);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    maybe_trigger(fd, total(iov, cnt));
    return NEXT(pwritev)(fd, iov, cnt, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    maybe_trigger(fd, total(iov, cnt));
    return NEXT(pwritev64)(fd, iov, cnt, off);
}
