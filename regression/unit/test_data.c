/* test_data.c -- data sources and the global-batch order (src/data/data.c). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data.h"
#include "tap.h"
#include "tokenizer.h"

static char tmpdir[256];
static char created[64][400];
static int ncreated;

/* A config holding only the &data keys (config.c is not linked): the kind's
 * enum and its word, as the deck reader sets them. */
#define WORD_OF(P, word) #word,
static struct config cfg_of(enum data_kind kind, const char *path, int64_t seed, int shuffle)
{
    static const char *const words[] = {DATA_KIND(WORD_OF, ~)};
    static struct config c;
    memset(&c, 0, sizeof c);
    c.data.kind_id = kind;
    snprintf(c.data.kind, sizeof c.data.kind, "%s", words[kind]);
    snprintf(c.data.path, sizeof c.data.path, "%s", path);
    c.data.seed = seed;
    c.data.shuffle = shuffle;
    return c;
}

static const char *tpath(const char *name)
{
    static char buf[4][400];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void track(const char *path)
{
    for (int k = 0; k < ncreated; k++)
        if (!strcmp(created[k], path)) return;
    if (ncreated < 64) snprintf(created[ncreated++], sizeof created[0], "%s", path);
}

static void write_bytes(const char *name, const void *p, size_t n)
{
    const char *path = tpath(name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        printf("Bail out! cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
    track(path);
}

/* An llm.c shard; hdr_n < 0 writes the true count, extra < 0 drops tokens. */
static void write_shard_ex(const char *name, const uint16_t *tok, int n, int32_t magic,
                           int32_t version, int32_t hdr_n, int extra)
{
    size_t bytes = 1024 + 2 * (size_t)n + (extra > 0 ? (size_t)extra : 0);
    if (extra < 0) bytes -= (size_t)(-extra) * 2;
    unsigned char *buf = calloc(1, 1024 + 2 * (size_t)n + 16);
    int32_t hdr[3] = {magic, version, hdr_n < 0 ? n : hdr_n};
    memcpy(buf, hdr, sizeof hdr);
    for (int k = 0; k < n; k++) {
        buf[1024 + 2 * k] = (unsigned char)(tok[k] & 0xff);
        buf[1024 + 2 * k + 1] = (unsigned char)(tok[k] >> 8);
    }
    write_bytes(name, buf, bytes);
    free(buf);
}

static void write_shard(const char *name, const uint16_t *tok, int n)
{
    write_shard_ex(name, tok, n, 20240520, 1, -1, 0);
}

/* Open expecting failure; does err.what contain both needles (and the hint h)? */
static int fails_with(struct config cfg, int V, int T, const char *w1, const char *w2,
                      const char *h)
{
    struct deck_error err;
    memset(&err, 0, sizeof err);
    struct data_source *ds = data_open(&cfg, V, T, &err);
    if (ds) {
        data_close(ds);
        tap_diag("opened, expected an error containing '%s'", w1);
        return 0;
    }
    int ok = strstr(err.what, w1) && (!w2 || strstr(err.what, w2)) && (!h || strstr(err.hint, h));
    if (!ok) tap_diag("what: %s | hint: %s | file: %s", err.what, err.hint, err.file);
    return ok;
}

static struct data_source *must_open(struct config cfg, int V, int T)
{
    struct deck_error err;
    struct data_source *ds = data_open(&cfg, V, T, &err);
    if (!ds) {
        printf("Bail out! data_open: %s (%s): %s\n", err.what, err.file, err.hint);
        exit(1);
    }
    return ds;
}

/* ---------------------------------------------------------------- */

static void test_first_sample(void)
{
    tap_ok(data_first_sample(3 * 8, 8, 2, 1, 2, 1) == 3 * 8 + 4 + 2 &&
               data_first_sample(0, 8, 1, 0, 8, 0) == 0 &&
               data_first_sample(5 * 16, 16, 4, 3, 2, 1) == 80 + 12 + 2 &&
               data_first_sample(44, 16, 4, 3, 2, 1) == 44 + 12 + 2,
           "data_first_sample = start + rank*(G/dp) + mb*mbs");
}

/* dp x micro-batches reproduce the dp=1 global batch, in order. */
static void test_decomposition(const struct data_source *ds, int T, const char *name)
{
    enum { G = 8, STEPS = 3 };
    static const int cases[][2] = {{2, 2}, {2, 4}, {4, 1}, {4, 2}, {8, 1}}; /* dp, mbs */
    int32_t ref_in[G * 64], ref_tg[G * 64], in[G * 64], tg[G * 64];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int dp = cases[c][0], mbs = cases[c][1], nmb = G / (dp * mbs), same = 1;
        for (int64_t step = 0; step < STEPS; step++) {
            data_batch(ds, data_first_sample((uint64_t)step * G, G, 1, 0, G, 0), G, ref_in, ref_tg);
            int row = 0;
            for (int r = 0; r < dp; r++)
                for (int mb = 0; mb < nmb; mb++, row += mbs)
                    data_batch(ds, data_first_sample((uint64_t)step * G, G, dp, r, mbs, mb), mbs,
                               in + (size_t)row * T, tg + (size_t)row * T);
            same &= !memcmp(in, ref_in, sizeof(int32_t) * G * T) &&
                    !memcmp(tg, ref_tg, sizeof(int32_t) * G * T);
        }
        tap_ok(same, "%s: G=8 as dp=%d x %d micro-batches of %d = dp=1 batch, 3 steps", name, dp,
               nmb, mbs);
    }
}

/* data_batch rows are data_sample shifted by one. */
static int batch_matches_samples(const struct data_source *ds, uint64_t first, int n, int T)
{
    int32_t *in = malloc(sizeof(int32_t) * n * T), *tg = malloc(sizeof(int32_t) * n * T);
    int32_t *seq = malloc(sizeof(int32_t) * (T + 1));
    int ok = 1;
    data_batch(ds, first, n, in, tg);
    for (int j = 0; j < n; j++) {
        data_sample(ds, first + j, seq);
        ok &= !memcmp(in + (size_t)j * T, seq, sizeof(int32_t) * T) &&
              !memcmp(tg + (size_t)j * T, seq + 1, sizeof(int32_t) * T);
    }
    free(in);
    free(tg);
    free(seq);
    return ok;
}

/* ---- synthetic ---- */

static void test_synthetic_range(void)
{
    static const int Vs[] = {2, 8, 256, 50257}, Ts[] = {1, 2, 7, 8, 64, 1024};
    int32_t *seq = malloc(sizeof(int32_t) * 1025);
    for (int v = 0; v < 4; v++) {
        int ok = 1;
        for (int t = 0; t < 6; t++) {
            struct data_source *ds = must_open(cfg_of(DATA_KIND_synthetic, "", 1234, 0), Vs[v], Ts[t]);
            for (uint64_t i = 0; i < 40; i++) {
                data_sample(ds, i * 1000003ULL + (i == 39 ? 1ULL << 62 : 0), seq);
                for (int k = 0; k <= Ts[t]; k++) ok &= seq[k] >= 0 && seq[k] < Vs[v];
            }
            ok &= data_windows(ds) == 0;
            data_close(ds);
        }
        tap_ok(ok, "synthetic V=%d: every token in [0, V) for T in {1,2,7,8,64,1024}", Vs[v]);
    }
    free(seq);
}

static void test_synthetic_determinism(void)
{
    enum { T = 64 };
    struct data_source *a = must_open(cfg_of(DATA_KIND_synthetic, "", 7, 0), 256, T);
    struct data_source *b = must_open(cfg_of(DATA_KIND_synthetic, "", 7, 0), 256, T);
    struct data_source *c = must_open(cfg_of(DATA_KIND_synthetic, "", 8, 0), 256, T);
    int32_t x[T + 1], y[T + 1], z[T + 1];
    int same = 1, twice = 1, differ = 0, distinct = 0;
    for (uint64_t i = 0; i < 200; i++) {
        data_sample(a, i, x);
        data_sample(b, i, y);
        data_sample(c, i, z);
        same &= !memcmp(x, y, sizeof x);
        differ += !!memcmp(x, z, sizeof x);
        data_sample(a, i, y);
        twice &= !memcmp(x, y, sizeof x);
        data_sample(a, i + 1, y);
        distinct += !!memcmp(x, y, sizeof x);
    }
    tap_ok(twice, "synthetic: the same sample twice is identical");
    tap_ok(same, "synthetic: two independently opened sources agree");
    tap_ok(differ == 200, "synthetic: another seed gives other sequences (%d/200 differ)", differ);
    tap_ok(distinct == 200, "synthetic: consecutive samples differ (%d/200)", distinct);
    tap_ok(batch_matches_samples(a, 12345, 9, T), "synthetic: data_batch = data_sample shifted");
    test_decomposition(a, T, "synthetic");
    data_close(a);
    data_close(b);
    data_close(c);
}

/* Active tokens: at most 128 distinct, spread over the vocabulary. */
static void test_synthetic_alphabet(void)
{
    enum { V = 50257, T = 256 };
    struct data_source *ds = must_open(cfg_of(DATA_KIND_synthetic, "", 1234, 0), V, T);
    static unsigned char seen[V];
    int32_t seq[T + 1];
    int distinct = 0, high = 0;
    for (uint64_t i = 0; i < 400; i++) {
        data_sample(ds, i, seq);
        for (int k = 0; k <= T; k++) {
            distinct += !seen[seq[k]];
            high += !seen[seq[k]] && seq[k] >= V / 2;
            seen[seq[k]] = 1;
        }
    }
    tap_ok(distinct > 100 && distinct <= 128 && high > 20,
           "synthetic V=50257: %d distinct tokens (<= 128), %d in the upper half", distinct, high);
    tap_diag("%s", data_describe(ds));
    data_close(ds);
}

/* Longest span of x[0..n) that occurs again later without overlap. */
static int longest_repeat(const int32_t *x, int n)
{
    int best = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            int L = 0;
            while (j + L < n && i + L < j && x[i + L] == x[j + L]) L++;
            if (L > best) best = L;
        }
    return best;
}

static void test_synthetic_learnable(void)
{
    enum { V = 256, T = 64, NTRAIN = 4000, NTEST = 1000 };
    struct data_source *ds = must_open(cfg_of(DATA_KIND_synthetic, "", 1234, 0), V, T);
    double lo = 0, hi = 0;
    const char *f = strstr(data_describe(ds), "loss floor ");
    int got = f && sscanf(f, "loss floor %lf..%lf", &lo, &hi) == 2;
    tap_ok(got && lo > 0.9 && lo < hi && hi < 1.1,
           "synthetic T=64: describe gives the loss floor [%.3f, %.3f] nats", lo, hi);

    static double big[V][V], uni[V];
    int32_t seq[T + 1];
    int copies = 1;
    for (uint64_t i = 0; i < NTRAIN; i++) {
        data_sample(ds, i, seq);
        for (int t = 1; t <= T; t++) big[seq[t - 1]][seq[t]] += 1, uni[seq[t]] += 1;
        if (i < 100) copies &= longest_repeat(seq, T + 1) >= (T + 1) / 8;
    }
    tap_ok(copies, "synthetic T=64: every sequence repeats a span of >= (T+1)/8 tokens");

    /* held-out cross-entropy of: unigram, bigram, bigram + copy (3-gram match) */
    const double alpha = 0.01;
    double row[V], ce_uni = 0, ce_big = 0, ce_cpy = 0, nuni = 0;
    for (int a = 0; a < V; a++) nuni += uni[a];
    for (int a = 0; a < V; a++) {
        row[a] = 0;
        for (int b = 0; b < V; b++) row[a] += big[a][b];
    }
    for (uint64_t i = 0; i < NTEST; i++) {
        data_sample(ds, 1000000 + i, seq);
        for (int t = 1; t <= T; t++) {
            int a = seq[t - 1], b = seq[t];
            double pb = (big[a][b] + alpha) / (row[a] + alpha * V), p = pb;
            ce_uni -= log((uni[b] + alpha) / (nuni + alpha * V));
            ce_big -= log(pb);
            for (int j = t - 1; j >= 3 && t >= 4; j--) /* latest earlier match of the 3 last */
                if (seq[j - 1] == seq[t - 1] && seq[j - 2] == seq[t - 2] &&
                    seq[j - 3] == seq[t - 3]) {
                    p = 0.3 * pb + 0.7 * (seq[j] == b);
                    break;
                }
            ce_cpy -= log(p);
        }
    }
    ce_uni /= (double)NTEST * T;
    ce_big /= (double)NTEST * T;
    ce_cpy /= (double)NTEST * T;
    tap_diag("held-out CE (nats): ln V %.3f, unigram %.3f, bigram %.3f, bigram+copy %.3f, "
             "floor [%.3f, %.3f]", log(V), ce_uni, ce_big, ce_cpy, lo, hi);
    tap_ok(ce_uni > 4.0 && ce_uni < log(V) - 0.5,
           "synthetic: unigram CE %.3f lies between 4 and ln V - 0.5", ce_uni);
    tap_ok(ce_big < 0.35 * log(V) && ce_big > lo,
           "synthetic: bigram CE %.3f well below ln V = %.3f, above the floor %.3f", ce_big,
           log(V), lo);
    tap_ok(ce_cpy < ce_big - 0.05 && ce_cpy > lo,
           "synthetic: using the copied span helps (%.3f < %.3f), still above the floor", ce_cpy,
           ce_big);
    data_close(ds);
}

/* ---- windows of token shards ---- */

static void test_windows(void)
{
    enum { T = 4, V = 256 };
    uint16_t t[30];
    for (int k = 0; k < 30; k++) t[k] = (uint16_t)(100 + k); /* value = position + 100 */
    /* written out of order; sorted order: s_00 (10), s_01 (empty), s_02 (7), s_03 (13) */
    write_shard("s_03.bin", t + 17, 13);
    write_shard("s_01.bin", t, 0);
    write_shard("s_00.bin", t, 10);
    write_shard("s_02.bin", t + 10, 7);
    write_bytes("other.txt", "x", 1); /* not matched by the glob */
    struct data_source *ds = must_open(cfg_of(DATA_KIND_tokens, tpath("s_*.bin"), 1, 0), V, T);

    tap_ok(data_windows(ds) == 7, "tokens: W = floor((30-1)/4) = 7 (got %llu)",
           (unsigned long long)data_windows(ds));
    int32_t seq[T + 1];
    int ok = 1;
    for (int w = 0; w < 7; w++) {
        data_sample(ds, (uint64_t)w, seq);
        for (int k = 0; k <= T; k++) ok &= seq[k] == 100 + w * T + k;
    }
    tap_ok(ok, "tokens: window w is tokens w*T .. w*T+T of the sorted concatenation");
    data_sample(ds, 2, seq);
    tap_ok(seq[0] == 108 && seq[1] == 109 && seq[2] == 110 && seq[4] == 112,
           "tokens: window 2 crosses the shard boundary (and an empty shard)");
    data_sample(ds, 6, seq);
    tap_ok(seq[0] == 124 && seq[4] == 128, "tokens: the last window ends before the last token");
    int wrap = 1;
    int32_t s2[T + 1];
    for (uint64_t i = 0; i < 7; i++) {
        data_sample(ds, i, seq);
        data_sample(ds, i + 7, s2);
        wrap &= !memcmp(seq, s2, sizeof seq);
        data_sample(ds, i + 7 * 1000003ULL, s2);
        wrap &= !memcmp(seq, s2, sizeof seq);
    }
    tap_ok(wrap, "tokens: sample i is window i mod W");
    tap_ok(batch_matches_samples(ds, 5, 9, T), "tokens: data_batch = data_sample shifted");
    tap_ok(strstr(data_describe(ds), "4 shards, 30 tokens, 7 windows of 4") != NULL,
           "tokens: describe '%s'", data_describe(ds));
    data_close(ds);

    /* N-1 divisible by T: the last window ends on the last token */
    write_shard("e_00.bin", t, 29);
    ds = must_open(cfg_of(DATA_KIND_tokens, tpath("e_00.bin"), 1, 0), V, T);
    data_sample(ds, 6, seq);
    tap_ok(data_windows(ds) == 7 && seq[4] == 128, "tokens: N = 29 gives 7 windows, last ends at "
           "token 28");
    data_close(ds);
}

/* ---- shuffle ---- */

/* Does epoch e of the shuffled source visit every window once?  Window = seq[0]. */
static int epoch_is_perm(const struct data_source *ds, uint64_t W, uint64_t e, int32_t *order)
{
    static unsigned char seen[4096];
    memset(seen, 0, W);
    int32_t seq[2];
    for (uint64_t k = 0; k < W; k++) {
        data_sample(ds, e * W + k, seq);
        if (seq[0] < 0 || (uint64_t)seq[0] >= W || seen[seq[0]] || seq[1] != seq[0] + 1) return 0;
        seen[seq[0]] = 1;
        if (order) order[k] = seq[0];
    }
    return 1;
}

static void test_shuffle(void)
{
    static const int Ws[] = {1, 2, 3, 5, 16, 17, 1000, 4095};
    static uint16_t t[4096];
    for (int k = 0; k < 4096; k++) t[k] = (uint16_t)k;
    int perms = 1;
    for (size_t c = 0; c < sizeof Ws / sizeof Ws[0]; c++) {
        char name[32];
        snprintf(name, sizeof name, "w%d.bin", Ws[c]);
        write_shard(name, t, Ws[c] + 1); /* T = 1: W = N-1 windows, window w = (w, w+1) */
        struct data_source *ds = must_open(cfg_of(DATA_KIND_tokens, tpath(name), 99, 1), 65536, 1);
        perms &= data_windows(ds) == (uint64_t)Ws[c];
        for (uint64_t e = 0; e < 3; e++) perms &= epoch_is_perm(ds, (uint64_t)Ws[c], e, NULL);
        data_close(ds);
    }
    tap_ok(perms, "shuffle: every epoch visits each window exactly once (W = 1 ... 4095)");

    static int32_t o1[1000], o2[1000], o3[1000], o4[1000];
    struct data_source *a = must_open(cfg_of(DATA_KIND_tokens, tpath("w1000.bin"), 99, 1), 65536, 1);
    struct data_source *b = must_open(cfg_of(DATA_KIND_tokens, tpath("w1000.bin"), 100, 1), 65536, 1);
    struct data_source *a2 = must_open(cfg_of(DATA_KIND_tokens, tpath("w1000.bin"), 99, 1), 65536, 1);
    epoch_is_perm(a, 1000, 0, o1);
    epoch_is_perm(a, 1000, 1, o2);
    epoch_is_perm(b, 1000, 0, o3);
    epoch_is_perm(a2, 1000, 0, o4);
    int fixed = 0, same_ep = 0, same_seed = 0;
    for (int k = 0; k < 1000; k++) {
        fixed += o1[k] == k;
        same_ep += o1[k] == o2[k];
        same_seed += o1[k] == o3[k];
    }
    tap_ok(fixed < 20, "shuffle: the order is not the identity (%d fixed points of 1000)", fixed);
    tap_ok(same_seed < 20, "shuffle: another seed gives another order (%d/1000 agree)", same_seed);
    tap_ok(same_ep < 20, "shuffle: each epoch has its own order (%d/1000 agree)", same_ep);
    tap_ok(!memcmp(o1, o4, sizeof o1), "shuffle: the same seed gives the same order");
    tap_ok(strstr(data_describe(a), "shuffled") != NULL, "shuffle: describe '%s'",
           data_describe(a));
    data_close(a);
    data_close(b);
    data_close(a2);

    write_shard("sh_00.bin", t, 300);
    write_shard("sh_01.bin", t + 300, 301);
    a = must_open(cfg_of(DATA_KIND_tokens, tpath("sh_*.bin"), 3, 1), 65536, 8);
    test_decomposition(a, 8, "tokens+shuffle");
    data_close(a);
}

/* ---- text ---- */

static void test_text(void)
{
    const char *txt = "Hello, triad! \xff\x01";
    write_bytes("t.txt", txt, strlen(txt));
    struct data_source *ds = must_open(cfg_of(DATA_KIND_text, tpath("t.txt"), 1, 0), 256, 5);
    int32_t seq[6];
    data_sample(ds, 1, seq);
    int ok = data_windows(ds) == (strlen(txt) - 1) / 5;
    for (int k = 0; k < 6; k++) ok &= seq[k] == (unsigned char)txt[5 + k];
    data_sample(ds, 2, seq);
    ok &= seq[4] == 0xff && seq[5] == 0x01;
    tap_ok(ok, "text: bytes are tokens, windows as for shards (%s)", data_describe(ds));
    data_close(ds);
    tap_ok(fails_with(cfg_of(DATA_KIND_text, tpath("t.txt"), 1, 0), 255, 5, "vocab_size is 255", NULL,
                      "vocab_size = 256"),
           "text: vocab_size < 256 is an error with the fix");
    write_bytes("empty.txt", "", 0);
    tap_ok(fails_with(cfg_of(DATA_KIND_text, tpath("empty.txt"), 1, 0), 256, 5, "holds 0 tokens", NULL,
                      NULL),
           "text: an empty file has no window");
    tap_ok(fails_with(cfg_of(DATA_KIND_text, tpath("nope.txt"), 1, 0), 256, 5, "cannot open",
                      "No such file", NULL),
           "text: a missing file is reported with the reason");
    tap_ok(fails_with(cfg_of(DATA_KIND_text, tmpdir, 1, 0), 256, 5, "is a directory", NULL, NULL),
           "text: a directory is reported");
}

/* ---- errors of token shards ---- */

static void test_errors(void)
{
    uint16_t t[64];
    for (int k = 0; k < 64; k++) t[k] = (uint16_t)k;
    struct deck_error err;

    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("zz_*.bin"), 1, 0), 256, 4, "no file matches",
                      "zz_*.bin", "data.path"),
           "tokens: a glob that matches nothing names the pattern");
    {
        struct config c = cfg_of(DATA_KIND_tokens, tpath("zz_*.bin"), 1, 0);
        memset(&err, 0, sizeof err);
        data_open(&c, 256, 4, &err);
        tap_ok(strstr(err.what, tmpdir) && !strcmp(err.file, c.data.path),
               "tokens: ... and the directory; err.file is the data path ('%s')", err.what);
    }
    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("nodir/x_*.bin"), 1, 0), 256, 4, "no file matches",
                      "does not exist", NULL),
           "tokens: a missing directory is said so");

    write_shard("u_00.bin", t, 20);
    chmod(tpath("u_00.bin"), 0);
    if (geteuid() == 0)
        tap_skip("unreadable file: running as root");
    else
        tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("u_*.bin"), 1, 0), 256, 4, "cannot open",
                          "Permission denied", "permissions"),
               "tokens: an unreadable file is reported");
    chmod(tpath("u_00.bin"), 0644);

    char text[2000];
    memset(text, 'a', sizeof text);
    write_bytes("m_00.bin", text, sizeof text);
    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("m_*.bin"), 1, 0), 256, 4, "not an llm.c token shard",
                      "magic 1633771873 (0x61616161, text \"aaaa\")", "kind = 'text'"),
           "tokens: a wrong magic says what was found");
    { /* llm.c's LLaMA-3 shard: uint32 ids past 65535, read as written */
        unsigned char b32[1024 + 4 * 12] = {0};
        int32_t h32[3] = {20240801, 7, 12};
        memcpy(b32, h32, sizeof h32);
        for (int k = 0; k < 12; k++) {
            uint32_t v = 128000u + (uint32_t)k * 21u;
            for (int i = 0; i < 4; i++) b32[1024 + 4 * k + i] = (unsigned char)(v >> (8 * i));
        }
        write_bytes("l3_00.bin", b32, sizeof b32);
        struct data_source *l3 = must_open(cfg_of(DATA_KIND_tokens, tpath("l3_*.bin"), 1, 0), 128256, 5);
        int32_t seq[6];
        data_sample(l3, 1, seq);
        tap_ok(seq[0] == 128000 + 5 * 21 && seq[5] == 128000 + 10 * 21, "tokens: an llm.c LLaMA-3 shard (20240801, "
               "version 7, uint32) reads its ids past 65535 (%d ... %d)", seq[0], seq[5]);
        data_close(l3);
        tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("l3_*.bin"), 1, 0), 128000, 4, "is 128000, not in 0 .. vocab_size - 1",
                          NULL, "at least 128232"),
               "tokens: a uint32 id past vocab_size is named with the size needed");
    }
    write_bytes("short.bin", text, 100);
    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("short.bin"), 1, 0), 256, 4, "100 bytes, shorter",
                      NULL, NULL),
           "tokens: a file shorter than the header");
    write_shard_ex("v_00.bin", t, 20, 20240520, 2, -1, 0);
    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("v_*.bin"), 1, 0), 256, 4, "version 2", "expected version 1",
                      NULL),
           "tokens: a wrong version");
    write_shard_ex("tr_00.bin", t, 50, 20240520, 1, 100, 0);
    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("tr_*.bin"), 1, 0), 256, 4,
                      "header says 100 tokens, the file holds 50", NULL, "truncated"),
           "tokens: a truncated shard says both counts");
    write_shard_ex("lg_00.bin", t, 50, 20240520, 1, 40, 0);
    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("lg_*.bin"), 1, 0), 256, 4,
                      "header says 40 tokens, the file holds 50", NULL, "longer"),
           "tokens: a shard longer than its header");

    uint16_t big[40];
    for (int k = 0; k < 40; k++) big[k] = (uint16_t)k;
    write_shard("big_00.bin", big, 40);
    big[5] = 300;
    big[7] = 400;
    write_shard("big_01.bin", big, 40);
    big[5] = 500;
    write_shard("big_02.bin", big, 10);
    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("big_*.bin"), 1, 0), 256, 4, "big_01.bin' token 5",
                      "is 300", "at least 501"),
           "tokens: a token >= V names file, position, value and the vocab_size needed");
    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("big_*.bin"), 1, 0), 400, 4, "token 7", "is 400",
                      "at least 501") &&
               (data_close(must_open(cfg_of(DATA_KIND_tokens, tpath("big_*.bin"), 1, 0), 501, 4)), 1),
           "tokens: ... and vocab_size = max+1 is accepted");

    write_shard("few_00.bin", t, 2);
    write_shard("few_01.bin", t, 2);
    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, tpath("few_*.bin"), 1, 0), 256, 4,
                      "holds 4 tokens in total", "needs 5", "at most 3"),
           "tokens: fewer than T+1 tokens in total");
    {
        struct data_source *ds = must_open(cfg_of(DATA_KIND_tokens, tpath("few_*.bin"), 1, 0), 256, 3);
        tap_ok(data_windows(ds) == 1, "tokens: exactly T+1 tokens give one window");
        data_close(ds);
    }
    tap_ok(fails_with(cfg_of(DATA_KIND_tokens, "", 1, 0), 256, 4, "needs data.path", NULL, "*.bin"),
           "tokens: an empty path");
}

