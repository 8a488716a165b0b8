/* sample.c -- text from a checkpoint (sample.h). */
#include "sample.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "comm.h"
#include "log.h"
#include "model.h"
#include "moe.h"
#include "hf.h"
#include "tokenizer.h"
#include "rng.h"
#include "shape.h"
#include "topo.h"
#include "exit_status.h"

/* One token's activations and the cache of every layer's keys and values. */
struct sampler {
    struct config cfg; /* the checkpoint's stored deck */
    struct model m;
    struct comm c;
    float *x, *h, *qkv, *att, *part, *fc, *act, *logits_part, *logits;
    float *kcache, *vcache; /* (L, T, this rank's kv heads * HS) */
};

/* Local layer l's slice of a per-layer tensor, NULL where the family has none. */
static const float *layer_param(const struct model *m, enum param_id id, int l)
{
    return m->size[id] ? m->param[id] + (size_t)l * (m->size[id] / (size_t)m->d.Lp) : NULL;
}

static void norm(const struct model *m, float *out, const float *x, enum param_id w, enum param_id b, int l)
{
    float mean, rstd;
    const float *wp = param_table[w].per_layer ? layer_param(m, w, l) : m->param[w];
    if (m->d.llama) m->k->rmsnorm_forward(PREC_FP32, out, &rstd, x, wp, 1, m->d.C, m->d.eps);
    else
        m->k->layernorm_forward(PREC_FP32, out, &mean, &rstd, x, wp,
                                param_table[b].per_layer ? layer_param(m, b, l) : m->param[b], 1, m->d.C);
}

/* out (NH*HS) = softmax(q k^T / sqrt(HS)) v over positions 0..n-1, each query
 * head on its group's kv head. */
static void attend(float *out, const float *q, const float *K, const float *V, int n, int NH, int NKV, int HS)
{
    int KV = NKV * HS, G = NH / NKV;
    float *s = xmalloc((size_t)n * sizeof *s), scale = 1.0f / sqrtf((float)HS);
    for (int h = 0; h < NH; h++) {
        const float *qh = q + (size_t)h * HS;
        int g = h / G;
        float mx = -INFINITY;
        for (int j = 0; j < n; j++) {
            float dot = 0;
            for (int i = 0; i < HS; i++) dot += qh[i] * K[(size_t)j * KV + g * HS + i];
            s[j] = dot * scale;
            mx = s[j] > mx ? s[j] : mx;
        }
        double sum = 0;
        for (int j = 0; j < n; j++) sum += s[j] = expf(s[j] - mx);
        for (int i = 0; i < HS; i++) {
            double o = 0;
            for (int j = 0; j < n; j++) o += s[j] * V[(size_t)j * KV + g * HS + i];
            out[(size_t)h * HS + i] = (float)(o / sum);
        }
    }
    free(s);
}

