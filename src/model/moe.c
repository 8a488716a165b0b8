/* moe.c -- a mixture of experts in place of a block's MLP (docs/moe.md).
 * The router runs in fp32 and its choices are made on the host, the same
 * on every tp rank; each expert is a SwiGLU split over tp like the dense
 * MLP, run as one product per expert over the rows routed to it; their
 * outputs are summed back into each token in the order of its choices. */
#include "moe.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "hash.h"
#include "log.h"
#include "model_internal.h"

void moe_alloc(struct model *m)
{
    const struct model_dims *d = &m->d;
    if (!d->E) return;
    size_t N = (size_t)m->N, E = (size_t)d->E, K = (size_t)d->K;
    struct moe_state *s = xcalloc(1, sizeof *s);
    s->logits = xcalloc(N * E, sizeof(float));
    s->probs = xcalloc(N * E, sizeof(float));
    s->dlogits = xcalloc(N * E, sizeof(float));
    s->expert = xcalloc(N * K, sizeof(int32_t));
    s->weight = xcalloc(N * K, sizeof(float));
    s->row = xcalloc(N * K, sizeof(int32_t));
    s->token = xcalloc(N * K, sizeof(int32_t));
    s->row_weight = xcalloc(N * K, sizeof(float));
    s->first = xcalloc(E + 1, sizeof(int));
    s->sums = xcalloc(2 * E + 1, sizeof(double));
    s->work = xcalloc(2 * E, sizeof(double));
    size_t nb = (size_t)(d->ep > 1 ? d->ep : 1) * (size_t)d->El;
    s->block_row = xcalloc(nb, sizeof(int));
    s->block_n = xcalloc(nb, sizeof(int));
    s->block_expert = xcalloc(nb, sizeof(int));
    s->sent = xcalloc(nb, sizeof(int));
    s->recvd = xcalloc(nb, sizeof(int));
    s->counts = xcalloc(8 * (size_t)(d->ep > 1 ? d->ep : 1), sizeof(int));
    s->chosen = xcalloc(E, sizeof(int));
    s->gate = d->F && d->shared_gate ? xcalloc(N, sizeof(float)) : NULL;
    s->dot = xcalloc(N * K + N, sizeof(float));
    s->stats.tokens = xcalloc((size_t)d->Lp * E + 1, sizeof(double));
    m->moe = s;
}

void moe_free(struct model *m)
{
    struct moe_state *s = m->moe;
    if (!s) return;
    free(s->logits), free(s->probs), free(s->dlogits), free(s->expert), free(s->weight), free(s->row);
    free(s->token), free(s->row_weight), free(s->first), free(s->chosen), free(s->gate), free(s->dot);
    free(s->stats.tokens), free(s->sums), free(s->work);
    free(s->block_row), free(s->block_n), free(s->block_expert), free(s->sent), free(s->recvd), free(s->counts);
    free(s);
    m->moe = NULL;
}

void moe_replay(struct model *m, int on)
{
    if (m->moe) m->moe->replay = on;
}

void moe_stats_reset(struct model *m)
{
    struct moe_state *s = m->moe;
    if (!s) return;
    double *t = s->stats.tokens;
    memset(&s->stats, 0, sizeof s->stats);
    memset(t, 0, ((size_t)m->d.Lp * (size_t)m->d.E + 1) * sizeof(double));
    s->stats.tokens = t;
}

/* ---------------------------------------------------------------- routing */

/* The router's logits (fp32) of the N rows of ln2, on the host. */
static void router_logits(struct model *m, const float *ln2, const float *w)
{
    struct scratch *sc = &m->scr;
    int N = m->moe->N;
    m->k->matmul_forward(PREC_FP32, sc->moe_logits, ln2, w, NULL, N, m->d.C, m->d.E);
    m->k->to_host(m->moe->logits, sc->moe_logits, (size_t)N * m->d.E * sizeof(float));
}

/* Each token's scores, its k choices (the highest scores, the lower expert
 * first among equals) and their weights; then the capacity, granted in
 * token order; then the routed rows, grouped by expert, into the scratch. */
