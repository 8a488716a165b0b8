/* sample.c -- `triad sample`: text from a checkpoint (sample.h). */
#include "sample.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "exit_status.h"
#include "hf.h"
#include "log.h"
#include "sample_gen.h"
#include "sample_text.h"
#include "tokenizer.h"

/* sample.tokenizer, else the model's own (kept in the checkpoint, or named
 * by its deck), else none (*tok NULL).  0, or -1 with err.  Rank 0. */
static int open_tokenizer(const struct config *o, const struct config *cfg, const char *ckpt, int V,
                          struct tokenizer **tok, char *err, size_t errlen)
{
    *tok = NULL;
    err[0] = '\0';
    if (!o->sample.tokenizer[0]) {
        *tok = hf_model_tokenizer(cfg, ckpt, V, err, errlen);
        return !*tok && err[0] ? -1 : 0;
    }
    if (!strcmp(o->sample.tokenizer, "none")) return 0;
    if (!(*tok = tok_open(o->sample.tokenizer, err, errlen))) return -1;
    if (tok_vocab_size(*tok) <= V) return 0;
    errorf(err, errlen, "the tokenizer %s has %d ids, more than this model's vocabulary of %d", o->sample.tokenizer,
           tok_vocab_size(*tok), V);
    tok_close(*tok);
    *tok = NULL;
    return -1;
}

/* The ids a draw may give (V bytes, 1 each): with a tokenizer those it
 * decodes, without one where the text is bytes (`bytes`) the 256 bytes.
 * A model's vocabulary may be padded past its tokenizer's ids (GPT-2's
 * 50,304 for 50,257; a text model's 512 for 256), and a vocabulary may
 * leave gaps among its ids.  NULL where every id of V is drawable (ids
 * out, or a tokenizer that decodes all V): the draw is then over the whole
 * vocabulary, exactly as without a tokenizer.  *left_out: the ids never
 * drawn.  Rank 0. */
static unsigned char *drawable_ids(const struct tokenizer *tok, int bytes, int V, int *left_out)
{
    *left_out = 0;
    if (!tok && (!bytes || V <= 256)) return NULL;
    unsigned char *ok = xmalloc((size_t)V);
    for (int i = 0; i < V; i++) *left_out += !(ok[i] = (unsigned char)(tok ? tok_has_id(tok, i) : i < 256));
    if (*left_out == 0) free(ok), ok = NULL;
    return ok;
}

/* Rank 0 says once which ids are never drawn. */
static void say_drawable(const struct tokenizer *tok, int V, int left_out)
{
    if (!tok) {
        fprintf(stderr, "triad sample: this model's text is its bytes: the %d padded id%s 256 .. %d %s never drawn\n",
                left_out, left_out == 1 ? "" : "s", V - 1, left_out == 1 ? "is" : "are");
        return;
    }
    int n = tok_vocab_size(tok), gaps = left_out - (V - n);
    if (V == n + 1)
        fprintf(stderr, "triad sample: the model's vocabulary has %d ids, its tokenizer %d: the padded id %d is never "
                "drawn\n", V, n, n);
    else if (V > n)
        fprintf(stderr, "triad sample: the model's vocabulary has %d ids, its tokenizer %d: the %d padded ids %d .. %d "
                "are never drawn\n", V, n, V - n, n, V - 1);
    if (gaps > 0) {
        int first = 0;
        while (tok_has_id(tok, first)) first++;
        fprintf(stderr, "triad sample: the tokenizer has no token for %d id%s below %d (the first: %d): never drawn\n",
                gaps, gaps == 1 ? "" : "s", n, first);
    }
}

/* The ids that end a document (rank 0): the tokenizer's end-of-text and
 * the id put before each document, those of generation_config.json's
 * eos_token_id (gen), then those of sample.stop_ids (each an id of the
 * vocabulary).  Into stop[] (*n of them); 0, or -1 with err naming the
 * word. */
