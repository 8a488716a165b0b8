/* sample_gen.c -- generation on the grid (sample_gen.h). */
#include "sample_gen.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "log.h"
#include "moe.h"
#include "rng.h"
#include "shape.h"

int gen_read_config(const char *ckpt, struct config *cfg, char *err, size_t errlen)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    int rc = rank == 0 ? ckpt_read_config(ckpt, cfg, err, errlen) : 0;
    if (mpi_agree_error(MPI_COMM_WORLD, rc != 0, err, errlen)) return -1;
    MPI_CHECK(MPI_Bcast(cfg, (int)sizeof *cfg, MPI_BYTE, 0, MPI_COMM_WORLD));
    return 0;
}

/* cfg in the sampling layout on world ranks: the grid of o, fp32, no
 * recomputation, ZeRO, sequence parallelism or capacity (every token
 * reaches its experts: a batch never changes a row's routing), no testing
 * aids of the training's, the device of o; micro-batches of B sequences (the model's scratch rows).  Checked
 * as a training deck is; 0, or -1 with err (alike on every rank). */
static int layout(struct config *cfg, const struct config *o, int world, int B, char *err, size_t errlen)
{
    if (o->parallel.cp > 1 || o->parallel.ep > 1)
        return errorf(err, errlen, "parallel.%s = %lld: triad sample splits a model over tp, pp and dp only\n"
                      "  hint: remove parallel.cp and parallel.ep from the command line",
                      o->parallel.cp > 1 ? "cp" : "ep",
                      (long long)(o->parallel.cp > 1 ? o->parallel.cp : o->parallel.ep));
    struct deck_error de;
    char device[CONFIG_STRLEN + 16];
    snprintf(device, sizeof device, "train.device=%s", o->train.device);
    const char *fixed[] = {"train.precision=fp32", "train.recompute=none", "train.recompute_layers=0",
                           "parallel.virtual_stages=1", "parallel.schedule=1f1b", "parallel.sequence_parallel=.false.",
                           "parallel.zero_stage=0", "train.moe_capacity=0", CONFIG_TRAINING_AIDS_OFF, device};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (config_override(cfg, fixed[i], &de) != 0) return errorf(err, errlen, "%s: %s", fixed[i], de.what);
    int64_t tp = o->parallel.tp, pp = o->parallel.pp, dp = o->parallel.dp;
    /* no grid given: tensor parallelism over every rank, or over the most
     * ranks that divide the model (the rest as replicas: 3 ranks and 4 heads
     * are tp 1 x dp 3) */
    int chosen = tp == 1 && pp == 1 && dp == 0;
    cfg->train.share_gpus = o->train.share_gpus;
    cfg->train.tf32 = o->train.tf32;
    cfg->diag.stage_through_host = o->diag.stage_through_host;
    cfg->parallel.cp = 1, cfg->parallel.ep = 1, cfg->train.micro_batch_size = B;
    struct deck_error first;
    for (int64_t t = chosen ? world : tp; t >= 1; t--) {
        if (chosen && world % t) continue;
        int64_t d = chosen ? world / t : dp;
        cfg->parallel.tp = t, cfg->parallel.pp = pp, cfg->parallel.dp = d;
        int64_t replicas = d ? d : world % (t * pp) ? 1 : world / (t * pp);
        cfg->train.batch_size = replicas * B;
        if (config_validate(cfg, world, &de) == 0) return 0;
        if (t == (chosen ? world : tp)) first = de; /* (the error of the grid asked for, or of tp over every rank) */
        if (!chosen) break;
    }
    return errorf(err, errlen, "%s%s%s", first.what, first.hint[0] ? "\n  hint: " : "", first.hint);
}

static void *dev(const struct device *k, size_t n, size_t size) { return k->alloc((n ? n : 1) * size); }

