/* tok_unicode.c -- the library's Unicode where it is not utf8proc's or
 * PCRE2's (tok_unicode.h). */
#include "tok_unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tok_unicode9.h"
#include "tok_bytes.h"

int tok_unicode9(uint32_t cp)
{
    size_t lo = 0, hi = sizeof unicode9 / sizeof unicode9[0];
    while (lo < hi) { /* the first range whose last is >= cp */
        size_t mid = (lo + hi) / 2;
        if (unicode9[mid][1] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < sizeof unicode9 / sizeof unicode9[0] && unicode9[lo][0] <= cp;
}

/* Unicode's White_Space, as the library's \s (PCRE2 10.42 adds U+180E). */
static const char white_space[] = "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
                                  "\\x{202F}\\x{205F}\\x{3000}";
/* Letters and numbers of Unicode 15.0 - 16.0 (the library's \p{L} and \p{N},
 * as the library itself classes them: a Split "Removed" on each class over
 * every code point, both sides; tools/tokfuzz.py --codepoints), which
 * PCRE2 10.42's Unicode 14.0 tables leave unassigned.  Decimal digits (\d)
 * are the numbers but the Kaktovik numerals. */
static const char new_letters[] =
    "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}\\x{10D4A}-\\x{10D65}"
    "\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}"
    "\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}"
    "\\x{11F12}-\\x{11F33}\\x{1342F}\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}"
    "\\x{16D40}-\\x{16D6C}\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}\\x{1E030}-\\x{1E06D}"
    "\\x{1E4D0}-\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}";
static const char new_digits[] = "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}"
                                 "\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1E4F0}-\\x{1E4F9}"
                                 "\\x{1E5F1}-\\x{1E5FA}";
static const char new_numbers[] = "\\x{1D2C0}-\\x{1D2D3}";

static int put_str(struct bytes *o, const char *s) { return tok_put(o, s, strlen(s)); }

/* A class escape as the library means it: its members (for inside a
 * [...]), and whether it is the complement.  0 if the escape is not one
 * of these (then it is copied as it is), -1 for one whose meaning differs
 * between Oniguruma and PCRE2. */
static int class_escape(const char *e, size_t *len, int *negated, struct bytes *members, char *why, size_t whylen)
{
    char c = e[1];
    *negated = c == 'S' || c == 'D' || c == 'P';
    *len = 2;
    if (c == 's' || c == 'S') return put_str(members, white_space) ? errorf(why, whylen, "out of memory") : 1;
    if (c == 'd' || c == 'D')
        return put_str(members, "\\p{Nd}") || put_str(members, new_digits) ? errorf(why, whylen, "out of memory") : 1;
    if (c == 'Q' || c == 'E')
        return errorf(why, whylen, "the Split regex uses \\Q...\\E quoting: triad refuses it rather than rewrite "
                      "its classes wrongly");
    if (strchr("wWbBhHvVRXNK", c) && c)
        return errorf(why, whylen, "the Split regex uses \\%c, which means one thing to Oniguruma (the library's "
                      "engine) and another to PCRE2: triad refuses it rather than split differently", c);
    if (c != 'p' && c != 'P') return 0;
    const char *name = e + 2;
    size_t nlen = 1;
    if (*name == '{') {
        const char *end = strchr(name, '}');
        if (!end) return 0; /* (PCRE2 reports it) */
        name++, nlen = (size_t)(end - name), *len = 4 + nlen;
    } else {
        *len = 3;
    }
    int letters = nlen == 1 && *name == 'L', numbers = nlen == 1 && *name == 'N';
    if (!letters && !numbers) return 0; /* (other properties: PCRE2's own tables) */
    int rc = put_str(members, letters ? "\\p{L}" : "\\p{N}") ||
             put_str(members, letters ? new_letters : new_digits) || (numbers && put_str(members, new_numbers));
    return rc ? errorf(why, whylen, "out of memory") : 1;
}

int tok_regex_for_pcre2(const char *pattern, char **out, char *why, size_t whylen)
{
    struct bytes o = {0};
    int in_class = 0, rc = put_str(&o, "");
    why[0] = 0;
    /* (?x...) makes blanks and '#' comments no part of the pattern: the rewriting below would read them as it */
    for (const char *q = strstr(pattern, "(?"); q; q = strstr(q + 2, "(?")) {
        size_t flags = strspn(q + 2, "imsxU-^");
        if (memchr(q + 2, 'x', flags) || q[2] == '#')
            return free(o.p), errorf(why, whylen, "the Split regex uses the extended mode (?x) or a (?#...) comment: "
                                     "triad refuses it rather than rewrite its classes wrongly");
    }
    for (const char *p = pattern; *p && rc == 0;) {
        if (*p == '\\' && p[1]) {
            struct bytes members = {0};
            size_t len;
            int negated, k = class_escape(p, &len, &negated, &members, why, whylen);
            if (k < 0) rc = -1;
            else if (k == 0) rc = tok_put(&o, p, 2), len = 2;
            else if (in_class && negated)
                rc = errorf(why, whylen, "the Split regex uses \\%c inside a [...] class: triad cannot add the "
                            "library's Unicode to that (write the class without it)", p[1]);
            else if (in_class) rc = put_str(&o, members.p);
            else rc = put_str(&o, negated ? "[^" : "[") || put_str(&o, members.p) || put_str(&o, "]");
            free(members.p);
            p += len;
            continue;
        }
        if (!in_class && *p == '[') { /* a class opens; a ] right after [ or [^ is a member */
            size_t k = p[1] == '^' ? 2 : 1;
            if (p[k] == ']') k++;
            rc = tok_put(&o, p, k), p += k, in_class = 1;
            continue;
        }
        if (in_class && *p == '[' && p[1] == ':') { /* [:alpha:] */
            const char *end = strstr(p, ":]");
            size_t k = end ? (size_t)(end - p) + 2 : 1;
            rc = tok_put(&o, p, k), p += k;
            continue;
        }
        if (in_class && *p == ']') in_class = 0;
        rc = tok_put(&o, p++, 1);
    }
    if (rc) return free(o.p), why[0] ? -1 : errorf(why, whylen, "out of memory");
    *out = o.p;
    return 0;
}
