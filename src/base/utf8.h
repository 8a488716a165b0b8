/* utf8.h -- well-formed UTF-8 as RFC 3629 bounds it: no overlong form, no
 * surrogate, nothing past U+10FFFF.  The JSON reader refuses anything else,
 * the deck reader names the first character outside ASCII, and messages
 * show a byte that starts no sequence as '?'. */
#ifndef TRIAD_UTF8_H
#define TRIAD_UTF8_H

#include <stddef.h>

/* The length (1 to 4) of the well-formed sequence at p, which has n > 0
 * bytes, or 0 where none starts there. */
int utf8_length(const unsigned char *p, size_t n);

/* The code point of the well-formed sequence of len bytes at p. */
unsigned utf8_code_point(const unsigned char *p, int len);

#endif
