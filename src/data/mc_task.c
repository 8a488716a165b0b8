/* mc_task.c -- multiple-choice tasks from llm.c's eval files and JSON Lines (mc_task.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "mc_task.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "json.h"
#include "log.h"

#define EVAL_MAGIC 20240522     /* llm.c's eval files */
#define EVAL_VERSION 1
#define EVAL_HEADER_BYTES (256 * 4)
#define EVAL_START 65535        /* <START_EXAMPLE> */
#define EVAL_FIXED 6            /* uint16 before the context's ids: start, bytes, index, label, choices, length */
#define EVAL_FILE_MAX ((size_t)1 << 30) /* an eval file is read whole; over 1 GiB is not one */

int mc_task_is_jsonl(const char *path)
{
    size_t n = strlen(path);
    return (n >= 6 && !strcmp(path + n - 6, ".jsonl")) || (n >= 5 && !strcmp(path + n - 5, ".json"));
}

/* v appended to *a (*n of *cap used, grown from `first`); -1 out of memory
 * (the array kept). */
static int push_to(int32_t **a, size_t *n, size_t *cap, size_t first, int32_t v)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : first;
        int32_t *grown = realloc(*a, c * sizeof *grown);
        if (!grown) return -1;
        *a = grown, *cap = c;
    }
    (*a)[(*n)++] = v;
    return 0;
}

/* v appended to the stream. */
static int push(struct mc_task *t, size_t *cap, int32_t v) { return push_to(&t->stream, &t->len, cap, 4096, v); }

/* The characters (Unicode code points: the bytes that do not continue a
 * UTF-8 sequence) of the text s after its leading whitespace (Python's
 * str.isspace, as the context's trailing whitespace): what
 * lm-evaluation-harness's acc_norm divides by, len(choice), the target
 * delimiter (a space) not counted. */
