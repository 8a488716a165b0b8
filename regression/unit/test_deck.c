/* test_deck.c -- the namelist reader (deck.c) and the configuration built on
 * it (config.c): every syntax feature, the echo round trip, overrides, and
 * tables of bad input that must fail with a given message at a given place. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "deck.h"
#include "shape.h"
#include "build_config.h"
#include "tap.h"
#include "utf8.h"

/* ------------------------------------------------------------ helpers */

/* What put(f, arg) writes, as a string (caller frees). */
static char *capture(void (*put)(FILE *, const void *), const void *arg)
{
    FILE *f = tmpfile();
    if (!f) return calloc(1, 1);
    put(f, arg);
    long n = ftell(f);
    char *buf = malloc(n > 0 ? (size_t)n + 1 : 1);
    rewind(f);
    size_t got = n > 0 ? fread(buf, 1, (size_t)n, f) : 0;
    buf[got] = '\0';
    fclose(f);
    return buf;
}

static void put_echo(FILE *f, const void *cfg) { config_echo(f, cfg); }
static void put_doc(FILE *f, const void *unused) { config_doc_markdown(f); }
static void put_error(FILE *f, const void *err) { config_error_print(f, err); }

static char *echo_text(const struct config *cfg) { return capture(put_echo, cfg); }
static char *doc_text(void) { return capture(put_doc, NULL); }
static char *print_text(const struct deck_error *err) { return capture(put_error, err); }

static int read_ok(struct config *cfg, const char *text)
{
    struct deck_error err;
    config_defaults(cfg);
    if (config_read_string(cfg, text, "good.nml", &err) == 0) return 1;
    tap_diag("unexpected error: %s:%d:%d: %s (hint: %s)", err.file, err.line, err.col, err.what, err.hint);
    return 0;
}

/* ------------------------------------------------------------ good decks */

static const char full_deck[] =
    "! every syntax feature in one deck\n"
    "&MODEL  N_Layer = 1*6, n_head=4    ! mixed case, a repeat of one\n"
    "        d_model = 128\n"
    "        seq_len =\n"
    "           64                     ! the value on the next line\n"
    "/\n"
    "\n"
    "&train\n"
    "  lr = 1.5d-3  min_lr = 1.5D-4, steps = 200   ! d exponents, optional commas\n"
    "  batch_size = 16, beta2 = .95, eps = 1e-7, grad_clip = 2.\n"
    "  device = \"CPU\", lr_schedule = 'Constant'\n"
    "&end\n"
    "&parallel sequence_parallel = F, schedule = 'gpipe' /\n"
    "&data kind = 'synthetic', shuffle = .t., seed = -0 /\n"
    "&io run_dir = 'it''s \"here\"!'  init_from = \"say \"\"hi\"\"\"\n"
    "    trace = .false., save_final = f, max_seconds = +3600 /\n";

static void test_full_deck(void)
{
    struct config c;
    int ok = read_ok(&c, full_deck);
    tap_ok(ok, "full-syntax deck parses");
    tap_ok(c.model.n_layer == 6 && c.model.n_head == 4 && c.model.d_model == 128 && c.model.seq_len == 64,
           "&model: mixed case, 1*6 repeat, value on the next line");
    tap_ok(c.train.lr == 1.5e-3 && c.train.min_lr == 1.5e-4 && c.train.steps == 200 && c.train.batch_size == 16,
           "&train: d and D exponents, optional commas");
    tap_ok(c.train.beta2 == 0.95 && c.train.eps == 1e-7 && c.train.grad_clip == 2.0,
           "reals written .95, 1e-7 and 2.");
    tap_ok(strcmp(c.train.device, "cpu") == 0 && strcmp(c.train.lr_schedule, "constant") == 0,
           "choices are case-insensitive and stored in the table's spelling");
    tap_ok(c.parallel.sequence_parallel == 0 && strcmp(c.parallel.schedule, "gpipe") == 0,
           "&end terminator, then F and a string");
    tap_ok(c.data.shuffle == 1 && c.data.seed == 0 && c.io.save_final == 0 && c.io.trace == 0,
           "logicals .t. f .false.; integer -0");
    tap_ok(strcmp(c.io.run_dir, "it's \"here\"!") == 0, "single-quoted string with '' and \" and ! inside");
    tap_ok(strcmp(c.io.init_from, "say \"hi\"") == 0, "double-quoted string with \"\" inside");
    tap_ok(c.io.max_seconds == 3600.0, "integer +3600 given to a real key");
    tap_ok(c.model.vocab_size == 50257 && c.train.warmup_steps == 0 && c.parallel.tp == 1,
           "keys not in the deck keep their defaults");
}