static void route(struct model *m)
{
    const struct model_dims *d = &m->d;
    struct moe_state *s = m->moe;
    int N = s->N, E = d->E, K = d->K;
    memset(s->chosen, 0, (size_t)E * sizeof(int));
    for (int t = 0; t < N; t++) {
        const float *l = s->logits + (size_t)t * E;
        float *p = s->probs + (size_t)t * E;
        if (d->sigmoid_router)
            for (int e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-l[e]));
        else {
            float mx = l[0], sum = 0;
            for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
            for (int e = 0; e < E; e++) sum += (p[e] = expf(l[e] - mx));
            for (int e = 0; e < E; e++) p[e] /= sum;
        }
        int32_t *x = s->expert + (size_t)t * K;
        float *w = s->weight + (size_t)t * K, sum = 0;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < k; i++) taken |= x[i] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            x[k] = best;
            w[k] = p[best];
            sum += p[best];
            s->chosen[best]++;
        }
        if (d->norm_topk)
            for (int k = 0; k < K; k++) w[k] /= sum;
    }
    /* the capacity: each expert takes its first cap choices in (token, choice) order */
    long cap = d->capacity > 0 ? (long)ceil(d->capacity * (double)N * K / E) : (long)N * K;
    int *fill = s->first; /* (counts first, then the prefix sums) */
    memset(fill, 0, (size_t)(E + 1) * sizeof(int));
    for (int i = 0; i < N * K; i++) {
        int e = s->expert[i];
        s->row[i] = fill[e + 1] < cap ? fill[e + 1]++ : -1; /* its place among expert e's rows */
    }
    for (int e = 0; e < E; e++) fill[e + 1] += fill[e];
    s->R = fill[E];
    for (int i = 0; i < N * K; i++) {
        if (s->row[i] < 0) continue;
        s->row[i] += s->first[s->expert[i]];
        s->token[s->row[i]] = i / K;
        s->row_weight[s->row[i]] = s->weight[i];
    }
    struct scratch *sc = &m->scr;
    m->k->to_device(sc->moe_row, s->row, (size_t)N * K * sizeof(int32_t));
    m->k->to_device(sc->moe_token, s->token, (size_t)s->R * sizeof(int32_t));
    m->k->to_device(sc->moe_wslot, s->weight, (size_t)N * K * sizeof(float));
    m->k->to_device(d->ep > 1 ? sc->moe_wsend : sc->moe_wrow, s->row_weight, (size_t)s->R * sizeof(float));
}

/* Where the routed rows go: without expert parallelism a block per expert
 * here; with it, the rows of each local expert from each rank of the ep
 * group (the counts exchanged first), blocks in (source, expert) order. */
static void plan_blocks(struct model *m, struct comm *c)
{
    const struct model_dims *d = &m->d;
    struct moe_state *s = m->moe;
    int El = d->El, ep = d->ep;
    if (ep <= 1) {
        for (int e = 0; e < El; e++)
            s->block_row[e] = s->first[e], s->block_n[e] = s->first[e + 1] - s->first[e], s->block_expert[e] = e;
        s->nblock = El;
        s->Rx = s->R;
        return;
    }
    for (int i = 0; i < ep * El; i++) s->sent[i] = s->first[i + 1] - s->first[i]; /* (global expert i) */
    comm_alltoall_int(c, CG_EP, s->sent, s->recvd, El);
    int at = 0;
    for (int p = 0; p < ep; p++)
        for (int e = 0; e < El; e++) {
            int b = p * El + e;
            s->block_row[b] = at, s->block_n[b] = s->recvd[b], s->block_expert[b] = e;
            at += s->recvd[b];
        }
    s->nblock = ep * El;
    s->Rx = at;
}

enum { TO_EXPERTS, FROM_EXPERTS };

/* Post the all-to-all over the ep group that moves rows of `width` floats
 * between the ranks that route them (in the order of route: by global
 * expert) and the ranks whose experts take them (in plan_blocks' order).
 * Its counts stay in `slot` (0 or 1) until exchange_wait, so two exchanges
 * may be under way at once; computation overlaps them meanwhile. */
static void exchange_start(struct model *m, struct comm *c, const float *src, float *dst, int width, int dir, int slot,
                           MPI_Request *req)
{
    struct moe_state *s = m->moe;
    int ep = m->d.ep, El = m->d.El;
    int *sc = s->counts + 4 * ep * slot, *rc = sc + ep, *sd = sc + 2 * ep, *rd = sc + 3 * ep;
    for (long q = 0, so = 0, ro = 0; q < ep; q++) {
        long out = 0, in = 0;
        for (int e = 0; e < El; e++) out += s->sent[q * El + e], in += s->recvd[q * El + e];
        if (dir == FROM_EXPERTS) {
            long t = out;
            out = in, in = t;
        }
        if ((so + out) * width > INT_MAX || (ro + in) * width > INT_MAX)
            die("a mixture's all-to-all of %ld rows of %d floats exceeds MPI's int count: lower "
                "train.micro_batch_size (or raise ep)", so + out > ro + in ? so + out : ro + in, width);
        sc[q] = (int)(out * width), sd[q] = (int)(so * width), rc[q] = (int)(in * width), rd[q] = (int)(ro * width);
        so += out, ro += in;
    }
    comm_ialltoallv_f32(c, CG_EP, src, sc, sd, dst, rc, rd, req);
}

