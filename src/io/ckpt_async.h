/* ckpt_async.h -- io.async_checkpoint: a checkpoint taken at a step boundary
 * and written by a background thread while training goes on.
 *
 * ckpt_async_begin copies what this rank owns of the state into a host
 * snapshot (pinned on a GPU; allocated before training by ckpt_async_init),
 * creates the file with its space allocated and reserved
 * (ckpt_create_allocated) and
 * starts the writer: it writes the snapshot's pieces at their offsets with
 * pwrite, flushes them, reads them back and checks their checksums.  No MPI
 * and no HDF5 happen on that thread.  ckpt_async_end waits for it and seals
 * the file (checksums, flush, metadata check, rename, rotation: ckpt_seal),
 * with the same atomicity as ckpt_save: until the rename the file is
 * <run_dir>/ckpt_<step>.h5.tmp, which no restart reads, so a crash at any
 * point leaves the previous checkpoints as they were. */
#ifndef TRIAD_CKPT_ASYNC_H
#define TRIAD_CKPT_ASYNC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

struct ckpt_piece;

struct ckpt_async {
    struct ckpt_piece *pieces; /* what this rank owns, t.local in the snapshot (ckpt_piece.h); listed by
                                * ckpt_async_begin, freed by ckpt_async_end (NULL, 0 between checkpoints) */
    int npieces, datasets;
    float *snap;               /* the snapshot: the pieces one after another */
    size_t snap_floats;        /* its size */
    void (*release)(void *);   /* how the snapshot is freed */
    uint64_t *sums;            /* this rank's checksum of each dataset's piece (by index) */
    char tmp[4200];            /* the file being written */
    int64_t step;
    double slow;               /* diag.slow_checkpoint: seconds added to the write (a testing aid) */
    pthread_t thread;
    int own_thread;            /* the writer runs on that thread (else it ran in ckpt_async_begin) */
    int running;               /* a write is in flight: begun, not yet ended */
    atomic_int done;           /* the writer has finished (set by it) */
    atomic_int progress;       /* pieces it has written or read back so far */
    int failed;                /* the writer's result: 0, or 1 with the reason in err */
    char err[1024];
    double t_begin, t_resumed; /* wall clock: the snapshot began, training resumed */
    int reserved;              /* (rank 0) the file's blocks were reserved when it was created */
    double waited;             /* seconds ckpt_async_end waited for the writer */
};

/* List what this rank owns and allocate (and touch) the snapshot: before
 * training, else the first checkpoint does it.  Local; 0, or -1 with err
 * where the list or the snapshot cannot be allocated (a GPU's pinned
 * snapshot ends the job where it cannot be had: host_alloc). */
int ckpt_async_init(struct ckpt_async *a, const struct model *m, const struct optim *o, const struct grid *g,
                    char *err, size_t errlen);

/* Take the checkpoint of st->step: snapshot, file, writer started (none
 * may be in flight: ckpt_async_end first).  Collective; 0, or -1 with err
 * (nothing started, nothing left but the snapshot). */
int ckpt_async_begin(struct ckpt_async *a, const char *run_dir, const struct ckpt_state *st, const struct model *m,
                     const struct optim *o, const char *deck, const struct grid *g, double slow, char *err,
                     size_t errlen);

/* Has this rank's writer finished?  (Local; the ranks agree before ending.) */
int ckpt_async_done(struct ckpt_async *a);

/* Wait for the writer and seal the file.  Collective; 0, or -1 with err
 * (every rank alike; the file removed, the earlier checkpoints intact).
 * The list of pieces and the checksums are freed (the next checkpoint
 * lists them anew); the snapshot is kept. */
int ckpt_async_end(struct ckpt_async *a, const char *run_dir, const struct model *m, const struct optim *o,
                   const struct grid *g, int keep, char *err, size_t errlen);

/* The snapshot's and the list's memory (no write may be in flight). */
void ckpt_async_free(struct ckpt_async *a);

#endif