/* deck.c alone: value lists, repeats of strings, kinds and positions. */
static void test_deck_syntax(void)
{
    struct deck d;
    struct deck_error err;
    const char *text = "&g  k = 3*0.5, 2*'a''b' T\n"
                       "  .FALSE., -7 w = word  ! comment / not an end\n"
                       "  other = \"x\" /  &h /\n";
    int rc = deck_parse(&d, text, &err);
    tap_ok(rc == 0 && d.ngroups == 2 && d.nentries == 3, "deck: two groups, three entries");
    if (rc) return;
    const struct deck_entry *e = &d.entries[0];
    tap_ok(strcmp(e->key, "k") == 0 && e->nvalues == 8 && e->line == 1 && e->col == 5,
           "deck: 3*0.5, 2*'a''b', T, .FALSE., -7 make 8 values of key k at 1:5");
    tap_ok(e->values[0].kind == DECK_REAL && e->values[2].r == 0.5 && e->values[3].kind == DECK_STR &&
               strcmp(e->values[4].s, "a'b") == 0 && strcmp(e->values[4].raw, "'a''b'") == 0,
           "deck: repeated real and repeated string with a doubled quote");
    tap_ok(e->values[5].kind == DECK_BOOL && e->values[5].i == 1 && e->values[6].kind == DECK_BOOL &&
               e->values[6].i == 0 && e->values[7].kind == DECK_INT && e->values[7].i == -7 &&
               e->values[7].line == 2 && e->values[7].col == 12,
           "deck: T, .FALSE., -7 (at 2:12) continue the list on the next line");
    e = &d.entries[1];
    tap_ok(strcmp(e->key, "w") == 0 && e->nvalues == 1 && e->values[0].kind == DECK_WORD &&
               strcmp(e->values[0].s, "word") == 0 && e->values[0].line == 2 && e->values[0].col == 19,
           "deck: an unquoted word is kept for the caller to judge, with its place 2:19");
    tap_ok(strcmp(d.entries[2].key, "other") == 0 && d.groups[0].count == 3 && d.groups[1].count == 0 &&
               strcmp(d.groups[1].name, "h") == 0 && d.groups[1].line == 3 && d.groups[1].col == 18,
           "deck: a '/' after a comment's '/' ends the group; an empty group &h at 3:18");
    deck_free(&d);

    struct deck_value *v;
    int n;
    rc = deck_parse_values(" 2*1d2, 'q'", &v, &n, &err);
    tap_ok(rc == 0 && n == 3 && v[1].r == 100.0 && v[1].col == 2 && strcmp(v[2].s, "q") == 0,
           "deck_parse_values: a bare value list");
    if (rc == 0) deck_values_free(v, n);
}

/* An integer given to a real key reads as Fortran reads it: the sign of -0
 * stays, and one beyond 64 bits is still a real. */
static void test_integers_as_reals(void)
{
    struct config c;
    int ok = read_ok(&c, "&train peak_gflops = -0, loss_scale = 123456789012345678901234567890 /\n"
                         "&io max_seconds = -000 /\n");
    tap_ok(ok && c.train.peak_gflops == 0.0 && signbit(c.train.peak_gflops) && signbit(c.io.max_seconds),
           "-0 and -000 given to a real key are -0.0, as gfortran reads them");
    tap_ok(ok && c.train.loss_scale == 123456789012345678901234567890.0,
           "an integer beyond 64 bits given to a real key is that real");
}

/* $name ... $end, the older spelling of a group that gfortran still reads. */
static void test_dollar_groups(void)
{
    struct config c;
    int ok = read_ok(&c, "$train seed = 5 $end\n$IO trace = t &end\n&sample prompt = 'a$b' $END\n");
    tap_ok(ok && c.train.seed == 5 && c.io.trace == 1 && strcmp(c.sample.prompt, "a$b") == 0,
           "$group ... $end groups read, mixed with & and &end; a '$' inside a string is text");
    ok = read_ok(&c, "&train seed = 5,&end &io trace = t/ &sample prompt = 'x'/");
    tap_ok(ok && c.train.seed == 5 && c.io.trace == 1 && strcmp(c.sample.prompt, "x") == 0,
           "a comma or a '/' right after a value ends it");
}

static void test_empty_and_comments(void)
{
    struct config c, d;
    config_defaults(&d);
    int ok = read_ok(&c, "") && read_ok(&c, "! only a comment\n\n   \n") && read_ok(&c, "&model /\n&io&end");
    char *a = echo_text(&c), *b = echo_text(&d);
    tap_ok(ok && strcmp(a, b) == 0, "empty deck, comments only, empty groups: all defaults");
    free(a);
    free(b);
}

/* ------------------------------------------------------------ round trip */

static void test_round_trip(void)
{
    struct config c, r;
    int ok = read_ok(&c, "&train lr = 0.30000000000000004, beta2 = 0.999999999, eps = 1d-30, grad_clip = 1d-300\n"
                         "  batch_size = 1073741824, seed = 9223372036854775807 /\n"
                         "&data path = 'a''b\"c', shuffle = T /\n&parallel bucket_mb = 1e6 /\n"
                         "&io run_dir = '', restart = \"'\" /\n");
    char *e1 = echo_text(&c);
    config_defaults(&r);
    struct deck_error err;
    int rc = config_read_string(&r, e1, "echo", &err);
    char *e2 = echo_text(&r);
    tap_ok(ok && rc == 0, "the echo parses as a deck");
    tap_ok(strcmp(e1, e2) == 0, "echo -> parse -> echo is the identity");
    tap_ok(r.train.lr == 0.30000000000000004 && r.train.eps == 1e-30 && r.train.grad_clip == 1e-300 &&
               r.train.beta2 == 0.999999999 && r.parallel.bucket_mb == 1e6,
           "reals survive the round trip bit for bit");
    tap_ok(r.train.seed == 9223372036854775807LL && r.train.batch_size == 1073741824,
           "64-bit integers survive the round trip");
    tap_ok(strcmp(r.data.path, "a'b\"c") == 0 && strcmp(r.io.restart, "'") == 0 && r.io.run_dir[0] == '\0',
           "strings with quotes, and the empty string, survive the round trip");
    tap_ok(strstr(e1, "&model\n  arch                        = 'gpt2'\n  n_layer                     = 12\n") && strstr(e1, "  eps                   = 1e-30\n"),
           "echo aligns the '=' within each group");
    free(e1);
    free(e2);
}

