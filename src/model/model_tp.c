/* model_tp.c -- the tensor-parallel region operators: how the residual
 * stream enters and leaves the column- and row-parallel matmuls. */
#include "model.h"

#include "model_internal.h"

/* Megatron's conjugate pairs over tp_comm.  Without sequence parallelism the
 * residual stream is replicated: entering the TP region is the identity
 * (all-reduce in backward) and leaving it an all-reduce.  With it the stream
 * holds Ns = N/tp rows: entering is an all-gather (reduce-scatter in
 * backward), leaving a reduce-scatter (all-gather in backward). */

/* Rows (Ns,C) -> the full (N,C) the column-parallel matmul reads. */
const float *model_gather_to_tp(const struct model *m, struct comm *c, float *full, const float *rows)
{
    if (!m->d.sp) return rows;
    comm_allgather_f32(c, CG_TP, full, rows, (size_t)m->Ns * m->d.C);
    return full;
}

/* Partial sums (N,C) of a row-parallel matmul -> the stream's rows. */
const float *model_reduce_from_tp(const struct model *m, struct comm *c, float *rows, float *partial)
{
    if (m->d.tp == 1) return partial;
    if (!m->d.sp) {
        comm_allreduce_sum_f32(c, CG_TP, partial, (size_t)m->N * m->d.C);
        return partial;
    }
    comm_reduce_scatter_f32(c, CG_TP, rows, partial, (size_t)m->Ns * m->d.C);
    return rows;
}

/* The family's norm of the stream's rows (LayerNorm; llama: RMSNorm, no
 * mean, no bias), its output gathered to (N,C) in full. */
void model_norm_to_tp(struct model *m, struct comm *c, float *full, float *mean, float *rstd, const float *inp,
                      const float *w, const float *b, int layer, enum fwd_out which, const char *what)
{
    float *out = m->d.sp ? m->scr.part : full;
    if (m->d.llama) m->k->rmsnorm_forward(m->d.prec, out, rstd, inp, w, m->Ns, m->d.C, m->d.eps);
    else m->k->layernorm_forward(m->d.prec, out, mean, rstd, inp, w, b, m->Ns, m->d.C);
    model_act_out(m, out, (size_t)m->Ns * m->d.C, layer, which, what);
    model_gather_to_tp(m, c, full, out);
}

/* The gradient of a norm's output (partial sums over tp of a column-
 * parallel matmul's input gradient) back into the residual stream; the
 * norm's parameter gradients too, or (keep, a split backward's B) its
 * output gradient's rows kept in keep for W. */
void model_norm_from_tp(struct model *m, struct comm *c, float *dln_full, float *dw, float *db, const float *inp,
                        const float *w, const float *mean, const float *rstd, float *keep, int rounded)
{
    if (!rounded) model_bwd_out(m, dln_full, (size_t)m->N * m->d.C);
    const float *dln = model_reduce_from_tp(m, c, m->scr.dln_part, dln_full);
    if (keep) {
        m->k->copy(keep, dln, (size_t)m->Ns * m->d.C * sizeof(float));
        dw = db = NULL;
    }
    if (m->d.llama) m->k->rmsnorm_backward(m->d.prec, m->scr.dresidual, dw, dln, inp, w, rstd, m->Ns, m->d.C);
    else m->k->layernorm_backward(m->d.prec, m->scr.dresidual, dw, db, dln, inp, w, mean, rstd, m->Ns, m->d.C);
    model_bwd_out(m, m->scr.dresidual, (size_t)m->Ns * m->d.C);
}