static void exchange_wait(struct comm *c, MPI_Request *req) { comm_wait(c, CG_EP, CO_ALLTOALL, 1, req); }

static void exchange(struct model *m, struct comm *c, const float *src, float *dst, int width, int dir, int slot)
{
    MPI_Request req;
    exchange_start(m, c, src, dst, width, dir, slot, &req);
    exchange_wait(c, &req);
}

/* The rows of x (N, C) this rank's choices route, at the experts' ranks:
 * into xr, after rows_wait under expert parallelism (the rows gathered in
 * moe_send meanwhile, read by own_rows). */
static void rows_to_experts(struct model *m, struct comm *c, const float *x, float *xr, MPI_Request *req)
{
    struct scratch *sc = &m->scr;
    struct moe_state *s = m->moe;
    if (m->d.ep <= 1) {
        m->k->rows_gather(m->d.prec, xr, x, sc->moe_token, NULL, s->R, m->d.C);
        return;
    }
    m->k->rows_gather(m->d.prec, sc->moe_send, x, sc->moe_token, NULL, s->R, m->d.C);
    exchange_start(m, c, sc->moe_send, xr, m->d.C, TO_EXPERTS, 0, req);
}

/* Rows of `width` computed at the experts (yr), back in this rank's route
 * order: yr itself without expert parallelism, else `back` after rows_wait. */
static const float *rows_from_experts(struct model *m, struct comm *c, const float *yr, float *back, int width,
                                      MPI_Request *req)
{
    if (m->d.ep <= 1) return yr;
    exchange_start(m, c, yr, back, width, FROM_EXPERTS, 0, req);
    return back;
}

static void rows_wait(const struct model *m, struct comm *c, MPI_Request *req)
{
    if (m->d.ep > 1) exchange_wait(c, req);
}

/* Let MPI move an exchange under way between two products (its large
 * messages advance only inside MPI calls). */
static void rows_progress(const struct model *m, struct comm *c, MPI_Request *req)
{
    if (m->d.ep > 1) comm_progress(c, 1, req);
}

/* Block b's rows of width C: this rank's own rows for its own experts are
 * read where rows_to_experts gathered them (own: before the exchange
 * ends), every other block from xr. */
static int own_block(const struct model *m, int b) { return m->d.ep > 1 && b / m->d.El == m->d.ep_rank; }
static const float *block_rows(const struct model *m, const float *xr, int b, int own)
{
    const struct moe_state *s = m->moe;
    size_t C = (size_t)m->d.C;
    return own ? m->scr.moe_send + (size_t)s->first[m->d.ep_rank * m->d.El + s->block_expert[b]] * C
               : xr + (size_t)s->block_row[b] * C;
}

/* The shared experts' gate sigmoid(ln2 . w) per token, on the host and in the scratch. */
static void shared_gate(struct model *m, const float *ln2, const float *w)
{
    struct moe_state *s = m->moe;
    int N = s->N;
    m->k->matmul_forward(PREC_FP32, m->scr.moe_gate, ln2, w, NULL, N, m->d.C, 1);
    m->k->to_host(s->gate, m->scr.moe_gate, (size_t)N * sizeof(float));
    for (int t = 0; t < N; t++) s->gate[t] = 1.0f / (1.0f + expf(-s->gate[t]));
    m->k->to_device(m->scr.moe_gate, s->gate, (size_t)N * sizeof(float));
}

/* The sums the auxiliary losses need over the micro-batch's tokens: the
 * choices of each expert before the capacity (c_i), its scores (sigmoid:
 * each token's normalised to sum 1), and lse_t^2 of the router's logits;
 * this rank's, summed over the cp ranks that hold the rest of its
 * sequences (a collective there), and the tokens Ng they cover. */
static void aux_sums(struct model *m, struct comm *c)
{
    const struct model_dims *d = &m->d;
    struct moe_state *s = m->moe;
    int N = s->N, E = d->E;
    double *u = s->sums;
    for (int e = 0; e < E; e++) u[e] = s->chosen[e], u[E + e] = 0;
    for (int t = 0; t < N; t++) { /* (each expert's P summed over the tokens in order) */
        const float *p = s->probs + (size_t)t * E;
        double norm = 1;
        if (d->sigmoid_router) {
            norm = 0;
            for (int i = 0; i < E; i++) norm += p[i];
        }
        for (int e = 0; e < E; e++) u[E + e] += p[e] / norm;
    }
    double zz = 0;
    for (int t = 0; t < N; t++) {
        const float *l = s->logits + (size_t)t * E;
        double mx = l[0], sum = 0;
        for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
        for (int e = 0; e < E; e++) sum += exp(l[e] - mx);
        double lse = mx + log(sum);
        zz += lse * lse;
    }
    u[2 * E] = zz;
    s->Ng = N;
    if (d->cp > 1) {
        comm_allreduce_sum_f64(c, CG_CP, u, 2 * (size_t)E + 1);
        s->Ng = (double)N * d->cp;
    }
}