/* ------------------------------------------------------------ overrides */

static void test_overrides(void)
{
    struct config c;
    struct deck_error err;
    int ok = read_ok(&c, "&model n_layer = 4 /");
    const char *args[] = { "model.n_layer=3", "TRAIN.LR=1d-3", "data.path=dir/x,y.txt", "io.run_dir='my run'",
                           "parallel.sequence_parallel=T", "train.device=CPU", "train.steps = 7" };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        if (config_override(&c, args[i], &err)) {
            tap_diag("%s: %s", args[i], err.what);
            ok = 0;
        }
    }
    tap_ok(ok && c.model.n_layer == 3 && c.train.lr == 1e-3 && c.train.steps == 7,
           "overrides replace deck values, in any case, with d exponents");
    tap_ok(strcmp(c.data.path, "dir/x,y.txt") == 0 && strcmp(c.io.run_dir, "my run") == 0,
           "string overrides: unquoted text is literal, quotes are removed");
    tap_ok(c.parallel.sequence_parallel == 1 && strcmp(c.train.device, "cpu") == 0, "logical and choice overrides");
    struct config before = c;
    int rc = config_override(&c, "model.n_layer=0", &err);
    tap_ok(rc == -1 && c.model.n_layer == before.model.n_layer, "a failed override leaves the config unchanged");
}

/* ------------------------------------------------------------ bad decks */

struct bad {
    const char *text;
    const char *what; /* substring of err.what */
    int line, col;
    const char *hint; /* substring of err.hint, or NULL */
};

