/* fuzz_readers.c -- every reader of outside files, fed damaged inputs
 * (docs/regression.md, "Fuzzing").  Built with AddressSanitizer and
 * UndefinedBehaviorSanitizer (make check); each input must end in a result
 * (0) or a clear error (-1 with a printable message).  A crash or a
 * sanitizer report aborts the program with the input still in WORK/<target>.input.
 *
 *   fuzz_readers [-v] [-n INPUTS] [-s SEED] CORPUS WORK TARGET [REPLAY...]
 *
 * CORPUS holds the seed files (regression/fuzz/corpus: made by
 * regression/fuzz/make_corpus.sh), WORK is a scratch folder, TARGET one of
 * the readers below or 'all'.  Each REPLAY file (a crash found before,
 * regression/fuzz/crashes/<target>/) is run first, then INPUTS mutations.
 *
 * The mutator is deterministic (splitmix64 from SEED): byte and word edits,
 * cuts, copies and insertions everywhere, and for text formats edits of
 * tokens (numbers, strings, punctuation, invalid UTF-8).  Feedback is the
 * readers' own words: an input whose error message (digits left out) is new
 * joins the pool that later mutations start from.  A checkpoint is mutated
 * in its tensors' bytes, its attributes and its links, and cut short, but
 * never in HDF5's own metadata bytes: those are the HDF5 library's to parse,
 * not triad's. */
#define _DEFAULT_SOURCE /* realpath */
#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt.h"
#include "config.h"
#include "data.h"
#include "device.h"
#include "hf.h"
#include "log.h"
#include "mc_task.h"
#include "model.h"
#include "pipeline.h"
#include "shape.h"
#include "tokenizer.h"
#include "topo.h"

enum { POOL_MAX = 64, INPUT_MAX = 4 << 20 };

struct buf {
    unsigned char *p;
    size_t n;
};

struct harness {
    const char *corpus, *work;
    uint64_t rng;
    struct grid g;
    struct model llama, gpt2, moe; /* the seeds' models (corpus/llama.nml, gpt2.nml, qwen2_moe.nml) */
    struct config llama_cfg;
    hsize_t regions[64][2];   /* the seed checkpoint's tensor bytes: [offset, size) */
    int nregions;
    int verbose;              /* -v: each new outcome printed */
};

/* ------------------------------------------------------------ small helpers */

static uint64_t next(struct harness *h)
{
    uint64_t z = (h->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static size_t below(struct harness *h, size_t n) { return n ? (size_t)(next(h) % n) : 0; }

static void die_harness(const char *what, const char *path)
{
    fprintf(stderr, "fuzz_readers: %s %s: %s\n", what, path, strerror(errno));
    exit(2);
}

static struct buf slurp(const char *path)
{
    struct buf b = {0};
    FILE *f = fopen(path, "rb");
    if (!f) die_harness("cannot read", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b.p = malloc((size_t)n + 1);
    if (!b.p || fread(b.p, 1, (size_t)n, f) != (size_t)n) die_harness("cannot read", path);
    b.n = (size_t)n;
    fclose(f);
    return b;
}

static void spill(const char *path, const struct buf *b)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->p, 1, b->n, f) != b->n || fclose(f) != 0) die_harness("cannot write", path);
}

static void link_seed(struct harness *h, const char *dir, const char *seed, const char *name)
{
    char from[8200], to[8200];
    snprintf(from, sizeof from, "%s/%s", h->corpus, seed);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    unlink(to);
    if (symlink(from, to) != 0) die_harness("cannot link", to);
}

static void make_dir(const char *path)
{
    if (mkdir(path, 0777) != 0 && errno != EEXIST) die_harness("cannot create", path);
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char p[4096];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
    rmdir(path);
}

/* ------------------------------------------------------------ the mutator */

static const int64_t interesting[] = {0, 1, -1, 2, 7, 8, 16, 127, 128, 255, 256, 1023, 1024, 32767, 65535, 65536,
                                      2147483647, -2147483648LL, 4294967295LL, 4294967296LL, INT64_MAX, INT64_MIN};
