/* utf8.c -- well-formed UTF-8 (RFC 3629). */
#include "utf8.h"

int utf8_length(const unsigned char *p, size_t n)
{
    int len = p[0] < 0x80 ? 1 : p[0] >= 0xC2 && p[0] <= 0xDF ? 2 : p[0] >= 0xE0 && p[0] <= 0xEF ? 3
            : p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : 0;
    if (len == 0 || n < (size_t)len) return 0;
    for (int i = 1; i < len; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0) || /* overlong; a surrogate */
        (p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90))   /* overlong; past U+10FFFF */
        return 0;
    return len;
}

unsigned utf8_code_point(const unsigned char *p, int len)
{
    unsigned cp = len == 1 ? p[0] : p[0] & (0x7Fu >> len);
    for (int i = 1; i < len; i++) cp = cp << 6 | (p[i] & 0x3Fu);
    return cp;
}
