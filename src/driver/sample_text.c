/* sample_text.c -- the prompts in, the text out (sample_text.h). */
#include "sample_text.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static void *grow(void *p, size_t bytes)
{
    void *q = realloc(p, bytes);
    if (!q) die("out of memory for the prompts (%zu bytes)", bytes);
    return q;
}

/* Append n ids as one more prompt. */
static void prompts_add(struct prompts *p, const int32_t *ids, int n, size_t *cap)
{
    size_t at = p->n ? p->at[p->n - 1] + (size_t)p->len[p->n - 1] : 0;
    if ((p->n & (p->n - 1)) == 0) { /* (grown at powers of two) */
        p->len = grow(p->len, (size_t)(p->n ? 2 * p->n : 1) * sizeof *p->len);
        p->at = grow(p->at, (size_t)(p->n ? 2 * p->n : 1) * sizeof *p->at);
    }
    while (at + (size_t)n > *cap) *cap = *cap ? 2 * *cap : 1024;
    p->ids = grow(p->ids, *cap * sizeof *p->ids);
    memcpy(p->ids + at, ids, (size_t)n * sizeof *ids);
    p->len[p->n] = n;
    p->at[p->n++] = at;
}

/* The ids of text (len bytes): encoded by tok after its document token, or
 * its bytes.  Their number, -1 with err. */
static int encode(const struct tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *cap, char *err,
                  size_t errlen)
{
    size_t k = 0;
    if (!tok) {
        if (len > *cap) *ids = grow(*ids, (*cap = len) * sizeof **ids);
        for (size_t i = 0; i < len; i++) (*ids)[i] = (unsigned char)text[i];
        return (int)len;
    }
    int32_t doc = tok_doc(tok);
    if (doc >= 0) (*ids)[k++] = doc;
    if (tok_encode(tok, text, len, 0, ids, &k, cap, err, errlen) != 0) return -1;
    return k > (size_t)INT32_MAX / 2 ? errorf(err, errlen, "a prompt of %zu tokens", k) : (int)k;
}

/* One whitespace-separated word of f read whole, however long: its first
 * characters (as shown in a message), its length, and its value where it
 * is an integer (an optional sign, then digits; leading zeros are only
 * zeros); *big where the value exceeds a long long.  0 at the end. */
struct word {
    char shown[64];
    size_t len;
    int integer, big;
    long long v;
};

static int next_word(FILE *f, struct word *w)
{
    int c;
    while ((c = getc(f)) != EOF && isspace(c)) continue;
    if (c == EOF) return 0;
    *w = (struct word){.integer = 1};
    int neg = 0, digits = 0;
    for (; c != EOF && !isspace(c); c = getc(f), w->len++) {
        if (w->len < sizeof w->shown - 1) w->shown[w->len] = (char)c;
        if (w->len == 0 && (c == '-' || c == '+')) neg = c == '-';
        else if (!isdigit(c)) w->integer = 0;
        else if (digits++, w->v > (LLONG_MAX - (c - '0')) / 10) w->big = 1;
        else if (!w->big) w->v = w->v * 10 + (c - '0');
    }
    w->shown[w->len < sizeof w->shown - 1 ? w->len : sizeof w->shown - 1] = 0;
    w->integer &= digits > 0;
    if (neg) w->v = -w->v;
    return 1;
}

/* The ids of sample.prompt_tokens: whitespace-separated, each in the
 * vocabulary (and one the output's text can show: with a tokenizer an id
 * it decodes, without one where the text is bytes a byte); every one is checked and counted, at most T kept (a file of any
 * length is read in T ids of memory). */