static const char *const tokens[] = {
    "0", "-1", "1e999", "-1e999", "2.5", "1e-400", "9007199254740993", "18446744073709551616", "4294967296",
    "\"\"", "\"x\"", "\"F32\"", "\"BF16\"", "\"I64\"", "\"../x\"", "\"model.safetensors\"", "null", "true", "false",
    "[]", "{}", "[0, 0]", "{\"a\": 1}", "\\u0000", "\\ud800", "\xff", "\xc0\xaf", "\xe2\x82", "\0", ",", ":", "[",
    "]", "{", "}", "\"", "'", "/", "&", "=", "*", "!", ".true.", "3*", "1d400", "&model", "&end", "\n", "nan"};

static void insert(struct buf *b, size_t at, const void *src, size_t n)
{
    if (b->n + n > INPUT_MAX) return;
    b->p = realloc(b->p, b->n + n + 1);
    memmove(b->p + at + n, b->p + at, b->n - at);
    memcpy(b->p + at, src, n);
    b->n += n;
}

static void cut(struct buf *b, size_t at, size_t n)
{
    if (at >= b->n) return;
    if (n > b->n - at) n = b->n - at;
    memmove(b->p + at, b->p + at + n, b->n - at - n);
    b->n -= n;
}

/* The span of the token (a number, a word, a quoted string) at or after at. */
static void token_at(const struct buf *b, size_t at, size_t *start, size_t *len)
{
    while (at < b->n && !(b->p[at] == '"' || b->p[at] == '\'' || b->p[at] == '-' || (b->p[at] >= '0' && b->p[at] <= '9') ||
                          (b->p[at] >= 'a' && b->p[at] <= 'z')))
        at++;
    *start = at;
    if (at >= b->n) return (void)(*len = 0);
    size_t e = at + 1;
    if (b->p[at] == '"' || b->p[at] == '\'') {
        while (e < b->n && b->p[e] != b->p[at]) e++;
        if (e < b->n) e++;
    } else {
        while (e < b->n && (b->p[e] == '.' || b->p[e] == '_' || b->p[e] == '+' || b->p[e] == '-' ||
                            (b->p[e] >= '0' && b->p[e] <= '9') || (b->p[e] >= 'a' && b->p[e] <= 'z') ||
                            (b->p[e] >= 'A' && b->p[e] <= 'Z')))
            e++;
    }
    *len = e - at;
}

/* One edit somewhere in [lo, hi) of b (hi grows and shrinks with it). */
static void mutate_once(struct harness *h, struct buf *b, size_t lo, size_t *hi, int text)
{
    size_t span = *hi > lo ? *hi - lo : 0, at = lo + below(h, span + 1), before = b->n;
    if (at > b->n) at = b->n;
    switch (below(h, text ? 10 : 7)) {
    case 0: /* flip a bit */
        if (at < b->n) b->p[at] ^= (unsigned char)(1u << below(h, 8));
        break;
    case 1: /* a byte of interest */
        if (at < b->n) b->p[at] = (unsigned char)interesting[below(h, 10)];
        break;
    case 2: { /* a little-endian word of interest (4 or 8 bytes) */
        int64_t v = interesting[below(h, sizeof interesting / sizeof interesting[0])];
        size_t w = below(h, 2) ? 8 : 4;
        if (below(h, 4) == 0) v = (int64_t)((uint64_t)v + b->n - below(h, 16)); /* near the size */
        for (size_t i = 0; i < w && at + i < b->n; i++) b->p[at + i] = (unsigned char)((uint64_t)v >> (8 * i));
        break;
    }
    case 3: /* cut a run */
        cut(b, at, 1 + below(h, below(h, 2) ? 8 : 256));
        break;
    case 4: { /* copy a run of the input elsewhere */
        size_t from = lo + below(h, span), n = 1 + below(h, 64);
        if (from < b->n && from + n <= b->n) {
            unsigned char *tmp = malloc(n);
            memcpy(tmp, b->p + from, n);
            insert(b, at, tmp, n);
            free(tmp);
        }
        break;
    }
    case 5: /* cut the input short */
        if (at < b->n && below(h, 3) == 0) b->n = at;
        break;
    case 6: { /* random bytes */
        unsigned char r[8];
        for (int i = 0; i < 8; i++) r[i] = (unsigned char)next(h);
        insert(b, at, r, 1 + below(h, 8));
        break;
    }
    default: { /* text: replace a token, or insert one */
        const char *t = tokens[below(h, sizeof tokens / sizeof tokens[0])];
        size_t tl = t[0] ? strlen(t) : 1, s, len;
        token_at(b, at, &s, &len);
        if (below(h, 3) && s < *hi) cut(b, s, len), at = s;
        insert(b, at, t, tl);
    }
    }
    *hi = *hi + b->n - before; /* (unsigned wrap-around makes this a subtraction when b shrank) */
    if (*hi > b->n) *hi = b->n;
}

