/* data.c -- data sources and the deterministic global-batch order (docs/data.md).
 *
 * Three sources, one contract: sample i (T+1 tokens) is a pure function of
 * (source, seed, i), so every rank computes any sample without talking to
 * anyone and every decomposition of a step sees the same global batch.
 *
 *   synthetic  a seeded Markov chain plus one copied span per sequence
 *              (below; docs/data.md has the derivation of its loss floor)
 *   text       the bytes of one file are the tokens (V >= 256)
 *   tokens     llm.c shards (256 x int32 header: magic 20240520, version 1,
 *              token count, then uint16 tokens; or magic 20240801,
 *              version 7, then uint32 tokens), globbed, concatenated in
 *              byte-wise sorted name order, memory-mapped read-only
 *
 * Text and shards are cut into W = floor((N-1)/T) non-overlapping windows of
 * T+1 tokens, window w starting at token w*T of the concatenation (llm.c's
 * windows; one may cross a shard boundary).  Sample i is window i mod W, or,
 * with shuffle, window perm_e(i mod W) where e = i / W is the epoch and perm_e
 * a seeded bijection of [0, W) (a Feistel network with cycle walking: O(1)
 * memory, a fresh order every epoch, each window exactly once per epoch).
 *
 * The synthetic task.  Only A = min(V, 128) "active" tokens occur; they are
 * spread over [0, V) by a seeded affine bijection (so vocab-parallel shards
 * all see targets).  Each active token has K = min(4, A) distinct seeded
 * successors, taken with probabilities (8, 4, 2, 1)/15 (the first K weights,
 * renormalised), whose entropy is H_p = 1.1369 nats for K = 4.  A sequence of
 * n = T+1 tokens starts with a uniform active token and follows the chain,
 * except that when n >= 8 one span of S tokens, S uniform in [S_lo, S_hi] =
 * [max(2, n/8), max(S_lo, n/4)], is an exact copy of an earlier span:
 * a uniform in [1, n-2S], gap g uniform in [0, n-2S-a], x[b+k] = x[a+k] for
 * b = a+S+g, k < S; the chain resumes after the copy.  A bigram model learns
 * the chain (loss falls from ln V to about H_p within a few dozen steps);
 * the copy needs attention (an induction head) and is worth another ~19%.
 *
 * Loss floor (best achievable mean cross-entropy, nats/token): by the chain
 * rule it is H(x_1..x_T | x_0) / T.  Given the hidden layout (S, a, g) the
 * copied tokens are determined and every other target costs exactly H_p, so
 *     lo = H_p (T - E[S]) / T  <=  floor  <=  lo + H(S, a, g) / T  =  hi,
 * also floor <= ln A.  For T = 64: [0.924, 1.059]; T = 1024: [0.924, 0.940].
 * data_describe() prints the bounds for the run's T. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "data.h"
#include "data_internal.h"
#include "file.h"
#include "log.h"
#include "mapguard.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


#define SHARD_MAGIC 20240520   /* llm.c's GPT-2 shards: version 1, uint16 tokens */
#define SHARD_VERSION 1
#define SHARD32_MAGIC 20240801 /* llm.c's LLaMA-3 shards: version 7, uint32 tokens */
#define SHARD32_VERSION 7
#define SHARD_HEADER_BYTES (256 * 4)
#define SYN_ALPHABET 128 /* active tokens of the synthetic task (at most) */
#define SYN_SUCC 4       /* successors per token (at most) */
#define FEISTEL_ROUNDS 6

static const uint32_t syn_weight[SYN_SUCC] = {8, 4, 2, 1};

struct data_source {
    enum data_kind kind;
    int V, T;
    uint64_t seed;
    int shuffle;

    /* text and tokens */
    int nshard;
    struct shard *shard;  /* (nshard) */
    uint64_t *first;      /* (nshard+1) token offset of each shard; first[nshard] = N */
    uint64_t N, W;        /* tokens, windows */
    int half_bits;        /* Feistel half width: 4^half_bits >= W */

