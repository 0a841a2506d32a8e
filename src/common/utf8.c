/* utf8: byte-level decoding by the RFC 3629 table (first-byte ranges narrow the second byte
 * for E0/ED/F0/F4), which rejects overlongs and surrogates without computing code points. */
#include "common/utf8.h"

size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */

    if (n == 0)
        return 0;
    c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* > U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

bool utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        size_t l = utf8_seq_len(p + i, n - i);
        if (l == 0)
            return false;
        i += l;
    }
    return true;
}

size_t utf8_cut(const char *s, size_t n, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    if (n <= max)
        return n;
    while (i < max) {
        size_t l = utf8_seq_len(p + i, n - i);
        if (l == 0)
            l = 1;
        if (i + l > max)
            break;
        i += l;
    }
    return i;
}

size_t utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF)
        return 0;
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