/* A safetensors file: edits in the header text (its stored length kept
 * true, or not), in the length itself, or in the data. */
static void mutate_safetensors(struct harness *h, struct buf *b)
{
    uint64_t n = 0;
    for (int i = 7; b->n >= 8 && i >= 0; i--) n = n << 8 | b->p[i];
    int where = (int)below(h, 8);
    if (b->n < 8 || n > b->n - 8 || where == 7) { /* anywhere, bytes only */
        size_t hi = b->n;
        mutate_once(h, b, 0, &hi, 0);
        return;
    }
    size_t hi = 8 + (size_t)n;
    int edits = 1 + (int)below(h, 3);
    for (int e = 0; e < edits; e++) {
        size_t end = b->n; /* (the data: from the header's end to the file's) */
        mutate_once(h, b, where < 5 ? 8 : hi, where < 5 ? &hi : &end, where < 5);
    }
    if (where < 4 && hi >= 8) /* the length follows the edits of the text */
        for (int i = 0; i < 8; i++) b->p[i] = (unsigned char)((uint64_t)(hi - 8) >> (8 * i));
}

static void mutate(struct harness *h, struct buf *b, int text)
{
    int edits = 1 + (int)below(h, 4);
    size_t hi = b->n;
    for (int e = 0; e < edits; e++) {
        hi = b->n;
        mutate_once(h, b, 0, &hi, text);
    }
}

/* ------------------------------------------------------------ a checkpoint */

static herr_t note_region(hid_t loc, const char *name, const H5O_info_t *info, void *data)
{
    struct harness *h = data;
    if (info->type != H5O_TYPE_DATASET || h->nregions == 64) return 0;
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    haddr_t at = H5Dget_offset(ds);
    hsize_t size = H5Dget_storage_size(ds);
    if (at != HADDR_UNDEF && size > 0) h->regions[h->nregions][0] = at, h->regions[h->nregions++][1] = size;
    H5Dclose(ds);
    return 0;
}

static void ckpt_regions(struct harness *h, const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) die_harness("cannot open", path);
    H5Ovisit(f, H5_INDEX_NAME, H5_ITER_NATIVE, note_region, h);
    H5Fclose(f);
}

static const char *const ckpt_attrs[] = {"step", "format_version", "deck", "deck_checksum", "tokens", "tp", "dp", "pp"};
static const char *const ckpt_links[] = {"/model/wte", "/model/h.0/qkv_w", "/model/h.1/fc_w", "/model/lnf_w",
                                         "/model/lm_head", "/tokenizer/tokenizer.json", "/model/h.0", "/tokenizer"};

/* Edit the copy at path through HDF5: an attribute rewritten (the deck's
 * text mutated), a dataset's checksum changed, or a link removed. */
static void mutate_ckpt_api(struct harness *h, const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return;
    int kind = (int)below(h, 3);
    if (kind == 0) { /* the deck's text, as a text format */
        hid_t a = H5Aopen(f, "deck", H5P_DEFAULT);
        hid_t t = a < 0 ? -1 : H5Aget_type(a);
        size_t n = t < 0 ? 0 : H5Tget_size(t);
        struct buf b = {calloc(n + 1, 1), n};
        if (a >= 0 && H5Aread(a, t, b.p) >= 0) {
            b.n = strlen((char *)b.p);
            mutate(h, &b, 1);
            b.p = realloc(b.p, b.n + 1);
            b.p[b.n] = 0;
            H5Aclose(a), a = -1;
            H5Adelete(f, "deck");
            hid_t nt = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
            H5Tset_size(nt, b.n + 1);
            hid_t na = H5Acreate2(f, "deck", nt, s, H5P_DEFAULT, H5P_DEFAULT);
            H5Awrite(na, nt, b.p);
            H5Aclose(na), H5Sclose(s), H5Tclose(nt);
            if (below(h, 2)) H5Adelete(f, "deck_checksum"); /* (as a file from before it: the text is parsed) */
        }
        free(b.p);
        if (t >= 0) H5Tclose(t);
        if (a >= 0) H5Aclose(a);
    } else if (kind == 1) { /* a number attribute, or a checksum, of another value */
        const char *name = ckpt_attrs[below(h, sizeof ckpt_attrs / sizeof ckpt_attrs[0])];
        hid_t obj = f;
        if (below(h, 2)) obj = H5Dopen2(f, ckpt_links[below(h, 6)], H5P_DEFAULT), name = "checksum";
        if (obj >= 0 && strcmp(name, "deck") != 0 && H5Aexists(obj, name) > 0) {
            int64_t v = interesting[below(h, sizeof interesting / sizeof interesting[0])];
            hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
            H5Awrite(a, H5T_NATIVE_INT64, &v);
            H5Aclose(a);
        }
        if (obj >= 0 && obj != f) H5Dclose(obj);
    } else { /* a dataset or a group gone */
        H5Ldelete(f, ckpt_links[below(h, sizeof ckpt_links / sizeof ckpt_links[0])], H5P_DEFAULT);
    }
    H5Fclose(f);
}

