/* ckpt_raw.c -- a checkpoint's selections moved outside HDF5 (ckpt_raw.h). */
#include "ckpt_raw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_sum.h"
#include "log.h"

/* The parts a piece is read and summed in: small enough to be summed from
 * the cache the read left them in, large enough that a part costs one
 * system call among many bytes. */
enum { RAW_PART = 32768 }; /* floats: 128 KiB */

/* pwrite or pread all of n bytes at off (short transfers and EINTR resumed). */
static int transfer_all(int fd, int writing, void *buf, size_t n, off_t off)
{
    char *p = buf;
    while (n > 0) {
        ssize_t k = writing ? pwrite(fd, p, n, off) : pread(fd, p, n, off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) { /* (a read past the end: the file is short) */
            errno = EIO;
            return -1;
        }
        p += k, n -= (size_t)k, off += k;
    }
    return 0;
}

/* The runs of a piece: each stretch of elements that lies contiguous in the
 * file (whole rows of a block as one run, else each row), visited in the
 * order of the piece's elements.  fn(first logical element, elements,
 * the run's first element in the piece, arg); a nonzero return stops. */
typedef int (*run_fn)(const struct ckpt_piece *pc, uint64_t first, size_t n, size_t at, void *arg);

static int each_run(const struct ckpt_piece *pc, run_fn fn, void *arg)
{
    const struct tensor_ref *t = &pc->t;
    uint64_t cols = t->rank == 2 ? t->dims[1] : 1;
    size_t at = 0;
    for (int b = 0; b < t->nblocks; b++) {
        uint64_t rows = t->count[b][0], width = t->count[b][1];
        if (width == cols) width *= rows, rows = 1; /* whole rows: contiguous in the file */
        for (uint64_t r = 0; r < rows; r++, at += width)
            if (fn(pc, (t->start[b][0] + r) * cols + t->start[b][1], width, at, arg) != 0) return -1;
    }
    return 0;
}

static off_t offset_of(const struct ckpt_piece *pc, uint64_t element)
{
    return (off_t)(pc->offset + 4 * element);
}

struct io_arg {
    int fd, writing;
    float *data;
};

static int io_run(const struct ckpt_piece *pc, uint64_t first, size_t n, size_t at, void *arg)
{
    struct io_arg *a = arg;
    return transfer_all(a->fd, a->writing, a->data + at, n * sizeof(float), offset_of(pc, first));
}

int ckpt_raw_io(int fd, int writing, const struct ckpt_piece *pc, float *data)
{
    struct io_arg a = {fd, writing, data};
    return each_run(pc, io_run, &a);
}

/* A read of the piece's elements [lo, hi) (in the piece's order), summed
 * part by part where summing. */
struct read_arg {
    int fd, summing;
    float *data; /* NULL: into part */
    float *part;
    size_t lo, hi;
    uint64_t sum;
};

static int read_run(const struct ckpt_piece *pc, uint64_t first, size_t n, size_t at, void *arg)
{
    struct read_arg *a = arg;
    size_t s = at > a->lo ? at : a->lo, e = at + n < a->hi ? at + n : a->hi; /* the run's part in [lo, hi) */
    for (; s < e;) {
        size_t k = e - s < RAW_PART ? e - s : RAW_PART;
        float *to = a->data ? a->data + s : a->part;
        if (transfer_all(a->fd, 0, to, k * sizeof(float), offset_of(pc, first + (s - at))) != 0) return -1;
        if (a->summing) a->sum += ckpt_sum_run(first + (s - at), to, k);
        s += k;
    }
    return 0;
}

static int read_span(int fd, const struct ckpt_piece *pc, float *data, size_t lo, size_t hi, uint64_t *sum)
{
    float part[RAW_PART]; /* (touched only without data) */
    struct read_arg a = {fd, sum != NULL, data, part, lo, hi, 0};
    int rc = each_run(pc, read_run, &a);
    if (rc == 0 && sum) *sum = a.sum;
    return rc;
}

int ckpt_raw_read(int fd, const struct ckpt_piece *pc, float *data, uint64_t *sum)
{
    return read_span(fd, pc, data, 0, pc->t.elems, sum);
}

