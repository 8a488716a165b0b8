/* ckpt_layout.c -- a checkpoint's tensors, this rank's part of each, and the
 * walk over them (ckpt_layout.h).
 *
 * Layout: /model/<name> for whole-model tensors, /model/h.<l>/<name> per
 * layer, the same under /optim/m and /optim/v.  Vectors are 1-D [n],
 * matrices 2-D [out, in]; wte is stored unpadded [V, C].  Ranks that do not
 * own a tensor select nothing, and of the data-parallel replicas only
 * dp_rank 0 writes -- but under ZeRO each dp rank writes and reads its own
 * slice of the optimizer state (and of the master weights) straight into
 * the logical datasets: nothing is gathered. */
#include "ckpt_layout.h"

#include <stdarg.h>
#include <stdio.h>

#include "flight.h"
#include "log.h"

/* Add the rectangles of local elements [a, b) (counted from the tensor's
 * first) of a row block: its first local row is row0, which lies at
 * logical row r0, columns from c0; cols columns a row. */
static void add_rects(struct tensor_ref *t, size_t a, size_t b, size_t row0, size_t cols, size_t r0, size_t c0)
{
    while (a < b) {
        size_t r = a / cols, c = a % cols, rows = 1, width = cols - c < b - a ? cols - c : b - a;
        if (c == 0 && b - a >= cols) rows = (b - a) / cols, width = cols; /* whole rows */
        int k = t->nblocks++;
        t->start[k][0] = r0 + (r - row0);
        t->start[k][1] = c0 + c;
        t->count[k][0] = rows;
        t->count[k][1] = width;
        t->elems += rows * width;
        a += rows * width;
    }
}

void ckpt_tensor_ref(struct tensor_ref *t, const char *prefix, const struct model *m, const struct state_buf *sb,
                     enum param_id id, int slice)
{
    const struct model_dims *d = &m->d;
    size_t rows, cols, lrows, lcols;
    param_shape(d, id, &rows, &cols);
    param_local_shape(d, id, &lrows, &lcols);
    if (id == P_WTE || id == P_LMHEAD) rows = (size_t)d->V; /* the padding is not stored */
    char name[96];
    param_slice_name(d, id, slice, name, sizeof name);
    snprintf(t->path, sizeof t->path, "%s/%s", prefix, name);
    t->rank = cols == 1 ? 1 : 2;
    t->dims[0] = rows;
    t->dims[1] = cols;
    t->replicated = param_table[id].shard == SHARD_NONE;
    t->primary = id != P_WTE || model_has_embedding(d); /* of a tied wte's two copies, the first stage writes */
    t->sliced = sb->sliced;
    t->expert = param_group(d, id) == CG_EDP;
    t->nblocks = 0;
    t->elems = 0;
    t->local = NULL;

    /* the local tensor's flat elements [at, at + n) meet the buffer's in [lo, hi) */
    int j = param_slice_local(d, id, slice);
    if (m->size[id] == 0 || j < 0) return;
    size_t n = lrows * lcols, at = m->at[id] + (size_t)j * n, lo, hi, s;
    if (!zero_slice_part(&sb->z, at, n, &lo, &hi, &s)) return;
    t->local = sb->mem + s;

    /* the row blocks, in the order they lie in local memory: one per row
     * part (q, k, v; gate, up) of a row-split tensor */
    size_t part[3] = {lrows}, row = 0, r0, c0;
    int nparts = 1;
    if (param_table[id].shard == SHARD_ROWS) {
        nparts = param_row_parts(d, id, part);
        for (int b = 0; b < nparts; b++) part[b] /= (size_t)d->tp;
    }
    for (int b = 0; b < nparts; b++) {
        param_logical_index(d, id, row, 0, &r0, &c0);
        size_t real = r0 >= rows ? 0 : r0 + part[b] > rows ? rows - r0 : part[b]; /* wte: padding rows last */
        size_t a = row * lcols, e = (row + real) * lcols;
        if (a < lo - at) a = lo - at;
        if (e > hi - at) e = hi - at;
        if (a < e) add_rects(t, a, e, row, lcols, r0, c0);
        row += part[b];
    }
    if (t->elems == 0) t->local = NULL; /* padding only */
}

void ckpt_select_blocks(hid_t fs, const struct tensor_ref *t, int take)
{
    H5Sselect_none(fs);
    if (!take) return;
    for (int b = 0; b < t->nblocks; b++)
        if (t->count[b][0] > 0)
            H5Sselect_hyperslab(fs, H5S_SELECT_OR, t->start[b], NULL, t->count[b], NULL);
}

void ckpt_walk_fail(struct walk_ctx *w, const char *fmt, ...)
{
    if (w->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, w->errlen, fmt, ap);
    va_end(ap);
    text_printable(w->err);
    w->failed = 1;
}

int ckpt_walk(hid_t file, const char *prefix, const struct model *m, const struct state_buf *sb, tensor_fn fn,
              struct walk_ctx *w)
{
    for (int id = 0; id < NUM_PARAMS; id++) {
        int slices = param_slices(&m->d, (enum param_id)id);
        for (int l = 0; l < slices; l++) {
            if (!param_slice_exists(&m->d, (enum param_id)id, l)) continue; /* (a layer without it) */
            struct tensor_ref t;
            ckpt_tensor_ref(&t, prefix, m, sb, (enum param_id)id, l);
            if (fn(file, &t, w) != 0 && !w->failed) ckpt_walk_fail(w, "rank %d: %s failed", w->g->rank, t.path);
            w->next++;
            flight_progress(); /* a long checkpoint that advances is not a hang (diag.hang_timeout) */
        }
    }
    return w->failed ? -1 : 0;
}

int ckpt_datasets_per_prefix(const struct model *m) { return model_logical_tensors(&m->d); }

int ckpt_owner(const struct tensor_ref *t, const struct grid *g)
{
    int first_replica = t->expert ? g->edp_rank == 0 : g->dpcp_rank == 0;
    return t->local != NULL && t->primary && (t->sliced || first_replica) && (!t->replicated || g->tp_rank == 0);
}

const char *const ckpt_prefix[3] = {"/model", "/optim/m", "/optim/v"};

struct state_buf ckpt_whole_buf(const struct model *m, float *mem)
{
    struct state_buf b = {mem, {1, {{CG_DP, 1, 0, 0, m->flat, m->flat, 0, 0}}, m->flat}, 0};
    return b;
}

void ckpt_state_bufs(const struct model *m, const struct optim *o, struct state_buf sb[3])
{
    struct state_buf none = ckpt_whole_buf(m, NULL);
    none.z.part[0].shard = none.z.floats = 0; /* (holds nothing) */
    sb[0] = ckpt_whole_buf(m, m->params_mem);
    sb[1] = sb[2] = none; /* (the model alone: nothing of the optimizer) */
    if (m->shard_mem) sb[0] = (struct state_buf){m->shard_mem, m->zs, 1}; /* ZeRO-3: the shares */
    if (!o) return;
    struct state_buf slice = {NULL, o->z, o->zero_stage > 0}; /* (all of it without ZeRO) */
    if (o->master_mem) sb[0] = slice, sb[0].mem = o->master_mem;
    sb[1] = slice, sb[1].mem = o->m_mem;
    sb[2] = slice, sb[2].mem = o->v_mem;
}