int gen_open(struct gen *G, const char *ckpt, const struct config *cfg, const struct config *o, struct grid *g,
             int nprompts, char *err, size_t errlen)
{
    memset(G, 0, sizeof *G);
    int world;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world));
    G->cfg = *cfg;
    int T = (int)cfg->model.seq_len;
    if (layout(&G->cfg, o, world, 1, err, errlen) != 0) return -1;
    /* batches of S prompts: a replica's share, or sample.batch_size of it */
    int dp = shape_dp(&G->cfg, world), share = (nprompts + dp - 1) / dp;
    G->S = o->sample.batch_size > 0 && o->sample.batch_size < share ? (int)o->sample.batch_size : share;
    G->S = G->S > 0 ? G->S : 1;
    G->R = G->S > T ? G->S : T;
    int B = (G->R + T - 1) / T;
    if (B > 1 && layout(&G->cfg, o, world, B, err, errlen) != 0) return -1;
    const struct config *c = &G->cfg;
    const struct device *k = device_for(c->train.device_id == TRAIN_DEVICE_cuda, (int)c->diag.stage_through_host, err,
                                        errlen);
    if (mpi_agree_error(MPI_COMM_WORLD, !k, err, errlen)) return -1;
    struct run_shape s;
    run_shape_init(&s, c, world, device_staged(k));
    grid_init(g, s.tp, 1, s.dp, s.pp, 1);
    G->g = g;
    struct device_options dopt = {.allow_shared = (int)c->train.share_gpus, .tf32 = (int)c->train.tf32};
    if (mpi_agree_error(g->world_comm, device_open(k, g->world_comm, &dopt, err, errlen) < 0, err, errlen)) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, "\n  hint: %s", DEVICE_OPEN_HINT);
        return -1;
    }
    struct model_dims d;
    model_dims_init(&d, c, &s, g);
    model_init(&G->m, &d, k, B, (struct model_buffers){.slots = 1}, 0);
    comm_init(&G->c, g);
    comm_use_device(&G->c, k);
    if (ckpt_load_model(ckpt, &G->m, g, err, errlen) != 0) return -1;
    size_t R = (size_t)G->R, S = (size_t)G->S, C = (size_t)d.C, Vs = (size_t)d.Vp / (size_t)d.tp;
    G->x = dev(k, R * C, sizeof(float)), G->h = dev(k, R * C, sizeof(float)), G->part = dev(k, R * C, sizeof(float));
    G->qkv = dev(k, R * (size_t)model_qkv_cols(&d), sizeof(float));
    G->att = dev(k, R * (size_t)model_q_heads(&d) * (size_t)d.HS, sizeof(float));
    G->fc = dev(k, R * (size_t)model_fc_cols(&d), sizeof(float));
    G->act = dev(k, R * (size_t)model_hidden_cols(&d), sizeof(float));
    G->mean = dev(k, R, sizeof(float)), G->rstd = dev(k, R, sizeof(float));
    if (d.llama) G->rope_cos = dev(k, R * (size_t)d.HS / 2, sizeof(float)), G->rope_sin = dev(k, R * (size_t)d.HS / 2,
                                                                                                sizeof(float));
    G->tok = dev(k, R, sizeof(int32_t)), G->seq = dev(k, R, sizeof(int32_t)), G->pos = dev(k, R, sizeof(int32_t));
    G->last = dev(k, S, sizeof(int32_t));
    G->head = dev(k, S * C, sizeof(float)), G->lnf = dev(k, S * C, sizeof(float));
    G->logits = dev(k, S * Vs, sizeof(float)), G->logits_all = dev(k, S * Vs * (size_t)d.tp, sizeof(float));
    G->htok = xmalloc(R * sizeof(int32_t)), G->hseq = xmalloc(R * sizeof(int32_t));
    G->hpos = xmalloc(R * sizeof(int32_t)), G->hlast = xmalloc(S * sizeof(int32_t));
    G->hnext = xmalloc(S * sizeof(int32_t));
    G->hlogits = xmalloc(S * Vs * (size_t)d.tp * sizeof(float)), G->hrow = xmalloc((size_t)d.Vp * sizeof(float));
    G->cand = xmalloc((size_t)d.V * sizeof *G->cand);
    return 0;
}

