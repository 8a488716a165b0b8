/* test_read_alloc.c -- the readers of a user's files when memory runs out:
 * every allocation, one at a time, refused (alloc_sweep.h), in
 *   - the input deck: the namelist reader (deck_parse, deck_parse_values)
 *     and the configuration built on it (config_read_string with its
 *     checks and suggestions, a command-line override, the echo);
 *   - a safetensors file (st_open: its JSON header, the tensors' table,
 *     the lookup by name);
 *   - the training data (data_open): an llm.c token shard, a Megatron-LM
 *     indexed dataset, raw text;
 *   - a multiple-choice task (mc_task_read): JSON Lines of text for a
 *     byte-level model, an llm.c eval file;
 * the files written here byte by byte as their formats define them. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc_sweep.h"
#include "config.h"
#include "data.h"
#include "mc_task.h"
#include "deck.h"
#include "file.h"
#include "safetensors.h"

/* ------------------------------------------------------------ the deck */

/* Every kind of value, a repeat, a list, a value on the next line. */
static const char syntax_text[] =
    "! a comment\n"
    "&Model  n_layer = 2, n_head = 4 d_model =\n"
    "   64 /\n"
    "&train list = 3*1, 2.5d-3 .true. 'it''s'  w = .f.\n"
    "  x = \"q\", sched = cosine &end\n";

/* A good deck for the configuration. */
static const char deck_text[] =
    "&model  n_layer = 2, n_head = 4, d_model = 64, seq_len = 32, vocab_size = 256 /\n"
    "&train\n"
    "  steps = 3, lr = 1.5d-3  batch_size = 4,\n"
    "  lr_schedule = 'cosine', warmup_steps = 0\n"
    "/\n"
    "&io run_dir = \"it''s here\", save_final = .false. /\n";

static void deck_run(void *ctx, struct sweep_outcome *o)
{
    (void)ctx;
    struct deck d;
    struct deck_error err;
    size_t on = 0;
    int rc = deck_parse(&d, syntax_text, &err);
    if (rc) {
        snprintf(o->err, sizeof o->err, "%.500s (%.500s)", err.what, err.hint);
        return;
    }
    for (int e = 0; rc == 0 && e < d.nentries; e++) {
        const struct deck_entry *x = &d.entries[e];
        rc = sweep_printf(o, &on, "&%s %s@%d:%d", d.groups[x->group].name, x->key, x->line, x->col);
        for (int v = 0; rc == 0 && v < x->nvalues; v++) {
            const struct deck_value *y = &x->values[v];
            rc = sweep_printf(o, &on, " %s:%lld:%.17g:%s:%s", deck_kind_name(y->kind), (long long)y->i, y->r,
                              y->s ? y->s : "-", y->raw ? y->raw : "-");
        }
    }
    deck_free(&d);
    struct deck_value *v = NULL;
    int n = 0;
    if (rc == 0 && deck_parse_values(" 2*1d2, 'q', word", &v, &n, &err))
        rc = -1, snprintf(o->err, sizeof o->err, "%.500s (%.500s)", err.what, err.hint);
    for (int i = 0; rc == 0 && i < n; i++) rc = sweep_printf(o, &on, " [%s %s]", v[i].raw, v[i].s ? v[i].s : "-");
    if (v) deck_values_free(v, n);
    if (rc) free(o->text), o->text = NULL;
}

/* The configuration: read (with a misspelled key's suggestion kept out:
 * the deck is good), overridden, echoed. */
static void config_run(void *ctx, struct sweep_outcome *o)
{
    (void)ctx;
    struct config cfg;
    struct deck_error err;
    config_defaults(&cfg);
    if (config_read_string(&cfg, deck_text, "good.nml", &err) || config_override(&cfg, "train.lr=2e-3", &err) ||
        config_override(&cfg, "io.run_dir='elsewhere'", &err)) {
        snprintf(o->err, sizeof o->err, "%.500s (%.500s)", err.what, err.hint);
        return;
    }
    char *buf = NULL;
    size_t len = 0, on = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        snprintf(o->err, sizeof o->err, "(the test) out of memory");
        return;
    }
    config_echo(f, &cfg);
    int bad = fclose(f) != 0 || !buf;
    if (bad || sweep_printf(o, &on, "%s", buf)) {
        if (bad) snprintf(o->err, sizeof o->err, "(the test) out of memory");
        free(o->text), o->text = NULL;
    }
    free(buf);
}

/* A deck with a misspelled key: the error, with its suggestion, is the
 * outcome (not a failure of the run). */