static int32_t choice_chars(const char *s)
{
    s += tok_lstrip(s, strlen(s));
    int32_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int out_of_memory(const struct mc_task *t, const char *path, char *err, size_t errlen)
{
    return errorf(err, errlen, "%s: out of memory for a task of %zu ids", path, t->len);
}

const int32_t *mc_choice(const struct mc_task *t, int64_t e, int c, int *n)
{
    const int32_t *s = t->stream + t->at[e] + 3 + t->stream[t->at[e] + 2];
    for (int k = 0; k < c; k++) s += 1 + s[0];
    *n = s[0];
    return s + 1;
}

static int check_ids(const int32_t *ids, int n, int V, const char *path, const char *where, const char *part,
                     char *err, size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return errorf(err, errlen, "%s: %s: id %d (%s, token %d) is not in the model's vocabulary (0 .. %d)\n"
                          "  hint: the task was made with another tokenizer than the model's", path, where, ids[i],
                          part, i + 1, V - 1);
    return 0;
}

/* The example at t->stream[at..t->len), read from `where` of path: two
 * choices or more, the label one of them, nothing empty, every id < V,
 * the context and each choice in T positions (the choice's last token is
 * a target only). */
static int check_example(const struct mc_task *t, size_t at, const char *path, const char *where, int V, int T,
                         char *err, size_t errlen)
{
    const int32_t *s = t->stream + at;
    int label = s[0], nch = s[1], nctx = s[2];
    if (nch < 2)
        return errorf(err, errlen, "%s: %s has %d choice%s: a multiple-choice example needs two or more", path, where,
                      nch, nch == 1 ? "" : "s");
    if (label < 0 || label >= nch)
        return errorf(err, errlen, "%s: %s: label %d is not one of its %d choices (0 .. %d)\n"
                      "  hint: the label is the 0-based index of the right choice", path, where, label, nch, nch - 1);
    if (nctx < 1)
        return errorf(err, errlen, "%s: %s: the context is empty, so a choice's first token follows nothing\n"
                      "  hint: give each example a context", path, where);
    if (check_ids(s + 3, nctx, V, path, where, "the context", err, errlen)) return -1;
    size_t p = 3 + (size_t)nctx;
    for (int c = 0; c < nch; c++) {
        int n = s[p];
        char part[32];
        snprintf(part, sizeof part, "choice %d", c);
        if (n < 1) return errorf(err, errlen, "%s: %s: choice %d is empty", path, where, c);
        if (check_ids(s + p + 1, n, V, path, where, part, err, errlen)) return -1;
        if ((int64_t)nctx + n - 1 > T)
            return errorf(err, errlen, "%s: %s: choice %d does not fit the model's seq_len = %d: its context (%d "
                          "ids) and its own %d ids take %lld positions\n  hint: a model of a longer seq_len, or a "
                          "task with shorter examples", path, where, c, T, nctx, n, (long long)nctx + n - 1);
        p += 1 + (size_t)n;
    }
    return 0;
}

static unsigned rd16(const unsigned char *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }
static int32_t rd32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* llm.c's eval file (dev/data/data_common.py, write_evalfile). */
static int read_llmc(struct mc_task *t, const char *path, int V, int T, int64_t max, char *err, size_t errlen)
{
    size_t size, cap = 0;
    char *text, why[256];
    if (file_read_all(path, EVAL_FILE_MAX, "an eval file", &text, &size, why, sizeof why))
        return errorf(err, errlen, "%s: %s", path, why);
    const unsigned char *b = (const unsigned char *)text;
    int rc = -1;
    int32_t magic = size >= 16 ? rd32(b) : 0, version = size >= 16 ? rd32(b + 4) : 0;
    int32_t count = size >= 16 ? rd32(b + 8) : 0, longest = size >= 16 ? rd32(b + 12) : 0;
    if (size < EVAL_HEADER_BYTES)
        errorf(err, errlen, "%s: %zu bytes, fewer than the 1024 of an llm.c eval file's header: not such a file, or "
               "truncated", path, size);
    else if (magic != EVAL_MAGIC)
        errorf(err, errlen, "%s: magic %d is not llm.c's eval file's %d%s%s\n  hint: eval.tasks takes llm.c eval "
               "files (dev/data/hellaswag.py, mmlu.py) or JSON Lines (a name ending in .jsonl)", path, magic, EVAL_MAGIC,
               file_llmc_kind(magic) ? ": it is " : "", file_llmc_kind(magic) ? file_llmc_kind(magic) : "");
    else if (version != EVAL_VERSION)
        errorf(err, errlen, "%s: version %d; llm.c's eval files are version %d", path, version, EVAL_VERSION);
    else if (count < 1 || longest < 2 * EVAL_FIXED)
        errorf(err, errlen, "%s: the header says %d examples, the longest %d bytes: no example fits that", path, count,
               longest);
    else
        rc = 0;
    size_t pos = EVAL_HEADER_BYTES;
    int64_t keep = max > 0 && max < count ? max : count;
    for (int64_t e = 0; rc == 0 && e < keep; e++) {
        char where[48];
        snprintf(where, sizeof where, "example %lld", (long long)e);
        if (size - pos < 2 * EVAL_FIXED) {
            rc = errorf(err, errlen, "%s: the file ends at byte %zu, after %lld of the %d examples its header "
                        "announces: it is truncated", path, size, (long long)e, count);
            break;
        }
        const unsigned char *x = b + pos;
        unsigned bytes = rd16(x + 2);
        if (rd16(x) != EVAL_START) {
            rc = errorf(err, errlen, "%s: %s does not start with <START_EXAMPLE> = 65535 (byte %zu holds %u): the "
                        "file is damaged", path, where, pos, rd16(x));
            break;
        }
        if (bytes < 2 * EVAL_FIXED || bytes % 2 || bytes > (unsigned)longest) {
            rc = errorf(err, errlen, "%s: %s says it is %u bytes: not an even count from %d to the header's longest "
                        "example, %d", path, where, bytes, 2 * EVAL_FIXED, longest);
            break;
        }
        if (bytes > size - pos) {
            rc = errorf(err, errlen, "%s: %s of %d is %u bytes from byte %zu, but the file ends at byte %zu: it is "
                        "truncated", path, where, count, bytes, pos, size);
            break;
        }
        if (rd16(x + 4) != (unsigned)(e & 0xffff)) {
            rc = errorf(err, errlen, "%s: %s carries the index %u: the examples are out of order", path, where,
                        rd16(x + 4));
            break;
        }
        /* the label, the choices, then the context's and each choice's length and ids: exactly its bytes */
        size_t w = EVAL_FIXED - 1, words = bytes / 2, at = t->len;
        int nch = (int)rd16(x + 8), fits = 1, oom = push(t, &cap, (int32_t)rd16(x + 6)) || push(t, &cap, nch);
        for (int part = -1; fits && !oom && part < nch; part++) {
            fits = w < words;
            unsigned n = fits ? rd16(x + 2 * w++) : 0;
            fits = fits && n <= words - w;
            oom |= push(t, &cap, (int32_t)n);
            for (unsigned i = 0; fits && !oom && i < n; i++) oom |= push(t, &cap, (int32_t)rd16(x + 2 * w++));
        }
        if (oom) {
            rc = out_of_memory(t, path, err, errlen);
            break;
        }
        if (!fits || w != words) {
            rc = errorf(err, errlen, "%s: %s: its lengths and ids do not take exactly its %u bytes (the context's "
                        "or a choice's length is wrong): the file is damaged", path, where, bytes);
            break;
        }
        rc = check_example(t, at, path, where, V, T, err, errlen);
        pos += bytes;
    }
    if (rc == 0 && keep == count && pos != size)
        rc = errorf(err, errlen, "%s: %zu bytes follow the last of the %d examples its header announces: the count "
                    "is wrong or the file is damaged", path, size - pos, count);
    free(text);
    return rc;
}

/* The ids of text[0..len) appended to *ids (*n of *cap used): the
 * tokenizer's, or without one the bytes.  0, or -1 with err. */
static int encode_text(const struct tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n,
                       size_t *cap, char *err, size_t errlen)
{
    if (tok) return tok_encode(tok, text, len, 0, ids, n, cap, err, errlen);
    if (*n + len > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *n + len) c *= 2;
        int32_t *grown = realloc(*ids, c * sizeof *grown);
        if (!grown) return errorf(err, errlen, "out of memory");
        *ids = grown, *cap = c;
    }
    for (size_t k = 0; k < len; k++) (*ids)[(*n)++] = (unsigned char)text[k];
    return 0;
}