static void mutate_ckpt(struct harness *h, struct buf *b, const char *path)
{
    int kind = (int)below(h, 10);
    if (kind < 6 && h->nregions) { /* the tensors' bytes */
        int edits = 1 + (int)below(h, 3);
        for (int e = 0; e < edits; e++) {
            hsize_t *r = h->regions[below(h, (size_t)h->nregions)];
            size_t at = (size_t)r[0] + below(h, (size_t)r[1]);
            if (at < b->n) b->p[at] ^= (unsigned char)(1 + below(h, 255));
        }
    } else if (kind == 6) { /* cut short */
        b->n = below(h, b->n);
    }
    spill(path, b);
    if (kind > 6) mutate_ckpt_api(h, path);
}

/* ------------------------------------------------------------ the readers */

static void model_of(struct harness *h, struct model *m, struct config *cfg, const char *deck)
{
    char path[4096];
    struct deck_error de;
    snprintf(path, sizeof path, "%s/%s", h->corpus, deck);
    config_defaults(cfg);
    if (config_read_file(cfg, path, &de) != 0) {
        fprintf(stderr, "fuzz_readers: %s: %s\n", path, de.what);
        exit(2);
    }
    config_resolve(cfg);
    struct run_shape s;
    run_shape_init(&s, cfg, 1, 0);
    struct model_dims d;
    model_dims_init(&d, cfg, &s, &h->g);
    model_init(m, &d, &cpu_device, 1, (struct model_buffers){.slots = 1}, 0);
}

static int run_deck(struct harness *h, const char *in, char *err, size_t errlen)
{
    struct config cfg;
    struct deck_error de;
    memset(&de, 0, sizeof de);
    config_defaults(&cfg);
    int rc = config_read_file(&cfg, in, &de);
    if (rc == 0) config_resolve(&cfg), rc = config_validate(&cfg, 1, &de);
    if (rc) snprintf(err, errlen, "%s", de.what);
    return rc;
}

/* A Hugging Face folder in WORK/<dir> with `name` the input and the rest the seed's. */
static int run_folder(struct harness *h, const char *in, const char *dir, const char *name, const char *seed_dir,
                      const char *const *rest, struct model *m, char *err, size_t errlen)
{
    char d[4096], to[8200], seed[4096];
    snprintf(d, sizeof d, "%s/%s", h->work, dir);
    make_dir(d);
    for (int i = 0; rest[i]; i++) {
        snprintf(seed, sizeof seed, "%s/%s", seed_dir, rest[i]);
        link_seed(h, d, seed, rest[i]);
    }
    snprintf(to, sizeof to, "%s/%s", d, name);
    unlink(to);
    if (symlink(in, to) != 0) die_harness("cannot link", to);
    return hf_load(d, m, &h->g, 0, err, errlen);
}

static int run_config(struct harness *h, const char *in, char *err, size_t errlen)
{
    static const char *const rest[] = {"model.safetensors", NULL};
    return run_folder(h, in, "hf_config", "config.json", "llama", rest, &h->llama, err, errlen);
}

static int run_config_moe(struct harness *h, const char *in, char *err, size_t errlen)
{
    static const char *const rest[] = {"model.safetensors", NULL};
    return run_folder(h, in, "hf_config_moe", "config.json", "qwen2_moe", rest, &h->moe, err, errlen);
}