    /* synthetic */
    int A, K;                                   /* active tokens, successors each */
    int32_t alpha[SYN_ALPHABET];                /* active index -> token id */
    uint8_t succ[SYN_ALPHABET][SYN_SUCC];       /* successors (active indices) */
    uint32_t cum[SYN_SUCC], wsum;               /* cumulative weights */
    int S_lo, S_hi;                             /* copy length range; 0 = no copy */
    double floor_lo, floor_hi;                  /* loss floor bounds, nats/token */

    /* sequences in memory (data_open_rows): sample i is row i */
    const int32_t *rows;                        /* (W, T+1), the caller's */

    char desc[512];
};

/* ---- counter-based hashing (splitmix64 finaliser, a bijection of 64 bits) ---- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Independent streams of one seed. */
enum { STREAM_ALPHA = 1, STREAM_SUCC, STREAM_SAMPLE, STREAM_SHUFFLE };

static uint64_t key_of(uint64_t seed, uint64_t stream, uint64_t index)
{
    return mix64(mix64(mix64(seed ^ 0x9e3779b97f4a7c15ULL) + stream * 0xd1b54a32d192ed03ULL) +
                 index * 0xaf251af3b0f025b5ULL);
}

/* Word `j` of the stream under `key`. */
static uint64_t draw(uint64_t key, uint64_t j)
{
    return mix64(key + (j + 1) * 0x9e3779b97f4a7c15ULL);
}

/* Uniform integer in [0, m), m < 2^32, from the high 32 bits of h. */
static uint32_t below(uint64_t h, uint64_t m)
{
    return (uint32_t)(((h >> 32) * m) >> 32);
}

/* ---- errors ---- */

void *data_fail(struct deck_error *err, const char *file, const char *hint,
                  const char *fmt, ...)
{
    if (!err) return NULL;
    memset(err, 0, sizeof *err);
    snprintf(err->file, sizeof err->file, "%s", file ? file : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->what, sizeof err->what, fmt, ap);
    va_end(ap);
    text_printable(err->what);
    snprintf(err->hint, sizeof err->hint, "%s", hint ? hint : "");
    return NULL;
}

/* ---- the synthetic task ---- */

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static void synthetic_setup(struct data_source *ds)
{
    int V = ds->V, n = ds->T + 1;
    ds->A = V < SYN_ALPHABET ? V : SYN_ALPHABET;
    ds->K = ds->A < SYN_SUCC ? ds->A : SYN_SUCC;

    /* active index k -> (m k + c) mod V, gcd(m, V) = 1: injective on [0, A) */
    uint64_t ka = key_of(ds->seed, STREAM_ALPHA, 0), m = 1;
    for (uint64_t j = 0; V > 2; j++) {
        m = 1 + below(draw(ka, j), (uint64_t)V - 1);
        if (gcd64(m, (uint64_t)V) == 1) break;
    }
    uint64_t c = below(draw(ka, ~0ULL - 1), (uint64_t)V);
    for (int k = 0; k < ds->A; k++) ds->alpha[k] = (int32_t)((m * (uint64_t)k + c) % (uint64_t)V);

    for (int a = 0; a < ds->A; a++) {
        uint64_t ks = key_of(ds->seed, STREAM_SUCC, (uint64_t)a);
        uint64_t j = 0;
        for (int k = 0; k < ds->K; k++) {
            int dup;
            do { /* rejection: K <= A distinct successors always exist */
                ds->succ[a][k] = (uint8_t)below(draw(ks, j++), (uint64_t)ds->A);
                dup = 0;
                for (int q = 0; q < k; q++) dup |= ds->succ[a][q] == ds->succ[a][k];
            } while (dup);
        }
    }

    ds->wsum = 0;
    double Hp = 0;
    for (int k = 0; k < ds->K; k++) ds->cum[k] = ds->wsum += syn_weight[k];
    for (int k = 0; k < ds->K; k++) {
        double p = (double)syn_weight[k] / ds->wsum;
        Hp -= p * log(p);
    }

    /* copy span and the floor bounds of the header comment */
    ds->S_lo = ds->S_hi = 0;
    double ES = 0, Hhid = 0;
    if (n >= 8) {
        ds->S_lo = n / 8 > 2 ? n / 8 : 2;
        ds->S_hi = n / 4 > ds->S_lo ? n / 4 : ds->S_lo;
        int nS = ds->S_hi - ds->S_lo + 1;
        Hhid = log((double)nS);
        for (int S = ds->S_lo; S <= ds->S_hi; S++) {
            double r = n - 2 * S; /* choices of a; a then leaves n-2S-a+1 gaps */
            ES += (double)S / nS;
            Hhid += (log(r) + lgamma(r + 1) / r) / nS;
        }
    }
    ds->floor_lo = Hp * (ds->T - ES) / ds->T;
    ds->floor_hi = ds->floor_lo + Hhid / ds->T;
    if (ds->floor_hi > log((double)ds->A)) ds->floor_hi = log((double)ds->A);
}