void gen_close(struct gen *G)
{
    const struct device *k = G->m.k;
    if (!k) return;
    float *f[] = {G->x, G->h, G->part, G->qkv, G->att, G->fc, G->act, G->mean, G->rstd, G->rope_cos, G->rope_sin,
                  G->head, G->lnf, G->logits, G->logits_all, (float *)G->tok, (float *)G->seq, (float *)G->pos,
                  (float *)G->last};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i]) k->release(f[i]);
    free(G->htok), free(G->hseq), free(G->hpos), free(G->hlast), free(G->hnext), free(G->hlogits), free(G->hrow), free(G->cand);
    comm_free(&G->c);
    model_free(&G->m);
    if (k->close) k->close();
    memset(G, 0, sizeof *G);
}

/* ------------------------------------------------------------ forward */

/* The family's norm of n rows. */
static void norm(struct gen *G, float *out, const float *x, const float *w, const float *b, int n)
{
    const struct model *m = &G->m;
    if (m->d.llama) m->k->rmsnorm_forward(PREC_FP32, out, G->rstd, x, w, n, m->d.C, m->d.eps);
    else m->k->layernorm_forward(PREC_FP32, out, G->mean, G->rstd, x, w, b, n, m->d.C);
}

/* Partial sums over tp of n floats summed on every tp rank. */
static void tp_sum(struct gen *G, float *x, size_t n)
{
    if (G->m.d.tp > 1) comm_allreduce_sum_f32(&G->c, CG_TP, x, n);
}

/* x (n, C) = the rows' token embeddings (vocabulary-parallel) plus gpt2's positions. */
static void embed(struct gen *G, int n)
{
    const struct model *m = &G->m;
    const struct model_dims *d = &m->d;
    int Vs = d->Vp / d->tp;
    m->k->encoder_forward(PREC_FP32, G->x, G->tok, m->param[P_WTE], NULL, 1, n, d->C, d->tp_rank * Vs, Vs);
    if (m->size[P_WPE] && d->tp_rank == 0) {
        m->k->rows_gather(PREC_FP32, G->part, m->param[P_WPE], G->pos, NULL, n, d->C);
        m->k->residual_forward(PREC_FP32, G->x, G->x, G->part, (size_t)n * d->C);
    }
    tp_sum(G, G->x, (size_t)n * d->C);
}

/* Local layer j on the n rows of x, in place. */
static void block(struct gen *G, int j, int n)
{
    struct model *m = &G->m;
    const struct model_dims *d = &m->d;
    const struct device *k = m->k;
    int C = d->C, Cl = C / d->tp, HS = d->HS, NHl = model_q_heads(d), NKVl = model_kv_heads(d);
    int l = model_global_layer(d, j), QKV = model_qkv_cols(d), FC = model_layer_fc_cols(d, l);
    int Fl = model_layer_hidden_cols(d, l), root = d->tp_rank == 0;
    size_t nC = (size_t)n * C, cache = (size_t)j * G->S * G->Tc * NKVl * HS;
    const float *W[NUM_PARAMS];
    model_layer_params(m, j, W);
    norm(G, G->h, G->x, W[P_LN1W], W[P_LN1B], n);
    k->matmul_forward(PREC_FP32, G->qkv, G->h, W[P_QKVW], W[P_QKVB], n, C, QKV); /* column-parallel */
    if (d->llama) k->rope_forward(PREC_FP32, G->qkv, G->rope_cos, G->rope_sin, 1, n, NHl, NKVl, HS);
    k->attention_cached(PREC_FP32, G->att, G->qkv, QKV, G->kcache + cache, G->vcache + cache, G->seq, G->pos, n, G->Tc,
                        NHl, NKVl, HS);
    k->matmul_forward(PREC_FP32, G->part, G->att, W[P_ATTPROJW], root ? W[P_ATTPROJB] : NULL, n, Cl, C);
    tp_sum(G, G->part, nC); /* row-parallel */
    k->residual_forward(PREC_FP32, G->x, G->x, G->part, nC);
    norm(G, G->h, G->x, W[P_LN2W], W[P_LN2B], n);
    if (model_moe_layer(d, l)) moe_forward_rows(m, &G->c, G->h, n, W, G->fc, G->act, G->part);
    else {
        k->matmul_forward(PREC_FP32, G->fc, G->h, W[P_FCW], W[P_FCB], n, C, FC);
        if (d->llama) k->swiglu_forward(PREC_FP32, G->act, G->fc, (size_t)n, Fl);
        else k->gelu_forward(PREC_FP32, G->act, G->fc, (size_t)n * Fl);
        k->matmul_forward(PREC_FP32, G->part, G->act, W[P_FCPROJW], root ? W[P_FCPROJB] : NULL, n, Fl, C);
    }
    tp_sum(G, G->part, nC);
    k->residual_forward(PREC_FP32, G->x, G->x, G->part, nC);
}