/* The load-balancing loss E sum_i (c_i / Ng) (P_i / Ng) and the z-loss
 * (sum lse^2) / Ng from aux_sums. */
static void aux_losses(const struct model *m, double *aux, double *z)
{
    const struct moe_state *s = m->moe;
    int E = m->d.E;
    double a = 0, Ng = s->Ng;
    for (int e = 0; e < E; e++) a += s->sums[e] / Ng * (s->sums[E + e] / Ng);
    *aux = a * E;
    *z = s->sums[2 * E] / Ng;
}

/* ---------------------------------------------------------------- forward */

/* Expert e's slices of the layer's expert tensors (fc: gate and up, 2Fe/tp x C; fcproj: C x Fe/tp);
 * NULL for none (a split backward's B has no gradients). */
static const float *expert_fc(const struct model *m, const float *w, int e)
{
    return w ? w + (size_t)e * 2 * (m->d.Fe / m->d.tp) * m->d.C : NULL;
}
static const float *expert_proj(const struct model *m, const float *w, int e)
{
    return w ? w + (size_t)e * m->d.C * (m->d.Fe / m->d.tp) : NULL;
}

/* The MoE MLP of N rows x (N, C): its products into fch and fch_gelu (the
 * shared experts' N rows, then the routed rows), its output's partial sum
 * over tp into out (N, C); stats_layer: the local layer whose statistics
 * count, or -1. */
static void forward_rows(struct model *m, struct comm *c, const float *x, int N, const float *const *P, float *fch_all,
                         float *act_all, float *out, int l, int stats_layer)
{
    const struct model_dims *d = &m->d;
    const struct device *k = m->k;
    struct scratch *sc = &m->scr;
    struct moe_state *s = m->moe;
    int C = d->C, E = d->E, K = d->K, Fs = d->F / d->tp, Fe = d->Fe / d->tp, j = stats_layer;
    float *sh_fch = fch_all, *fch = fch_all + (size_t)N * 2 * Fs;
    float *sh_act = act_all, *act = act_all + (size_t)N * Fs;
    s->N = N;
    router_logits(m, x, P[P_ROUTERW]);
    route(m);
    aux_sums(m, c);
    if (j >= 0) {
        double aux, z;
        aux_losses(m, &aux, &z);
        s->stats.aux += aux;
        s->stats.z += z;
        s->stats.layers += 1;
        s->stats.slots += (double)N * K;
        s->stats.dropped += (double)N * K - s->R;
        for (int e = 0; e < E; e++) s->stats.tokens[(size_t)j * E + e] += s->chosen[e];
        uint64_t h = s->stats.signature ? s->stats.signature : FNV1A_INIT;
        h = fnv1a(h, &j, sizeof j);
        h = fnv1a(h, s->expert, (size_t)N * K * sizeof *s->expert);
        s->stats.signature = fnv1a(h, s->row, (size_t)N * K * sizeof *s->row);
    }
    /* the routed rows through their experts (blocks of one expert each);
     * while they travel, the shared experts' first product and SwiGLU and
     * this rank's own rows at its own experts */
    plan_blocks(m, c);
    int Rx = s->Rx;
    MPI_Request req;
    rows_to_experts(m, c, x, sc->moe_x, &req);
    if (Fs) {
        k->matmul_forward(d->prec, sh_fch, x, P[P_FCW], NULL, N, C, 2 * Fs);
        model_fwd_out(m, sh_fch, (size_t)N * 2 * Fs, l, OUT_FC, "experts' fc");
        k->swiglu_forward(d->prec, sh_act, sh_fch, (size_t)N, Fs);
        model_act_out(m, sh_act, (size_t)N * Fs, l, OUT_ACT, "experts' swiglu");
    }
    for (int own = 1; own >= 0; own--) {
        if (!own) rows_wait(m, c, &req);
        for (int b = 0; b < s->nblock; b++) {
            int r0 = s->block_row[b], n = s->block_n[b], e = s->block_expert[b];
            if (!n || own_block(m, b) != own) continue;
            k->matmul_forward(d->prec, fch + (size_t)r0 * 2 * Fe, block_rows(m, sc->moe_x, b, own),
                              expert_fc(m, P[P_EXPFCW], e), NULL, n, C, 2 * Fe);
            if (own) rows_progress(m, c, &req);
        }
    }
    model_fwd_out(m, fch, (size_t)Rx * 2 * Fe, l, OUT_FC, "experts' fc");
    k->swiglu_forward(d->prec, act, fch, (size_t)Rx, Fe);
    model_act_out(m, act, (size_t)Rx * Fe, l, OUT_ACT, "experts' swiglu");
    for (int b = 0; b < s->nblock; b++) {
        int r0 = s->block_row[b], n = s->block_n[b], e = s->block_expert[b];
        if (n) k->matmul_forward(d->prec, sc->moe_y + (size_t)r0 * C, act + (size_t)r0 * Fe,
                                 expert_proj(m, P[P_EXPPROJW], e), NULL, n, Fe, C);
    }
    model_fwd_out(m, sc->moe_y, (size_t)Rx * C, l, OUT_FCPROJ, "experts' fc projection");
    /* the outputs back; meanwhile the shared experts' output, gated; then
     * each token's choices in order */
    const float *y = rows_from_experts(m, c, sc->moe_y, sc->moe_send, C, &req);
    if (Fs) {
        k->matmul_forward(d->prec, out, sh_act, P[P_FCPROJW], NULL, N, Fs, C);
        model_fwd_out(m, out, (size_t)N * C, l, OUT_FCPROJ, "shared experts' fc projection");
        if (s->gate) {
            shared_gate(m, x, P[P_SHGATEW]);
            k->rows_gather(d->prec, out, out, NULL, sc->moe_gate, N, C);
        }
    }
    rows_wait(m, c, &req);
    k->rows_combine(d->prec, out, y, sc->moe_row, sc->moe_wslot, N, K, C, Fs > 0);
    model_fwd_out(m, out, (size_t)N * C, l, OUT_FCPROJ, "experts' output");
}

