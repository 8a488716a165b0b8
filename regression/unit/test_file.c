/* test_file.c -- file_read_all (file.h): a small file read whole.  Regular
 * files at, below and over the bound, an empty one, an absent one, a
 * directory, one of /proc's (size 0 to stat); pipes fed by a child process
 * across the buffer's doublings, at the bound and over it; every byte value
 * kept.  (A file that ends early, or grows, while read: the short_read.c
 * shim in regression/tokenizer.sh.) */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "file.h"
#include "tap.h"

/* Byte i of a test file: every value, NUL included, in a pattern that does
 * not repeat within a buffer's size. */
static unsigned char byte_at(size_t i) { return (unsigned char)(i * 131u + (i >> 9) * 7u); }

static int write_file(const char *path, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    for (size_t i = 0; i < n; i++) fputc(byte_at(i), f);
    return fclose(f);
}

static int holds(const char *text, size_t len, size_t want)
{
    if (!text || len != want || text[len] != '\0') return 0;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)text[i] != byte_at(i)) return 0;
    return 1;
}

/* A regular file of n bytes read with the bound max: the errno it gives. */
static int read_regular(const char *dir, size_t n, size_t max, char *why, size_t whylen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/f%zu", dir, n);
    if (write_file(path, n)) return tap_diag("cannot write %s", path), -1;
    char *text;
    size_t len;
    int e = file_read_all(path, max, "a test file", &text, &len, why, whylen);
    if (e == 0 && !holds(text, len, n)) e = -2;
    free(text);
    remove(path);
    return e;
}

/* n bytes through a pipe from a child (in writes of 1000 bytes, so that the
 * reader meets them as they come), read through /dev/fd with the bound max. */
static int read_pipe(size_t n, size_t max, char *why, size_t whylen, size_t *got)
{
    int p[2];
    if (pipe(p)) return tap_diag("pipe: %s", strerror(errno)), -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        unsigned char buf[1000];
        for (size_t at = 0; at < n;) {
            size_t k = n - at < sizeof buf ? n - at : sizeof buf;
            for (size_t i = 0; i < k; i++) buf[i] = byte_at(at + i);
            if (write(p[1], buf, k) != (ssize_t)k) _exit(0); /* the reader stopped: a pipe over the bound */
            at += k;
        }
        _exit(0);
    }
    close(p[1]);
    char path[64], *text;
    snprintf(path, sizeof path, "/dev/fd/%d", p[0]);
    size_t len;
    int e = pid < 0 ? -1 : file_read_all(path, max, "a test stream", &text, &len, why, whylen);
    if (e == 0 && !holds(text, len, n)) e = -2;
    if (e == 0) free(text);
    *got = e == 0 ? len : 0;
    close(p[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
    return e;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    char dir[4096], why[256];
    tap_tmp_template(dir, sizeof dir, "file");
    if (!mkdtemp(dir)) {
        tap_ok(0, "a directory made for the test (%s)", strerror(errno));
        return tap_done();
    }
    /* regular files */
    tap_ok(read_regular(dir, 0, 100, why, sizeof why) == 0, "an empty file: no bytes, a NUL after them");
    tap_ok(read_regular(dir, 5000, 1 << 20, why, sizeof why) == 0, "5,000 bytes of every value, NUL included");
    tap_ok(read_regular(dir, 4096, 4096, why, sizeof why) == 0, "a file of exactly the bound is read");
    int e = read_regular(dir, 4097, 4096, why, sizeof why);
    tap_ok(e == EFBIG && strcmp(why, "4097 bytes; triad reads a test file up to 4 KiB") == 0,
           "a byte over the bound: EFBIG, its size and the bound (%d: %s)", e, why);
    e = read_regular(dir, 100, 99, why, sizeof why);
    tap_ok(e == EFBIG && strcmp(why, "100 bytes; triad reads a test file up to 99 bytes") == 0,
           "a bound not a whole KiB said in bytes (%s)", why);
    char path[4200], *text = (char *)1;
    size_t len = 1;
    snprintf(path, sizeof path, "%s/absent", dir);
    e = file_read_all(path, 100, "a test file", &text, &len, why, sizeof why);
    tap_ok(e == ENOENT && strcmp(why, "cannot open it (No such file or directory)") == 0 && !text && len == 0,
           "an absent file: ENOENT, said so, nothing returned (%s)", why);
    e = file_read_all(dir, 100, "a test file", &text, &len, why, sizeof why);
    tap_ok(e == EISDIR && strcmp(why, "a directory, not a file") == 0 && !text, "a directory: EISDIR (%s)", why);
    e = file_read_all(path, 100, "a test file", &text, &len, NULL, 0);
    tap_ok(e == ENOENT, "no room for the reason: the errno still");
    /* pipes: below, across and at the buffer's doublings (64, 128, 256 KiB) */
    static const size_t sizes[] = {0, 1, 65535, 65536, 65537, 131072, 200000, 262144};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t got;
        e = read_pipe(sizes[i], 262144, why, sizeof why, &got);
        tap_ok(e == 0 && got == sizes[i], "a pipe of %zu bytes read whole (%d%s%s)", sizes[i], e, e ? ": " : "",
               e > 0 ? why : "");
    }
    size_t got;
    e = read_pipe(262145, 262144, why, sizeof why, &got);
    tap_ok(e == EFBIG && strcmp(why, "more than 256 KiB; triad reads a test stream up to 256 KiB") == 0,
           "a pipe a byte over the bound: EFBIG (%s)", why);
    e = read_pipe(3 << 20, 100000, why, sizeof why, &got);
    tap_ok(e == EFBIG && strcmp(why, "more than 100000 bytes; triad reads a test stream up to 100000 bytes") == 0,
           "a pipe far over the bound: EFBIG at its first byte over, not read to its end (%s)", why);
    e = read_pipe(100000, 100000, why, sizeof why, &got);
    tap_ok(e == 0 && got == 100000, "a pipe of exactly a bound that is no doubling of the buffer (%d)", e);
    /* a regular file of size 0 that the kernel fills as it is read */
    e = file_read_all("/proc/self/status", 1 << 20, "a test file", &text, &len, why, sizeof why);
    tap_ok(e == 0 && len > 0 && strncmp(text, "Name:", 5) == 0 && text[len] == '\0',
           "/proc/self/status (size 0 to stat) read as it comes (%d: %zu bytes)", e, len);
    free(text);
    rmdir(dir);
    return tap_done();
}
