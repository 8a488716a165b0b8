/* ckpt_file.h -- a checkpoint's file: opened by every rank (parallel HDF5),
 * its attributes, created under a temporary name if it fits, flushed on
 * every rank, then published by a rename and the old ones rotated out
 * (docs/formats.md). */
#ifndef TRIAD_CKPT_FILE_H
#define TRIAD_CKPT_FILE_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_layout.h"

#define CKPT_FORMAT_VERSION 1

/* The counters a checkpoint stores beside the tensors (its attributes). */
struct ckpt_state {
    int64_t step;      /* optimizer steps done (skipped ones included) */
    int64_t tokens;    /* tokens trained on */
    int64_t updates;   /* AdamW updates applied (steps not skipped) */
    double loss_scale; /* the dynamic loss scaler (scaler.h) */
    int64_t good_steps, hysteresis_left;
    int has_scaler;    /* the three above are there (written by an fp16 run) */
};

/* rc (this rank's result: 0 or not) agreed over the world: 0, or -1 with
 * the first failing rank's err on every rank.  Collective. */
int ckpt_agree(int rc, char *err, size_t errlen, const struct grid *g);

/* Open (or create, truncating) path on every rank of the world: metadata
 * collective, tensors of 1 MiB and more on MiB boundaries.  Collective; the
 * file, or a negative id. */
enum ckpt_open_mode { CKPT_OPEN_READ, CKPT_OPEN_CREATE, CKPT_OPEN_UPDATE };
hid_t ckpt_open(const char *path, enum ckpt_open_mode mode, const struct grid *g);

/* A tensor's dataset, of file space fs; allocated: contiguous, its space
 * allocated now (for a write outside HDF5).  Every element is written: no
 * fill pass first.  Collective. */
hid_t ckpt_create_dataset(hid_t file, const struct tensor_ref *t, hid_t fs, int allocated);

/* The file's attributes: the counters, the grid that wrote it, the deck.
 * Collective. */
void ckpt_write_attributes(hid_t f, const struct ckpt_state *st, const char *deck, const struct grid *g);

/* The counters of the file at path into st (the loss scale's where an fp16
 * run stored them, the updates as the steps in files older than them): 0,
 * or -1 with err. */
int ckpt_read_state(hid_t f, const char *path, struct ckpt_state *st, char *err, size_t errlen);
/* The data- and context-parallel degrees of the grid the file was written
 * on (its "dp" and "cp" attributes), each 0 where it has none. */
void ckpt_stored_grid(hid_t f, int64_t *dp, int64_t *cp);

/* Does the step attribute of f (at path) read back as step?  0, or -1 with
 * err naming this rank. */
int ckpt_check_step(hid_t f, const char *path, int64_t step, const struct grid *g, char *err, size_t errlen);

/* The deck stored in f into *text, malloc'ed, or NULL where it has none
 * (files from elsewhere) or it does not read: 0, -1 where memory ran out,
 * or -2 (*text NULL) where the text is damaged: empty, or not the text of
 * the checksum stored beside it (deck_checksum; files from before it have
 * none). */
int ckpt_stored_deck(hid_t f, char **text);

/* About the bytes a checkpoint of m takes on disk (checked against the free
 * space before one is started). */
double ckpt_file_bytes(const struct model *m);

/* Create <run_dir>/ckpt_<step>.h5.tmp (its name in tmp) for writing, if a
 * checkpoint fits.  Collective; the file, or -1 with err on every rank. */
hid_t ckpt_create_tmp(const char *run_dir, int64_t step, const struct model *m, const struct grid *g, char *tmp,
                      size_t tmplen, char *err, size_t errlen);

/* After a failed read of path: does any rank fail to read its bytes at
 * all (file_read_probe: EIO from a node's failing mount or a failing
 * disk)?  Then err names the lowest such rank and the error (and, for the
 * device's, that the file may be intact: file_read_words), and 1 is
 * returned; else 0 and err as it was.
 * Collective. */
int ckpt_read_trouble(const char *path, const struct grid *g, char *err, size_t errlen);

/* H5Fclose of a file being written (ckpt_open not for reading: from the
 * open to here the hang watchdog's report names HDF5's writing, where rank
 * 0 writes the metadata at points every rank meets, and a write of rank
 * 0's that fails there leaves the others waiting: io_errors.sh). */
herr_t ckpt_close_written(hid_t f);

/* Close a file being written (rc: how the writing went), then every rank
 * flushes it (on a parallel file system each client holds its own dirty
 * pages).  Where a write into it failed on some rank (rc
 * CKPT_WRITE_FAILED there), or the writing failed and the folder no longer
 * takes writes on some rank (file_write_probe: a file system gone
 * read-only), the file is left open and the exits end the job through
 * MPI_Abort (exit_by_abort): HDF5 1.10's collective close of such a file
 * hangs, the ranks leaving its metadata flush at different points
 * (io_errors.sh, readonly_fs.sh).  err then says whether the folder still
 * takes writes.  Collective; the agreed result. */
int ckpt_close_and_flush(hid_t f, const char *tmp, int rc, const struct grid *g, char *err, size_t errlen);

/* A write that failed: rank 0 removes tmp (and, for a file left open,
 * what the MPI-IO library keeps beside it while it is open). */
void ckpt_discard_tmp(const char *tmp, const struct grid *g);

/* The end of a write (rc: how it went, agreed): only a verified file
 * replaces anything (tmp renamed to <run_dir>/ckpt_<step>.h5), and only
 * then are all but the newest `keep` of the run's lineage removed; a failed
 * one is removed.  Collective; the agreed result. */
int ckpt_publish(const char *run_dir, const char *tmp, int64_t step, int keep, int rc, const struct grid *g,
                 char *err, size_t errlen);

#endif