static void config_bad_run(void *ctx, struct sweep_outcome *o)
{
    (void)ctx;
    struct config cfg;
    struct deck_error err;
    size_t on = 0;
    config_defaults(&cfg);
    if (config_read_string(&cfg, "&train stpes = 3 /\n", "bad.nml", &err) == 0) {
        snprintf(o->err, sizeof o->err, "a misspelled key was read");
        return;
    }
    if (strstr(err.what, "out of memory")) { /* (the reader's own failure) */
        snprintf(o->err, sizeof o->err, "%s", err.what);
        return;
    }
    if (sweep_printf(o, &on, "%d:%d %s | %s", err.line, err.col, err.what, err.hint)) free(o->text), o->text = NULL;
}

/* The configuration read from a deck file (ctx: its path). */
static void config_file_run(void *ctx, struct sweep_outcome *o)
{
    struct config cfg;
    struct deck_error err;
    size_t on = 0;
    config_defaults(&cfg);
    if (config_read_file(&cfg, ctx, &err)) {
        snprintf(o->err, sizeof o->err, "%.500s (%.500s)", err.what, err.hint);
        return;
    }
    if (sweep_printf(o, &on, "%lld %lld %.17g %s", (long long)cfg.model.n_layer, (long long)cfg.train.steps,
                     cfg.train.lr, cfg.io.run_dir))
        free(o->text), o->text = NULL;
}

/* 300,000 bytes through a pipe from a child process (the reader's buffer
 * doubled three times), read whole. */
enum { PIPE_BYTES = 300000 };
static void pipe_run(void *ctx, struct sweep_outcome *o)
{
    (void)ctx;
    int p[2];
    if (pipe(p)) {
        snprintf(o->err, sizeof o->err, "(the test) no pipe");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        static char block[10000];
        memset(block, 'x', sizeof block);
        for (int i = 0; i < PIPE_BYTES / (int)sizeof block; i++)
            if (write(p[1], block, sizeof block) != (ssize_t)sizeof block) _exit(0);
        _exit(0);
    }
    close(p[1]);
    char path[64], *text = NULL;
    size_t len = 0, on = 0, xs = 0;
    snprintf(path, sizeof path, "/dev/fd/%d", p[0]);
    if (pid < 0) snprintf(o->err, sizeof o->err, "(the test) no child");
    else if (file_read_all(path, 1 << 20, "a test stream", &text, &len, o->err, sizeof o->err) == 0) {
        for (size_t i = 0; i < len; i++) xs += text[i] == 'x';
        if (sweep_printf(o, &on, "%zu bytes, %zu of them x, then %d", len, xs, text[len])) free(o->text), o->text = NULL;
        free(text);
    }
    close(p[0]);
    if (pid > 0) waitpid(pid, NULL, 0);
}

/* ------------------------------------------------------------ safetensors */

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> 8 * i);
}

/* Four tensors (F32 2x3, BF16 4, F16 2, I64 1) and metadata, the header
 * padded with spaces to a multiple of 8 as the format allows. */
static int write_safetensors(const char *path)
{
    char header[512];
    int hl = snprintf(header, sizeof header,
                      "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
                      "\"c.bias\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[32,36]},"
                      "\"step\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[36,44]}}");
    while (hl % 8) header[hl++] = ' ';
    unsigned char data[44] = {0}, len8[8];
    const float a[6] = {1, -2, 0.5f, 3, 4.25f, -6};
    memcpy(data, a, sizeof a);                                  /* (little-endian floats: x86) */
    const uint16_t b[4] = {0x3F80, 0xC000, 0x3F00, 0x4040};     /* bf16 1, -2, 0.5, 3 */
    memcpy(data + 24, b, sizeof b);
    const uint16_t c[2] = {0x3C00, 0xB800};                     /* fp16 1, -0.5 */
    memcpy(data + 32, c, sizeof c);
    data[36] = 7;                                               /* int64 7 */
    put_le64(len8, (uint64_t)hl);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int bad = fwrite(len8, 1, 8, f) != 8 || fwrite(header, 1, (size_t)hl, f) != (size_t)hl ||
              fwrite(data, 1, sizeof data, f) != sizeof data;
    return (fclose(f) != 0 || bad) ? -1 : 0;
}

static void st_run(void *ctx, struct sweep_outcome *o)
{
    struct st_file f;
    if (st_open(&f, ctx, o->err, sizeof o->err)) return;
    size_t on = 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < f.n; i++) {
        const struct st_tensor *t = &f.t[i];
        rc = sweep_printf(o, &on, "%s %s %d [%llu,%llu)", t->name, t->dtype_name, t->rank, (unsigned long long)t->begin,
                          (unsigned long long)t->end);
        const struct st_tensor *u = st_find(&f, t->name);
        float x[6];
        size_t n = 1;
        for (int d = 0; d < t->rank; d++) n *= (size_t)t->shape[d];
        if (rc == 0 && u != t) rc = -1, snprintf(o->err, sizeof o->err, "%s: not found by name", t->name);
        if (rc == 0 && t->readable && st_pread(f.fd, f.data_start + t->begin, t->dtype, n, x))
            rc = -1, snprintf(o->err, sizeof o->err, "%s: %s", t->name, strerror(errno)); /* (hf.c's message) */
        for (size_t k = 0; rc == 0 && t->readable && k < n; k++) rc = sweep_printf(o, &on, " %g", x[k]);
        if (rc == 0) rc = sweep_printf(o, &on, "; ");
    }
    st_close(&f);
    if (rc) free(o->text), o->text = NULL;
}