/* encode_text's error err, of the example at where in path: -1. */
static int text_error(const char *path, const char *where, char *err, size_t errlen)
{
    char why[256];
    snprintf(why, sizeof why, "%s", err);
    return errorf(err, errlen, "%s: %s: %s", path, where, why);
}

/* JSON Lines: {"context": "...", "choices": ["...", ...], "label": k} a line. */
static int read_jsonl(struct mc_task *t, const char *path, const struct tokenizer *tok, int V, int bytes, int T,
                      int64_t max, char *err, size_t errlen)
{
    if (!tok && !bytes)
        return errorf(err, errlen, "%s: JSON Lines hold text, and this model (vocab_size = %d, not trained on bytes: "
                      "data.kind = 'text') has no tokenizer to encode it\n  hint: set eval.tokenizer to the model's "
                      "tokenizer.json (or its folder)", path, V);
    FILE *f = fopen(path, "r");
    if (!f) return errorf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    char *line = NULL, where[48], jerr[256];
    size_t lcap = 0, cap = t->len;
    ssize_t n = 0;
    int rc = 0;
    int32_t doc = tok_doc(tok), *whole = NULL;
    size_t wcap = 0, nnorm = 0, ncap = 0;
    int64_t lineno = 0, examples = 0;
    static const char *const form = "each line {\"context\": \"...\", \"choices\": [\"...\", ...], \"label\": k}";
    while (rc == 0 && (max == 0 || examples < max) && (n = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        size_t i = 0;
        while (i < (size_t)n && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n')) i++;
        if (i == (size_t)n) continue; /* (a blank line) */
        snprintf(where, sizeof where, "line %lld", (long long)lineno);
        size_t m = (size_t)n;
        while (m && (line[m - 1] == '\n' || line[m - 1] == '\r')) m--; /* (the line without its end) */
        struct json *j = json_parse(line, m, jerr, sizeof jerr);
        const struct json *ctx = j ? json_get(j, "context") : NULL, *ch = j ? json_get(j, "choices") : NULL;
        long long label;
        int one = !j && strncmp(jerr, "line 1, ", 8) == 0; /* (the parser's "line 1, column C": the file's line) */
        if (!j) rc = errorf(err, errlen, "%s: %s%s%s", path, where, one ? ", " : ": ", one ? jerr + 8 : jerr);
        else if (j->kind != JSON_OBJECT || !ctx || ctx->kind != JSON_STRING || !ch || ch->kind != JSON_ARRAY ||
                 json_int(j, "label", &label) != 0 || label < INT32_MIN || label > INT32_MAX)
            rc = errorf(err, errlen, "%s: %s: not a task's example: %s (a string, an array of strings, an integer)",
                        path, where, form);
        for (int c = 0; rc == 0 && c < ch->n; c++)
            if (ch->item[c].kind != JSON_STRING)
                rc = errorf(err, errlen, "%s: %s: choice %d is not a string: %s", path, where, c, form);
        size_t at = t->len;
        /* the label, the choices, the context's length (once known), the document's first id */
        if (rc == 0 && (push(t, &cap, (int32_t)label) || push(t, &cap, ch->n) || push(t, &cap, 0) ||
                        (doc >= 0 && push(t, &cap, doc))))
            rc = out_of_memory(t, path, err, errlen);
        /* the context, then each choice, after its length (the split of
         * lm-evaluation-harness: the context's trailing whitespace goes to
         * the choices, and a choice's ids are those of the whole text after
         * the context's own, so that a tokenizer that marks where a word
         * starts (SentencePiece's U+2581) encodes a choice as it reads
         * inside the text, not as a text of its own) */
        const char *cs = rc == 0 ? ctx->string : "";
        size_t clen = strlen(cs), keep = tok_rstrip(cs, clen), from = t->len, ctx_ids = 0;
        if (rc == 0 && encode_text(tok, cs, keep, &t->stream, &t->len, &cap, err, errlen))
            rc = text_error(path, where, err, errlen);
        if (rc == 0) ctx_ids = t->len - from, t->stream[at + 2] = (int32_t)ctx_ids + (doc >= 0);
        for (int c = 0; rc == 0 && c < ch->n; c++) {
            const char *chs = ch->item[c].string;
            size_t len = strlen(chs), got = 0;
            char *text = malloc(clen + len + 1);
            if (!text) {
                rc = out_of_memory(t, path, err, errlen);
                break;
            }
            memcpy(text, cs, clen), memcpy(text + clen, chs, len + 1);
            if (encode_text(tok, text, clen + len, &whole, &got, &wcap, err, errlen))
                rc = text_error(path, where, err, errlen);
            free(text);
            size_t own = got > ctx_ids ? got - ctx_ids : 0;
            if (rc == 0 && own == 0 && len > 0)
                rc = errorf(err, errlen, "%s: %s: choice %d has no ids of its own: the context and the choice encode "
                            "to no more ids than the context alone (the tokenizer merges the choice into the "
                            "context's last token)", path, where, c);
            if (rc == 0 && (push(t, &cap, (int32_t)own) || push_to(&t->norm, &nnorm, &ncap, 256, choice_chars(chs))))
                rc = out_of_memory(t, path, err, errlen);
            for (size_t k = 0; rc == 0 && k < own; k++)
                if (push(t, &cap, whole[ctx_ids + k])) rc = out_of_memory(t, path, err, errlen);
        }
        json_free(j);
        if (rc == 0) rc = check_example(t, at, path, where, V, T, err, errlen);
        examples++;
    }
    /* (getline's -1 is the end, or an error: memory run out, a failed read) */
    int bad = rc == 0 && (ferror(f) || (n < 0 && !feof(f))), e = errno;
    free(whole);
    free(line);
    fclose(f);
    if (bad) return errorf(err, errlen, "cannot read %s: %s", path, e ? strerror(e) : "a read failed");
    if (rc == 0 && examples == 0) return errorf(err, errlen, "%s holds no example: %s", path, form);
    return rc;
}

int mc_task_read(struct mc_task *t, const char *path, const struct tokenizer *tok, int V, int bytes, int T,
                 int64_t max_examples, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    int jsonl = mc_task_is_jsonl(path);
    int rc = jsonl ? read_jsonl(t, path, tok, V, bytes, T, max_examples, err, errlen)
                   : read_llmc(t, path, V, T, max_examples, err, errlen);
    if (rc == 0 && mc_task_index(t)) rc = errorf(err, errlen, "%s: out of memory indexing its examples", path);
    if (rc == 0 && !jsonl) { /* (llm.c's files keep no text: a choice's length is its ids) */
        if (!(t->norm = malloc((size_t)(t->rows ? t->rows : 1) * sizeof *t->norm)))
            rc = errorf(err, errlen, "%s: out of memory for its %lld choices", path, (long long)t->rows);
        for (int64_t e = 0, r = 0; rc == 0 && e < t->n; e++)
            for (int c = 0; c < mc_choices(t, e); c++) mc_choice(t, e, c, &t->norm[r++]);
    }
    if (rc) mc_task_free(t);
    return rc;
}

int mc_task_index(struct mc_task *t)
{
    size_t n = 0;
    for (size_t p = 0; p < t->len; n++) { /* label, choices, then each part's length and ids */
        int parts = 1 + t->stream[p + 1];
        p += 2;
        for (int k = 0; k < parts; k++) p += 1 + (size_t)t->stream[p];
    }
    free(t->at);
    if (!(t->at = malloc((n ? n : 1) * sizeof *t->at))) return -1;
    t->n = (int64_t)n;
    t->rows = 0;
    size_t p = 0;
    for (size_t e = 0; e < n; e++) {
        t->at[e] = p;
        int parts = 1 + t->stream[p + 1];
        t->rows += parts - 1;
        p += 2;
        for (int k = 0; k < parts; k++) p += 1 + (size_t)t->stream[p];
    }
    return 0;
}

void mc_task_free(struct mc_task *t)
{
    free(t->stream);
    free(t->at);
    free(t->norm);
    memset(t, 0, sizeof *t);
}