static int stop_ids(const struct config *o, const struct tokenizer *tok, const struct hf_generation *gen, int V,
                    int32_t **stop, int *n, char *err, size_t errlen)
{
    const char *list = o->sample.stop_ids;
    /* (a word of the list and its separator: 2 bytes or more) */
    *stop = xmalloc((strlen(list) / 2 + 3 + (size_t)gen->n) * sizeof **stop);
    *n = 0;
    int32_t doc = tok_doc(tok);
    if (tok && tok_eos(tok) >= 0) (*stop)[(*n)++] = tok_eos(tok);
    if (doc >= 0 && doc != tok_eos(tok)) (*stop)[(*n)++] = doc; /* (doc >= 0: there is a tokenizer) */
    for (int i = 0; i < gen->n; i++) (*stop)[(*n)++] = gen->ids[i];
    for (const char *p = list + strspn(list, " ,\t"); *p; p += strspn(p, " ,\t")) {
        size_t len = strcspn(p, " ,\t");
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end != p + len || errno || v < 0 || v >= V)
            return errorf(err, errlen, "sample.stop_ids = '%s': '%.*s' is not an id of this model's vocabulary "
                          "(0 .. %d)\n  hint: give the ids that end a document, e.g. sample.stop_ids = '128001, 128009'",
                          list, (int)len, p, V - 1);
        (*stop)[(*n)++] = (int32_t)v;
        p += len;
    }
    return 0;
}

/* The sampling defaults of generation_config.json (gen) for the keys not
 * given on the command line (set: SAMPLE_SET_*), into o, said on stderr
 * (rank 0), as vLLM takes a model's defaults. */
static void generation_defaults(struct config *o, const struct hf_generation *gen, int set)
{
    char took[256] = "";
    size_t at = 0;
    if (gen->temperature >= 0 && !(set & SAMPLE_SET_TEMPERATURE)) {
        o->sample.temperature = gen->temperature;
        at += (size_t)snprintf(took + at, sizeof took - at, "temperature %g", gen->temperature);
    }
    if (gen->top_k >= 0 && !(set & SAMPLE_SET_TOP_K)) {
        o->sample.top_k = gen->top_k;
        at += (size_t)snprintf(took + at, sizeof took - at, "%stop_k %lld", at ? ", " : "", gen->top_k);
    }
    if (gen->top_p >= 0 && !(set & SAMPLE_SET_TOP_P)) {
        o->sample.top_p = gen->top_p;
        at += (size_t)snprintf(took + at, sizeof took - at, "%stop_p %g", at ? ", " : "", gen->top_p);
    }
    if (at)
        fprintf(stderr, "triad sample: %s from generation_config.json (%s); sample.temperature, sample.top_k and "
                "sample.top_p given on the command line win\n", took, gen->whose);
}

/* Replica d's prompts are [share_first(d), share_first(d + 1)) of n. */
static int share_first(int d, int n, int dp) { return (int)(((long long)d * n + dp - 1) / dp); }

/* Rank 0 collects every replica's outputs (ids of prompt i at all + i T,
 * their number in len[i]) from the first rank of each (tp and pp rank 0,
 * whose dp_comm this is).  Collective over those ranks. */
static void gather_outputs(const struct grid *g, int n, int T, const int32_t *mine, const int *mlen, int32_t *all,
                           int *len)
{
    int dp = g->dp, f0 = share_first(g->dp_rank, n, dp), f1 = share_first(g->dp_rank + 1, n, dp), sent = 0;
    int *counts = xmalloc(2 * (size_t)dp * sizeof *counts), *displs = counts + dp;
    for (int d = 0; d < dp; d++) counts[d] = share_first(d + 1, n, dp) - (displs[d] = share_first(d, n, dp));
    MPI_CHECK(MPI_Gatherv(mlen, f1 - f0, MPI_INT, len, counts, displs, MPI_INT, 0, g->dp_comm));
    int32_t *packed = xmalloc(((size_t)(f1 - f0) * T + 1) * sizeof *packed);
    for (int i = 0; i < f1 - f0; i++) {
        memcpy(packed + sent, mine + (size_t)i * T, (size_t)mlen[i] * sizeof *packed);
        sent += mlen[i];
    }
    int32_t *recv = g->dp_rank == 0 ? xmalloc(((size_t)n * T + 1) * sizeof *recv) : NULL;
    if (g->dp_rank == 0)
        for (int d = 0, at = 0; d < dp; d++) {
            int ids = 0;
            for (int i = displs[d]; i < displs[d] + counts[d]; i++) ids += len[i];
            counts[d] = ids, displs[d] = at, at += ids;
        }
    MPI_CHECK(MPI_Gatherv(packed, sent, MPI_INT32_T, recv, counts, displs, MPI_INT32_T, 0, g->dp_comm));
    for (int i = 0, at = 0; g->dp_rank == 0 && i < n; at += len[i++])
        memcpy(all + (size_t)i * T, recv + at, (size_t)len[i] * sizeof *all);
    free(recv), free(packed), free(counts);
}