static const struct bad bad_decks[] = {
    /* syntax */
    { "&model n_layer = 2\n&train lr = 1e-3 /\n", "&train starts before &model (opened at line 1) is closed", 2, 1,
      "end &model with '/'" },
    { "\n  &model n_layer = 2\n", "&model is not closed", 2, 3, "'/'" },
    { "&data\n  path = 'abc\n/\n", "unterminated string", 2, 10, "close the string with '" },
    { "&data path = \"a''b /\n", "unterminated string", 1, 14, "\"\"" },
    { "n_layer = 3\n", "text outside a group: 'n_layer'", 1, 1, "inside a group" },
    { "&model /\n  /\n", "group end outside a group", 2, 3, NULL },
    { "&model n_layer = 2 /\n&end\n", "group end outside a group: '&end'", 2, 1, NULL },
    { "&model\n  n_layer 3 /\n", "expected '=' after 'n_layer', found '3'", 2, 3, "write n_layer = 3" },
    { "&parallel schedule 'gpipe' /", "expected '=' after 'schedule', found the string 'gpipe'", 1, 11,
      "write schedule = 'gpipe'" },
    { "&model n_layer\n", "expected '=' after 'n_layer', found the end of the input", 1, 8,
      "write n_layer = value" },
    { "&model n_layer = 2 n_head 4 /", "expected '=' after 'n_head', found '4'", 1, 20, NULL },
    { "&model n_layer = 1.2.3 /", "'1.2.3' is not a valid value", 1, 18, "1.5d-3" },
    { "&parallel\n sequence_parallel = .tru. /", "'.tru.' is not a valid value", 2, 22, ".true." },
    { "&model n_layer = 12abc /", "'12abc' is not a valid value", 1, 18, NULL },
    { "& n_layer = 1 /", "empty group name after '&'", 1, 1, "&model" },
    { "$ n_layer = 1 /", "empty group name after '$'", 1, 1, "$model" },
    { "&train seed = 5&end", "&end is written right after the value 5", 1, 16, "put a blank before &end" },
    { "&train\n  lr = 1e-3, seed = 5$END", "$END is written right after the value 5", 2, 22, NULL },
    { "&io run_dir = 'x'&end", "&end is written right after the value 'x'", 1, 18, NULL },
    { "&io trace = t&train /", "&train is written right after the value t", 1, 14, NULL },
    { "$model n_layer = 1 $end\n$end\n", "group end outside a group: '$end'", 2, 1, NULL },
    { "&model n_layer = /", "missing value for 'n_layer': found '/'", 1, 18, NULL },
    { "&model n_layer = n_head = 3 /", "missing value for 'n_layer'", 1, 18, NULL },
    { "&model n_layer = 1,, n_head = 2 /", "empty value between two commas", 1, 20, NULL },
    { "&model = 3 /", "expected a key name, found '='", 1, 8, NULL },
    { "&model 'n_layer' = 3 /", "expected a key name, found the string 'n_layer'", 1, 8, NULL },
    { "&model n_layer = 3* /", "repeat '3*' has no value", 1, 18, "3*0.5" },
    { "&train lr = 0*1.0 /", "repeat count 0", 1, 13, NULL },
    { "&train seed = 99999999999999999999 /", "does not fit in 64 bits", 1, 15, NULL },
    { "&train lr = 1e999 /", "too large for a double", 1, 13, NULL },
    { "&train seed = -9223372036854775809 /", "seed = -9223372036854775809 does not fit in 64 bits", 1, 15,
      "0 <= seed <= 9223372036854775807" },
    /* names */
    { "&model\n  n_layers = 4\n/\n", "unknown key 'n_layers' in &model", 2, 3, "did you mean 'n_layer'?" },
    { "&train stpes = 4 /", "unknown key 'stpes' in &train", 1, 8, "did you mean 'steps'?" },
    { "&train warmup = 4 /", "unknown key 'warmup'", 1, 8, "did you mean 'warmup_steps'?" },
    { "&model lr = 1e-3 /", "'lr' belongs to &train, not &model", 1, 8, "move it into &train" },
    { "&model seed = 1 /", "'seed' belongs to &train, &data and &sample, not &model", 1, 8, NULL },
    { "&model batch_sise = 1 /", "unknown key 'batch_sise' in &model", 1, 8,
      "did you mean 'batch_size'? (it belongs to &train)" },
    { "&model xyzzy = 1 /", "unknown key 'xyzzy' in &model", 1, 8, "the keys of &model are: arch, n_layer, n_head" },
    { "! c\n&modle n_layer = 2 /", "unknown group &modle", 2, 1, "did you mean &model?" },
    { "&optim /", "unknown group &optim", 1, 1, "the groups are &model, &parallel, &train, &data, &io" },
    /* types */
    { "&model n_layer = 2.5 /", "n_layer expects an integer, got 2.5 (a real)", 1, 18, "from 1 to 4096" },
    { "&train steps = 1e3 /", "steps expects an integer", 1, 16, "write steps = 1000" },
    { "&model n_layer = '4' /", "n_layer expects an integer, got '4' (a string)", 1, 18, NULL },
    { "&train lr = .true. /", "lr expects a real number", 1, 13, "6d-4" },
    { "&parallel sequence_parallel = 1 /", "sequence_parallel expects a logical", 1, 31, ".true." },
    { "&data path = input.txt /", "path expects a quoted string, got input.txt (an unquoted word)", 1, 14,
      "write path = 'input.txt'" },
    { "&train device = cuda /", "device expects a quoted string", 1, 17, "write device = 'cuda'" },
    /* ranges and choices */
    { "&model n_layer = 0 /", "n_layer = 0 is out of range [1, 4096]", 1, 18, "1 <= n_layer <= 4096" },
    { "&model\n\n   d_model = 2000000 /", "d_model = 2000000 is out of range [1, 1048576]", 3, 14, NULL },
    { "&train lr = 11.0 /", "lr = 11 is out of range [0, 10]", 1, 13, NULL },
    { "&train beta1 = -0.5 /", "beta1 = -0.5 is out of range [0, 0.999999]", 1, 16, NULL },
    { "&parallel schedule = 'zigzag' /", "schedule = 'zigzag' is not one of 'gpipe', '1f1b', 'interleaved'", 1,
      22, "choose one of" },
    { "&parallel schedule = '1fb1' /", "is not one of", 1, 22, "did you mean schedule = '1f1b'?" },
    { "&parallel schedule = 'zb-h3' /", "is not one of 'gpipe', '1f1b', 'interleaved', 'file', 'zb-h1', 'zb-h2', 'zbv'",
      1, 22, "did you mean schedule = 'zb-h1'?" },
    /* duplicates, several values */
    { "&train\n  lr = 1e-3\n  steps = 4\n  lr = 2e-3 /", "duplicate key 'lr' (first set at line 2)", 4, 3, NULL },
    { "&train\n  lr = 1e-3\n/\n&io /\n&TRAIN steps = 2 /", "&train is given twice (first at line 1)", 5, 1,
      "merge the two into one &train group" },
    { "&model n_layer = 2 N_LAYER = 3 /", "duplicate key 'n_layer' (first set at line 1)", 1, 20, NULL },
    { "&model n_layer = 2, 3 /", "n_layer takes a single value, but 2 are given", 1, 21, "n_layer = 2" },
    { "&train lr = 2*0.5 /", "lr takes a single value, but 2 are given", 1, 13, NULL },
    /* characters outside ASCII that look like ASCII or show nothing: named, with what to write */
    { "&model n_layer\xc2\xa0= 4 /", "(it holds U+00A0, a no-break space, after 'n_layer')", 1, 8,
      "type a plain space" },
    { "&model n_layer = 4\xe2\x80\x8b /", "(it holds U+200B, a zero-width space, after '4')", 1, 18, "delete it" },
    { "&model n_layer = 4 /\n\xef\xbb\xbf&train steps = 2 /", "(it starts with U+FEFF, a byte order mark)", 2, 1,
      "one is skipped only at the deck's start" },
    { "&data path = \xe2\x80\x98in.txt\xe2\x80\x99 /", "(it starts with U+2018, a typographic single quote)", 1, 14,
      "quote strings with the ASCII '" },
    { "&model n_layer = \xe2\x88\x92" "4 /", "(it starts with U+2212, a minus sign)", 1, 18, "hyphen-minus" },
    { "&model n_layer = 4\xc3\xa9 /", "(it holds U+00E9, a character outside ASCII, after '4')", 1, 18,
      "only a quoted string may hold other characters" },
    { "&model n_l\xe9yer = 4 /", "(it holds the byte 0xE9, which is not UTF-8, after 'n_l')", 1, 8,
      "save the deck as UTF-8" },
    { "&model n_layer = 4\xe2\x41\x80 /", "(it holds the byte 0xE2, which is not UTF-8, after '4')", 1, 18, NULL },
    { "&model n_layer = 4\xed\xa0\x80 /", "(it holds the byte 0xED, which is not UTF-8, after '4')", 1, 18, NULL },
    { "&model n_layer = 4\xc2\x9b" "31m /", "(it holds U+009B, a character outside ASCII, after '4')", 1, 18, NULL },
};