/* The logits of the H rows `last` of x, gathered over tp into hlogits (tp, H, Vp/tp) on the host. */
static void head(struct gen *G, int H)
{
    struct model *m = &G->m;
    const struct model_dims *d = &m->d;
    size_t Vs = (size_t)d->Vp / (size_t)d->tp;
    m->k->rows_gather(PREC_FP32, G->head, G->x, G->last, NULL, H, d->C);
    norm(G, G->lnf, G->head, m->param[P_LNFW], m->size[P_LNFB] ? m->param[P_LNFB] : NULL, H);
    m->k->matmul_forward(PREC_FP32, G->logits, G->lnf, m->param[d->tied ? P_WTE : P_LMHEAD], NULL, H, d->C, (int)Vs);
    const float *all = G->logits;
    if (d->tp > 1) {
        comm_allgather_f32(&G->c, CG_TP, G->logits_all, G->logits, (size_t)H * Vs);
        all = G->logits_all;
    }
    m->k->to_host(G->hlogits, all, (size_t)d->tp * H * Vs * sizeof(float));
}

/* This stage's forward of n rows (htok, hseq, hpos), the logits of rows hlast[0..H) on the last. */
static void stage_forward(struct gen *G, int n, int H)
{
    struct model *m = &G->m;
    const struct model_dims *d = &m->d;
    const struct device *k = m->k;
    size_t nC = (size_t)n * d->C;
    k->to_device(G->tok, G->htok, (size_t)n * sizeof(int32_t));
    k->to_device(G->seq, G->hseq, (size_t)n * sizeof(int32_t));
    k->to_device(G->pos, G->hpos, (size_t)n * sizeof(int32_t));
    if (d->llama) { /* each row's angles */
        k->rows_gather(PREC_FP32, G->rope_cos, m->rope_cos, G->pos, NULL, n, d->HS / 2);
        k->rows_gather(PREC_FP32, G->rope_sin, m->rope_sin, G->pos, NULL, n, d->HS / 2);
    }
    MPI_Request rq;
    if (model_has_embedding(d)) embed(G, n);
    else {
        comm_irecv_f32(&G->c, CG_PP, G->x, nC, d->pp_rank - 1, 0, &rq);
        comm_wait(&G->c, CG_PP, CO_RECV, 1, &rq);
    }
    for (int j = 0; j < d->Lp; j++) block(G, j, n);
    if (!model_has_head(d)) {
        comm_isend_f32(&G->c, CG_PP, G->x, nC, d->pp_rank + 1, 0, &rq);
        comm_wait(&G->c, CG_PP, CO_SEND, 1, &rq);
        return;
    }
    k->to_device(G->last, G->hlast, (size_t)H * sizeof(int32_t));
    head(G, H);
}