void moe_forward(struct model *m, struct comm *c, const struct layer_acts *la, const float *const *P, int j, int l,
                 float *out)
{
    forward_rows(m, c, la->ln2, m->N, P, la->fch, la->fch_gelu, out, l, m->moe->replay ? -1 : j);
}

void moe_forward_rows(struct model *m, struct comm *c, const float *x, int n, const float *const *P, float *fch,
                      float *act, float *out)
{
    forward_rows(m, c, x, n, P, fch, act, out, -1, -1);
}

/* --------------------------------------------------------------- backward */

/* A product's precision (device.h: its operands hold values of it): the
 * run's, or fp32 where one operand is scaled by the shared experts' gate
 * or the routing weights in fp32 (g dout, w dout). */
static enum precision gated_prec(const struct moe_state *s, enum precision p) { return s->gate ? PREC_FP32 : p; }

/* d(logits) of each token from d(weight) of its choices (s->dot) and the
 * auxiliary losses' gradients: aux and z are d(objective)/d(this layer's
 * aux_l and z_l). */
static void router_backward(struct model *m, double aux, double z)
{
    const struct model_dims *d = &m->d;
    struct moe_state *s = m->moe;
    int N = s->N, E = d->E, K = d->K;
    double *dp = s->work, *u = s->work + E;
    double Ng = s->Ng; /* (the micro-batch's tokens: over the cp ranks too) */
    for (int e = 0; e < E; e++) u[e] = aux * E * s->sums[e] / (Ng * Ng); /* d aux / d P-term */
    for (int t = 0; t < N; t++) {
        const float *p = s->probs + (size_t)t * E, *l = s->logits + (size_t)t * E, *w = s->weight + (size_t)t * K;
        const int32_t *x = s->expert + (size_t)t * K;
        const float *dw = s->dot + (size_t)t * K;
        float *dl = s->dlogits + (size_t)t * E;
        for (int e = 0; e < E; e++) dp[e] = 0;
        /* the weights: w_k = p_k, or p_k / S with S the sum of the k chosen */
        if (d->norm_topk) {
            double S = 0, wdw = 0;
            for (int i = 0; i < K; i++) S += p[x[i]], wdw += (double)w[i] * dw[i];
            for (int i = 0; i < K; i++) dp[x[i]] += (dw[i] - wdw) / S;
        } else
            for (int i = 0; i < K; i++) dp[x[i]] += dw[i];
        /* the load-balancing loss through P_i */
        if (d->sigmoid_router) {
            double Q = 0, ur = 0;
            for (int e = 0; e < E; e++) Q += p[e];
            for (int e = 0; e < E; e++) ur += u[e] * p[e] / Q;
            for (int e = 0; e < E; e++) dp[e] += (u[e] - ur) / Q;
            for (int e = 0; e < E; e++) dl[e] = (float)(dp[e] * p[e] * (1.0 - p[e]));
        } else {
            double pdp = 0;
            for (int e = 0; e < E; e++) dp[e] += u[e];
            for (int e = 0; e < E; e++) pdp += dp[e] * p[e];
            for (int e = 0; e < E; e++) dl[e] = (float)(p[e] * (dp[e] - pdp));
        }
        if (z != 0) { /* d (lse^2) / d l_e = 2 lse softmax(l)_e */
            double mx = l[0], sum = 0;
            for (int e = 1; e < E; e++) mx = l[e] > mx ? l[e] : mx;
            for (int e = 0; e < E; e++) sum += exp(l[e] - mx);
            double lse = mx + log(sum);
            for (int e = 0; e < E; e++) dl[e] += (float)(z * 2.0 / Ng * lse * exp(l[e] - mx) / sum);
        }
    }
}