/* x_1..x_T into tail[0..T-1]; returns x_0. */
static int32_t synthetic_gen(const struct data_source *ds, uint64_t i, int32_t *tail)
{
    const int T = ds->T, n = T + 1;
    uint64_t key = key_of(ds->seed, STREAM_SAMPLE, i);
    int S = 0, a = 0, b = n; /* no copy: b beyond the sequence */
    if (ds->S_lo) {
        S = ds->S_lo + (int)below(draw(key, (uint64_t)n), (uint64_t)(ds->S_hi - ds->S_lo + 1));
        a = 1 + (int)below(draw(key, (uint64_t)n + 1), (uint64_t)(n - 2 * S));
        b = a + S + (int)below(draw(key, (uint64_t)n + 2), (uint64_t)(n - 2 * S - a + 1));
    }
    int x0 = (int)below(draw(key, 0), (uint64_t)ds->A), prev = x0;
    for (int t = 1; t <= T; t++) { /* active indices first: the copy reads them */
        int x;
        if (t >= b && t < b + S) {
            x = tail[t - b + a - 1]; /* source position t-b+a >= a >= 1 */
        } else {
            uint32_t r = below(draw(key, (uint64_t)t), ds->wsum);
            int k = 0;
            while (r >= ds->cum[k]) k++;
            x = ds->succ[prev][k];
        }
        tail[t - 1] = x;
        prev = x;
    }
    for (int t = 0; t < T; t++) tail[t] = ds->alpha[tail[t]];
    return ds->alpha[x0];
}

/* ---- windows of text and shards ---- */

/* Bijection of [0, W) for epoch e: a balanced Feistel network on 2*half_bits
 * bits, cycle-walking until the value falls inside [0, W). */
static uint64_t window_perm(const struct data_source *ds, uint64_t x, uint64_t epoch)
{
    const int h = ds->half_bits;
    const uint64_t mask = (1ULL << h) - 1;
    uint64_t key = key_of(ds->seed, STREAM_SHUFFLE, epoch);
    do {
        uint64_t L = x >> h, R = x & mask;
        for (int r = 0; r < FEISTEL_ROUNDS; r++) {
            uint64_t F = mix64(key + (uint64_t)r * 0x9e3779b97f4a7c15ULL + R) & mask;
            uint64_t nl = R;
            R = L ^ F;
            L = nl;
        }
        x = (L << h) | R;
    } while (x >= ds->W);
    return x;
}

static uint64_t window_of(const struct data_source *ds, uint64_t i)
{
    uint64_t w = i % ds->W;
    return ds->shuffle ? window_perm(ds, w, i / ds->W) : w;
}