static int run_safetensors(struct harness *h, const char *in, char *err, size_t errlen)
{
    static const char *const rest[] = {"config.json", NULL};
    return run_folder(h, in, "hf_st", "model.safetensors", "llama", rest, &h->llama, err, errlen);
}

/* GPT-2's weights, Conv1D's [in, out] (transposed as they are loaded) */
static int run_safetensors_gpt2(struct harness *h, const char *in, char *err, size_t errlen)
{
    static const char *const rest[] = {"config.json", NULL};
    return run_folder(h, in, "hf_st_gpt2", "model.safetensors", "gpt2", rest, &h->gpt2, err, errlen);
}

static int run_index(struct harness *h, const char *in, char *err, size_t errlen)
{
    static const char *const rest[] = {"config.json", "model-00001-of-00002.safetensors",
                                       "model-00002-of-00002.safetensors", NULL};
    return run_folder(h, in, "hf_index", "model.safetensors.index.json", "sharded", rest, &h->llama, err, errlen);
}

static int run_llmc(struct harness *h, const char *in, char *err, size_t errlen)
{
    return llmc_load(in, &h->gpt2, &h->g, 0, err, errlen);
}

/* The data source of kind at path, opened and sampled (any window, wrapped). */
static int run_data(const char *kind, const char *path, int V, int T, char *err, size_t errlen)
{
    struct config cfg;
    struct deck_error de;
    memset(&de, 0, sizeof de);
    char k[64], p[4300];
    config_defaults(&cfg);
    snprintf(k, sizeof k, "data.kind='%s'", kind);
    snprintf(p, sizeof p, "data.path='%s'", path);
    if (config_override(&cfg, k, &de) != 0 || config_override(&cfg, p, &de) != 0) {
        fprintf(stderr, "fuzz_readers: %s\n", de.what);
        exit(2);
    }
    config_resolve(&cfg);
    struct data_source *ds = data_open(&cfg, V, T, &de);
    if (!ds) return snprintf(err, errlen, "%s", de.what), -1;
    int32_t seq[64];
    for (uint64_t i = 0; i < 4; i++) data_sample(ds, i * 7919, seq);
    data_close(ds);
    return 0;
}

static int run_shard(struct harness *h, const char *in, char *err, size_t errlen)
{
    (void)h;
    return run_data("tokens", in, 64, 16, err, errlen);
}

/* A tokenizer.json, then a text through it and back (added tokens,
 * multi-byte characters, an ill-formed byte, a run of spaces). */
static int run_tokenizer(struct harness *h, const char *in, char *err, size_t errlen)
{
    struct tokenizer *t = tok_open(in, err, errlen);
    if (!t) return -1;
    static const char text[] = "Hello, world!  <s>caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xff 123 \n\n\t<|endoftext|>x</s>";
    int32_t *ids = NULL;
    size_t n = 0, cap = 0, len;
    char *back = NULL;
    int rc = tok_encode(t, text, sizeof text - 1, 1, &ids, &n, &cap, err, errlen);
    if (rc == 0) rc = tok_decode(t, ids, n, 0, &back, &len, err, errlen);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (ids[i] < 0 || ids[i] >= tok_vocab_size(t)) /* (a bad result, not a refusal) */
            rc = (errorf(err, errlen, "id %d outside the vocabulary", ids[i]), -2);
    free(ids), free(back);
    tok_close(t);
    (void)h;
    return rc;
}

/* An indexed dataset's .idx (the seed's .bin beside it), opened and sampled. */
static int run_indexed(struct harness *h, const char *in, char *err, size_t errlen)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/ds", h->work);
    make_dir(dir);
    link_seed(h, dir, "indexed.bin", "x.bin");
    snprintf(path, sizeof path, "%s/x.idx", dir);
    unlink(path);
    if (symlink(in, path) != 0) die_harness("cannot link", path);
    snprintf(path, sizeof path, "%s/x", dir);
    return run_data("indexed", path, 64, 4, err, errlen);
}

