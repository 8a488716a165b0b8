/* tokenizer.h -- a model's own tokenizer: text to token ids and back,
 * exactly as Hugging Face's tokenizers library does it (docs/tokenizer.md).
 *
 * Read from a tokenizer.json (or a folder holding one, or GPT-2's vocab.json
 * and merges.txt): added tokens split out first (leftmost-longest), then
 * each remaining piece normalized (NFC/NFD/NFKC/NFKD through utf8proc,
 * Prepend, Replace), pre-tokenized (Split on the file's regex through
 * PCRE2, or a string; ByteLevel), cut by the BPE model (tok_bpe.h) and
 * framed by the post-processor's template; decoding runs the file's
 * decoders (ByteLevel, Replace, ByteFallback, Fuse, Strip).  A file that
 * uses a component outside these is refused, naming the component: it is
 * never tokenized approximately.  Text that is not well-formed UTF-8 is
 * read as the library's callers read it: each maximal ill-formed
 * subsequence becomes U+FFFD. */
#ifndef TRIAD_TOKENIZER_H
#define TRIAD_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

struct tokenizer;

/* path: a tokenizer.json, or a folder with tokenizer.json or vocab.json +
 * merges.txt.  NULL with the reason (the file, the component) in err. */
struct tokenizer *tok_open(const char *path, char *err, size_t errlen);
void tok_close(struct tokenizer *t);

/* One past the largest id (added tokens included).  Ids below it may be
 * gaps: a vocabulary need not number its tokens 0, 1, 2, ... */
int32_t tok_vocab_size(const struct tokenizer *t);
/* 1 if id is a token of the vocabulary or an added token (tok_decode takes it), else 0. */
int tok_has_id(const struct tokenizer *t, int32_t id);
/* The ids a document starts or ends with (the post-processor's, else the
 * file's <|endoftext|>/<|begin_of_text|>/<s>/</s>-like added tokens), -1 if none. */
int32_t tok_bos(const struct tokenizer *t);
int32_t tok_eos(const struct tokenizer *t);
/* The id put before each document (triad tokenize's doc_token = 'auto', the
 * start of a prompt or a task's context): tok_bos, else tok_eos; -1 where
 * there is neither, or t is NULL. */
int32_t tok_doc(const struct tokenizer *t);

/* Append the ids of text[0..len) to *ids (n used of cap, grown with realloc),
 * inside the post-processor's template if add_special.  0, or -1 (out of
 * memory, or a regex failure) with err. */
int tok_encode(const struct tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
               size_t *cap, char *err, size_t errlen);

/* The text of ids[0..n) (malloc'ed, NUL-terminated, its length in *len),
 * special tokens left out if skip_special.  0, or -1 for an id outside the
 * vocabulary (err says which). */
int tok_decode(const struct tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text, size_t *len,
               char *err, size_t errlen);

/* How many of ids[0..n) have their text for good (tok_decode's, special
 * tokens left out if skip_special), whatever ids come after them: all but a
 * trailing run of byte-fallback tokens (<0xNN>; left-out special tokens
 * inside it) where the decoder has ByteFallback, which turns a run into its
 * bytes where they are UTF-8 and into one U+FFFD a token where not, so that
 * one more byte may turn a printed character into U+FFFDs ("\u20ac" is
 * <0xE2><0x82><0xAC>; with <0xE2> after it the four are U+FFFD). */
size_t tok_decode_settled(const struct tokenizer *t, const int32_t *ids, size_t n, int skip_special);

/* The length of text[0..len) (well-formed UTF-8) without its trailing
 * whitespace as Python's str.rstrip() takes it: the characters of general
 * category Zs or of bidirectional class WS, B or S (str.isspace), so
 * U+00A0, U+3000, U+2028 and U+0085 as well as ASCII's six. */
size_t tok_rstrip(const char *text, size_t len);
/* The bytes of text[0..len)'s leading whitespace, by the same rule. */
size_t tok_lstrip(const char *text, size_t len);

#endif