int64_t data_token_at(const struct shard *s, uint64_t k)
{
    const unsigned char *p = s->tok + k * (uint64_t)s->width; /* little-endian */
    if (s->width == 1) return s->signed_ ? (int8_t)p[0] : p[0];
    if (s->width == 2) {
        uint16_t v = (uint16_t)(p[0] | p[1] << 8);
        return s->signed_ ? (int16_t)v : v;
    }
    uint64_t v = 0;
    for (int i = s->width - 1; i >= 0; i--) v = v << 8 | p[i];
    if (s->width == 4) return s->signed_ ? (int32_t)(uint32_t)v : (int64_t)(uint32_t)v;
    return v > INT64_MAX ? -1 : (int64_t)v; /* (i64: negative or past any vocabulary, check_tokens refuses it) */
}

/* Tokens [start, start+count) of the concatenation into out. */
static void copy_tokens(const struct data_source *ds, uint64_t start, int count, int32_t *out)
{
    int lo = 0, hi = ds->nshard - 1; /* last shard with first[s] <= start: non-empty */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (ds->first[mid] <= start) lo = mid;
        else hi = mid - 1;
    }
    int s = lo;
    uint64_t k = start - ds->first[s];
    for (int t = 0; t < count; t++) {
        while (k >= ds->shard[s].n) {
            s++;
            k = 0;
        }
        int64_t v = data_token_at(&ds->shard[s], k++);
        if (v < 0 || v >= ds->V) /* (check_tokens saw every one at open: the file changed since) */
            die_at(__FILE__, __LINE__, "leave the files a run reads as they are until it ends (write new data under "
                   "new names)", "data file %s: token %llu is now %lld, outside the vocabulary (0 .. %d) every token "
                   "was in when it was opened: the file was rewritten under the run",
                   ds->shard[s].path ? ds->shard[s].path : "(in memory)",
                   (unsigned long long)(k - 1), (long long)v, ds->V - 1);
        out[t] = (int32_t)v;
    }
}

/* ---- opening the files ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void dir_of(const char *pattern, char *dir, size_t len)
{
    const char *slash = strrchr(pattern, '/');
    char cwd[CONFIG_STRLEN];
    if (!slash) {
        snprintf(dir, len, "%s", getcwd(cwd, sizeof cwd) ? cwd : ".");
    } else if (slash == pattern) {
        snprintf(dir, len, "/");
    } else if (pattern[0] == '/') {
        snprintf(dir, len, "%.*s", (int)(slash - pattern), pattern);
    } else {
        snprintf(dir, len, "%s/%.*s", getcwd(cwd, sizeof cwd) ? cwd : ".",
                 (int)(slash - pattern), pattern);
    }
}

/* Map one file read-only.  0, or -1 with *err filled. */
int data_map_file(struct shard *s, const char *path, struct deck_error *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK); /* (a FIFO without a writer: refused below, not waited on) */
    if (fd < 0) {
        int e = errno;
        data_fail(err, path, e == EACCES ? "check the file's permissions" : "check data.path in &data",
             "cannot open data file '%s': %s", path, strerror(e));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        data_fail(err, path, "", "cannot stat data file '%s': %s", path, strerror(e));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        int isdir = S_ISDIR(st.st_mode);
        close(fd);
        data_fail(err, path,
                  isdir ? "for kind = 'tokens' use a glob such as 'dir/*.bin'"
                        : "the data is read at any offset, as a mapping: name a regular file (a pipe's or a device's "
                          "bytes copied into one first)",
             "data file '%s' is %s", path, isdir ? "a directory" : "not a regular file");
        return -1;
    }
    s->path = strdup(path);
    if (!s->path) {
        close(fd);
        data_fail(err, path, "", "out of memory");
        return -1;
    }
    s->maplen = (size_t)st.st_size;
    s->map = NULL;
    if (s->maplen > 0) {
        s->map = mapguard_map(fd, s->maplen, path);
        if (!s->map) {
            int e = errno;
            close(fd);
            data_fail(err, path, "", "cannot map data file '%s' (%zu bytes): %s", path, s->maplen,
                 strerror(e));
            return -1;
        }
    }
    close(fd);
    return 0;
}

