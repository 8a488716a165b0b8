/* ckpt_raw.h -- a checkpoint's tensor selections moved between the file and
 * memory outside HDF5: pread and pwrite at the offset of their dataset,
 * which every triad checkpoint stores contiguous, as native floats.  The
 * background writer's writes and read-backs use it, and so does every read
 * of a checkpoint's tensors (ckpt.c): HDF5 keeps the metadata, these calls
 * move the bytes, each part checksummed while it is still in cache, the
 * file asked for ahead of the reads (docs/formats.md). */
#ifndef TRIAD_CKPT_RAW_H
#define TRIAD_CKPT_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_piece.h"

/* pwrite (writing) or pread a piece's rectangles between fd and data (its
 * elements in order).  0, or -1 with errno (EIO: the file ends first). */
int ckpt_raw_io(int fd, int writing, const struct ckpt_piece *pc, float *data);

/* pread a piece into data in parts of 128 KiB, each summed as it arrives:
 * *sum is then ckpt_partial_checksum of the piece (ckpt_sum.h), where sum
 * is not NULL.  With data NULL only the sum is taken (the parts pass
 * through a buffer on the stack).  0, or -1 with errno. */
int ckpt_raw_read(int fd, const struct ckpt_piece *pc, float *data, uint64_t *sum);

/* Ask the kernel to read a piece's bytes ahead of the reads
 * (posix_fadvise WILLNEED, from its first element to its last: the gaps
 * of a column slice too, which another rank reads); returns the bytes. */
uint64_t ckpt_raw_prefetch(int fd, const struct ckpt_piece *pc);

/* Read n pieces of the file at path in order, asking for the file about 64
 * MiB ahead of them: into their t.local (keep) or only summed; the sum of
 * each piece this rank owns (ckpt_owner) into sums[index].  Local; 0, or
 * -1 with err naming the rank, the dataset and the file. */
int ckpt_raw_read_pieces(const char *path, const struct ckpt_piece *pc, int n, int keep, uint64_t *sums,
                         const struct grid *g, char *err, size_t errlen);

#endif