static int check_error(int rc, const struct deck_error *err, const char *what, int line, int col,
                       const char *hint)
{
    int ok = rc == -1 && strstr(err->what, what) && err->line == line && err->col == col && err->hint[0] &&
             (!hint || strstr(err->hint, hint));
    if (!ok)
        tap_diag("got rc %d, %s:%d:%d: %s (hint: %s); wanted %d:%d: %s (hint: %s)", rc, err->file, err->line,
                 err->col, err->what, err->hint, line, col, what, hint ? hint : "any");
    return ok;
}

/* A message a terminal shows as it is: well-formed UTF-8 without control
 * characters (a Latin-1 byte of the deck quoted in it is shown as '?'). */
static int shows(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        int len = utf8_length((const unsigned char *)s + i, n - i);
        if (len == 0 || ((unsigned char)s[i] < 0x20 && s[i] != '\n') || s[i] == 0x7f ||
            (len == 2 && utf8_code_point((const unsigned char *)s + i, 2) < 0xA0))
            return 0;
        i += (size_t)len;
    }
    return 1;
}

static int read_bad_deck(struct config *cfg, const char *text, struct deck_error *err)
{
    return config_read_string(cfg, text, "bad.nml", err);
}

/* Each of n bad texts, read by read on the defaults, fails with its message
 * at its place, in file. */
static void test_bad(const struct bad *list, size_t n, int (*read)(struct config *, const char *, struct deck_error *),
                     const char *file)
{
    for (size_t i = 0; i < n; i++) {
        const struct bad *b = &list[i];
        struct config c;
        struct deck_error err;
        config_defaults(&c);
        int rc = read(&c, b->text, &err);
        int shown = shows(err.what) && shows(err.hint);
        if (!shown) tap_diag("a byte no terminal shows in: %s (hint: %s)", err.what, err.hint);
        tap_ok(check_error(rc, &err, b->what, b->line, b->col, b->hint) && strcmp(err.file, file) == 0 && shown,
               "bad %s %zu -> %d:%d %s", read == config_override ? "override" : "deck", i + 1, b->line, b->col,
               b->what);
    }
}

/* A UTF-8 byte order mark (Windows editors write one) is not text before
 * the first group: gfortran reads past it. */
static void test_byte_order_mark(void)
{
    struct config c;
    struct deck_error err;
    int ok = read_ok(&c, "\xef\xbb\xbf&train seed = 5 /\n");
    tap_ok(ok && c.train.seed == 5, "a deck that starts with a UTF-8 byte order mark reads");
    config_defaults(&c);
    int rc = config_read_string(&c, "\xef\xbb\xbfn_layer = 4\n", "bom.nml", &err);
    tap_ok(check_error(rc, &err, "text outside a group: 'n_layer'", 1, 1, NULL),
           "after a byte order mark, columns count from the first visible character");
}

static void test_long_string_and_atomic(void)
{
    char text[1024];
    struct config c, d;
    struct deck_error err;
    snprintf(text, sizeof text, "&data path = '%0600d' /", 0);
    config_defaults(&c);
    int rc = config_read_string(&c, text, "long.nml", &err);
    tap_ok(check_error(rc, &err, "path is 600 bytes long, more than the 511 allowed", 1, 14, NULL),
           "a string longer than CONFIG_STRLEN - 1 is refused");
    config_defaults(&c);
    config_defaults(&d);
    rc = config_read_string(&c, "&model n_layer = 3 /\n&train lr = 'x' /", "x.nml", &err);
    char *a = echo_text(&c), *b = echo_text(&d);
    tap_ok(rc == -1 && strcmp(a, b) == 0, "a deck that fails part way changes nothing");
    free(a);
    free(b);
    rc = config_read_file(&c, "/nonexistent/deck.nml", &err);
    tap_ok(rc == -1 && strstr(err.what, "cannot open it (No such file or directory)") && strcmp(err.file, "/nonexistent/deck.nml") == 0 &&
               err.line == 0,
           "a missing file names the file and the reason");
}