/* ------------------------------------------------------------ choice */

static int by_logit(const void *a, const void *b)
{
    const struct gen_cand *x = a, *y = b;
    return x->logit > y->logit ? -1 : x->logit < y->logit ? 1 : x->id - y->id;
}

int gen_candidates(const float *logits, int V, const struct gen_opts *o, struct gen_cand *c, double *mass)
{
    const unsigned char *ok = o->drawable;
    float mx = -INFINITY;
    for (int i = 0; i < V; i++)
        if (!ok || ok[i]) mx = logits[i] > mx ? logits[i] : mx;
    int m = 0; /* the candidates, in id order */
    for (int i = 0; i < V; i++) {
        if (ok && !ok[i]) continue;
        c[m].id = i;
        c[m].logit = logits[i];
        c[m++].p = exp(((double)logits[i] - mx) / o->temperature);
    }
    qsort(c, (size_t)m, sizeof *c, by_logit);
    /* top_k: every id whose logit reaches the k-th largest (ties at the boundary all stay) */
    int n = m;
    if (o->top_k > 0 && o->top_k < m)
        for (n = (int)o->top_k; n < m && c[n].logit == c[o->top_k - 1].logit;) n++;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += c[i].p;
    /* top_p over what top_k kept, renormalised: the most likely ids while the mass before each is below top_p */
    int kept = n;
    if (o->top_p < 1) {
        double before = 0;
        for (kept = 1, before = c[0].p; kept < n && before < o->top_p * sum;) before += c[kept++].p;
        sum = before;
    }
    *mass = sum;
    return kept;
}

/* The next token from logits[0..V), among the ids o->drawable allows (all
 * where it is NULL: the same operations as over every id): greedy at
 * temperature 0, else a draw of u in [0, 1) among gen_candidates.  The ids
 * left out never enter the softmax, as the padded columns do not (llm.c
 * draws from its real vocabulary, not the padded one). */
static int32_t pick(const float *logits, int V, const struct gen_opts *o, double u, struct gen_cand *c)
{
    const unsigned char *ok = o->drawable;
    if (o->temperature == 0) {
        int best = -1;
        for (int i = 0; i < V; i++)
            if ((!ok || ok[i]) && (best < 0 || logits[i] > logits[best])) best = i;
        return best;
    }
    double keep;
    int kept = gen_candidates(logits, V, o, c, &keep);
    double at = u * keep, acc = 0;
    for (int i = 0; i < kept; i++)
        if ((acc += c[i].p) > at) return c[i].id;
    return c[kept - 1].id;
}

/* The state of a batch: prompt i (global index first + i) holds len[i]
 * ids at out + i T, plen[i] of them its prompt's; done once it ended. */
struct batch {
    int first, n, T;
    int32_t *out;
    int *len, *plen, *done;
    void (*grew)(void *ctx, const int32_t *ids, int n);
    void *ctx;
};

/* The next token of each of the H prompts q[0..H) from the last stage's
 * logits (row i: prompt q[i]), drawn with the number of (seed, the
 * prompt's index, the position of its last id); every stage of the
 * replica gets them and adds them, or ends the prompt at a document's end
 * or at max_new_tokens. */
