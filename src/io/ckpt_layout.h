/* ckpt_layout.h -- which tensors a checkpoint holds and what part of each
 * this rank holds and owns, and the walk over them that every rank makes in
 * the same order (docs/formats.md: the layout). */
#ifndef TRIAD_CKPT_LAYOUT_H
#define TRIAD_CKPT_LAYOUT_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "optim.h"
#include "topo.h"

enum { MAX_RECTS = 9 }; /* a part of each of up to 3 row blocks: a partial row, whole rows, a partial row */

/* One tensor of one layer: its dataset, its logical shape, and the
 * rectangles of it that this rank holds, in the order of the file (and of
 * the rank's memory, where they lie one after another from `local`). */
struct tensor_ref {
    char path[128];
    int rank;              /* 1 (vectors) or 2 */
    hsize_t dims[2];       /* logical shape (wte without padding) */
    hsize_t start[MAX_RECTS][2], count[MAX_RECTS][2];
    int nblocks;
    size_t elems;          /* elements of this rank's selection */
    int replicated;        /* identical on every tp rank */
    int primary;           /* this copy is written (the tied wte: first stage's) */
    int sliced;            /* a part of a ZeRO slice: every dp rank owns its own */
    int expert;            /* an expert's under expert parallelism: the ep ranks hold different ones, its
                              replicas are the edp ranks */
    float *local;          /* the selection's first element in this rank's memory, or NULL if it holds none */
};

/* The memory of one kind of state (parameters, m, v) on this rank: the
 * flat layout's elements that z keeps, at mem + their state index -- all of
 * it (one whole part), or (ZeRO) this rank's shares, whose part of each
 * tensor the rank writes and reads itself. */
struct state_buf {
    float *mem;
    struct zero_slices z;
    int sliced;
};
/* The state buffer of all of the flat layout, whole, at mem. */
struct state_buf ckpt_whole_buf(const struct model *m, float *mem);

/* The groups of a checkpoint, and the state each holds (o may be NULL: the
 * model alone, nothing of the optimizer).  Mixed precision: the fp32 master
 * weights are the model. */
extern const char *const ckpt_prefix[3];
void ckpt_state_bufs(const struct model *m, const struct optim *o, struct state_buf sb[3]);

/* Logical slice `slice` of tensor `id` (param_slices: a layer's, or a
 * layer's expert's) under prefix, and this rank's part of it in sb. */
void ckpt_tensor_ref(struct tensor_ref *t, const char *prefix, const struct model *m, const struct state_buf *sb,
                     enum param_id id, int slice);

/* The number of datasets under each prefix. */
int ckpt_datasets_per_prefix(const struct model *m);

/* Does this rank own its selection for writing and verifying?  One owner
 * per element: data-parallel replica 0 (under ZeRO each dp rank, of its
 * slice), tp rank 0 of a replicated tensor, the first stage's copy of wte. */
int ckpt_owner(const struct tensor_ref *t, const struct grid *g);

/* Select this rank's blocks in the file space (nothing if it has none or
 * take is 0). */
void ckpt_select_blocks(hid_t fs, const struct tensor_ref *t, int take);

struct ckpt_piece;

/* What a walk over the checkpoint's tensors carries: per-dataset checksums
 * (partial on this rank, in walk order) and the first error. */
/* A writer's result for a write into the file that failed (not only
 * something before it, as memory or a file to store): HDF5 1.10 cannot
 * close such a file collectively (ckpt_close_and_flush).  The rank whose
 * write failed returns it, the others -1. */
enum { CKPT_WRITE_FAILED = -4 };

struct walk_ctx {
    const struct grid *g;
    uint64_t *sums;
    int next;        /* index of the dataset being visited */
    char *err;
    size_t errlen;
    int failed;      /* an error is in err (later ones are dropped) */
    int write_failed; /* a write into the file failed on this rank (CKPT_WRITE_FAILED) */
    struct ckpt_piece *pieces; /* the selections this rank writes or reads outside HDF5 (ckpt_raw.h), in walk
                                  order (a background write's: by index) */
    int npieces, cursor;
};

/* Record this rank's first error of the walk. */
void ckpt_walk_fail(struct walk_ctx *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef int (*tensor_fn)(hid_t file, struct tensor_ref *t, struct walk_ctx *w);

/* Visit every tensor of every layer in a fixed order (the same on all
 * ranks), all of them even after an error: the dataset calls are collective,
 * so a rank that stopped early would leave the others waiting in the next
 * one.  Returns -1 if this rank failed (the first error in w->err). */
int ckpt_walk(hid_t file, const char *prefix, const struct model *m, const struct state_buf *sb, tensor_fn fn,
              struct walk_ctx *w);

#endif