/* Check the header of shard s (mapped); set s->tok, s->n.  0 or -1. */
static int check_shard(struct shard *s, struct deck_error *err)
{
    const char *p = s->path;
    if (s->maplen < SHARD_HEADER_BYTES) {
        data_fail(err, p, "kind = 'tokens' reads llm.c .bin shards (tools/make_tokens.py writes them); "
                     "for a plain text file use kind = 'text'",
             "'%s' is %zu bytes, shorter than the %d-byte header of an llm.c token shard", p,
             s->maplen, SHARD_HEADER_BYTES);
        return -1;
    }
    int32_t hdr[3];
    memcpy(hdr, s->map, sizeof hdr);
    if (hdr[0] != SHARD_MAGIC && hdr[0] != SHARD32_MAGIC) {
        const char *what = file_llmc_kind(hdr[0]);
        char hint[512];
        snprintf(hint, sizeof hint, "%s%s%skind = 'tokens' reads llm.c shards (triad tokenize "
                 "writes them); for a plain text file use kind = 'text'",
                 what ? "this is " : "", what ? what : "", what ? "; " : "");
        const unsigned char *b = s->map;
        int text = 1;
        for (int k = 0; k < 4; k++) text &= b[k] >= 32 && b[k] < 127;
        if (text)
            snprintf(hint, sizeof hint, "the file starts with text; for a plain text file use "
                     "kind = 'text'; kind = 'tokens' reads llm.c shards (triad tokenize writes them)");
        data_fail(err, p, hint, "'%s' has magic %d (0x%08x%s%.*s%s), expected %d (uint16 tokens) or %d (uint32): "
             "not an llm.c token shard", p, hdr[0], (unsigned)hdr[0], text ? ", text \"" : "", text ? 4 : 0,
             (const char *)b, text ? "\"" : "", SHARD_MAGIC, SHARD32_MAGIC);
        return -1;
    }
    int wide = hdr[0] == SHARD32_MAGIC, version = wide ? SHARD32_VERSION : SHARD_VERSION;
    if (hdr[1] != version) {
        data_fail(err, p, "triad reads version 1 shards of magic 20240520 (uint16 tokens) and version 7 of magic "
                     "20240801 (uint32); regenerate the shard with triad tokenize",
             "'%s' is an llm.c shard of magic %d and version %d, expected version %d", p, hdr[0], hdr[1], version);
        return -1;
    }
    s->width = wide ? 4 : 2;
    if (hdr[2] < 0) {
        data_fail(err, p, "the shard header is corrupt; regenerate the shard",
             "'%s' header gives a negative token count (%d)", p, hdr[2]);
        return -1;
    }
    uint64_t n = (uint64_t)hdr[2], w = (uint64_t)s->width, m = (s->maplen - SHARD_HEADER_BYTES) / w;
    if (s->maplen != SHARD_HEADER_BYTES + w * n) {
        data_fail(err, p, m < n ? "the file is truncated (an interrupted copy or download?); "
                             "copy or regenerate it"
                           : "the file is longer than its header says; regenerate it",
             "'%s' header says %llu tokens, the file holds %llu%s (%zu bytes, expected %llu)", p,
             (unsigned long long)n, (unsigned long long)m,
             (s->maplen - SHARD_HEADER_BYTES) % w ? " and a part" : "", s->maplen,
             (unsigned long long)(SHARD_HEADER_BYTES + w * n));
        return -1;
    }
    s->tok = (const unsigned char *)s->map + SHARD_HEADER_BYTES;
    s->n = n;
    return 0;
}