/* The checkpoint as init_from and as triad export read it. */
static int run_ckpt(struct harness *h, const char *in, char *err, size_t errlen)
{
    struct config cfg;
    int rc = ckpt_read_config(in, &cfg, err, errlen);
    if (rc == 0) rc = ckpt_load_model(in, &h->llama, &h->g, err, errlen);
    char out[4096], why[1024];
    snprintf(out, sizeof out, "%s/exported", h->work);
    remove_tree(out);
    int ex = hf_export(in, out, ST_F32, NULL, why, sizeof why);
    remove_tree(out);
    if (rc == 0 && ex != 0) snprintf(err, errlen, "%s", why), rc = -1; /* (both must refuse a damaged file) */
    return rc;
}

/* A pipeline schedule file (parallel.schedule_file) for 2 ranks x 2 chunks
 * and 4 micro-batches: read, proved by the simulator, each rank's list built
 * and its peaks counted.  (The seed of target schedule_zb holds W's.) */
static int run_schedule(struct harness *h, const char *in, char *err, size_t errlen)
{
    (void)h;
    int rc = pp_schedule_check(PP_FILE, in, 2, 2, 4, err, errlen);
    for (int r = 0; rc == 0 && r < 2; r++) {
        struct pp_action *a;
        int n;
        rc = pp_schedule_build(PP_FILE, in, 2, 2, 4, r, &a, &n, err, errlen);
        if (rc == 0 && pp_peak_bound(PP_FILE, in, 2, 2, 4, r) < 1) rc = errorf(err, errlen, "rank %d holds nothing", r);
        if (rc == 0 && (pp_wpeak_bound(PP_FILE, in, 2, 2, 4, r) < 0 || pp_list_wpeak(a, n) > 4 * 2))
            rc = errorf(err, errlen, "rank %d: more W's pending than (mb, chunk) pairs", r);
        if (rc == 0) free(a);
    }
    return rc;
}

/* A multiple-choice task (eval.tasks) for a byte-level model of seq_len 16,
 * read, then every example's context and choices walked. */
static int run_mc(const char *path, char *err, size_t errlen)
{
    struct mc_task t;
    if (mc_task_read(&t, path, NULL, 256, 1, 16, 0, err, errlen) != 0) return -1;
    int64_t rows = 0, sum = 0;
    for (int64_t e = 0; e < t.n; e++) {
        int n;
        const int32_t *ids = mc_context(&t, e, &n);
        for (int k = 0; k < n; k++) sum += ids[k];
        for (int c = 0; c < mc_choices(&t, e); c++, rows++) {
            ids = mc_choice(&t, e, c, &n);
            for (int k = 0; k < n; k++) sum += ids[k];
        }
        if (mc_label(&t, e) < 0 || mc_label(&t, e) >= mc_choices(&t, e)) rows = -1;
    }
    int rc = rows == t.rows && sum >= 0 ? 0 : errorf(err, errlen, "a task of %lld choices walked as %lld",
                                                      (long long)t.rows, (long long)rows);
    mc_task_free(&t);
    return rc;
}

static int run_mc_llmc(struct harness *h, const char *in, char *err, size_t errlen)
{
    (void)h;
    return run_mc(in, err, errlen);
}

/* (A JSON Lines task is known by its name's ending.) */
static int run_mc_jsonl(struct harness *h, const char *in, char *err, size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/task.jsonl", h->work);
    unlink(path);
    if (symlink(in, path) != 0) die_harness("cannot link", path);
    return run_mc(path, err, errlen);
}

/* A tokenizer folder's generation_config.json (triad sample's stopping ids
 * and sampling defaults), read for a vocabulary of 32: what it took must be
 * inside the bounds it promises. */
static int run_generation(struct harness *h, const char *in, char *err, size_t errlen)
{
    char d[4096], to[4200];
    snprintf(d, sizeof d, "%s/hf_gen", h->work);
    make_dir(d);
    snprintf(to, sizeof to, "%s/generation_config.json", d);
    unlink(to);
    if (symlink(in, to) != 0) die_harness("cannot link", to);
    struct config cfg;
    memset(&cfg, 0, sizeof cfg);
    struct hf_generation gen;
    int rc = hf_generation(d, &cfg, NULL, 32, &gen, err, errlen);
    if (rc != 0) return rc;
    int ok = gen.n >= 0 && gen.n <= HF_GENERATION_STOPS && gen.top_k >= -1 &&
             (gen.temperature == -1 || (gen.temperature >= 0 && gen.temperature <= 100)) &&
             (gen.top_p == -1 || (gen.top_p >= 0 && gen.top_p <= 1));
    for (int i = 0; ok && i < gen.n; i++) ok = gen.ids[i] >= 0 && gen.ids[i] < 32;
    if (!ok) /* (a bad result, not a refusal) */
        return errorf(err, errlen, "taken out of bounds: %d ids, temperature %g, top_p %g, top_k %lld", gen.n,
                      gen.temperature, gen.top_p, gen.top_k), -2;
    return 0;
}