void moe_backward(struct model *m, struct comm *c, const struct layer_acts *la, const float *const *P,
                  float *const *G, const float *dout, float *dln, float dloss, struct layer_wgrad *lw)
{
    const struct model_dims *d = &m->d;
    const struct device *k = m->k;
    struct scratch *sc = &m->scr;
    struct moe_state *s = m->moe;
    int N = m->N, C = d->C, E = d->E, K = d->K, Fs = d->F / d->tp, Fe = d->Fe / d->tp;
    int root = d->tp_rank == 0; /* adds what every tp rank computes alike (the router's share of d(ln2)) once */
    const float *sh_fch = la->fch, *fch = la->fch + (size_t)N * 2 * Fs;
    const float *sh_act = la->fch_gelu, *act = la->fch_gelu + (size_t)N * Fs;
    float *sh_dfch = lw ? lw->dfch : sc->dfch, *dfch = sh_dfch + (size_t)N * 2 * Fs; /* (B: kept for W) */
    float *sh_dact = sc->dfch_gelu, *dact = sc->dfch_gelu + (size_t)N * Fs;
    if (lw) k->copy(lw->dfcproj, dout, (size_t)N * C * sizeof(float));
    /* the forward's routing again: the same logits, so the same choices */
    s->N = N;
    s->replay = 1;
    router_logits(m, la->ln2, P[P_ROUTERW]);
    route(m);
    aux_sums(m, c);
    plan_blocks(m, c);
    if (s->gate) shared_gate(m, la->ln2, P[P_SHGATEW]);
    s->replay = 0;
    if (lw) { /* what W routes again by */
        k->copy(lw->moe_logits, sc->moe_logits, (size_t)N * E * sizeof(float));
        if (s->gate) k->copy(lw->moe_gate, sc->moe_gate, (size_t)N * sizeof(float));
    }
    int R = s->R;
    size_t gate_at = (size_t)N * model_moe_rows(d); /* d(gate) after the routed rows' d(weight)s in moe_dot */
    memset(s->dot, 0, ((size_t)N * K + N) * sizeof(float));

    /* the output gradients of the routed rows and their weights to the
     * experts; meanwhile the shared experts: d(act) = g dout W, and d(gate)
     * = <dout W, act> */
    int Rx = s->Rx;
    MPI_Request req[2];
    rows_to_experts(m, c, dout, sc->moe_x, &req[0]);
    if (d->ep > 1) exchange_start(m, c, sc->moe_wsend, sc->moe_wrow, 1, TO_EXPERTS, 1, &req[1]);
    if (Fs) {
        k->matmul_backward(d->prec, sh_dact, NULL, NULL, dout, sh_act, P[P_FCPROJW], N, Fs, C);
        const float *gdout = dout;
        if (s->gate) {
            k->rows_dot(d->prec, sc->moe_dot + gate_at, sh_dact, sh_act, N, Fs);
            k->rows_gather(d->prec, sh_dact, sh_dact, NULL, sc->moe_gate, N, Fs);
            k->rows_gather(d->prec, sc->moe_y, dout, NULL, sc->moe_gate, N, C);
            gdout = sc->moe_y;
        }
        model_bwd_out(m, sh_dact, (size_t)N * Fs);
        k->matmul_backward(gated_prec(s, d->prec), NULL, G[P_FCPROJW], NULL, gdout, sh_act, NULL, N, Fs, C);
        k->swiglu_backward(d->prec, sh_dfch, sh_fch, sh_dact, (size_t)N, Fs);
        model_act_bwd_out(m, sh_dfch, (size_t)N * 2 * Fs);
        k->matmul_backward(d->prec, dln, G[P_FCW], NULL, sh_dfch, la->ln2, P[P_FCW], N, C, 2 * Fs);
    }
    rows_wait(m, c, &req[0]);
    rows_wait(m, c, &req[1]);
    /* the rows' inputs again (W's: there), travelling while the routed rows
     * at their experts make d(act) = w dout W and d(weight) = <dout W, act> */
    if (!lw) rows_to_experts(m, c, la->ln2, sc->moe_y, &req[0]);
    for (int b = 0; b < s->nblock; b++) {
        int r0 = s->block_row[b], n = s->block_n[b], e = s->block_expert[b];
        if (!n) continue;
        k->matmul_backward(d->prec, dact + (size_t)r0 * Fe, NULL, NULL, sc->moe_x + (size_t)r0 * C,
                           act + (size_t)r0 * Fe, expert_proj(m, P[P_EXPPROJW], e), n, Fe, C);
        if (!lw) rows_progress(m, c, &req[0]);
    }
    k->rows_dot(d->prec, sc->moe_dot, dact, act, Rx, Fe); /* (by row; back at the routing rank below) */
    const float *dot = sc->moe_dot;
    if (d->ep > 1) {
        exchange(m, c, sc->moe_dot, sc->moe_dwl, 1, FROM_EXPERTS, 1);
        dot = sc->moe_dwl;
    }
    k->rows_gather(d->prec, dact, dact, NULL, sc->moe_wrow, Rx, Fe);
    model_bwd_out(m, dact, (size_t)Rx * Fe);
    k->rows_gather(d->prec, sc->moe_x, sc->moe_x, NULL, sc->moe_wrow, Rx, C);
    for (int b = 0; b < s->nblock; b++) { /* (w dout: fp32 values) */
        int r0 = s->block_row[b], n = s->block_n[b], e = s->block_expert[b];
        if (n) k->matmul_backward(PREC_FP32, NULL, (float *)expert_proj(m, G[P_EXPPROJW], e), NULL,
                                  sc->moe_x + (size_t)r0 * C, act + (size_t)r0 * Fe, NULL, n, Fe, C);
    }
    k->swiglu_backward(d->prec, dfch, fch, dact, (size_t)Rx, Fe);
    model_act_bwd_out(m, dfch, (size_t)Rx * 2 * Fe);
    if (!lw) rows_wait(m, c, &req[0]);
    for (int b = 0; b < s->nblock; b++) {
        int r0 = s->block_row[b], n = s->block_n[b], e = s->block_expert[b];
        if (n) k->matmul_backward(d->prec, sc->moe_x + (size_t)r0 * C, (float *)expert_fc(m, G[P_EXPFCW], e), NULL,
                                  dfch + (size_t)r0 * 2 * Fe, sc->moe_y + (size_t)r0 * C,
                                  expert_fc(m, P[P_EXPFCW], e), n, C, 2 * Fe);
    }
    const float *dx = rows_from_experts(m, c, sc->moe_x, sc->moe_send, C, &req[0]);
    rows_wait(m, c, &req[0]);
    k->rows_combine(d->prec, dln, dx, sc->moe_row, NULL, N, K, C, Fs > 0);
    model_bwd_out(m, dln, (size_t)N * C);

    /* d(weight) of each choice (by row above) and d(gate), summed over tp */
    float *rowdot = s->dlogits; /* (free until router_backward) */
    m->k->to_host(rowdot, dot, (size_t)R * sizeof(float));
    for (int i = 0; i < N * K; i++) s->dot[i] = s->row[i] >= 0 ? rowdot[s->row[i]] : 0.0f;
    if (s->gate) m->k->to_host(s->dot + (size_t)N * K, sc->moe_dot + gate_at, (size_t)N * sizeof(float));
    if (d->tp > 1) comm_allreduce_sum_host_f32(c, CG_TP, s->dot, (size_t)N * K + (size_t)N); /* (host memory) */

    /* the router: d(logits) (fp32), its weight's gradient, its share of d(ln2) */
    double per = (double)m->B * d->T * dloss / (d->L - d->Ld); /* d(objective) / d(aux_l) per unit coefficient
                                                                   (the mean over the MoE layers) */
    router_backward(m, d->aux_coef * per, d->z_coef * per);
    m->k->to_device(sc->moe_logits, s->dlogits, (size_t)N * E * sizeof(float));
    k->matmul_backward(PREC_FP32, sc->moe_y, G[P_ROUTERW], NULL, sc->moe_logits, la->ln2, P[P_ROUTERW], N, C, E);
    if (root) k->residual_forward(PREC_FP32, dln, dln, sc->moe_y, (size_t)N * C);
    if (lw) k->copy(lw->moe_dlogits, sc->moe_logits, (size_t)N * E * sizeof(float));
    if (s->gate) { /* d(gate logit) = d(gate) g (1 - g) */
        for (int t = 0; t < N; t++) {
            float g = s->gate[t];
            s->dlogits[t] = s->dot[(size_t)N * K + t] * g * (1.0f - g);
        }
        m->k->to_device(sc->moe_gate, s->dlogits, (size_t)N * sizeof(float));
        k->matmul_backward(PREC_FP32, sc->moe_y, G[P_SHGATEW], NULL, sc->moe_gate, la->ln2, P[P_SHGATEW], N, C, 1);
        if (root) k->residual_forward(PREC_FP32, dln, dln, sc->moe_y, (size_t)N * C);
        if (lw) k->copy(lw->moe_dgate, sc->moe_gate, (size_t)N * sizeof(float));
    }
}