/* Largest token of a shard, and (signed ids) the smallest. */
static int64_t shard_max(const struct shard *s, int64_t *min)
{
    int64_t mx = 0, mn = 0;
    const int64_t n = (int64_t)s->n;
#ifdef _OPENMP
#pragma omp parallel for reduction(max : mx) reduction(min : mn) schedule(static)
#endif
    for (int64_t k = 0; k < n; k++) {
        int64_t v = data_token_at(s, (uint64_t)k);
        mx = v > mx ? v : mx;
        mn = v < mn ? v : mn;
    }
    *min = mn;
    return mx;
}

/* Every token in [0, V), or -1 with the first offender and the global max. */
static int check_tokens(const struct data_source *ds, struct deck_error *err)
{
    int64_t mx = 0, mn;
    int bad = -1;
    for (int s = 0; s < ds->nshard; s++) {
        int64_t m = shard_max(&ds->shard[s], &mn);
        if ((m >= ds->V || mn < 0) && bad < 0) bad = s;
        if (m > mx) mx = m;
    }
    if (bad < 0) return 0;
    const struct shard *s = &ds->shard[bad];
    uint64_t k = 0;
    while (data_token_at(s, k) >= 0 && data_token_at(s, k) < ds->V) k++;
    char hint[256];
    if (data_token_at(s, k) < 0) snprintf(hint, sizeof hint, "token ids are never negative: the file is damaged");
    else snprintf(hint, sizeof hint, "raise vocab_size in &model to at least %lld (the largest token in the data + 1)",
                  (long long)mx + 1);
    data_fail(err, s->path, hint, "'%s' token %llu (0-based%s) is %lld, not in 0 .. vocab_size - 1 = %d", s->path,
              (unsigned long long)k, ds->kind == DATA_KIND_tokens ? ", after the header" : "",
              (long long)data_token_at(s, k), ds->V - 1);
    return -1;
}

/* Glob `pattern` into ds->shard, sorted by name.  0 or -1. */
static int open_shards(struct data_source *ds, const char *path, int indexed, struct deck_error *err)
{
    glob_t g;
    memset(&g, 0, sizeof g);
    /* an indexed dataset: PREFIX, PREFIX.idx or PREFIX.bin, or a glob of prefixes, by their .idx files */
    char pattern[CONFIG_STRLEN + 8];
    size_t n = strlen(path);
    int ext = indexed && n > 4 && (strcmp(path + n - 4, ".idx") == 0 || strcmp(path + n - 4, ".bin") == 0);
    snprintf(pattern, sizeof pattern, "%.*s%s", (int)(ext ? n - 4 : n), path, indexed ? ".idx" : "");
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH) {
        globfree(&g);
        char dir[CONFIG_STRLEN + 64];
        struct stat st;
        dir_of(pattern, dir, sizeof dir);
        int exists = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
        data_fail(err, pattern, exists ? "check data.path in &data; relative paths start in the "
                                    "directory the run is launched from"
                                  : "create the directory or correct data.path in &data",
             "no file matches data.path '%s' (directory '%s'%s)", pattern, dir,
             exists ? "" : " does not exist");
        return -1;
    }
    if (rc != 0) {
        globfree(&g);
        data_fail(err, pattern, "check that the directories in data.path are readable",
             "cannot expand data.path '%s' (%s)", pattern,
             rc == GLOB_NOSPACE ? "out of memory" : "read error");
        return -1;
    }
    qsort(g.gl_pathv, g.gl_pathc, sizeof *g.gl_pathv, cmp_str); /* byte order, any locale */
    ds->nshard = (int)g.gl_pathc;
    ds->shard = calloc(g.gl_pathc, sizeof *ds->shard);
    ds->first = calloc(g.gl_pathc + 1, sizeof *ds->first);
    if (!ds->shard || !ds->first) {
        globfree(&g);
        data_fail(err, pattern, "", "out of memory");
        return -1;
    }
    for (size_t s = 0; s < g.gl_pathc; s++) {
        if (indexed) g.gl_pathv[s][strlen(g.gl_pathv[s]) - 4] = 0; /* the prefix */
        if (indexed ? data_indexed_open(&ds->shard[s], g.gl_pathv[s], err)
                    : data_map_file(&ds->shard[s], g.gl_pathv[s], err) || check_shard(&ds->shard[s], err)) {
            globfree(&g);
            return -1;
        }
        ds->first[s + 1] = ds->first[s] + ds->shard[s].n;
    }
    globfree(&g);
    ds->N = ds->first[ds->nshard];
    return check_tokens(ds, err);
}

