/* ckpt_piece.h -- a checkpoint written outside HDF5 (by the background
 * writer, ckpt_async.c): what this rank owns of each dataset, the file
 * created with every dataset's space allocated, and its sealing. */
#ifndef TRIAD_CKPT_PIECE_H
#define TRIAD_CKPT_PIECE_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_layout.h"

struct ckpt_state;

/* A selection this rank owns (writes and checks), for a write that happens
 * outside HDF5: the dataset's place in the file and in the walk order. */
struct ckpt_piece {
    struct tensor_ref t;   /* t.local: the live state when listed; the snapshot once copied */
    uint64_t offset;       /* the dataset's first byte in the file (contiguous, allocated at creation) */
    int index;             /* the dataset's number in the walk (its checksum's slot) */
};

/* A write of a checkpoint outside HDF5, in three steps:
 *
 * ckpt_pieces lists what this rank owns of every dataset (t.local in the
 * live state), in walk order; returns the number of datasets (the length
 * of the checksum array), or -1 where the list cannot be allocated (*pieces
 * NULL).  Every owned element is in exactly one rank's list.  The list is
 * calloc'ed.
 *
 * ckpt_create_allocated makes <run_dir>/ckpt_<step>.h5.tmp (its name in
 * tmp) with every dataset contiguous and its space allocated, the
 * attributes written, and closes it; each piece's offset is filled in.  The
 * bytes of each piece then go to offset + 4 x (row x cols + col), in any
 * order, by any means.  The file's blocks are reserved (posix_fallocate,
 * rank 0: 1 in *reserved) where the file system can.  Collective; 0, or -1
 * with err (nothing left).
 *
 * ckpt_seal ends it once every rank has written and read back its pieces
 * (failed: this rank's writing failed, the reason in err; sums: this
 * rank's ckpt_partial_checksum (ckpt_sum.h) of each owned piece, by index, zero
 * elsewhere): the checksums stored, the file flushed on every rank and its
 * metadata checked, then renamed and old checkpoints rotated out as
 * ckpt_save does.  Collective; 0, or -1 with err (the file removed). */
int ckpt_pieces(const struct model *m, const struct optim *o, const struct grid *g, struct ckpt_piece **pieces,
                int *n);
int ckpt_create_allocated(const char *run_dir, const struct ckpt_state *st, const struct model *m,
                          const struct optim *o, const char *deck, const struct grid *g, struct ckpt_piece *pieces,
                          int n, char *tmp, size_t tmplen, int *reserved, char *err, size_t errlen);
int ckpt_seal(const char *run_dir, const char *tmp, int64_t step, const struct model *m, const struct optim *o,
              uint64_t *sums, int failed, const struct grid *g, int keep, char *err, size_t errlen);

#endif