/* ---- tools/make_tokens.py round trip (skipped without python3 or the script) ---- */

static void test_make_tokens(void)
{
    const char *py = getenv("PYTHON3"), *dirs[] = {getenv("top_srcdir"), getenv("srcdir"), "."};
    const char *rel[] = {"/tools/make_tokens.py", "/../../tools/make_tokens.py"};
    char script[600] = "", cand[600], cmd[2000];
    if (!py || !py[0]) py = "python3";
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 2 && dirs[d] && !script[0]; k++) {
            snprintf(cand, sizeof cand, "%s%s", dirs[d], rel[k]);
            if (access(cand, R_OK) == 0) snprintf(script, sizeof script, "%s", cand);
        }
    snprintf(cmd, sizeof cmd, "'%s' -c 'import sys' >/dev/null 2>&1", py);
    if (!script[0] || system(cmd) != 0) {
        tap_skip("tools/make_tokens.py or python3 not found");
        return;
    }
    const char *ids = "5, 6 7\n8 9,10 11 12 13 14 15\n";
    write_bytes("ids.txt", ids, strlen(ids));
    snprintf(cmd, sizeof cmd, "'%s' '%s' --ints --shard-tokens 4 '%s' '%s' >/dev/null", py, script,
             tpath("ids.txt"), tpath("mk"));
    int rc = system(cmd);
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "mk_%06d.bin", k);
        track(tpath(name));
    }
    int ok = rc == 0;
    if (ok) {
        struct data_source *ds = must_open(cfg_of(DATA_KIND_tokens, tpath("mk_*.bin"), 1, 0), 256, 3);
        int32_t seq[4];
        data_sample(ds, 2, seq);
        ok = data_windows(ds) == 3 && seq[0] == 11 && seq[3] == 14 &&
             strstr(data_describe(ds), "3 shards, 11 tokens") != NULL;
        data_close(ds);
    }
    tap_ok(ok, "tools/make_tokens.py writes shards that data_open reads");
}