static int open_text(struct data_source *ds, const char *path, struct deck_error *err)
{
    if (ds->V < 256) {
        char hint[128];
        snprintf(hint, sizeof hint, "set vocab_size = 256 (or more) in &model");
        data_fail(err, path, hint, "kind = 'text' uses bytes as tokens (256 values), but vocab_size "
             "is %d", ds->V);
        return -1;
    }
    ds->nshard = 1;
    ds->shard = calloc(1, sizeof *ds->shard);
    ds->first = calloc(2, sizeof *ds->first);
    if (!ds->shard || !ds->first) {
        data_fail(err, path, "", "out of memory");
        return -1;
    }
    if (data_map_file(&ds->shard[0], path, err)) return -1;
    ds->shard[0].tok = ds->shard[0].map;
    ds->shard[0].n = ds->shard[0].maplen;
    ds->shard[0].width = 1;
    ds->N = ds->first[1] = ds->shard[0].n;
    return 0;
}

/* ---- the interface ---- */

int data_text_is_bytes(const struct config *cfg)
{
    return cfg->model.vocab_size == 256 || cfg->data.kind_id == DATA_KIND_text;
}

struct data_source *data_open(const struct config *cfg, int V, int T, struct deck_error *err)
{
    enum data_kind kind = cfg->data.kind_id;
    const char *path = cfg->data.path;
    if (V < 2 || T < 1) {
        return data_fail(err, "&model", "check vocab_size and seq_len in &model",
                    "data source needs vocab_size >= 2 and seq_len >= 1 (got %d and %d)", V, T);
    }
    struct data_source *ds = calloc(1, sizeof *ds);
    if (!ds) return data_fail(err, path, "", "out of memory");
    ds->V = V;
    ds->T = T;
    ds->seed = (uint64_t)cfg->data.seed;
    ds->shuffle = cfg->data.shuffle != 0;

    ds->kind = kind;
    if (kind == DATA_KIND_synthetic) {
        ds->shuffle = 0; /* every sample is fresh */
        synthetic_setup(ds);
        snprintf(ds->desc, sizeof ds->desc,
                 "synthetic: Markov chain over %d of %d tokens (%d successors each)%s, seed %llu; "
                 "loss floor %.3f..%.3f nats", ds->A, V, ds->K,
                 ds->S_lo ? " + one copied span per sequence" : "",
                 (unsigned long long)ds->seed, ds->floor_lo, ds->floor_hi);
        return ds;
    }
    int text = kind == DATA_KIND_text, indexed = kind == DATA_KIND_indexed;
    if (!path[0]) {
        free(ds);
        return data_fail(err, "&data", text ? "set path = 'file.txt' in &data"
                                  : "set path = 'dir/*.bin' in &data (tools/make_tokens.py "
                                    "writes shards)",
                    "kind = '%s' needs data.path", cfg->data.kind);
    }
    if ((text ? open_text(ds, path, err) : open_shards(ds, path, indexed, err)) != 0) {
        data_close(ds);
        return NULL;
    }
    if (ds->N < (uint64_t)T + 1) {
        char hint[256];
        if (ds->N >= 2)
            snprintf(hint, sizeof hint, "give a file of at least %d tokens, or (a model to train, not a "
                     "checkpoint's) a seq_len in &model of at most %llu", T + 1, (unsigned long long)(ds->N - 1));
        else
            snprintf(hint, sizeof hint, "give a file of at least %d tokens", T + 1);
        data_fail(err, path, hint, "'%s' holds %llu tokens in total; one window of seq_len = %d needs "
             "%d", path, (unsigned long long)ds->N, T, T + 1);
        data_close(ds);
        return NULL;
    }
    ds->W = (ds->N - 1) / (uint64_t)T;
    ds->half_bits = 1;
    while (ds->half_bits < 31 && (1ULL << (2 * ds->half_bits)) < ds->W) ds->half_bits++;

