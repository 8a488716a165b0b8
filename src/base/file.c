/* file.c -- a whole file read into memory (file.h). */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { STREAM_FIRST = 64 << 10 }; /* a pipe's first buffer, doubled as it fills */
enum { FIFO_WAIT_S = 10 };         /* how long a pipe may keep its first byte (or its end) */

static int reason(int e, char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int reason(int e, char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (whylen) vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return e;
}

/* "1 MiB", "512 KiB" or "100 bytes". */
static const char *size_words(char s[40], size_t bytes)
{
    if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) snprintf(s, 40, "%zu MiB", bytes >> 20);
    else if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) snprintf(s, 40, "%zu KiB", bytes >> 10);
    else snprintf(s, 40, "%zu bytes", bytes);
    return s;
}

int file_read_all(const char *path, size_t max, const char *what, char **text, size_t *len, char *why,
                  size_t whylen)
{
    *text = NULL;
    *len = 0;
    char lim[40];
    /* (O_NONBLOCK: a FIFO without a writer opens at once, and is waited on below for a bounded time) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return reason(e, why, whylen, "cannot open it (%s)", strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return reason(e, why, whylen, "cannot read it (%s)", strerror(e));
    }
    if (S_ISFIFO(sb.st_mode)) { /* a named pipe, or a shell's <(...): its first bytes (or its end) within a while */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int ready, left = FIFO_WAIT_S * 1000;
        while ((ready = poll(&p, 1, left)) < 0 && errno == EINTR) { /* (a signal: wait out the rest) */
            clock_gettime(CLOCK_MONOTONIC, &t);
            long spent = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
            left = spent >= FIFO_WAIT_S * 1000 ? 0 : FIFO_WAIT_S * 1000 - (int)spent;
        }
        if (ready <= 0) {
            int e = ready < 0 ? errno : ETIMEDOUT;
            close(fd);
            return ready < 0 ? reason(e, why, whylen, "cannot read it (%s)", strerror(e))
                             : reason(e, why, whylen, "a pipe through which nothing came in %d s (its writer not "
                                      "started, or slow to begin)", FIFO_WAIT_S);
        }
    }
    int flags = fcntl(fd, F_GETFL);
    FILE *f = flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return reason(e, why, whylen, "cannot read it (%s)", strerror(e));
    }
    if (S_ISDIR(sb.st_mode)) {
        fclose(f);
        return reason(EISDIR, why, whylen, "a directory, not a file");
    }
    /* (a regular file of size 0 may be one the kernel makes as it is read, as /proc's: read as a stream) */
    int sized = S_ISREG(sb.st_mode) && sb.st_size > 0;
    if (sized && (unsigned long long)sb.st_size > max) {
        fclose(f);
        return reason(EFBIG, why, whylen, "%lld bytes; triad reads %s up to %s", (long long)sb.st_size, what,
                      size_words(lim, max));
    }
    /* a stream's buffer doubles up to max + 1 bytes: a byte over the bound is where it stops */
    size_t cap = sized ? (size_t)sb.st_size + 1 : STREAM_FIRST < max + 1 ? STREAM_FIRST : max + 1, n = 0;
    char *buf = malloc(cap);
    int e = buf ? 0 : ENOMEM;
    if (!buf) reason(e, why, whylen, "out of memory for %s %zu bytes", sized ? "its" : "a buffer of", cap - !!sized);
    errno = 0;
    while (e == 0) {
        if (n == cap) { /* full: a regular file grew; a stream's buffer doubles */
            if (sized) {
                e = reason(EIO, why, whylen, "cannot read it (it changed size while read)");
                break;
            }
            if (n > max) {
                e = reason(EFBIG, why, whylen, "more than %s; triad reads %s up to %s", size_words(lim, max), what,
                           lim);
                break;
            }
            size_t grow = cap > max / 2 ? max + 1 : 2 * cap;
            char *grown = realloc(buf, grow);
            if (!grown) {
                e = reason(ENOMEM, why, whylen, "out of memory after %zu bytes of it", n);
                break;
            }
            buf = grown, cap = grow;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0) break;
        n += got;
    }
    if (e == 0 && ferror(f)) {
        int r = errno ? errno : EIO;
        e = reason(r, why, whylen, "cannot read it (%s)", strerror(r));
    }
    if (e == 0 && sized && n != (size_t)sb.st_size)
        e = reason(EIO, why, whylen, "cannot read it (it changed size while read)");
    fclose(f);
    if (e) {
        free(buf);
        return e;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

/* One folder: made, or there already as a folder. */
/* mkdir dir unless it is a folder already: 0 (*made: whether this call
 * made it), or -1 with why. */
static int make_one(const char *dir, int *made, char *why, size_t whylen)
{
    struct stat sb;
    *made = 0;
    if (mkdir(dir, 0777) == 0) return *made = 1, 0;
    int e = errno;
    if (e == EEXIST && stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
    if (e == EEXIST || e == ENOTDIR) snprintf(why, whylen, "%s is a file, not a folder", dir);
    else snprintf(why, whylen, "cannot create the folder %s: %s", dir, strerror(e));
    return -1;
}

int file_make_dirs_noted(const char *path, struct file_made_dirs *m, char *why, size_t whylen)
{
    struct file_made_dirs own;
    if (!m) m = &own;
    m->n = 0;
    char *buf = m->path;
    if (snprintf(buf, sizeof m->path, "%s", path) >= (int)sizeof m->path) {
        snprintf(why, whylen, "the folder name is longer than %zu bytes", sizeof m->path - 1);
        return -1;
    }
    size_t n = strlen(buf);
    for (size_t i = 1; i <= n; i++) {
        if (i < n && (buf[i] != '/' || buf[i - 1] == '/')) continue;
        char c = buf[i];
        buf[i] = 0;
        int made, rc = make_one(buf, &made, why, whylen);
        buf[i] = c;
        if (rc != 0) return -1;
        if (made && m->n < FILE_MADE_MAX) m->len[m->n++] = (int)i;
    }
    return 0;
}

int file_make_dirs(const char *path, char *why, size_t whylen) { return file_make_dirs_noted(path, NULL, why, whylen); }

void file_remove_made_dirs(struct file_made_dirs *m)
{
    for (int k = m->n - 1; k >= 0; k--) { /* (the deepest first; a folder that holds something stays) */
        char c = m->path[m->len[k]];
        m->path[m->len[k]] = 0;
        rmdir(m->path);
        m->path[m->len[k]] = c;
    }
    m->n = 0;
}

const char *file_llmc_kind(int32_t magic)
{
    switch (magic) { /* (the magics of llm.c's train_gpt2.py, train_llama3.py, dev/data/data_common.py, train_gpt2.cu) */
    case 20240326: return "an llm.c GPT-2 checkpoint (magic 20240326, gpt2_124M.bin: io.init_from reads it)";
    case 20240327: return "llm.c's debug state (magic 20240327, gpt2_124M_debug_state.bin), which triad does not read";
    case 20240328: return "an llm.c tokenizer file (magic 20240328, gpt2_tokenizer.bin), which triad does not read: "
                          "data.tokenizer takes a tokenizer.json, or GPT-2's vocab.json and merges.txt";
    case 20240520: return "an llm.c token shard (magic 20240520, uint16 ids: data.path with data.kind = 'tokens' "
                          "reads it)";
    case 20240522: return "an llm.c eval file (magic 20240522, hellaswag_val.bin: eval.tasks reads it)";
    case 20240527: return "an llm.c training state (magic 20240527, train_gpt2.cu's state_*.bin), which triad does "
                          "not read";
    case 20240801: return "an llm.c token shard (magic 20240801, uint32 ids: data.path with data.kind = 'tokens' "
                          "reads it)";
    case 20240803: return "an llm.c LLaMA 3 checkpoint (magic 20240803, train_llama3.py's), which triad does not "
                          "read: io.init_from takes the model's Hugging Face folder";
    default: return NULL;
    }
}

const char *file_llmc_kind_of(const char *path)
{
    unsigned char b[4];
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t got = fread(b, 1, sizeof b, f);
    fclose(f);
    if (got != sizeof b) return NULL;
    return file_llmc_kind((int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24));
}

int file_write_probe(const char *dir)
{
    static unsigned serial;
    char path[4400], host[256] = "";
    gethostname(host, sizeof host - 1);
    int fd = -1;
    /* a name no other process uses (a node's host name and process id); one
     * left by a process killed at the wrong moment, or on a file system
     * gone read-only (EEXIST there, not EROFS), is passed over */
    for (int tries = 0; fd < 0 && tries < 64; tries++) {
        snprintf(path, sizeof path, "%s/.triad-write-probe.%s.%ld.%u", dir, host, (long)getpid(), serial++);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (fd < 0 && errno != EEXIST) return errno;
    }
    if (fd < 0) return EEXIST;
    int e = write(fd, "", 1) == 1 ? 0 : errno; /* (a full disk may still make the file) */
    if (close(fd) != 0 && e == 0) e = errno; /* (NFS and Lustre may say ENOSPC or EDQUOT only here) */
    unlink(path);
    return e;
}

int file_read_probe(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return errno;
    char buf[4096];
    struct stat sb;
    int e = fstat(fd, &sb) != 0 ? errno : 0;
    off_t at[2] = {0, sb.st_size > (off_t)sizeof buf ? sb.st_size - (off_t)sizeof buf : 0};
    for (int i = 0; i < 2 && e == 0; i++) {
        posix_fadvise(fd, at[i], sizeof buf, POSIX_FADV_DONTNEED); /* (from the device, not the page cache) */
        if (pread(fd, buf, sizeof buf, at[i]) < 0) e = errno;
    }
    close(fd);
    return e;
}

const char *file_read_words(int e)
{
    int device = e == EIO || e == ESTALE || e == ENOTCONN || e == ETIMEDOUT || e == ENODEV || e == ENXIO;
    return device ? "; the file itself may be intact (the file system, or the node's mount of it, failed)" : "";
}

const char *file_write_words(int e)
{
    switch (e) {
    case 0: return "";
    case EROFS: return "its file system is read-only";
    case ENOSPC: return "its file system is full";
    case EDQUOT: return "the disk quota is used up";
    case EACCES:
    case EPERM: return "it takes no files from this user";
    case ENOENT: return "it does not exist";
    default: return strerror(e);
    }
}

int file_locked_by_another(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    int held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* (gives back the lock if we got it) */
    return held;
}