void moe_weight(struct model *m, struct comm *c, const struct layer_acts *la, float *const *G,
                const struct layer_wgrad *lw)
{
    const struct model_dims *d = &m->d;
    const struct device *k = m->k;
    struct scratch *sc = &m->scr;
    struct moe_state *s = m->moe;
    int N = m->N, C = d->C, E = d->E, Fs = d->F / d->tp, Fe = d->Fe / d->tp;
    const float *sh_act = la->fch_gelu, *act = la->fch_gelu + (size_t)N * Fs, *dout = lw->dfcproj;
    const float *sh_dfch = lw->dfch, *dfch = lw->dfch + (size_t)N * 2 * Fs;
    /* B's routing again, from the logits it kept: the same choices, the same blocks */
    s->N = N;
    m->k->to_host(s->logits, lw->moe_logits, (size_t)N * E * sizeof(float));
    route(m);
    plan_blocks(m, c);
    /* the routed rows to their experts, the rows' inputs with them, and
     * their weights; meanwhile the shared experts: (g dout)^T act and
     * d(fc)^T ln2 */
    MPI_Request req[2];
    rows_to_experts(m, c, dout, sc->moe_x, &req[0]);
    if (d->ep > 1) exchange_start(m, c, sc->moe_wsend, sc->moe_wrow, 1, TO_EXPERTS, 1, &req[1]);
    if (Fs) {
        const float *gdout = dout;
        if (s->gate) {
            k->rows_gather(d->prec, sc->moe_y, dout, NULL, lw->moe_gate, N, C);
            gdout = sc->moe_y;
        }
        k->matmul_backward(gated_prec(s, d->prec), NULL, G[P_FCPROJW], NULL, gdout, sh_act, NULL, N, Fs, C);
        k->matmul_backward(d->prec, NULL, G[P_FCW], NULL, sh_dfch, la->ln2, NULL, N, C, 2 * Fs);
    }
    rows_wait(m, c, &req[0]);
    rows_wait(m, c, &req[1]);
    /* (w dout)^T act and d(fc)^T x, block by block, the inputs travelling during the first */
    rows_to_experts(m, c, la->ln2, sc->moe_y, &req[0]);
    k->rows_gather(d->prec, sc->moe_x, sc->moe_x, NULL, sc->moe_wrow, s->Rx, C);
    for (int b = 0; b < s->nblock; b++) { /* (w dout: fp32 values) */
        int r0 = s->block_row[b], n = s->block_n[b], e = s->block_expert[b];
        if (!n) continue;
        k->matmul_backward(PREC_FP32, NULL, (float *)expert_proj(m, G[P_EXPPROJW], e), NULL,
                           sc->moe_x + (size_t)r0 * C, act + (size_t)r0 * Fe, NULL, n, Fe, C);
        rows_progress(m, c, &req[0]);
    }
    rows_wait(m, c, &req[0]);
    for (int b = 0; b < s->nblock; b++) {
        int r0 = s->block_row[b], n = s->block_n[b], e = s->block_expert[b];
        if (n) k->matmul_backward(d->prec, NULL, (float *)expert_fc(m, G[P_EXPFCW], e), NULL,
                                  dfch + (size_t)r0 * 2 * Fe, sc->moe_y + (size_t)r0 * C, NULL, n, C, 2 * Fe);
    }
    /* the router and the gate: d(logits)^T ln2 */
    k->matmul_backward(PREC_FP32, NULL, G[P_ROUTERW], NULL, lw->moe_dlogits, la->ln2, NULL, N, C, E);
    if (s->gate) k->matmul_backward(PREC_FP32, NULL, G[P_SHGATEW], NULL, lw->moe_dgate, la->ln2, NULL, N, C, 1);
}