/* The logits (Vp) after token tok at position pos, every rank. */
static void forward_token(struct sampler *S, int32_t tok, int pos)
{
    struct model *m = &S->m;
    const struct model_dims *d = &m->d;
    const struct device *k = m->k;
    int C = d->C, Cl = C / d->tp, HS = d->HS, NHl = model_q_heads(d), NKVl = model_kv_heads(d);
    int QKV = model_qkv_cols(d), FC = model_fc_cols(d), Fl = model_hidden_cols(d), Vs = d->Vp / d->tp;
    size_t KV = (size_t)NKVl * HS, half = (size_t)HS / 2;
    int root = d->tp_rank == 0, tp = d->tp > 1;
    const float *wpe = !d->llama && root ? m->param[P_WPE] + (size_t)pos * C : NULL;
    k->encoder_forward(PREC_FP32, S->x, &tok, m->param[P_WTE], wpe, 1, 1, C, d->tp_rank * Vs, Vs);
    if (tp) comm_allreduce_sum_f32(&S->c, CG_TP, S->x, (size_t)C);
    for (int l = 0; l < d->L; l++) {
        norm(m, S->h, S->x, P_LN1W, P_LN1B, l);
        k->matmul_forward(PREC_FP32, S->qkv, S->h, layer_param(m, P_QKVW, l), layer_param(m, P_QKVB, l), 1, C, QKV);
        if (d->llama)
            k->rope_forward(PREC_FP32, S->qkv, m->rope_cos + pos * half, m->rope_sin + pos * half, 1, 1, NHl, NKVl, HS);
        float *kc = S->kcache + (size_t)l * d->T * KV, *vc = S->vcache + (size_t)l * d->T * KV;
        memcpy(kc + pos * KV, S->qkv + (size_t)NHl * HS, KV * sizeof(float));
        memcpy(vc + pos * KV, S->qkv + (size_t)NHl * HS + KV, KV * sizeof(float));
        attend(S->att, S->qkv, kc, vc, pos + 1, NHl, NKVl, HS);
        k->matmul_forward(PREC_FP32, S->part, S->att, layer_param(m, P_ATTPROJW, l),
                          root ? layer_param(m, P_ATTPROJB, l) : NULL, 1, Cl, C);
        if (tp) comm_allreduce_sum_f32(&S->c, CG_TP, S->part, (size_t)C);
        k->residual_forward(PREC_FP32, S->x, S->x, S->part, (size_t)C);
        norm(m, S->h, S->x, P_LN2W, P_LN2B, l);
        if (d->E) { /* a mixture of experts: the token's row through the MLP of training */
            const float *W[NUM_PARAMS];
            for (int id = 0; id < NUM_PARAMS; id++)
                W[id] = param_table[id].per_layer ? layer_param(m, (enum param_id)id, l) : NULL;
            moe_forward_rows(m, &S->c, S->h, 1, W, S->fc, S->act, S->part);
        } else {
            k->matmul_forward(PREC_FP32, S->fc, S->h, layer_param(m, P_FCW, l), layer_param(m, P_FCB, l), 1, C, FC);
            if (d->llama) k->swiglu_forward(PREC_FP32, S->act, S->fc, 1, Fl);
            else k->gelu_forward(PREC_FP32, S->act, S->fc, (size_t)Fl);
            k->matmul_forward(PREC_FP32, S->part, S->act, layer_param(m, P_FCPROJW, l),
                              root ? layer_param(m, P_FCPROJB, l) : NULL, 1, Fl, C);
        }
        if (tp) comm_allreduce_sum_f32(&S->c, CG_TP, S->part, (size_t)C);
        k->residual_forward(PREC_FP32, S->x, S->x, S->part, (size_t)C);
    }
    norm(m, S->h, S->x, P_LNFW, P_LNFB, 0);
    k->matmul_forward(PREC_FP32, S->logits_part, S->h, m->param[d->tied ? P_WTE : P_LMHEAD], NULL, 1, C, Vs);
    if (tp) comm_allgather_f32(&S->c, CG_TP, S->logits, S->logits_part, (size_t)Vs);
    else memcpy(S->logits, S->logits_part, (size_t)Vs * sizeof(float));
}

struct cand {
    int id;
    double p;
};
static int by_prob(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    return x->p > y->p ? -1 : x->p < y->p ? 1 : x->id - y->id;
}

/* The next token from logits[0..V): greedy at temperature 0, else a draw
 * of u in [0, 1) among the top_k most likely whose mass is top_p. */