struct target {
    const char *name, *seed;
    int (*run)(struct harness *h, const char *in, char *err, size_t errlen);
    enum { BYTES, TEXT, SAFETENSORS, CKPT } kind;
};
static const struct target targets[] = {
    {"deck", "llama.nml", run_deck, TEXT},
    {"config", "llama/config.json", run_config, TEXT},
    {"config_moe", "qwen2_moe/config.json", run_config_moe, TEXT},
    {"safetensors", "llama/model.safetensors", run_safetensors, SAFETENSORS},
    {"safetensors_gpt2", "gpt2/model.safetensors", run_safetensors_gpt2, SAFETENSORS},
    {"index", "sharded/model.safetensors.index.json", run_index, TEXT},
    {"llmc", "gpt2.bin", run_llmc, BYTES},
    {"shard", "tokens.bin", run_shard, BYTES},
    {"ckpt", "ckpt.h5", run_ckpt, CKPT},
    {"tokenizer", "tokenizer_bytelevel.json", run_tokenizer, TEXT},
    {"tokenizer_sp", "tokenizer_sentencepiece.json", run_tokenizer, TEXT},
    {"indexed", "indexed.idx", run_indexed, BYTES},
    {"schedule", "schedule.txt", run_schedule, TEXT},
    {"schedule_zb", "schedule_zb.txt", run_schedule, TEXT},
    {"mc_llmc", "hellaswag.bin", run_mc_llmc, BYTES},
    {"mc_jsonl", "tasks.jsonl", run_mc_jsonl, TEXT},
    {"generation", "generation_config.json", run_generation, TEXT},
};
enum { NTARGETS = sizeof targets / sizeof targets[0] };

/* ------------------------------------------------------------ the loop */

/* The message without its digits and paths: what the feedback counts. */
static void shape_of(const char *err, char *out, size_t n)
{
    size_t k = 0;
    while (err[0] == '/' && strstr(err, ": ")) err = strstr(err, ": ") + 2; /* (a leading "path: ") */
    for (const char *p = err; *p && k + 1 < n && k < 48; p++)
        if (!(*p >= '0' && *p <= '9')) out[k++] = *p;
    out[k] = 0;
}

