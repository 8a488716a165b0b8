/* tok_unicode.h -- where the Unicode of Hugging Face's tokenizers library is
 * not the one of triad's libraries (docs/tokenizer.md).
 *
 * The library normalizes with Unicode 9.0's data (the unicode-normalization-
 * alignments crate) and matches its regexes with Unicode 16.0's (Oniguruma);
 * utf8proc and PCRE2 know other versions.  These two functions carry the
 * difference, so that the ids are the library's. */
#ifndef TRIAD_TOK_UNICODE_H
#define TRIAD_TOK_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* 1 if Unicode 9.0 assigns cp (a later character: no decomposition, class 0). */
int tok_unicode9(uint32_t cp);

/* A Split regex (fancy-regex / Oniguruma syntax) rewritten for PCRE2 so that
 * its classes are the library's: \s its White_Space (without U+180E), \p{L}
 * and \p{N} (and \d) with the letters and numbers of Unicode 15.0 - 16.0.
 * The result is malloc'ed in *out.  0, or -1 with the reason in why (an
 * escape whose meaning differs between the two engines). */
int tok_regex_for_pcre2(const char *pattern, char **out, char *why, size_t whylen);

#endif