struct live {
    struct stream s;
    const struct tokenizer *tok;
    int failed;    /* the text could not be decoded: err says why, nothing more is shown */
    char err[512];
};
static void show(void *ctx, const int32_t *ids, int n)
{
    struct live *l = ctx;
    if (!l->failed) l->failed = stream_text(&l->s, l->tok, ids, n, 0, l->err, sizeof l->err) != 0;
}

/* Rank 0 prints each prompt's text in prompt order (the one streamed
 * completes), until one cannot be decoded or stdout takes no more: 0, or
 * -1 with err naming it. */
static int print_outputs(struct live *live, int streaming, const struct tokenizer *tok, int bytes, int T, int n,
                         const int32_t *all, const int *len, char *err, size_t errlen)
{
    for (int i = 0; i < n; i++) {
        struct stream s = {.bytes = bytes};
        char why[512];
        int bad = streaming && live->failed;
        if (bad) snprintf(why, sizeof why, "%s", live->err);
        else bad = stream_text(streaming ? &live->s : &s, tok, all + (size_t)i * T, len[i], 1, why, sizeof why) != 0;
        stream_free(&s);
        if (ferror(stdout)) /* (the text's or the one streamed) */
            return errorf(err, errlen, "the text could not all be written to stdout (%s): the output holds %d of the "
                          "%d prompts' texts at most", errno ? strerror(errno) : "a write failed", i, n);
        if (bad) {
            if (streaming) putchar('\n'); /* (ends the text streamed so far) */
            return errorf(err, errlen, "the output of prompt %d cannot be decoded: %s\n  hint: sample.tokenizer = "
                          "'none' prints the ids instead of text", i + 1, why);
        }
        putchar('\n');
    }
    return 0;
}

/* The prefill and decode rates over every replica: positions (tokens) and the slowest rank's time. */
static void print_rates(const struct gen *G, int prompts)
{
    const struct grid *g = G->g;
    int first = g->tp_rank == 0 && g->pp_rank == 0; /* (each replica's tokens counted once) */
    double t[2] = {G->st.prefill_s, G->st.decode_s}, n[2] = {first ? (double)G->st.prefill_tokens : 0,
                                                             first ? (double)G->st.decode_tokens : 0};
    MPI_CHECK(MPI_Reduce(g->rank ? t : MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, 0, g->world_comm));
    MPI_CHECK(MPI_Reduce(g->rank ? n : MPI_IN_PLACE, n, 2, MPI_DOUBLE, MPI_SUM, 0, g->world_comm));
    if (g->rank) return;
    fprintf(stderr, "triad sample: %d prompt%s on tp %d x pp %d x dp %d (%s), batches of up to %d: prefill %.0f tokens "
            "in %.3f s (%.1f tokens/s), decode %.0f tokens in %.3f s (%.1f tokens/s)\n", prompts, prompts > 1 ? "s" : "",
            g->tp, g->pp, g->dp, G->m.k->name, G->S, n[0], t[0], n[0] / (t[0] > 0 ? t[0] : 1), n[1], t[1],
            n[1] / (t[1] > 0 ? t[1] : 1));
}

static int failed(int rank, const char *ckpt, const char *err)
{
    if (rank == 0) fprintf(stderr, "error: triad sample %s: %s\n", ckpt, err);
    return EXIT_ERROR;
}

