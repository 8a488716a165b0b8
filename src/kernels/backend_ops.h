/* backend_ops.h -- declarations of the kernels for one precision.
 * Included twice by backend.h with KREAL/KNAME set; no include guard. */

/* out (B,T,C) = wte[inp - v0] + wpe[t].  wte holds rows [v0, v0+Vs) of the
 * vocabulary (a vocabulary-parallel shard; v0 = 0, Vs = Vp without TP); a
 * token outside the shard contributes 0.  wpe may be NULL (not added). */
void KNAME(encoder_forward)(KREAL *out, const int32_t *inp, const KREAL *wte,
                            const KREAL *wpe, int B, int T, int C, int v0, int Vs);
/* dwte (Vs,C) +=, dwpe (T,C) += (skipped if NULL) from dout (B,T,C). */
void KNAME(encoder_backward)(KREAL *dwte, KREAL *dwpe, const KREAL *dout,
                             const int32_t *inp, int B, int T, int C, int v0, int Vs);

/* out (N,C); mean, rstd (N) saved for backward; eps = 1e-5. */
void KNAME(layernorm_forward)(KREAL *out, KREAL *mean, KREAL *rstd, const KREAL *inp,
                              const KREAL *weight, const KREAL *bias, int N, int C);
/* dinp (N,C) +=, dweight (C) +=, dbias (C) +=; dinp NULL or dweight NULL skips
 * that part (a zero-bubble pipeline's B and W), the other's bits unchanged. */
void KNAME(layernorm_backward)(KREAL *dinp, KREAL *dweight, KREAL *dbias,
                               const KREAL *dout, const KREAL *inp, const KREAL *weight,
                               const KREAL *mean, const KREAL *rstd, int N, int C);

/* RMSNorm: out (N,C) = inp * rstd * weight, rstd (N) = 1 / sqrt(mean(inp^2) + eps)
 * saved for backward.  backward: dinp (N,C) +=, dweight (C) +=, either skipped
 * when NULL (as layernorm_backward). */
void KNAME(rmsnorm_forward)(KREAL *out, KREAL *rstd, const KREAL *inp, const KREAL *weight, int N, int C,
                            KREAL eps);
void KNAME(rmsnorm_backward)(KREAL *dinp, KREAL *dweight, const KREAL *dout, const KREAL *inp,
                             const KREAL *weight, const KREAL *rstd, int N, int C);

/* out (N,OC) = inp (N,C) @ weight(OC,C)^T + bias (OC); bias may be NULL. */
void KNAME(matmul_forward)(KREAL *out, const KREAL *inp, const KREAL *weight,
                           const KREAL *bias, int N, int C, int OC);
/* dinp (N,C) = dout @ weight (overwritten; skipped if NULL);
 * dweight (OC,C) += dout^T @ inp (skipped if NULL, with weight unread when
 * dinp is NULL); dbias (OC) += column sums (skipped if NULL). */
void KNAME(matmul_backward)(KREAL *dinp, KREAL *dweight, KREAL *dbias,
                            const KREAL *dout, const KREAL *inp, const KREAL *weight,
                            int N, int C, int OC);
#ifdef KERNELS_BF16
/* The same two with the products in gemm_bf16's arithmetic (gemm.h): a
 * bf16 run's, whose operands hold bf16 values (in the float copies of
 * kernels_cpu.c only: the CPU table's matmuls in PREC_BF16). */
void KNAME(matmul_forward_bf16)(KREAL *out, const KREAL *inp, const KREAL *weight, const KREAL *bias, int N, int C,
                                int OC);
void KNAME(matmul_backward_bf16)(KREAL *dinp, KREAL *dweight, KREAL *dbias, const KREAL *dout, const KREAL *inp,
                                 const KREAL *weight, int N, int C, int OC);
#endif

/* Causal self-attention over NH query heads of size HS sharing NKV key/value
 * heads (grouped-query attention: query head h reads kv head h / (NH/NKV);
 * NKV = NH is multi-head attention), fused (no T x T buffer).  qkv
 * (B,T,(NH+2NKV)*HS): the q heads, then the k heads, then the v heads, each
 * head's HS values contiguous.  The keys and values are read from kv, rows
 * of ldkv floats (B,T,ldkv) holding the NKV k heads then the NKV v heads:
 * qkv + NH*HS with ldkv = (NH+2NKV)*HS for the sequence's own, or a
 * context-parallel peer's packed (B,T,2*NKV*HS) block.  One call takes the
 * n query rows [q0, q0+n) of each sequence against the n key rows
 * [k0, k0+n): with ATT_CAUSAL query q0+i sees keys k0 .. k0+i (the whole
 * sequence: q0 = k0 = 0, n = T), without it all n.  lse (B,NH,T): each
 * row's log-sum-exp of its scaled scores, kept for the backward.  out
 * (B,T,NH*HS).  ATT_MERGE: out and lse of the rows already hold the softmax
 * over other keys, which the call extends (ring attention's blocks).
 * Scale 1/sqrt(HS).  (flags: ops.h) */