/* The multiple-choice split's whitespace (tok_rstrip): every code point
 * after an 'x' is stripped exactly when Python's str.isspace() says it is
 * whitespace (the list below, from Python 3.11: [c for c in range(0x110000)
 * if chr(c).isspace()]); the 'x' is kept, and so is a character cut short. */
static void test_rstrip(void)
{
    static const unsigned space[] = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x1C,   0x1D,   0x1E,   0x1F,
                                     0x20,   0x85,   0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                                     0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F,
                                     0x205F, 0x3000};
    size_t k = 0, wrong = 0, first_wrong = 0;
    for (unsigned cp = 1; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp < 0xE000) continue; /* (no UTF-8) */
        char s[8] = "x";
        size_t n = 1;
        if (cp < 0x80) s[n++] = (char)cp;
        else if (cp < 0x800) s[n++] = (char)(0xC0 | cp >> 6), s[n++] = (char)(0x80 | (cp & 0x3F));
        else if (cp < 0x10000)
            s[n++] = (char)(0xE0 | cp >> 12), s[n++] = (char)(0x80 | (cp >> 6 & 0x3F)),
            s[n++] = (char)(0x80 | (cp & 0x3F));
        else
            s[n++] = (char)(0xF0 | cp >> 18), s[n++] = (char)(0x80 | (cp >> 12 & 0x3F)),
            s[n++] = (char)(0x80 | (cp >> 6 & 0x3F)), s[n++] = (char)(0x80 | (cp & 0x3F));
        int is = k < sizeof space / sizeof *space && space[k] == cp;
        k += is;
        if (tok_rstrip(s, n) != (is ? 1u : n) && wrong++ == 0) first_wrong = cp;
    }
    tap_ok(wrong == 0, "tok_rstrip strips after 'x' exactly Python's 29 whitespace code points (%zu wrong, the first "
           "U+%04zX)", wrong, first_wrong);
    tap_ok(tok_rstrip("a \xE3\x80\x80\t \xC2\xA0", 9) == 1 && tok_rstrip(" \t", 2) == 0 && tok_rstrip("", 0) == 0,
           "tok_rstrip strips a run of mixed whitespace, and a text of whitespace alone to nothing");
    tap_ok(tok_rstrip("a\xE3\x80", 3) == 3, "tok_rstrip keeps a character cut short");
    tap_ok(tok_lstrip("\xE3\x80\x80 \xC2\xA0" "a ", 8) == 6 && tok_lstrip(" \t", 2) == 2 && tok_lstrip("a", 1) == 0,
           "tok_lstrip: the leading run of mixed whitespace, a text of whitespace alone whole, none before a letter");
}

int main(void)
{
    tap_tmp_template(tmpdir, sizeof tmpdir, "triad_test_data");
    if (!mkdtemp(tmpdir)) {
        printf("Bail out! cannot create a temporary directory under %s\n", tmpdir);
        return 1;
    }
    test_first_sample();
    test_synthetic_range();
    test_synthetic_determinism();
    test_synthetic_alphabet();
    test_synthetic_learnable();
    test_windows();
    test_shuffle();
    test_text();
    test_errors();
    test_make_tokens();
    test_rstrip();
    for (int k = 0; k < ncreated; k++) unlink(created[k]);
    if (rmdir(tmpdir) != 0) tap_diag("could not remove %s", tmpdir);
    return tap_done();
}