int sample_checkpoint(const char *ckpt, const struct config *opts, int set)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    char err[2048] = "";
    struct config cfg;
    if (gen_read_config(ckpt, &cfg, err, sizeof err) != 0) return failed(rank, ckpt, err);
    int V = (int)cfg.model.vocab_size, T = (int)cfg.model.seq_len, bytes = data_text_is_bytes(&cfg);
    struct tokenizer *tok = NULL;
    struct prompts P;
    memset(&P, 0, sizeof P);
    int32_t *stop = NULL;
    int nstop = 0;
    struct config *o = xmalloc(sizeof *o); /* the options, with generation_config.json's sampling defaults */
    *o = *opts;
    struct hf_generation *gen = xmalloc(sizeof *gen); /* (none where there is no tokenizer to look beside) */
    int bad = rank == 0 && (open_tokenizer(o, &cfg, ckpt, V, &tok, err, sizeof err) != 0 ||
                            hf_generation(tok ? o->sample.tokenizer : "none", &cfg, ckpt, V, gen, err, sizeof err) ||
                            stop_ids(o, tok, gen, V, &stop, &nstop, err, sizeof err) != 0 ||
                            prompts_read(&P, o, tok, V, bytes, T, err, sizeof err) != 0);
    if (!bad && rank == 0) generation_defaults(o, gen, set);
    free(gen);
    if (mpi_agree_error(MPI_COMM_WORLD, bad, err, sizeof err)) {
        free(stop), free(o);
        tok_close(tok);
        return failed(rank, ckpt, err);
    }
    MPI_CHECK(MPI_Bcast(o, (int)sizeof *o, MPI_BYTE, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Bcast(&nstop, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank != 0) stop = xmalloc(((size_t)nstop + 1) * sizeof *stop);
    MPI_CHECK(MPI_Bcast(stop, nstop, MPI_INT32_T, 0, MPI_COMM_WORLD));
    int left_out = 0;
    unsigned char *drawable = rank == 0 ? drawable_ids(tok, bytes, V, &left_out) : NULL;
    MPI_CHECK(MPI_Bcast(&left_out, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (left_out == V) { /* (a tokenizer with no token at all among the model's ids) */
        snprintf(err, sizeof err, "the tokenizer decodes none of this model's %d ids: nothing can be drawn", V);
        free(drawable), free(stop), free(o);
        tok_close(tok);
        prompts_free(&P);
        return failed(rank, ckpt, err);
    }
    if (left_out > 0 && rank != 0) drawable = xmalloc((size_t)V);
    if (left_out > 0) MPI_CHECK(MPI_Bcast(drawable, V, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD));
    if (rank == 0 && left_out > 0) say_drawable(tok, V, left_out);
    prompts_bcast(&P, MPI_COMM_WORLD);
    /* a document ends at the tokenizer's end-of-text, at the id put before each, or at one of sample.stop_ids */
    struct gen_opts go = {.max_new = (int)o->sample.max_new_tokens, .temperature = o->sample.temperature,
                          .top_k = o->sample.top_k, .top_p = o->sample.top_p, .seed = (uint64_t)o->sample.seed,
                          .stop = stop, .nstop = nstop, .drawable = drawable};
    struct grid g;
    memset(&g, 0, sizeof g);
    struct gen G;
    if (gen_open(&G, ckpt, &cfg, o, &g, P.n, err, sizeof err) != 0) {
        free(drawable), free(stop), free(o);
        tok_close(tok);
        prompts_free(&P);
        return failed(rank, ckpt, err);
    }
    /* this replica's prompts in batches of G.S; one prompt is shown as it grows */
    int f0 = share_first(g.dp_rank, P.n, g.dp), f1 = share_first(g.dp_rank + 1, P.n, g.dp);
    int32_t *mine = xmalloc(((size_t)(f1 - f0) * T + 1) * sizeof *mine);
    int *mlen = xmalloc(((size_t)(f1 - f0) + 1) * sizeof *mlen);
    struct live live = {.s = {.bytes = bytes}, .tok = tok};
    int streaming = rank == 0 && P.n == 1;
    if (streaming) live.failed = stream_text(&live.s, tok, P.ids, P.len[0], 0, live.err, sizeof live.err) != 0;
    for (int b = f0; b < f1; b += G.S)
        gen_batch(&G, &go, &P, b, f1 - b < G.S ? f1 - b : G.S, mine + (size_t)(b - f0) * T, mlen + (b - f0),
                  streaming && b == 0 ? show : NULL, &live);
    int32_t *all = rank == 0 ? xmalloc((size_t)P.n * T * sizeof *all) : NULL;
    int *len = rank == 0 ? xmalloc((size_t)P.n * sizeof *len) : NULL;
    if (g.tp_rank == 0 && g.pp_rank == 0) gather_outputs(&g, P.n, T, mine, mlen, all, len);
    int bad_text = rank == 0 && print_outputs(&live, streaming, tok, bytes, T, P.n, all, len, err, sizeof err) != 0;
    fflush(stdout);
    print_rates(&G, P.n);
    MPI_CHECK(MPI_Bcast(&bad_text, 1, MPI_INT, 0, MPI_COMM_WORLD)); /* (every rank's status says it) */
    stream_free(&live.s);
    free(all), free(len), free(mine), free(mlen), free(drawable), free(stop);
    tok_close(tok);
    prompts_free(&P);
    gen_close(&G);
    grid_free(&g);
    free(o);
    return bad_text ? failed(rank, ckpt, err) : EXIT_DONE;
}