static void take_next(struct gen *G, const struct gen_opts *go, struct batch *b, const int *q, int H)
{
    const struct model_dims *d = &G->m.d;
    int32_t *next = G->hnext;
    if (model_has_head(d)) {
        int Vs = d->Vp / d->tp;
        uint64_t stream = rng_stream_id("sample");
        for (int i = 0; i < H; i++) {
            for (int t = 0; t < d->tp; t++) /* the row's logits from each tp rank's columns */
                memcpy(G->hrow + (size_t)t * Vs, G->hlogits + ((size_t)t * H + i) * Vs, (size_t)Vs * sizeof(float));
            uint64_t at = ((uint64_t)(b->first + q[i]) << 32) | (uint64_t)(b->len[q[i]] - 1);
            next[i] = pick(G->hrow, d->V, go, go->temperature > 0 ? rng_uniform(go->seed, stream, at) : 0, G->cand);
        }
    }
    if (d->pp > 1) MPI_CHECK(MPI_Bcast(next, H, MPI_INT32_T, d->pp - 1, G->g->pp_comm));
    for (int i = 0; i < H; i++) {
        int p = q[i];
        int stop = 0;
        for (int k = 0; k < go->nstop && !stop; k++) stop = next[i] == go->stop[k];
        if (stop) {
            b->done[p] = 1;
            continue;
        }
        b->out[(size_t)p * b->T + b->len[p]++] = next[i];
        b->done[p] = b->len[p] - b->plen[p] >= go->max_new;
        if (p == 0 && b->grew) b->grew(b->ctx, b->out, b->len[0]);
    }
}

void gen_batch(struct gen *G, const struct gen_opts *go, const struct prompts *p, int first, int n, int32_t *out,
               int *len, void (*grew)(void *ctx, const int32_t *ids, int n), void *ctx)
{
    const struct model_dims *d = &G->m.d;
    const struct device *k = G->m.k;
    struct batch b = {.first = first, .n = n, .T = d->T, .out = out, .len = len, .grew = grew, .ctx = ctx};
    b.plen = xmalloc((size_t)n * sizeof *b.plen), b.done = xcalloc((size_t)n, sizeof *b.done);
    int *q = xmalloc((size_t)n * sizeof *q); /* the prompt of each row whose logits are wanted */
    G->Tc = 1;
    for (int i = 0; i < n; i++) {
        b.plen[i] = len[i] = p->len[first + i];
        memcpy(out + (size_t)i * d->T, p->ids + p->at[first + i], (size_t)len[i] * sizeof *out);
        G->Tc = len[i] + go->max_new - 1 > G->Tc ? len[i] + go->max_new - 1 : G->Tc; /* the positions fed */
    }
    size_t cache = (size_t)d->Lp * G->S * G->Tc * model_kv_heads(d) * d->HS;
    G->kcache = k->alloc(cache * sizeof(float)), G->vcache = k->alloc(cache * sizeof(float));
    double t0 = wtime();
    /* prefill: every position of whole prompts, as many as one forward's rows take */
    for (int i = 0; i < n;) {
        int rows = 0, H = 0;
        while (i + H < n && rows + len[i + H] <= G->R) {
            int s = i + H;
            for (int t = 0; t < len[s]; t++, rows++) G->htok[rows] = out[(size_t)s * d->T + t], G->hseq[rows] = s,
                                                     G->hpos[rows] = t;
            G->hlast[H] = rows - 1;
            q[H++] = s;
            G->st.prefill_tokens += len[s];
        }
        stage_forward(G, rows, H);
        take_next(G, go, &b, q, H);
        i += H;
    }
    double t1 = wtime();
    G->st.prefill_s += t1 - t0;
    /* decode: a row for each prompt still going, its last id at its position */
    for (;;) {
        int rows = 0;
        for (int s = 0; s < n; s++) {
            if (b.done[s]) continue;
            G->htok[rows] = out[(size_t)s * d->T + len[s] - 1], G->hseq[rows] = s, G->hpos[rows] = len[s] - 1;
            G->hlast[rows] = rows;
            q[rows++] = s;
        }
        if (rows == 0) break;
        stage_forward(G, rows, rows);
        take_next(G, go, &b, q, rows);
        G->st.decode_tokens += rows;
    }
    G->st.decode_s += wtime() - t1;
    k->release(G->kcache), k->release(G->vcache);
    G->kcache = G->vcache = NULL;
    free(b.plen), free(b.done), free(q);
}