    int n = snprintf(ds->desc, sizeof ds->desc, "%s: ", cfg->data.kind);
    if (text)
        n += snprintf(ds->desc + n, sizeof ds->desc - n, "'%.300s', %llu bytes", path,
                      (unsigned long long)ds->N);
    else
        n += snprintf(ds->desc + n, sizeof ds->desc - n, "%d %s%s, %llu tokens", ds->nshard,
                      indexed ? "dataset" : "shard", ds->nshard == 1 ? "" : "s", (unsigned long long)ds->N);
    snprintf(ds->desc + n, sizeof ds->desc - n, ", %llu window%s of %d%s",
             (unsigned long long)ds->W, ds->W == 1 ? "" : "s", T,
             ds->shuffle ? ", shuffled each epoch" : "");
    return ds;
}

struct data_source *data_open_rows(const int32_t *rows, uint64_t n, int V, int T)
{
    struct data_source *ds = xcalloc(1, sizeof *ds);
    ds->V = V;
    ds->T = T;
    ds->rows = rows;
    ds->W = n;
    snprintf(ds->desc, sizeof ds->desc, "%llu sequences of %d tokens in memory", (unsigned long long)n, T + 1);
    return ds;
}

void data_close(struct data_source *ds)
{
    if (!ds) return;
    for (int s = 0; s < ds->nshard && ds->shard; s++) {
        if (ds->shard[s].map) mapguard_unmap(ds->shard[s].map, ds->shard[s].maplen);
        free(ds->shard[s].path);
    }
    free(ds->shard);
    free(ds->first);
    free(ds);
}

const char *data_describe(const struct data_source *ds)
{
    return ds->desc;
}

uint64_t data_windows(const struct data_source *ds)
{
    return ds->W;
}

void data_sample(const struct data_source *ds, uint64_t i, int32_t *seq)
{
    if (ds->rows)
        memcpy(seq, ds->rows + (i % ds->W) * (uint64_t)(ds->T + 1), (size_t)(ds->T + 1) * sizeof *seq);
    else if (ds->kind == DATA_KIND_synthetic)
        seq[0] = synthetic_gen(ds, i, seq + 1);
    else
        copy_tokens(ds, window_of(ds, i) * (uint64_t)ds->T, ds->T + 1, seq);
}

void data_batch(const struct data_source *ds, uint64_t first, int n, int32_t *inputs,
                int32_t *targets)
{
    const int T = ds->T;
    for (int j = 0; j < n; j++) {
        int32_t *in = inputs + (size_t)j * T, *tg = targets + (size_t)j * T; /* (T) each */
        if (ds->rows) {
            const int32_t *row = ds->rows + ((first + j) % ds->W) * (uint64_t)(T + 1);
            memcpy(in, row, (size_t)T * sizeof *in);
            memcpy(tg, row + 1, (size_t)T * sizeof *tg);
        } else if (ds->kind == DATA_KIND_synthetic) {
            in[0] = synthetic_gen(ds, first + j, tg);
            memcpy(in + 1, tg, (size_t)(T - 1) * sizeof *in);
        } else {
            uint64_t start = window_of(ds, first + j) * (uint64_t)T;
            copy_tokens(ds, start, T, in);
            copy_tokens(ds, start + 1, T, tg);
        }
    }
}

uint64_t data_first_sample(uint64_t start, int64_t global_batch, int dp, int dp_rank,
                           int micro_batch_size, int mb)
{
    return start +
           (uint64_t)dp_rank * (uint64_t)(global_batch / dp) +
           (uint64_t)mb * (uint64_t)micro_batch_size;
}