void KNAME(attention_forward)(KREAL *out, KREAL *lse, const KREAL *qkv, const KREAL *kv, int ldkv,
                              int B, int T, int q0, int k0, int n, int NH, int NKV, int HS, int flags);
/* The gradients of one such call from dout and the forward's out and (final)
 * lse: dq of rows [q0, q0+n) into dqkv's q heads, dk and dv of rows
 * [k0, k0+n) into dkv (laid out as kv; dqkv + NH*HS for the sequence's
 * own); overwritten, or added to with ATT_ACCUM.  A kv head's gradient sums
 * over its query heads in head order. */
void KNAME(attention_backward)(KREAL *dqkv, KREAL *dkv, const KREAL *dout, const KREAL *out, const KREAL *qkv,
                               const KREAL *kv, int ldkv, const KREAL *lse, int B, int T, int q0, int k0, int n,
                               int NH, int NKV, int HS, int flags);
#ifdef KERNELS_BF16
/* The same two with the products in gemm_bf16's arithmetic: a bf16 run's
 * (q, k, v, out and dout hold bf16 values; the probabilities and dS are
 * rounded to bf16 as the products pack them, as flash-attention multiplies
 * them in 16 bits; the row maxima, sums, lse and D stay fp32). */
void KNAME(attention_forward_bf16)(KREAL *out, KREAL *lse, const KREAL *qkv, const KREAL *kv, int ldkv, int B, int T,
                                   int q0, int k0, int n, int NH, int NKV, int HS, int flags);
void KNAME(attention_backward_bf16)(KREAL *dqkv, KREAL *dkv, const KREAL *dout, const KREAL *out, const KREAL *qkv,
                                    const KREAL *kv, int ldkv, const KREAL *lse, int B, int T, int q0, int k0, int n,
                                    int NH, int NKV, int HS, int flags);
#endif

/* Attention of R rows over a cache of keys and values (generation): row r
 * is position pos[r] of sequence seq[r].  First each row's k and v heads
 * (qkv, rows of ldq: NH q heads, NKV k heads, NKV v heads, HS each) are
 * stored at (seq[r], pos[r]) of the caches kc and vc, (S, Tc, NKV*HS)
 * each; then each row's q heads attend over positions 0 .. pos[r] of its
 * sequence's cache (query head h on kv head h / (NH/NKV)), scale
 * 1/sqrt(HS): rows of one sequence in one call see each other causally.
 * out (R, NH*HS).  A row's result depends on its q and its cache alone
 * (not on the other rows, their number or order).  seq and pos: the
 * device's memory. */
void KNAME(attention_cached)(KREAL *out, const KREAL *qkv, int ldq, KREAL *kc, KREAL *vc, const int32_t *seq,
                             const int32_t *pos, int R, int Tc, int NH, int NKV, int HS);

/* cols columns of rows rows, src (ld lds) into dst (ld ldd): copied, or
 * added with add != 0 (ring attention's packed keys and values). */
void KNAME(copy_cols)(KREAL *dst, int ldd, const KREAL *src, int lds, size_t rows, int cols, int add);

/* A mixture of experts' rows (C wide).  gather: dst row r = w[r] * src row
 * idx[r] (idx NULL: row r; w NULL: 1; in place when idx is NULL).
 * combine: out row t = (add ? out row t : 0) + the sum over s = 0..K-1, in
 * that order, of w[tK+s] * src row idx[tK+s], skipping idx < 0 (w NULL:
 * 1).  dot: out[r] = the sum over c, in order, of a[r,c] * b[r,c]. */
void KNAME(rows_gather)(KREAL *dst, const KREAL *src, const int32_t *idx, const KREAL *w, int R, int C);
void KNAME(rows_combine)(KREAL *out, const KREAL *src, const int32_t *idx, const KREAL *w, int N, int K, int C,
                         int add);