static const struct bad bad_overrides[] = {
    { "model.n_layers=3", "unknown key 'n_layers' in &model (in the override 'model.n_layers=3')", 1, 7,
      "did you mean 'n_layer'?" },
    { "modle.n_layer=3", "unknown group &modle", 1, 1, "did you mean &model?" },
    { "model.n_layer=2.5", "n_layer expects an integer", 1, 15, NULL },
    { "model.n_layer=0", "n_layer = 0 is out of range", 1, 15, NULL },
    { "n_layer=3", "override 'n_layer=3' does not name a group", 1, 1, "e.g. model.n_layer=3" },
    { "model.n_layer", "has no '='", 1, 1, "group.key=value" },
    { "model.n_layer=", "missing value", 1, 15, NULL },
    { "train.lr=1e-3 2e-3", "lr takes a single value, but 2 are given", 1, 15, NULL },
    { "model.lr=1", "'lr' belongs to &train, not &model", 1, 7, NULL },
    { "train.steps=1.2.3", "'1.2.3' is not a valid value", 1, 13, NULL },
    { "parallel.schedule=zigzag", "schedule = 'zigzag' is not one of", 1, 19, NULL },
    { "train.steps=5/", "unexpected '/' in a value", 1, 14, NULL },
    /* a carriage return in a string: the effective deck it is echoed into would refuse it as a line end */
    { "io.run_dir=/tmp/x\rY", "run_dir contains a line break (a carriage return)", 1, 12, "remove the line break" },
    /* a bare value that itself starts with a quote */
    { "sample.prompt='Tis so", "unterminated string", 1, 15,
      "a value that itself starts with ' is written sample.prompt=\"'Tis so\"" },
    { "io.run_dir=\"it's", "unterminated string", 1, 12, "is written io.run_dir=\"\"\"it's\"" },
};

/* ------------------------------------------------------------ cross-checks */

struct bad_combo {
    const char *text;
    int world;
    const char *what, *hint;
};

static const struct bad_combo bad_combos[] = {
    { "&model d_model = 770 /", 1, "d_model = 770 is not divisible by n_head = 12",
      "use d_model = 768 or 780, or n_head = 11 or 14" },
    { "&model d_model = 8, n_head = 12 /", 1, "d_model = 8 is not divisible by n_head = 12",
      "use d_model = 12, or n_head = 8" },
    { "&parallel tp = 2, sequence_parallel = T / &model seq_len = 15 /", 2, "seq_len = 15 is not divisible by tp = 2",
      "seq_len = 14 or 16" },
    /* a tp suggested divides the heads as well as the width refused (6 and 10 divide 60, not 8 heads) */
    { "&model arch = 'llama', n_head = 8, n_kv_head = 8, d_model = 64, ffn_hidden = 60 / &parallel tp = 8 /", 8,
      "the MLP hidden width 60 (ffn_hidden) is not divisible by tp = 8", "use ffn_hidden = 56 or 64, or tp = 4" },
    { "&model n_layer = 8 / &parallel pp = 2, virtual_stages = 2, schedule = 'interleaved' / &train batch_size = 5, micro_batch_size = 1 /",
      2, "schedule = 'interleaved' cannot run 5 micro-batches per replica on pp = 2", "change batch_size" },
    { "&parallel virtual_stages = 2 /", 1, "virtual_stages = 2 needs schedule = 'interleaved'",
      "set schedule = 'interleaved'" },
    { "&parallel virtual_stages = 2, schedule = 'interleaved' /", 1, "needs pipeline parallelism (pp > 1)",
      "virtual_stages = 1" },
    { "&model n_layer = 8 / &parallel pp = 2, schedule = 'zbv' /", 2,
      "schedule = 'zbv' runs two chunks on each of pp >= 2 ranks, in a V (stages r and 2pp-1-r on rank r), but "
      "virtual_stages = 1 and pp = 2", "set virtual_stages = 2" },
    { "&parallel virtual_stages = 2, schedule = 'zbv' /", 1, "but virtual_stages = 2 and pp = 1",
      "set pp >= 2 and virtual_stages = 2, or schedule = '1f1b'" },
    { "&model n_layer = 8 / &parallel pp = 2, virtual_stages = 2, schedule = 'zb-h1' /", 2,
      "virtual_stages = 2 needs schedule = 'interleaved', but schedule = 'zb-h1'", "'zbv' for 2 chunks" },
    { "&parallel sequence_parallel = T /", 1, "sequence_parallel = .true. needs tensor parallelism (tp > 1)",
      "set sequence_parallel = .false." },
    { "&train precision = 'fp16', loss_scale = 1024, loss_scale_min = 4096 /", 1,
      "loss_scale_min = 4096 is above the initial loss_scale = 1024", "set loss_scale_min <= loss_scale" },
#ifndef HAVE_CUDA
    { "&train device = 'cuda' /", 1, "device = 'cuda') is not available", "set device = 'cpu'" },
#endif
    { "&train device = 'cuda' / &diag stage_through_host = T /", 1, "diag.stage_through_host is for device = 'cpu'",
      "set diag.stage_through_host = .false." },
    { "&train tf32 = T /", 1, "train.tf32 = .true. is for device = 'cuda'", "set tf32 = .false., or device = 'cuda'" },
    { "&train device = 'cuda', tf32 = T, precision = 'bf16' /", 1,
      "a bf16 run multiplies on bf16 tensor cores already", "set tf32 = .false." },
    { "&parallel dp = 4 /", 2, "tp * dp * pp = 1 * 4 * 1 = 4, but 2 ranks were launched",
      "set dp = 2 (or dp = 0 to derive it), or launch 4 ranks" },
    { "&train batch_size = 10 /", 4, "batch_size = 10 is not divisible by dp = 4", "use batch_size = 8 or 12" },
    { "&train batch_size = 16, micro_batch_size = 3 /", 2,
      "batch_size = 16 is not divisible by dp * micro_batch_size = 2 * 3 = 6",
      "use batch_size = 12 or 18, or micro_batch_size = 2 or 4" },
    { "&train batch_size = 10, micro_batch_size = 4 /", 0, "batch_size = 10 is not divisible by micro_batch_size = 4",
      "use batch_size = 8 or 12, or micro_batch_size = 2 or 5" },
    { "&train min_lr = 1e-3 /", 1, "min_lr = 0.001 is larger than lr = 0.0006", "min_lr = 6e-05" },
    { "&train steps = 100, warmup_steps = 200 /", 1, "warmup_steps = 200 is larger than steps = 100",
      "warmup_steps <= 100" },
    { "&data kind = 'text' /", 1, "kind = 'text' needs a file, but path is empty", "set path = 'input.txt'" },
    { "&data kind = 'tokens' /", 1, "kind = 'tokens' needs a file", "llm.c token shards" },
    { "&data kind = 'text', path = 'a.txt' /\n&model vocab_size = 100 /", 1,
      "kind = 'text' reads bytes (256 token ids), but vocab_size = 100", "set vocab_size = 256" },
    { "&data path = 'a.txt' /", 1, "path = 'a.txt' is set, but kind = 'synthetic' reads no file",
      "set kind = 'text'" },
    { "&train batch_size = 64 /", 1, "the logits (micro-batch * seq_len / cp * padded vocab_size / tp) would hold "
      "3296722944 elements", "set micro_batch_size = 32" },
    { "&parallel cp = 2 / &model seq_len = 1026 /", 2,
      "seq_len = 1026 is not divisible by 2 * cp = 4 (context parallelism cuts every sequence into 2 * cp equal chunks",
      "use seq_len = 1024 or 1028" },
    { "&parallel tp = 4, cp = 2, sequence_parallel = T / &model seq_len = 12 /", 8,
      "seq_len / cp = 12 / 2 = 6 is not divisible by tp = 4", "use seq_len = 16" },
    { "&parallel cp = 2, dp = 2 /", 2, "tp * cp * dp * pp = 1 * 2 * 2 * 1 = 4, but 2 ranks were launched",
      "set dp = 1 (or dp = 0 to derive it), or launch 4 ranks" },
    { "&parallel tp = 2, cp = 2 /", 6, "6 ranks cannot be split into replicas of tp * cp * pp = 2 * 2 * 1 = 4 ranks",
      "launch a multiple of 4 ranks" },
    { "&train device = 'cuda' / &model d_model = 1536, n_head = 6 /", 1,
      "the head size d_model / n_head = 256 is above 128, the largest the CUDA backend's fused attention takes",
      "use more heads" },
    { "&model d_model = 65536, n_head = 1, seq_len = 8 /\n&train batch_size = 1 /", 1,
      "the token embedding (padded vocab_size / tp * d_model) has 3296722944 elements", "reduce d_model" },
};