/* ------------------------------------------------------------ training data */

static int write_bytes(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int bad = fwrite(p, 1, n, f) != n;
    return (fclose(f) != 0 || bad) ? -1 : 0;
}

/* An llm.c shard (magic 20240520, version 1, uint16 ids after a header of
 * 256 int32), a Megatron-LM indexed dataset (u16 ids, 3 sequences in 2
 * documents), a text. */
static int write_data(const char *dir)
{
    int32_t shard[256 + 20] = {20240520, 1, 40};
    uint16_t *ids = (uint16_t *)(shard + 256);
    for (int i = 0; i < 40; i++) ids[i] = (uint16_t)(i * 7 % 256);
    unsigned char idx[9 + 8 + 1 + 8 + 8 + 3 * 4 + 3 * 8 + 3 * 8], *q = idx;
    const uint64_t version = 1, seqs = 3, docs = 3; /* (the document index: 0, 2, 3) */
    const int32_t len[3] = {10, 20, 10};
    const int64_t at[3] = {0, 20, 60}, doc[3] = {0, 2, 3};
    memcpy(q, "MMIDIDX\0\0", 9), q += 9;
    memcpy(q, &version, 8), q += 8;
    *q++ = 8; /* u16 */
    memcpy(q, &seqs, 8), q += 8;
    memcpy(q, &docs, 8), q += 8;
    memcpy(q, len, sizeof len), q += sizeof len;
    memcpy(q, at, sizeof at), q += sizeof at;
    memcpy(q, doc, sizeof doc);
    char text[300];
    for (int i = 0; i < 299; i++) text[i] = (char)('a' + i % 26);
    return write_bytes(dir, "a_000.bin", shard, sizeof shard) ||
           write_bytes(dir, "m.idx", idx, sizeof idx) || write_bytes(dir, "m.bin", ids, 40 * sizeof *ids) ||
           write_bytes(dir, "t.txt", text, 299);
}

static void data_run(void *ctx, struct sweep_outcome *o)
{
    struct deck_error err;
    struct data_source *ds = data_open(ctx, 256, 8, &err);
    if (!ds) {
        snprintf(o->err, sizeof o->err, "%.500s (%.500s)", err.what, err.hint);
        return;
    }
    size_t on = 0;
    int32_t seq[9];
    int rc = sweep_printf(o, &on, "%s; %llu windows;", data_describe(ds), (unsigned long long)data_windows(ds));
    for (uint64_t i = 0; rc == 0 && i < data_windows(ds); i += 3) {
        data_sample(ds, i, seq);
        for (int k = 0; rc == 0 && k < 9; k++) rc = sweep_printf(o, &on, " %d", (int)seq[k]);
    }
    data_close(ds);
    if (rc) free(o->text), o->text = NULL;
}

/* The data sweeps: cfg's &data from overrides (outside the sweep). */
static void data_sweeps(const char *dir)
{
    /* (a path with wildcards is not swept: glibc 2.36's glob frees a block
     * twice when one of its own allocations fails, inside glob itself) */
    static const char *const kinds[][3] = {{"an llm.c token shard", "tokens", "a_000.bin"},
                                           {"a Megatron-LM indexed dataset", "indexed", "m"},
                                           {"a text read as bytes", "text", "t.txt"}};
    for (int i = 0; i < 3; i++) {
        struct config cfg;
        struct deck_error err;
        char kind[64], path[4300], name[200];
        config_defaults(&cfg);
        snprintf(kind, sizeof kind, "data.kind='%s'", kinds[i][1]);
        snprintf(path, sizeof path, "data.path='%s/%s'", dir, kinds[i][2]);
        snprintf(name, sizeof name, "the training data: %s", kinds[i][0]);
        if (config_override(&cfg, kind, &err) || config_override(&cfg, path, &err))
            tap_ok(0, "%s: %s", name, err.what);
        else
            alloc_sweep(name, data_run, &cfg);
    }
}

/* ------------------------------------------------------------ tasks */

