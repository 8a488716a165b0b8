/* tok_unicode.h -- where the Unicode of Hugging Face's tokenizers library is
 * not the one of triad's libraries (docs/tokenizer.md, "Regexes").
 *
 * The library matches its regexes with Unicode 16.0's data (Oniguruma);
 * PCRE2 10.42 knows Unicode 14.0.  This carries the difference, so that
 * the ids are the library's. */
#ifndef TRIAD_TOK_UNICODE_H
#define TRIAD_TOK_UNICODE_H

#include <stddef.h>

/* A Split regex (fancy-regex / Oniguruma syntax) rewritten for PCRE2 so that
 * its classes are the library's: \s its White_Space (without U+180E), \p{L}
 * and \p{N} (and \d) with the letters and numbers of Unicode 15.0 - 16.0.
 * The result is malloc'ed in *out.  0, or -1 with the reason in why (an
 * escape whose meaning differs between the two engines). */
int tok_regex_for_pcre2(const char *pattern, char **out, char *why, size_t whylen);

#endif
