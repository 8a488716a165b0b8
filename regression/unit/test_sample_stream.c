/* test_sample_stream.c -- triad sample's streamed text (stream_text,
 * sample_text.h) against the text of the whole sequence (tok_decode, which
 * regression/tokenizer.sh holds to Hugging Face's tokenizers library).
 *
 * For each of three tokenizers (tok_files.h: GPT-2's files, a byte-level
 * tokenizer.json, a Llama 2-like one with byte fallback) random sequences
 * of ids, most of them bytes that start, continue or break UTF-8
 * characters, some special tokens, are streamed as triad sample streams
 * them: the prompt at once, then one id at a time, then the end (final).
 * Two properties:
 *   - what was streamed is the text of the whole sequence, byte for byte;
 *   - the stream keeps up: after an id of whole text (not a byte token,
 *     not special), whose text does not end in U+FFFD, all of it is out.
 * And one case by name: ByteFallback turns a run of byte tokens into
 * U+FFFDs, one a token, when the run is not UTF-8, so "\u20ac" followed by
 * the byte <0xE2> becomes four U+FFFDs (the library's decode gives that),
 * which must not be printed as "\u20ac" first. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample_text.h"
#include "tap.h"
#include "tok_files.h"
#include "tokenizer.h"

enum { MAXLEN = 40, SEQS = 4000 };

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static unsigned draw(unsigned n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng_state >> 33) % n;
}

/* Bytes that begin, continue and break characters of 2, 3 and 4 bytes,
 * ASCII and a space. */
static const unsigned char some_bytes[] = {0xC3, 0xB6, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80,
                                           0x80, 0xBF, 0xFF, 0xC0, 'a', ' ', '\n'};

/* A tokenizer under test: the id of byte b (-1: none), the ids of special
 * tokens, and the others from `words` up. */
struct kind {
    const char *name, *file;
    int byte0;           /* the id of byte 0 (ids byte0 .. byte0 + 255), or -1: GPT-2's byte characters */
    int32_t special[3];
    int nspecial, words; /* the first id of whole text */
};

static int32_t byte_id(const struct kind *k, unsigned char b)
{
    if (k->byte0 >= 0) return k->byte0 + b;
    return b; /* (tok_files.h's byte-level vocabularies: byte b's character is id b) */
}

static int32_t random_id(const struct kind *k, int32_t nid)
{
    unsigned r = draw(100);
    if (r < 60) return byte_id(k, some_bytes[draw(sizeof some_bytes)]);
    if (r < 70 && k->nspecial) return k->special[draw((unsigned)k->nspecial)];
    return k->words + (int32_t)draw((unsigned)(nid - k->words));
}

/* Is id of whole text: neither a byte token nor special? */
static int whole(const struct kind *k, int32_t id)
{
    for (int i = 0; i < k->nspecial; i++)
        if (id == k->special[i]) return 0;
    return id >= k->words;
}

/* Stream ids[0..n) as triad sample does (the first p at once) into a
 * buffer; 0 when it equals the whole text and kept up, else -1 with why. */
static int stream_check(const struct kind *k, const struct tokenizer *t, const int32_t *ids, int n, int p,
                        char *why, size_t whylen)
{
    char *buf = NULL, *want = NULL, err[256];
    size_t blen = 0, wlen = 0;
    FILE *out = open_memstream(&buf, &blen);
    struct stream s = {.out = out};
    int rc = 0;
    for (int m = p; m <= n && rc == 0; m++) {
        int final = m == n;
        if (stream_text(&s, t, ids, m, final, err, sizeof err) != 0) {
            snprintf(why, whylen, "stream_text failed at %d ids: %s", m, err);
            rc = -1;
            break;
        }
        fflush(out);
        if (final || !whole(k, ids[m - 1])) continue;
        char *now;
        size_t nlen;
        if (tok_decode(t, ids, (size_t)m, 1, &now, &nlen, err, sizeof err) != 0) {
            snprintf(why, whylen, "tok_decode failed: %s", err);
            rc = -1;
            break;
        }
        int open_end = nlen >= 3 && memcmp(now + nlen - 3, "\xEF\xBF\xBD", 3) == 0;
        if (!open_end && (blen != nlen || memcmp(buf, now, nlen) != 0)) {
            snprintf(why, whylen, "after %d ids (the last of whole text) %zu bytes are out of %zu", m, blen, nlen);
            rc = -1;
        }
        free(now);
    }
    fclose(out);
    if (rc == 0 && tok_decode(t, ids, (size_t)n, 1, &want, &wlen, err, sizeof err) != 0) {
        snprintf(why, whylen, "tok_decode failed: %s", err);
        rc = -1;
    }
    if (rc == 0 && (blen != wlen || memcmp(buf, want, wlen) != 0)) {
        snprintf(why, whylen, "streamed %zu bytes '%.*s', the whole text is %zu bytes '%.*s'", blen, (int)blen, buf,
                 wlen, (int)wlen, want);
        rc = -1;
    }
    stream_free(&s);
    free(buf), free(want);
    return rc;
}

