/* ckpt_sum.h -- the checkpoint's per-dataset checksums: partial sums over
 * each owner's selection, added up over the ranks, stored as each dataset's
 * "checksum" attribute and checked when it is read. */
#ifndef TRIAD_CKPT_SUM_H
#define TRIAD_CKPT_SUM_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt_layout.h"

/* The order-independent checksum of a selection's elements (data: t->elems
 * of them, in the selection's order); the owners' sums add up (mod 2^64) to
 * the dataset's "checksum" attribute. */
uint64_t ckpt_partial_checksum(const struct tensor_ref *t, const float *data);

/* The same sum over a run of n elements that lie one after another in the
 * logical tensor from its element `first` on (a checksum over a piece that
 * arrives in parts: the parts' sums add up).  AVX-512 where that path is in
 * use (cpu.h); integer arithmetic, so every path gives the same sum. */
uint64_t ckpt_sum_run(uint64_t first, const float *data, size_t n);

/* The owners' partial sums of n datasets added up, in place, on every rank.
 * Collective over the world. */
void ckpt_sums_reduce(uint64_t *sums, int n, const struct grid *g);

/* Walk steps (ckpt_walk): attach w->sums[w->next] to the dataset as its
 * checksum; compare the stored checksum (where the file has one: weights
 * from elsewhere carry none) with it. */
int ckpt_attach_checksum(hid_t file, struct tensor_ref *t, struct walk_ctx *w);
int ckpt_verify_checksum(hid_t file, struct tensor_ref *t, struct walk_ctx *w);

/* Read the whole of `dataset` (a vector or a matrix, in slabs of about 16
 * MiB) and check it against its "checksum" attribute, on one process: 0, or
 * -1 with the reason (missing, no checksum, unreadable, a mismatch). */
int ckpt_verify_dataset(hid_t file, const char *dataset, char *err, size_t errlen);

#endif