static void test_validate(void)
{
    for (size_t i = 0; i < sizeof bad_combos / sizeof bad_combos[0]; i++) {
        const struct bad_combo *b = &bad_combos[i];
        struct config c;
        struct deck_error err;
        int ok = read_ok(&c, b->text), rc = config_validate(&c, b->world, &err);
        tap_ok(ok && check_error(rc, &err, b->what, 0, 0, b->hint), "cross-check on %d ranks: %s", b->world,
               b->what);
    }
    struct config c;
    struct deck_error err;
    config_defaults(&c);
    tap_ok(config_validate(&c, 1, &err) == 0 && config_validate(&c, 8, &err) == 0 &&
               config_validate(&c, 0, &err) == 0,
           "the defaults are valid on 1 and 8 ranks and with the world unknown");
    tap_ok(shape_dp(&c, 8) == 8 && shape_micro_batch(&c, 8) == 1 && shape_dp(&c, 0) == 0 &&
               shape_micro_batch(&c, 0) == 0,
           "shape_dp and shape_micro_batch derive dp = world and micro-batch = batch / dp");
    read_ok(&c, "&parallel dp = 2 / &train batch_size = 12, micro_batch_size = 3 /");
    tap_ok(config_validate(&c, 2, &err) == 0 && shape_dp(&c, 5) == 2 && shape_micro_batch(&c, 2) == 3,
           "explicit dp and micro_batch_size are returned as given");
    read_ok(&c, "&train batch_size = 64 /");
    tap_ok(config_validate(&c, 0, &err) == 0 && config_validate(&c, 2, &err) == 0,
           "micro-batch sizes are checked only once the micro-batch is known (64 on 2 ranks fits)");
    read_ok(&c, "&parallel cp = 2 / &train batch_size = 64 /");
    tap_ok(config_validate(&c, 2, &err) == 0 && shape_dp(&c, 2) == 1 && shape_micro_batch(&c, 2) == 64,
           "cp = 2 on 2 ranks: dp = 1, and a rank's logits (64 x 512 positions) fit where 64 x 1024 do not");
    read_ok(&c, "&train steps = 0, warmup_steps = 100 /");
    tap_ok(config_validate(&c, 1, &err) == 0, "warmup_steps > steps is fine when steps = 0");
}

/* The deck's ENUM words become the enums of the layers below once, in the
 * shape: every word of params.def maps to its own enum, and the schedule's
 * name in the pipeline's messages is the deck's word (params.def's
 * identifier with '-' for '_', as config_word spells it). */