static int32_t pick(const float *logits, int V, const struct config *o, double u, struct cand *c)
{
    if (o->sample.temperature == 0) {
        int best = 0;
        for (int i = 1; i < V; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    for (int i = 0; i < V; i++) {
        c[i].id = i;
        c[i].p = exp((logits[i] - mx) / o->sample.temperature);
        sum += c[i].p;
    }
    qsort(c, (size_t)V, sizeof *c, by_prob);
    int n = o->sample.top_k > 0 && o->sample.top_k < V ? (int)o->sample.top_k : V;
    double mass = 0, keep = 0;
    int kept = 0;
    while (kept < n && (kept == 0 || mass < o->sample.top_p * sum)) mass += c[kept++].p;
    for (int i = 0; i < kept; i++) keep += c[i].p;
    double at = u * keep, acc = 0;
    for (int i = 0; i < kept; i++)
        if ((acc += c[i].p) > at) return c[i].id;
    return c[kept - 1].id;
}

/* The prompt's ids (rank 0): sample.prompt encoded by the tokenizer (after
 * its BOS, else its end-of-text, as triad tokenize puts one before every
 * document), or its bytes, or the ids of the file sample.prompt_tokens.
 * Returns their number, -1 with err. */
static int read_prompt(const struct config *o, const struct tokenizer *tok, int V, int32_t *ids, int cap, char *err,
                       size_t errlen)
{
    int n = 0;
    if (tok && !o->sample.prompt_tokens[0]) {
        int32_t doc = tok_bos(tok) >= 0 ? tok_bos(tok) : tok_eos(tok), *enc = xmalloc(256 * sizeof *enc);
        size_t k = 0, kcap = 256;
        if (doc >= 0) enc[k++] = doc;
        if (tok_encode(tok, o->sample.prompt, strlen(o->sample.prompt), 0, &enc, &k, &kcap, err, errlen) != 0)
            return free(enc), -1;
        if (k > (size_t)cap - 1) {
            free(enc);
            return snprintf(err, errlen, "the prompt is %zu tokens, more than the model's seq_len = %d", k, cap - 1), -1;
        }
        memcpy(ids, enc, k * sizeof *ids);
        free(enc);
        n = (int)k;
    } else if (o->sample.prompt_tokens[0]) {
        FILE *f = fopen(o->sample.prompt_tokens, "r");
        if (!f) return snprintf(err, errlen, "cannot open sample.prompt_tokens = '%s'", o->sample.prompt_tokens), -1;
        long long v, count = 0; /* every id is checked and counted; the first cap are kept */
        errno = 0;
        while (fscanf(f, "%lld", &v) == 1) {
            if (v < 0 || v >= V || errno == ERANGE) {
                fclose(f);
                return snprintf(err, errlen, "%s: token %lld (id number %lld) is not an id of this model's vocabulary "
                                "(0 .. %d)", o->sample.prompt_tokens, v, count + 1, V - 1), -1;
            }
            if (n < cap) ids[n++] = (int32_t)v;
            count++;
        }
        int junk = !feof(f);
        fclose(f);
        if (junk) return snprintf(err, errlen, "%s: not whitespace-separated integers (after %lld ids)",
                                  o->sample.prompt_tokens, count), -1;
        if (count > n)
            return snprintf(err, errlen, "%s holds %lld ids, more than the model's seq_len = %d positions",
                            o->sample.prompt_tokens, count, cap - 1), -1;
    } else {
        if (V != 256)
            return snprintf(err, errlen, "sample.prompt is bytes, but this model's vocabulary has %d ids, not a "
                            "byte-level model's 256: give the ids in a file, sample.prompt_tokens", V), -1;
        for (const char *p = o->sample.prompt; *p && n < cap; p++) ids[n++] = (unsigned char)*p;
    }
    if (n == 0) return snprintf(err, errlen, "the prompt is empty: set sample.prompt or sample.prompt_tokens"), -1;
    return n;
}

/* The output as it grows: with a tokenizer the text of ids[0..n) (special
 * tokens left out) past what is printed already, held back while it ends
 * in a character still incomplete (U+FFFD) unless final; without one the
 * bytes (a byte-level model) or the ids. */
struct stream {
    char *printed;
    size_t len;
    int n;     /* ids printed (without a tokenizer) */
    int bytes; /* a byte-level model: the ids are the bytes */
};

static void stream_text(struct stream *s, const struct tokenizer *tok, const int32_t *ids, int n, int final)
{
    if (!tok) {
        for (; s->n < n; s->n++) {
            if (s->bytes) putchar(ids[s->n]);
            else printf("%s%d", s->n ? " " : "", ids[s->n]);
        }
        return;
    }
    char *text, err[256];
    size_t len;
    if (tok_decode(tok, ids, (size_t)n, 1, &text, &len, err, sizeof err) != 0) return;
    int held = !final && len >= 3 && memcmp(text + len - 3, "\xEF\xBF\xBD", 3) == 0;
    if (!held && len >= s->len && (s->len == 0 || memcmp(text, s->printed, s->len) == 0)) {
        fwrite(text + s->len, 1, len - s->len, stdout);
        fflush(stdout);
        free(s->printed);
        s->printed = text, s->len = len;
        return;
    }
    free(text);
}

/* The model of the checkpoint, split over the launched ranks by tp. */
static int open_model(struct sampler *S, const char *ckpt, struct grid *g, char *err, size_t errlen)
{
    int world = g->world;
    struct config cfg;
    int rc = g->rank == 0 ? ckpt_read_config(ckpt, &cfg, err, errlen) : 0;
    if (mpi_agree_error(MPI_COMM_WORLD, rc != 0, err, errlen)) return -1;
    MPI_CHECK(MPI_Bcast(&cfg, (int)sizeof cfg, MPI_BYTE, 0, MPI_COMM_WORLD));
    S->cfg = cfg;
    struct deck_error de;
    const char *layout[] = {"train.precision=fp32", "train.recompute=none", "train.device=cpu", "parallel.pp=1",
                            "parallel.dp=1", "parallel.cp=1", "parallel.virtual_stages=1", "parallel.schedule=1f1b",
                            "parallel.sequence_parallel=.false.", "parallel.zero_stage=0", "train.micro_batch_size=0",
                            "parallel.ep=1"};
    for (size_t i = 0; i < sizeof layout / sizeof layout[0]; i++) config_override(&cfg, layout[i], &de);
    cfg.parallel.tp = world;
    cfg.train.batch_size = 1;
    struct run_shape s;
    run_shape_init(&s, &cfg, world, 0);
    int64_t F = s.fam.E ? s.fam.Fe : s.fam.F; /* (a mixture: the experts' width, and the shared experts') */
    if (cfg.model.n_head % world || s.fam.NKV % world || F % world || (s.fam.E && s.fam.Fs % world)) {
        snprintf(err, errlen, "%d ranks cannot split the model by tensor parallelism: n_head = %lld, n_kv_head = "
                 "%lld and the %s width %lld must all be multiples of the rank count", world,
                 (long long)cfg.model.n_head, (long long)s.fam.NKV, s.fam.E ? "experts'" : "MLP", (long long)F);
        return -1;
    }
    grid_init(g, world, 1, 1, 1, 1);
    struct model_dims d;
    model_dims_init(&d, &cfg, &s, g);
    model_init(&S->m, &d, &cpu_device, 1, (struct model_buffers){.slots = 1}, 0);
    comm_init(&S->c, g);
    return ckpt_load_model(ckpt, &S->m, g, err, errlen);
}

int sample_checkpoint(const char *ckpt, const struct config *o)
{
    struct sampler S;
    memset(&S, 0, sizeof S);
    struct grid g;
    memset(&g, 0, sizeof g);
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g.world));
    char err[1024];
    if (open_model(&S, ckpt, &g, err, sizeof err) != 0) {
        if (g.rank == 0) fprintf(stderr, "error: triad sample %s: %s\n", ckpt, err);
        return EXIT_ERROR;
    }
    const struct model_dims *d = &S.m.d;
    int T = d->T, V = d->V, cap = T + 1;
    int32_t *ids = xcalloc((size_t)cap, sizeof *ids);
    struct tokenizer *tok = NULL;
    int n = 0;
    /* sample.tokenizer, else the model's own (kept in the checkpoint, or named by its deck) */
    if (g.rank == 0 && o->sample.tokenizer[0] && strcmp(o->sample.tokenizer, "none") != 0) {
        tok = tok_open(o->sample.tokenizer, err, sizeof err);
        if (!tok) n = -1;
        else if (tok_vocab_size(tok) > V)
            n = -1, snprintf(err, sizeof err, "the tokenizer %s has %d ids, more than this model's vocabulary of %d",
                             o->sample.tokenizer, tok_vocab_size(tok), V);
    } else if (g.rank == 0 && !o->sample.tokenizer[0]) {
        tok = hf_model_tokenizer(&S.cfg, ckpt, V, err, sizeof err);
        if (!tok && err[0]) n = -1;
    }
    if (g.rank == 0 && n == 0) n = read_prompt(o, tok, V, ids, cap, err, sizeof err);
    /* generation stops at the end of a document: the tokenizer's end-of-text, or the id put before each */
    int32_t stop[2] = {tok ? tok_eos(tok) : -1, tok ? (tok_bos(tok) >= 0 ? tok_bos(tok) : tok_eos(tok)) : -1};
    MPI_CHECK(MPI_Bcast(stop, 2, MPI_INT32_T, 0, MPI_COMM_WORLD));
    if (n > 0 && n + o->sample.max_new_tokens > T) {
        snprintf(err, sizeof err, "the prompt (%d tokens) and max_new_tokens = %lld exceed the model's seq_len = %d",
                 n, (long long)o->sample.max_new_tokens, T);
        n = -1;
    }
    if (mpi_agree_error(MPI_COMM_WORLD, n < 0, err, sizeof err)) {
        if (g.rank == 0) fprintf(stderr, "error: triad sample %s: %s\n", ckpt, err);
        tok_close(tok);
        return EXIT_ERROR;
    }
    MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Bcast(ids, n, MPI_INT32_T, 0, MPI_COMM_WORLD));
    size_t C = (size_t)d->C, KV = (size_t)model_kv_heads(d) * d->HS;
    S.x = xmalloc(C * sizeof(float)), S.h = xmalloc(C * sizeof(float)), S.part = xmalloc(C * sizeof(float));
    S.qkv = xmalloc((size_t)model_qkv_cols(d) * sizeof(float));
    S.att = xmalloc((size_t)model_q_heads(d) * d->HS * sizeof(float));
    S.fc = xmalloc((size_t)model_fc_cols(d) * sizeof(float));
    S.act = xmalloc((size_t)model_hidden_cols(d) * sizeof(float));
    S.logits_part = xmalloc((size_t)(d->Vp / d->tp) * sizeof(float));
    S.logits = xmalloc((size_t)d->Vp * sizeof(float));
    S.kcache = xmalloc((size_t)d->L * T * KV * sizeof(float));
    S.vcache = xmalloc((size_t)d->L * T * KV * sizeof(float));
    struct cand *cand = xmalloc((size_t)V * sizeof *cand);
    uint64_t stream = rng_stream_id("sample");
    int total = n + (int)o->sample.max_new_tokens;
    struct stream out = {.bytes = V == 256};
    if (g.rank == 0) stream_text(&out, tok, ids, n, 0);
    double t0 = wtime();
    for (int pos = 0; pos < total - 1; pos++) { /* the prompt fills the cache; each later logit gives a token */
        forward_token(&S, ids[pos], pos);
        if (pos + 1 >= n) {
            ids[pos + 1] = pick(S.logits, V, o, rng_uniform((uint64_t)o->sample.seed, stream, (uint64_t)pos), cand);
            if (ids[pos + 1] == stop[0] || ids[pos + 1] == stop[1]) { /* (every rank picks the same) */
                total = pos + 1;
                break;
            }
            if (g.rank == 0) stream_text(&out, tok, ids, pos + 2, 0);
        }
    }
    double dt = wtime() - t0;
    if (g.rank == 0) {
        stream_text(&out, tok, ids, total, 1);
        putchar('\n');
        fflush(stdout);
        fprintf(stderr, "triad sample: %d prompt and %lld new tokens on %d rank%s (tp %d) in %.2f s (%.1f tokens/s)\n",
                n, (long long)o->sample.max_new_tokens, g.world, g.world > 1 ? "s" : "", d->tp, dt,
                (total - 1) / (dt > 0 ? dt : 1));
    }
    free(out.printed);
    tok_close(tok);
    free(cand), free(ids), free(S.x), free(S.h), free(S.part), free(S.qkv), free(S.att), free(S.fc), free(S.act);
    free(S.logits_part), free(S.logits), free(S.kcache), free(S.vcache);
    comm_free(&S.c);
    model_free(&S.m);
    grid_free(&g);
    return EXIT_DONE;
}
