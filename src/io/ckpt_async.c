/* ckpt_async.c -- a checkpoint written in the background (ckpt_async.h). */
#include "ckpt_async.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ckpt_file.h"
#include "ckpt_piece.h"
#include "ckpt_raw.h"
#include "ckpt_sum.h"
#include "flight.h"
#include "log.h"
#include "timers.h"

/* The writer's first error, with errno's text after it (strerror_r: the
 * main thread may call strerror meanwhile). */
static void writer_fail(struct ckpt_async *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void writer_fail(struct ckpt_async *a, const char *fmt, ...)
{
    int e = errno;
    if (a->failed) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(a->err, sizeof a->err, fmt, ap);
    va_end(ap);
    char why[256] = "";
    if (e && strerror_r(e, why, sizeof why) == 0 && n >= 0 && (size_t)n < sizeof a->err)
        snprintf(a->err + n, sizeof a->err - (size_t)n, ": %s", why);
    a->failed = 1;
}

/* The writer's nice value: on a node whose cores all compute, the writer
 * takes about 36 / (1024 + 36) = 3 % of one (the kernel's weights of nice
 * 15 and 0), and much longer to finish; on one with cores to spare it
 * runs at full speed. */
enum { WRITER_NICE = 15 };

/* The writer: the pieces written and flushed, then read back and checked. */
static void *writer(void *arg)
{
    struct ckpt_async *a = arg;
    if (a->own_thread) setpriority(PRIO_PROCESS, 0, WRITER_NICE); /* Linux: this thread's nice value */
    int fd = open(a->tmp, O_WRONLY);
    if (fd < 0) writer_fail(a, "cannot open %s to write it", a->tmp);
    for (int i = 0; i < a->npieces && !a->failed; i++) {
        struct ckpt_piece *pc = &a->pieces[i];
        if (ckpt_raw_io(fd, 1, pc, pc->t.local) != 0)
            writer_fail(a, "writing %s into %s failed", pc->t.path, a->tmp);
        a->sums[pc->index] = ckpt_partial_checksum(&pc->t, pc->t.local);
        atomic_fetch_add(&a->progress, 1);
        if (!a->own_thread) flight_progress(); /* (written on the main thread: the watchdog sees it here) */
        if (a->slow > 0) pause_for(a->slow / a->npieces);
    }
    if (fd >= 0 && !a->failed && fdatasync(fd) != 0)
        writer_fail(a, "flushing %s failed", a->tmp);
    if (fd >= 0 && close(fd) != 0) writer_fail(a, "closing %s failed", a->tmp);
    fd = a->failed ? -1 : open(a->tmp, O_RDONLY);
    if (fd < 0 && !a->failed) writer_fail(a, "cannot open %s to read it back", a->tmp);
    for (int i = 0; fd >= 0 && i < a->npieces && !a->failed; i++) {
        struct ckpt_piece *pc = &a->pieces[i];
        uint64_t sum = 0;
        if (ckpt_raw_read(fd, pc, NULL, &sum) != 0)
            writer_fail(a, "reading back %s of %s failed", pc->t.path, a->tmp);
        else if (sum != a->sums[pc->index]) {
            errno = 0; /* (no call failed: the bytes differ) */
            writer_fail(a, "%s does not read back as written (checksum mismatch in %s)", a->tmp, pc->t.path);
        }
        atomic_fetch_add(&a->progress, 1);
    }
    if (fd >= 0) close(fd);
    atomic_store(&a->done, 1);
    return NULL;
}

/* The snapshot: each piece copied out of the live state (off the device) and
 * pointed at its copy. */
static void snapshot(struct ckpt_async *a, const struct model *m)
{
    float *at = a->snap;
    for (int i = 0; i < a->npieces; i++) {
        struct tensor_ref *t = &a->pieces[i].t;
        if (m->k->on_device) m->k->to_host(at, t->local, t->elems * sizeof(float));
        else memcpy(at, t->local, t->elems * sizeof(float));
        t->local = at;
        at += t->elems;
    }
}

/* The pieces listed anew (pointing into the live state) and the snapshot
 * large enough for them. */
int ckpt_async_init(struct ckpt_async *a, const struct model *m, const struct optim *o, const struct grid *g,
                    char *err, size_t errlen)
{
    free(a->pieces);
    a->datasets = ckpt_pieces(m, o, g, &a->pieces, &a->npieces);
    if (a->datasets < 0) {
        a->datasets = 0;
        snprintf(err, errlen, "rank %d: out of memory for the list of the checkpoint's pieces", g->rank);
        return -1;
    }
    size_t need = 0;
    for (int i = 0; i < a->npieces; i++) need += a->pieces[i].t.elems;
    if (!a->snap || a->snap_floats < need) {
        size_t bytes = (need ? need : 1) * sizeof(float);
        if (a->snap) a->release(a->snap);
        /* (pinned for a GPU, whose host_alloc ends the job where it cannot pin) */
        a->snap = m->k->on_device ? m->k->host_alloc(bytes) : alloc_aligned(bytes);
        a->release = m->k->on_device ? m->k->host_release : free;
        a->snap_floats = a->snap ? need : 0;
        if (!a->snap) {
            free(a->pieces);
            a->pieces = NULL, a->npieces = 0, a->datasets = 0;
            snprintf(err, errlen, "rank %d: out of memory for the background checkpoint's snapshot of the state "
                     "(%.1f MiB)", g->rank, (double)bytes / 1048576.0);
            return -1;
        }
        memset(a->snap, 0, bytes); /* (its pages now, not at the first checkpoint) */
    }
    return 0;
}

int ckpt_async_begin(struct ckpt_async *a, const char *run_dir, const struct ckpt_state *st, const struct model *m,
                     const struct optim *o, const char *deck, const struct grid *g, double slow, char *err,
                     size_t errlen)
{
    if (a->running) /* (the writer reads the list and the snapshot: ckpt_async_end first) */
        die("ckpt_async_begin: a background checkpoint of step %lld is still in flight", (long long)a->step);
    a->t_begin = wtime();
    int rc = ckpt_async_init(a, m, o, g, err, errlen);
    uint64_t *sums = rc == 0 ? calloc((size_t)a->datasets, sizeof(uint64_t)) : NULL;
    if (rc == 0 && !sums)
        rc = -1, snprintf(err, errlen, "rank %d: out of memory for the checkpoint's checksums", g->rank);
    rc = ckpt_agree(rc, err, errlen, g); /* (before the file, whose creation is collective) */
    if (rc == 0) {
        snapshot(a, m);
        rc = ckpt_create_allocated(run_dir, st, m, o, deck, g, a->pieces, a->npieces, a->tmp, sizeof a->tmp,
                                   &a->reserved, err, errlen);
    }
    if (rc != 0) { /* (nothing kept but the snapshot) */
        free(sums);
        free(a->pieces);
        a->pieces = NULL, a->npieces = 0, a->datasets = 0;
        return -1;
    }
    free(a->sums);
    a->sums = sums;
    a->step = st->step;
    a->slow = slow;
    a->failed = 0;
    a->err[0] = '\0';
    atomic_store(&a->done, 0);
    atomic_store(&a->progress, 0);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the signals stay the main thread's */
    a->own_thread = 1;
    rc = pthread_create(&a->thread, NULL, writer, a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) { /* (no thread: written here and now) */
        log_warn("cannot start the checkpoint writer thread (%s): ckpt_%lld.h5 is written at once", strerror(rc),
                 (long long)st->step);
        a->own_thread = 0;
        writer(a);
    }
    a->running = 1;
    a->t_resumed = wtime();
    return 0;
}

int ckpt_async_done(struct ckpt_async *a) { return !a->running || atomic_load(&a->done); }

int ckpt_async_end(struct ckpt_async *a, const char *run_dir, const struct model *m, const struct optim *o,
                   const struct grid *g, int keep, char *err, size_t errlen)
{
    if (!a->running) return 0;
    double t0 = wtime();
    /* Every rank waits until every writer is done, and the hang watchdog
     * sees their progress, summed: a long write is not a hang, a stalled one
     * is, also on a rank that has less to write (or nothing) than another. */
    for (long long seen = -1;; pause_for(0.02)) {
        long long v[2] = {atomic_load(&a->progress), !atomic_load(&a->done)};
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_LONG_LONG, MPI_SUM, g->world_comm));
        if (v[0] != seen) flight_progress(), seen = v[0];
        if (v[1] == 0) break;
    }
    if (a->own_thread) pthread_join(a->thread, NULL);
    a->waited = wtime() - t0;
    a->running = 0;
    if (a->failed) snprintf(err, errlen, "rank %d: %s", g->rank, a->err);
    int rc = ckpt_seal(run_dir, a->tmp, a->step, m, o, a->sums, a->failed, g, keep, err, errlen);
    free(a->pieces); /* (listed anew by the next checkpoint; the snapshot is kept) */
    free(a->sums);
    a->pieces = NULL, a->sums = NULL, a->npieces = 0, a->datasets = 0;
    return rc;
}

void ckpt_async_free(struct ckpt_async *a)
{
    if (a->snap) a->release(a->snap);
    free(a->pieces);
    free(a->sums);
    memset(a, 0, sizeof *a);
}