uint64_t ckpt_raw_prefetch(int fd, const struct ckpt_piece *pc)
{
    const struct tensor_ref *t = &pc->t;
    uint64_t cols = t->rank == 2 ? t->dims[1] : 1, lo = UINT64_MAX, hi = 0;
    for (int b = 0; b < t->nblocks; b++) {
        uint64_t a = t->start[b][0] * cols + t->start[b][1];
        uint64_t e = (t->start[b][0] + t->count[b][0] - 1) * cols + t->start[b][1] + t->count[b][1];
        if (t->count[b][0] == 0 || t->count[b][1] == 0) continue;
        if (a < lo) lo = a;
        if (e > hi) hi = e;
    }
    if (hi <= lo) return 0;
    posix_fadvise(fd, offset_of(pc, lo), (off_t)(4 * (hi - lo)), POSIX_FADV_WILLNEED); /* (advice: may be ignored) */
    return 4 * (hi - lo);
}

/* How far ahead of the reads the file is asked for, and the spans the
 * pieces are cut into, read by the rank's threads in turn. */
enum { RAW_AHEAD = 64 << 20, RAW_SPAN = 1 << 18 /* floats: 1 MiB */ };

struct span {
    int piece;
    size_t lo, hi;  /* the piece's elements [lo, hi) */
    uint64_t sum;
    int err;        /* errno of a failed read, else 0 */
};

/* The pieces cut into spans of at most RAW_SPAN elements, in order; NULL
 * where memory ran out. */
static struct span *cut_spans(const struct ckpt_piece *pc, int n, size_t *count)
{
    size_t k = 0;
    for (int i = 0; i < n; i++) k += (pc[i].t.elems + RAW_SPAN - 1) / RAW_SPAN;
    struct span *s = calloc(k ? k : 1, sizeof *s);
    if (!s) return NULL;
    k = 0;
    for (int i = 0; i < n; i++)
        for (size_t lo = 0; lo < pc[i].t.elems; lo += RAW_SPAN)
            s[k++] = (struct span){i, lo, lo + RAW_SPAN < pc[i].t.elems ? lo + RAW_SPAN : pc[i].t.elems, 0, 0};
    *count = k;
    return s;
}

int ckpt_raw_read_pieces(const char *path, const struct ckpt_piece *pc, int n, int keep, uint64_t *sums,
                         const struct grid *g, char *err, size_t errlen)
{
    if (n == 0) return 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(err, errlen, "rank %d: cannot open %s to read it: %s", g->rank, path, strerror(errno));
        return -1;
    }
    size_t ns;
    struct span *sp = cut_spans(pc, n, &ns);
    if (!sp) {
        close(fd);
        return errorf(err, errlen, "rank %d: out of memory for the list of the spans to read of %s", g->rank, path);
    }
    uint64_t asked = 0, done = 0; /* bytes asked for ahead; bytes read */
    int next = 0, failed = 0;
    /* windows of about RAW_AHEAD bytes, each read by the threads while the
     * kernel reads the next one in */
    for (size_t s = 0, e; s < ns && !failed; s = e) {
        uint64_t bytes = 0;
        for (e = s; e < ns && (e == s || bytes < RAW_AHEAD); e++) bytes += 4 * (sp[e].hi - sp[e].lo);
        while (next < n && (next <= sp[e - 1].piece || asked < done + bytes + RAW_AHEAD))
            asked += ckpt_raw_prefetch(fd, &pc[next++]);
#pragma omp parallel for schedule(dynamic, 1) reduction(| : failed)
        for (size_t k = s; k < e; k++) {
            const struct ckpt_piece *p = &pc[sp[k].piece];
            if (read_span(fd, p, keep ? p->t.local : NULL, sp[k].lo, sp[k].hi,
                          ckpt_owner(&p->t, g) ? &sp[k].sum : NULL) != 0)
                sp[k].err = errno ? errno : EIO, failed = 1;
        }
        done += bytes;
    }
    close(fd);
    for (size_t k = 0; k < ns; k++) {
        const struct ckpt_piece *p = &pc[sp[k].piece];
        if (sp[k].err) {
            snprintf(err, errlen, "rank %d: reading %s of %s failed (truncated or corrupted file?): %s", g->rank,
                     p->t.path, path, strerror(sp[k].err));
            break;
        }
        if (ckpt_owner(&p->t, g)) sums[p->index] = (sp[k].lo == 0 ? 0 : sums[p->index]) + sp[k].sum;
    }
    free(sp);
    return failed ? -1 : 0;
}