#define WORD_OF(P, word) #word,
static void dashed(char *buf, size_t n, const char *word)
{
    snprintf(buf, n, "%s", word);
    for (char *p = buf; *p; p++)
        if (*p == '_') *p = '-';
}
static void test_shape_enums(void)
{
    static const char *const schedules[] = {PARALLEL_SCHEDULE(WORD_OF, ~)};
    static const char *const precisions[] = {TRAIN_PRECISION(WORD_OF, ~)};
    static const enum precision prec_of[] = {PREC_FP32, PREC_BF16, PREC_FP16};
    _Static_assert(sizeof precisions / sizeof precisions[0] == sizeof prec_of / sizeof prec_of[0], "a word each");
    int n = (int)(sizeof schedules / sizeof schedules[0]), same = 0;
    char deck[128];
    for (int i = 0; i < n; i++) {
        struct config c;
        struct run_shape s;
        char word[64];
        dashed(word, sizeof word, schedules[i]);
        snprintf(deck, sizeof deck, "&parallel schedule = '%s' /", word);
        read_ok(&c, deck);
        run_shape_init(&s, &c, 1, 0);
        same += (int)c.parallel.schedule_id == i && strcmp(pp_schedule_name(s.sched), word) == 0 &&
                strcmp(c.parallel.schedule, word) == 0;
    }
    tap_ok(same == n, "every parallel.schedule word is the name of its enum pp_schedule (%d of %d)", same, n);
    /* '-' and '_' are one character in a word, in any case; the deck's
     * spelling stored and shown is the dashed one */
    static const char *const spellings[] = {"zb-h1", "zb_h1", "ZB_H1", "Zb-H1"};
    same = 0;
    for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; i++) {
        struct config c;
        snprintf(deck, sizeof deck, "&parallel schedule = '%s' /", spellings[i]);
        read_ok(&c, deck);
        same += c.parallel.schedule_id == PARALLEL_SCHEDULE_zb_h1 && strcmp(c.parallel.schedule, "zb-h1") == 0;
    }
    tap_ok(same == 4, "schedule = 'zb-h1', 'zb_h1', 'ZB_H1' and 'Zb-H1' all read as 'zb-h1' (%d of 4)", same);
    n = (int)(sizeof precisions / sizeof precisions[0]), same = 0;
    for (int i = 0; i < n; i++) {
        struct config c;
        struct run_shape s;
        snprintf(deck, sizeof deck, "&train precision = '%s' /", precisions[i]);
        read_ok(&c, deck);
        run_shape_init(&s, &c, 1, 0);
        same += (int)c.train.precision_id == i && s.prec == prec_of[i];
    }
    tap_ok(same == n, "every train.precision word gives its enum precision (%d of %d)", same, n);
}

/* ------------------------------------------------------------ printing, docs */

static void test_print(void)
{
    struct deck_error e = { .file = "d.nml", .line = 3, .col = 7, .what = "bad", .hint = "fix" };
    char *s = print_text(&e);
    tap_ok(strcmp(s, "d.nml:3:7: error: bad\n  hint: fix\n") == 0, "error print: file:line:col and the hint");
    free(s);
    e.col = 0;
    e.hint[0] = '\0';
    s = print_text(&e);
    tap_ok(strcmp(s, "d.nml:3: error: bad\n") == 0, "error print: file:line: without a column, no hint line");
    free(s);
    e.line = 0;
    s = print_text(&e);
    tap_ok(strcmp(s, "d.nml: error: bad\n") == 0, "error print: file: without a line");
    free(s);
    e.file[0] = '\0';
    s = print_text(&e);
    tap_ok(strcmp(s, "error: bad\n") == 0, "error print: no file");
    free(s);
}

static void test_doc(void)
{
    char *doc = doc_text();
    const char *key_rows[] = { "| `n_layer` | integer | `12` | 1 ... 4096 |", "| `lr` | real | `0.0006` | 0 ... 10 |",
                               "| `schedule` | choice | `'1f1b'` | `'gpipe'`, `'1f1b'`, `'interleaved'`, `'file'`, `'zb-h1'`, `'zb-h2'`, `'zbv'` |",
                               "| `path` | string | `''` |", "| `shuffle` | logical | `.false.` |" };
    int rows = 1;
    for (size_t i = 0; i < sizeof key_rows / sizeof key_rows[0]; i++) rows &= strstr(doc, key_rows[i]) != NULL;
    tap_ok(strncmp(doc, "# ", 2) == 0 && rows, "the reference has a title and one row per key");
    /* The example deck in the reference must itself be a valid deck. */
    char *start = strstr(doc, "```fortran\n"), *end = start ? strstr(start + 11, "```\n") : NULL;
    struct config c;
    struct deck_error err;
    int ok = 0;
    if (start && end) {
        *end = '\0';
        ok = read_ok(&c, start + 11) && config_validate(&c, 1, &err) == 0 && c.model.n_layer == 4 &&
             c.train.lr == 1e-3;
    }
    tap_ok(ok, "the example deck in the reference parses and validates");
    free(doc);
}

int main(void)
{
    test_full_deck();
    test_deck_syntax();
    test_integers_as_reals();
    test_byte_order_mark();
    test_dollar_groups();
    test_empty_and_comments();
    test_round_trip();
    test_overrides();
    test_bad(bad_decks, sizeof bad_decks / sizeof bad_decks[0], read_bad_deck, "bad.nml");
    test_long_string_and_atomic();
    test_bad(bad_overrides, sizeof bad_overrides / sizeof bad_overrides[0], config_override, "command line");
    test_validate();
    test_shape_enums();
    test_print();
    test_doc();
    return tap_done();
}