/* One input through a reader: 0 fine, 1 a bad result (said on stderr). */
static int check_one(struct harness *h, const struct target *t, const char *in, char *err, size_t errlen, int *rc)
{
    err[0] = 0;
    *rc = t->run(h, in, err, errlen);
    int bad = *rc != 0 && *rc != -1;
    if (*rc == -1 && !err[0]) bad = 1;
    for (const char *p = err; *p && !bad; p++) bad = ((unsigned char)*p < 0x20 && *p != '\n' && *p != '\t') || *p == 0x7f;
    if (bad) { /* kept beside the input, which the next one overwrites */
        static int nbad;
        char keep[4200];
        snprintf(keep, sizeof keep, "%s.bad%d", in, nbad++);
        struct buf b = slurp(in);
        spill(keep, &b);
        free(b.p);
        fprintf(stderr, "fuzz_readers: %s: %s gave status %d with the message '%s'\n", t->name, keep, *rc, err);
    }
    return bad;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int fuzz_target(struct harness *h, const struct target *t, long inputs, char **replay, int nreplay)
{
    char seed_path[4096], in[4096], err[4096];
    snprintf(seed_path, sizeof seed_path, "%s/%s", h->corpus, t->seed);
    snprintf(in, sizeof in, "%s/%s.input", h->work, t->name);
    struct buf pool[POOL_MAX];
    char seen[POOL_MAX * 4][64];
    int npool = 1, nseen = 0, failures = 0, rc;
    long ok = 0, refused = 0;
    pool[0] = slurp(seed_path);
    spill(in, &pool[0]); /* the seed itself reads: else the harness, not the reader, is wrong */
    if (t->kind == CKPT) spill(in, &pool[0]);
    if (t->run(h, in, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_readers: %s: the seed %s does not read: %s\n", t->name, seed_path, err);
        exit(2);
    }
    double t0 = now(), slowest = 0;
    for (int i = 0; i < nreplay; i++) { /* the crashes found before */
        struct buf b = slurp(replay[i]);
        spill(in, &b);
        free(b.p);
        failures += check_one(h, t, in, err, sizeof err, &rc);
        rc == 0 ? ok++ : refused++;
    }
    for (long i = 0; i < inputs; i++) {
        const struct buf *from = &pool[below(h, 2) ? 0 : below(h, (size_t)npool)]; /* (the seed half the time) */
        struct buf b = {malloc(from->n + 1), from->n};
        memcpy(b.p, from->p, from->n);
        if (t->kind == CKPT) mutate_ckpt(h, &b, in);
        else {
            if (t->kind == SAFETENSORS) mutate_safetensors(h, &b);
            else mutate(h, &b, t->kind == TEXT);
            spill(in, &b);
        }
        double s = now();
        failures += check_one(h, t, in, err, sizeof err, &rc);
        if (now() - s > slowest) slowest = now() - s;
        rc == 0 ? ok++ : refused++;
        char shape[64];
        shape_of(rc == 0 ? "(read)" : err, shape, sizeof shape);
        int known = 0;
        for (int k = 0; k < nseen && !known; k++) known = strcmp(seen[k], shape) == 0;
        if (!known && nseen < POOL_MAX * 4) snprintf(seen[nseen++], sizeof seen[0], "%s", shape);
        if (!known && h->verbose) printf("  %s: %s\n", t->name, rc == 0 ? "(read)" : err);
        if (!known && npool < POOL_MAX && t->kind != CKPT) pool[npool++] = b;
        else free(b.p);
    }
    printf("%-12s %7ld inputs (%ld replayed): %ld read, %ld refused, %d distinct outcomes, %d bad; %.1f s "
           "(slowest input %.3f s)\n", t->name, inputs + nreplay, (long)nreplay, ok, refused, nseen, failures,
           now() - t0, slowest);
    for (int i = 0; i < npool; i++) free(pool[i].p);
    return failures;
}

int main(int argc, char **argv)
{
    long inputs = 1000;
    uint64_t seed = 1;
    int a = 1, verbose = 0;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (strcmp(argv[a], "-v") == 0) verbose = 1;
        else if (strcmp(argv[a], "-n") == 0 && a + 1 < argc) inputs = atol(argv[++a]);
        else if (strcmp(argv[a], "-s") == 0 && a + 1 < argc) seed = strtoull(argv[++a], NULL, 10);
    }
    if (argc - a < 3) {
        fprintf(stderr, "usage: fuzz_readers [-v] [-n INPUTS] [-s SEED] CORPUS WORK TARGET|all [REPLAY...]\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    char corpus[4096], work[4096]; /* absolute: the folders link to the seeds */
    if (!realpath(argv[a], corpus) || !realpath(argv[a + 1], work)) die_harness("no folder", argv[a]);
    struct harness h = {.corpus = corpus, .work = work, .rng = seed, .verbose = verbose};
    grid_init(&h.g, 1, 1, 1, 1, 1);
    struct config gcfg;
    model_of(&h, &h.llama, &h.llama_cfg, "llama.nml");
    model_of(&h, &h.gpt2, &gcfg, "gpt2.nml");
    model_of(&h, &h.moe, &gcfg, "qwen2_moe.nml");
    char ck[4096];
    snprintf(ck, sizeof ck, "%s/ckpt.h5", h.corpus);
    ckpt_regions(&h, ck);
    int failures = 0, found = 0;
    for (int i = 0; i < NTARGETS; i++)
        if (strcmp(argv[a + 2], "all") == 0 || strcmp(argv[a + 2], targets[i].name) == 0) {
            found = 1;
            h.rng = seed * 1000003u + (uint64_t)i; /* each target its own stream, whichever run */
            failures += fuzz_target(&h, &targets[i], inputs, argv + a + 3, argc - a - 3);
        }
    if (!found) fprintf(stderr, "fuzz_readers: no target '%s'\n", argv[a + 2]);
    model_free(&h.llama);
    model_free(&h.gpt2);
    model_free(&h.moe);
    grid_free(&h.g);
    MPI_Finalize();
    return failures || !found ? 1 : 0;
}
