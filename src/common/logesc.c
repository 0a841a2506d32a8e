/* logesc: one pass to measure, one to write, with the contract's UTF-8 validator deciding
 * what is text; measuring first lets a text that fits be copied whole and a text that does
 * not be cut on a unit boundary with room left for "...". */
#include "common/logesc.h"

#include <stdbool.h>
#include <string.h>

#include "common/utf8.h"

/* The unit at u[i]: *seq input bytes, written as esc[0..*el) when *el > 0, else copied. */
static void unit(const unsigned char *u, size_t n, size_t i, char esc[4], size_t *el, size_t *seq)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c = u[i];
    *el = 0;
    *seq = 1;
    if (c == '\n' || c == '\r' || c == '\t' || c == '\\') {
        esc[0] = '\\';
        esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
        *el = 2;
        return;
    }
    if (c >= 0x80) {
        *seq = utf8_seq_len(u + i, n - i);
        if (*seq > 0)
            return;
        *seq = 1;
    } else if (c >= 0x20 && c != 0x7f) {
        return;
    }
    esc[0] = '\\';
    esc[1] = 'x';
    esc[2] = hex[c >> 4];
    esc[3] = hex[c & 15];
    *el = 4;
}

char *logesc(const char *s, size_t n, char *out, size_t cap)
{
    const unsigned char *u = (const unsigned char *)s;
    char esc[4];
    size_t el, seq, total = 0, o = 0;
    if (cap == 0)
        return out;
    for (size_t i = 0; i < n; i += seq) {
        unit(u, n, i, esc, &el, &seq);
        total += el ? el : seq;
    }
    /* everything fits: limit = cap - 1; otherwise stop where "..." still fits after */
    bool cut = total > cap - 1;
    size_t limit = cut ? (cap >= 4 ? cap - 4 : 0) : cap - 1;
    for (size_t i = 0; i < n; i += seq) {
        unit(u, n, i, esc, &el, &seq);
        size_t need = el ? el : seq;
        if (o + need > limit)
            break;
        memcpy(out + o, el ? esc : s + i, need);
        o += need;
    }
    if (cut && cap >= 4) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return out;
}