static int read_ids(const char *path, const struct tokenizer *tok, int V, int bytes, int T, int32_t **ids, size_t *cap,
                    char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) return errorf(err, errlen, "cannot open sample.prompt_tokens = '%s': %s", path, strerror(errno));
    if (*cap < (size_t)T) *ids = grow(*ids, (*cap = (size_t)T) * sizeof **ids);
    long long count = 0;
    struct word w;
    while (next_word(f, &w)) { /* (each word read whole: a number too large is named as written) */
        const char *more = w.len >= sizeof w.shown ? "..." : "";
        if (!w.integer) {
            fclose(f);
            return errorf(err, errlen, "%s: '%s%s' (id number %lld) is not an integer: the file holds "
                          "whitespace-separated token ids", path, w.shown, more, count + 1);
        }
        if (w.big || w.v < 0 || w.v >= V) {
            fclose(f);
            return errorf(err, errlen, "%s: token %s%s (id number %lld) is not an id of this model's vocabulary "
                          "(0 .. %d)", path, w.shown, more, count + 1, V - 1);
        }
        if (!tok && bytes && w.v > 255) {
            fclose(f);
            return errorf(err, errlen, "%s: token %lld (id number %lld) is no byte: this model's text is its bytes (ids "
                          "0 .. 255, the %d above them padding), so the output could not be printed\n  hint: give "
                          "ids below 256", path, w.v, count + 1, V - 256);
        }
        if (tok && !tok_has_id(tok, (int32_t)w.v)) {
            fclose(f);
            return errorf(err, errlen, "%s: token %lld (id number %lld) is not an id of the tokenizer (0 .. %d%s), "
                          "so the output could not be decoded to text\n  hint: give ids the tokenizer has, or set "
                          "sample.tokenizer = 'none' to sample without it", path, w.v, count + 1,
                          tok_vocab_size(tok) - 1, w.v < tok_vocab_size(tok) ? ", which has no token of that id" : "");
        }
        if (count < T) (*ids)[count] = (int32_t)w.v;
        count++;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) return errorf(err, errlen, "%s: cannot read it (after %lld ids)", path, count);
    if (count > T) return errorf(err, errlen, "%s holds %lld ids, more than the model's seq_len = %d", path, count, T);
    return (int)count;
}

/* A prompt of n ids (`where` names it) must be non-empty, with room for
 * max_new_tokens more in T positions: 0, or -1 with err. */
static int check_room(int n, const char *where, const struct config *o, int T, char *err, size_t errlen)
{
    if (n == 0) return errorf(err, errlen, "%s is empty: set sample.prompt, sample.prompt_tokens or "
                              "sample.prompt_file", where);
    if ((long long)n + o->sample.max_new_tokens > T)
        return errorf(err, errlen, "%s (%d tokens) and max_new_tokens = %lld exceed the model's seq_len = %d", where, n,
                      (long long)o->sample.max_new_tokens, T);
    return 0;
}

/* sample.prompt_file: one prompt a line (a final newline ends the last; "\r\n" is a newline too). */
static int read_file(struct prompts *p, const struct config *o, const struct tokenizer *tok, int T, int32_t **ids,
                     size_t *icap, size_t *cap, char *err, size_t errlen)
{
    const char *path = o->sample.prompt_file;
    FILE *f = fopen(path, "rb");
    if (!f) return errorf(err, errlen, "cannot open sample.prompt_file = '%s': %s", path, strerror(errno));
    char *line = NULL, where[600];
    size_t lcap = 0;
    ssize_t got;
    int no = 0, rc = 0;
    while (rc == 0 && (got = getline(&line, &lcap, f)) >= 0) {
        no++;
        size_t len = (size_t)got;
        if (len && line[len - 1] == '\n') len--;
        if (len && line[len - 1] == '\r') len--;
        snprintf(where, sizeof where, "prompt %d (line %d of %s)", p->n + 1, no, path);
        if (len == 0) {
            snprintf(err, errlen, "%s is empty: one prompt a line, no empty lines", where);
            rc = -1;
            break;
        }
        int n = encode(tok, line, len, ids, icap, err, errlen);
        if (n < 0 || check_room(n, where, o, T, err, errlen) != 0) rc = -1;
        else prompts_add(p, *ids, n, cap);
    }
    if (rc == 0 && ferror(f)) rc = -1, snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    free(line);
    fclose(f);
    if (rc == 0 && p->n == 0) rc = -1, snprintf(err, errlen, "sample.prompt_file = '%s' holds no prompts", path);
    return rc;
}