void KNAME(rows_dot)(KREAL *out, const KREAL *a, const KREAL *b, int R, int C);

/* Rotary position embedding of the q and k heads of qkv (layout as above),
 * in place, Hugging Face's rotate_half convention: for i < HS/2 the pair
 * (x[i], x[i + HS/2]) of position t turns by the angle whose cosine and
 * sine are cos[t*HS/2 + i], sin[t*HS/2 + i] (tables (T, HS/2)).  The v
 * heads are left alone.  backward: the same turn reversed on dqkv (its
 * transpose), in place. */
void KNAME(rope_forward)(KREAL *qkv, const KREAL *cos, const KREAL *sin, int B, int T, int NH, int NKV, int HS);
void KNAME(rope_backward)(KREAL *dqkv, const KREAL *cos, const KREAL *sin, int B, int T, int NH, int NKV, int HS);

/* GELU, tanh approximation. out (N); dinp (N) overwritten, and may be dout
 * (element-wise: each element read before it is written). */
void KNAME(gelu_forward)(KREAL *out, const KREAL *inp, size_t N);
void KNAME(gelu_backward)(KREAL *dinp, const KREAL *inp, const KREAL *dout, size_t N);

/* SwiGLU over N rows: inp (N, 2F) holds each row's gate then its up values;
 * out (N, F) = silu(gate) * up, silu(x) = x / (1 + exp(-x)).  backward:
 * dinp (N, 2F) overwritten from dout (N, F). */
void KNAME(swiglu_forward)(KREAL *out, const KREAL *inp, size_t N, int F);
void KNAME(swiglu_backward)(KREAL *dinp, const KREAL *inp, const KREAL *dout, size_t N, int F);

/* out = a + b (N). */
void KNAME(residual_forward)(KREAL *out, const KREAL *a, const KREAL *b, size_t N);

/* Vocabulary-parallel cross-entropy in three local steps; with TP the caller
 * all-reduces between them (max of maxes, then sum of sums and tlogit).
 * logits (N,Vs) hold global columns [v0, v0+Vs); only columns < V are real
 * (the padding never enters the softmax).  targets (N) are global ids < V. */
/* maxes (N) = max over this shard's real columns (-inf if it has none). */
void KNAME(crossentropy_max)(KREAL *maxes, const KREAL *logits, int N, int Vs, int v0, int V);
/* sums (N) = sum exp(logit - maxes); tlogit (N) = logit of the target if this
 * shard holds it, else 0.  The real columns' logits are replaced by their
 * exp(logit - maxes), the softmax's numerators that the backward scales
 * (so it computes no exponential; the padding columns keep their logits). */
void KNAME(crossentropy_sumexp)(KREAL *sums, KREAL *tlogit, KREAL *logits,
                                const KREAL *maxes, const int32_t *targets,
                                int N, int Vs, int v0, int V);
/* losses (N) = log(sums) + maxes - tlogit (after the reductions). */
void KNAME(crossentropy_loss)(KREAL *losses, const KREAL *maxes, const KREAL *sums,
                              const KREAL *tlogit, int N);
/* dlogits (N,Vs) = (softmax - onehot(target)) * dloss from the exponentials
 * crossentropy_sumexp left (exps) and the reduced sums: softmax = exps / sums
 * (as exps * (1 / sums)); padded columns 0.  dlogits may alias exps. */
void KNAME(crossentropy_backward)(KREAL *dlogits, const KREAL *exps, const KREAL *sums,
                                  const int32_t *targets, KREAL dloss,
                                  int N, int Vs, int v0, int V);

/* AdamW (PyTorch semantics) on n elements of the gradient grad * gscale
 * (gscale: the clipping coefficient, 1 without; the product is the one a
 * separate scale_inplace would store, so the fused pass is bitwise the
 * two); t >= 1 is the step for bias correction; wd = 0 for tensors without
 * decay; clear: the gradient left zero as it is read (the next step's
 * zeroing pass saved: optim_update). */
void KNAME(adamw_update)(KREAL *param, KREAL *grad, KREAL gscale, KREAL *m, KREAL *v, size_t n,
                         KREAL lr, KREAL beta1, KREAL beta2, KREAL eps, KREAL wd, int t, int clear);

/* Sum of squares (accumulated in double) and in-place scaling. */
double KNAME(sumsq)(const KREAL *x, size_t n);
void KNAME(scale_inplace)(KREAL *x, size_t n, KREAL s);