/* Three examples as JSON Lines (a blank line between), and as an llm.c
 * eval file (magic 20240522, version 1, then per example uint16
 * <START_EXAMPLE> 65535, its bytes, its index, the label, the choices, the
 * context's length and ids, each choice's length and ids). */
static int write_tasks(const char *dir)
{
    static const char jsonl[] =
        "{\"context\": \"The sky is\", \"choices\": [\" blue\", \" loud\", \" wet\"], \"label\": 0}\n"
        "\n"
        "{\"context\": \"Two and two\", \"choices\": [\" make five\", \" make four\"], \"label\": 1}\n"
        "{\"label\": 2, \"choices\": [\"a\", \"b\", \"c\", \"d\"], \"context\": \"\\u00e9t\\u00e9: "
        /* (a line longer than getline's first buffer: it grows the buffer here, in the middle of the file) */
        "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
        "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
        "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
        "\"}\n";
    uint16_t words[3][16];
    int nwords[3];
    int32_t header[256] = {20240522, 1, 3, 0};
    size_t total = 0;
    for (int e = 0; e < 3; e++) {
        uint16_t *w = words[e];
        int n = 0, nch = 2 + e % 2;
        w[n++] = 65535, w[n++] = 0, w[n++] = (uint16_t)e, w[n++] = (uint16_t)(e % nch), w[n++] = (uint16_t)nch;
        w[n++] = 3, w[n++] = (uint16_t)(10 + e), w[n++] = 11, w[n++] = 12;
        for (int c = 0; c < nch; c++) w[n++] = 1, w[n++] = (uint16_t)(40 + c);
        w[1] = (uint16_t)(2 * n);
        nwords[e] = n;
        total += 2 * (size_t)n;
        if (2 * n > header[3]) header[3] = 2 * n;
    }
    unsigned char file[1024 + 3 * 32];
    memcpy(file, header, sizeof header);
    size_t at = sizeof header;
    for (int e = 0; e < 3; e++) memcpy(file + at, words[e], 2 * (size_t)nwords[e]), at += 2 * (size_t)nwords[e];
    return write_bytes(dir, "task.jsonl", jsonl, sizeof jsonl - 1) || write_bytes(dir, "task.bin", file, at) ||
           at != sizeof header + total;
}

static void task_run(void *ctx, struct sweep_outcome *o)
{
    struct mc_task t;
    size_t on = 0;
    if (mc_task_read(&t, ctx, NULL, 256, 1, 1024, 0, o->err, sizeof o->err)) return;
    int rc = sweep_printf(o, &on, "%lld examples, %lld rows:", (long long)t.n, (long long)t.rows);
    for (size_t i = 0; rc == 0 && i < t.len; i++) rc = sweep_printf(o, &on, " %d", (int)t.stream[i]);
    for (int64_t e = 0; rc == 0 && e < t.n; e++) rc = sweep_printf(o, &on, " @%zu", t.at[e]);
    mc_task_free(&t);
    if (rc) free(o->text), o->text = NULL;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alloc_sweep("the input deck's namelist reader", deck_run, NULL);
    alloc_sweep("the configuration read from a deck, overridden, echoed", config_run, NULL);
    alloc_sweep("a deck with a misspelled key: its error and suggestion", config_bad_run, NULL);
    alloc_sweep("a stream read whole, its buffer doubled as it comes", pipe_run, NULL);
    char path[4096];
    tap_tmp_template(path, sizeof path, "read_alloc");
    int fd = mkstemp(path);
    FILE *deck = fd >= 0 ? fdopen(dup(fd), "w") : NULL;
    if (!deck || fputs(deck_text, deck) < 0 || fclose(deck) != 0) {
        tap_ok(0, "a deck written to %s", path);
    } else {
        alloc_sweep("the configuration read from a deck file", config_file_run, path);
    }
    if (fd < 0 || ftruncate(fd, 0) != 0 || write_safetensors(path)) {
        tap_ok(0, "a safetensors file written to %s", path);
    } else {
        alloc_sweep("a safetensors file's header", st_run, path);
    }
    if (fd >= 0) close(fd), remove(path);
    char dir[4096];
    tap_tmp_template(dir, sizeof dir, "read_alloc_data");
    if (!mkdtemp(dir) || write_data(dir)) {
        tap_ok(0, "the data files written to %s", dir);
        return tap_done();
    }
    data_sweeps(dir);
    char task[4200];
    if (write_tasks(dir)) {
        tap_ok(0, "the task files written to %s", dir);
    } else {
        snprintf(task, sizeof task, "%s/task.jsonl", dir);
        alloc_sweep("a multiple-choice task in JSON Lines", task_run, task);
        snprintf(task, sizeof task, "%s/task.bin", dir);
        alloc_sweep("a multiple-choice task in an llm.c eval file", task_run, task);
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
    return tap_done();
}