static void sweep(const struct kind *k, const char *dir)
{
    char path[4200], err[512], why[1024] = "";
    snprintf(path, sizeof path, "%s/%s", dir, k->file);
    struct tokenizer *t = tok_open(path, err, sizeof err);
    if (!tap_ok(t != NULL, "%s: opens", k->name)) {
        tap_diag("%s", err);
        return;
    }
    int32_t nid = tok_vocab_size(t), ids[MAXLEN];
    int bad = 0, first = -1;
    for (int q = 0; q < SEQS; q++) {
        int n = 1 + (int)draw(MAXLEN), p = 1 + (int)draw((unsigned)n);
        for (int i = 0; i < n; i++) ids[i] = random_id(k, nid);
        if (stream_check(k, t, ids, n, p, why, sizeof why) != 0 && bad++ == 0) first = q;
    }
    tap_ok(bad == 0, "%s: %d random sequences streamed are their whole text, and kept up", k->name, SEQS);
    if (bad) tap_diag("%d failed, the first (%d): %s", bad, first, why);
    tok_close(t);
}

int main(void)
{
    char dir[4096];
    if (tok_files_write_all(dir, sizeof dir, "sample_stream") != 0) return tap_done();
    /* (tok_files.h: the byte-level vocabularies' ids 0-255 are the bytes, 256 on the merges, <|endoftext|> last;
     * the llama one's <unk> <s> </s> 0-2, the bytes 3-258, then letters and merges) */
    struct kind gpt2k = {"GPT-2's files", "gpt2", -1, {256 + BL_MERGES}, 1, 256};
    struct kind bl = {"a byte-level tokenizer.json", "bytelevel.json", -1, {256 + BL_MERGES}, 1, 256};
    struct kind llama = {"a Llama 2-like tokenizer.json (byte fallback)", "llama.json", 3, {0, 1, 2}, 3, 259};
    sweep(&gpt2k, dir);
    sweep(&bl, dir);
    sweep(&llama, dir);

    /* the case by name: <0xE2><0x82><0xAC> ("\u20ac"), <0xE2>, then "▁w" (" w") */
    char path[4200], err[512], why[1024];
    snprintf(path, sizeof path, "%s/llama.json", dir);
    struct tokenizer *t = tok_open(path, err, sizeof err);
    if (t) {
        int32_t w = -1, euro[] = {3 + 0xE2, 3 + 0x82, 3 + 0xAC, 3 + 0xE2, 0};
        int32_t probe[1];
        char *text;
        size_t len;
        for (int32_t id = 259; id < tok_vocab_size(t) && w < 0; id++) {
            probe[0] = id;
            if (tok_decode(t, probe, 1, 1, &text, &len, err, sizeof err) == 0) {
                if (len == 1 && text[0] == 'w') w = id;
                free(text);
            }
        }
        euro[4] = w;
        int rc = stream_check(&llama, t, euro, 5, 1, why, sizeof why);
        tap_ok(w >= 0 && rc == 0, "\\u20ac then the byte <0xE2> (four U+FFFD in the whole text), streamed one id a time, "
               "is the whole text");
        if (rc) tap_diag("%s", why);
        tok_close(t);
    }
    tok_files_remove(dir);
    return tap_done();
}
