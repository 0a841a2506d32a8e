/* logesc: one pass over the bytes with the contract's UTF-8 validator deciding what is text. */
#include "common/logesc.h"

#include <stdbool.h>
#include <string.h>

#include "contract/utf8.h"

char *logesc(const char *s, size_t n, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    const unsigned char *u = (const unsigned char *)s;
    if (cap == 0)
        return out;
    for (size_t i = 0; i < n;) {
        char esc[4];
        size_t el = 0, seq = 1;
        unsigned char c = u[i];
        if (c == '\n' || c == '\r' || c == '\t' || c == '\\') {
            esc[0] = '\\';
            esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
            el = 2;
        } else if (c < 0x20 || c == 0x7f) {
            el = 4;
        } else if (c >= 0x80) {
            seq = utf8_seq_len(u + i, n - i);
            if (seq == 0) {
                seq = 1;
                el = 4;
            }
        }
        if (el == 4) {
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[c >> 4];
            esc[3] = hex[c & 15];
        }
        size_t need = el ? el : seq;
        bool last = i + seq >= n;
        /* keep room for "..." unless this unit is the last one and fits exactly */
        if (!(cap >= 4 && o + need <= cap - 4) && !(last && o + need <= cap - 1)) {
            if (cap >= 4 && o <= cap - 4) {
                memcpy(out + o, "...", 3);
                o += 3;
            }
            break;
        }
        if (el)
            memcpy(out + o, esc, el);
        else
            memcpy(out + o, s + i, seq);
        o += need;
        i += seq;
    }
    out[o] = '\0';
    return out;
}
