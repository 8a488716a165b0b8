/* test_tok_alloc.c -- the tokenizer (tokenizer.h) when memory runs out:
 * every allocation it makes, one at a time, refused (alloc_sweep.h).
 * Each run opens a tokenizer, encodes a text (with the template), decodes
 * the ids with special tokens kept and skipped, decodes an empty list and
 * a list of odd ids (a lone byte, a control byte), and closes.
 *
 * Three tokenizers, written in Hugging Face's formats (tok_files.h):
 * GPT-2's vocab.json and merges.txt, a byte-level tokenizer.json, and a
 * Llama 2-like one; the byte-level one a second time with PCRE2's JIT off.
 * Their vocabularies are small, so that every allocation of a run can be
 * refused in turn (about 7,200 runs, a second). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_sweep.h"
#include "tok_files.h"
#include "tokenizer.h"

#include <dlfcn.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* PCRE2's JIT, which this program can turn off (no_jit): the loader's call
 * (tok_load.c) comes here first.  Without it a match runs in the
 * interpreter, which allocates its frames as it matches (with JIT a match
 * allocates nothing); the library's own function is looked up before the
 * sweeps (dlsym may allocate). */
static int no_jit;
static int (*real_jit)(pcre2_code *, uint32_t);
int pcre2_jit_compile_8(pcre2_code *code, uint32_t options)
{
    if (no_jit || !real_jit) return PCRE2_ERROR_JIT_BADOPTION;
    return real_jit(code, options);
}

/* ------------------------------------------------------------ the work */

struct tok_work {
    const char *path, *text;
    const int32_t *odd;
    size_t nodd;
};

/* The text of ids[0..n) both ways (special tokens kept, skipped) after '|'s. */
static int decode_into(const struct tokenizer *t, const int32_t *ids, size_t n, struct sweep_outcome *o, size_t *on)
{
    for (int skip = 0; skip < 2; skip++) {
        char *text = NULL;
        size_t len = 0;
        if (tok_decode(t, ids, n, skip, &text, &len, o->err, sizeof o->err)) return -1;
        int rc = sweep_printf(o, on, "|%.*s", (int)len, text);
        free(text);
        if (rc) return -1;
    }
    return 0;
}

static void tok_run(void *ctx, struct sweep_outcome *o)
{
    const struct tok_work *w = ctx;
    struct tokenizer *t = tok_open(w->path, o->err, sizeof o->err);
    if (!t) return;
    int32_t *ids = NULL;
    size_t n = 0, cap = 0, on = 0;
    int rc = tok_encode(t, w->text, strlen(w->text), 1, &ids, &n, &cap, o->err, sizeof o->err);
    for (size_t i = 0; rc == 0 && i < n; i++) rc = sweep_printf(o, &on, "%d ", (int)ids[i]);
    if (rc == 0) rc = decode_into(t, ids, n, o, &on);
    if (rc == 0) rc = decode_into(t, ids, 0, o, &on);
    if (rc == 0) rc = decode_into(t, w->odd, w->nodd, o, &on);
    free(ids);
    tok_close(t);
    if (rc) free(o->text), o->text = NULL;
}

int main(void)
{
    real_jit = (int (*)(pcre2_code *, uint32_t))dlsym(RTLD_NEXT, "pcre2_jit_compile_8");
    char dir[4096], path[4200];
    if (tok_files_write_all(dir, sizeof dir, "tok_alloc") != 0) return tap_done();
    char gpt2[4200];
    snprintf(gpt2, sizeof gpt2, "%s/gpt2", dir);
    /* text with words the merges make, others left in bytes, an added token, text that is not NFC */
    const char *text = "hello world, hello<|endoftext|> w\xC3\xB6rld e\xCC\x81 \xF0\x9F\x98\x80 42\n";
    const int32_t lone_bl[] = {0xC3 /* (not a whole character) */, 0x07, 256};
    struct tok_work w = {gpt2, text, lone_bl, 3};
    alloc_sweep("GPT-2's vocab.json and merges.txt", tok_run, &w);
    snprintf(path, sizeof path, "%s/bytelevel.json", dir);
    w.path = path;
    alloc_sweep("a byte-level tokenizer.json", tok_run, &w);
    no_jit = 1;
    alloc_sweep("a byte-level tokenizer.json, its regex in PCRE2's interpreter (no JIT)", tok_run, &w);
    no_jit = 0;
    /* the llama one: <0xC3> alone (byte fallback's U+FFFD), ids of bytes that make 'ö' */
    const int32_t odd_sp[] = {3 + 0xC3, 3 + 0xC3, 3 + 0xB6, 3 + 'A'};
    snprintf(path, sizeof path, "%s/llama.json", dir);
    w = (struct tok_work){path, "hello world w\xC3\xB6rld  \xF0\x9F\x98\x80 hel", odd_sp, 4};
    alloc_sweep("a Llama 2-like tokenizer.json", tok_run, &w);

    tok_files_remove(dir);
    return tap_done();
}