int prompts_read(struct prompts *p, const struct config *o, const struct tokenizer *tok, int V, int bytes, int T,
                 char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    int given = !!o->sample.prompt[0] + !!o->sample.prompt_tokens[0] + !!o->sample.prompt_file[0];
    if (given > 1) return errorf(err, errlen, "set one of sample.prompt, sample.prompt_tokens and "
                                   "sample.prompt_file, not %d", given);
    if (!tok && !o->sample.prompt_tokens[0] && !bytes)
        return errorf(err, errlen, "without a tokenizer a prompt's text is its bytes, but this model of %d ids was not "
                      "trained on bytes (data.kind = 'text'): give the ids in a file, sample.prompt_tokens, or its "
                      "tokenizer, sample.tokenizer", V);
    size_t icap = 256, cap = 0;
    int32_t *ids = xmalloc(icap * sizeof *ids);
    int rc = 0, n = 0;
    if (o->sample.prompt_file[0]) rc = read_file(p, o, tok, T, &ids, &icap, &cap, err, errlen);
    else {
        n = o->sample.prompt_tokens[0] ? read_ids(o->sample.prompt_tokens, tok, V, bytes, T, &ids, &icap, err, errlen)
                                       : encode(tok, o->sample.prompt, strlen(o->sample.prompt), &ids, &icap, err,
                                                errlen);
        if (n == 0 && o->sample.prompt_tokens[0])
            rc = errorf(err, errlen, "sample.prompt_tokens = '%s' holds no ids: give the prompt's token ids in it, "
                        "whitespace-separated", o->sample.prompt_tokens);
        else if (n < 0 || check_room(n, "the prompt", o, T, err, errlen) != 0) rc = -1;
        else prompts_add(p, ids, n, &cap);
    }
    free(ids);
    if (rc != 0) prompts_free(p);
    return rc;
}

void prompts_bcast(struct prompts *p, MPI_Comm comm)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Bcast(&p->n, 1, MPI_INT, 0, comm));
    if (rank != 0) {
        p->len = xmalloc((size_t)p->n * sizeof *p->len);
        p->at = xmalloc((size_t)p->n * sizeof *p->at);
    }
    MPI_CHECK(MPI_Bcast(p->len, p->n, MPI_INT, 0, comm));
    size_t total = 0;
    for (int i = 0; i < p->n; i++) p->at[i] = total, total += (size_t)p->len[i];
    if (rank != 0) p->ids = xmalloc((total ? total : 1) * sizeof *p->ids);
    for (size_t done = 0; done < total;) { /* (in pieces an int counts) */
        int piece = total - done < (size_t)1 << 30 ? (int)(total - done) : 1 << 30;
        MPI_CHECK(MPI_Bcast(p->ids + done, piece, MPI_INT32_T, 0, comm));
        done += (size_t)piece;
    }
}

void prompts_free(struct prompts *p)
{
    free(p->len), free(p->at), free(p->ids);
    memset(p, 0, sizeof *p);
}

int stream_text(struct stream *s, const struct tokenizer *tok, const int32_t *ids, int n, int final, char *err,
                size_t errlen)
{
    FILE *out = s->out ? s->out : stdout;
    if (!tok) {
        for (; s->n < n; s->n++) {
            if (s->bytes) fputc(ids[s->n], out);
            else fprintf(out, "%s%d", s->n ? " " : "", ids[s->n]);
        }
        return 0;
    }
    /* the ids whose text is settled, less a character still incomplete at its end */
    size_t k = final ? (size_t)n : tok_decode_settled(tok, ids, (size_t)n, 1);
    char *text;
    size_t len;
    if (tok_decode(tok, ids, k, 1, &text, &len, err, errlen) != 0) return -1;
    int held = !final && len >= 3 && memcmp(text + len - 3, "\xEF\xBF\xBD", 3) == 0;
    if (!held && len >= s->len && (s->len == 0 || memcmp(text, s->printed, s->len) == 0)) {
        fwrite(text + s->len, 1, len - s->len, out);
        fflush(out);
        free(s->printed);
        s->printed = text, s->len = len;
        return 0;
    }
    free(text);
    return 0;
}

void stream_free(struct stream *s)
{
    free(s->printed);
    memset(s, 0, sizeof *s);
}
