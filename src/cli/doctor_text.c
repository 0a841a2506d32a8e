/* doctor_text: shell quoting and terminal escaping for `dyno doctor`'s lines, kept apart
 * from the checks so that every check shares one reviewed implementation (and one fuzz
 * target, fuzz_doctor_text). */
#include "cli/doctor_text.h"

#include <stdbool.h>
#include <string.h>

#include "common/logesc.h"

static bool shq_bare(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("_@%+=:,./-", c) != NULL;
}

void doctor_shq(struct cli_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    bool bare = n > 0, printable = true;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\0' || !shq_bare(c))
            bare = false;
        if (c < 0x20 || c > 0x7e)
            printable = false;
    }
    if (bare) {
        cli_buf_append(b, s, n);
        return;
    }
    if (printable) {
        cli_buf_append(b, "'", 1);
        for (size_t i = 0; i < n; i++) {
            if (s[i] == '\'')
                cli_buf_append(b, "'\\''", 4);
            else
                cli_buf_append(b, s + i, 1);
        }
        cli_buf_append(b, "'", 1);
        return;
    }
    cli_buf_append(b, "$'", 2);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };
        if (c == '\\' || c == '\'') {
            esc[1] = (char)c;
            cli_buf_append(b, esc, 2);
        } else if (c < 0x20 || c > 0x7e) {
            cli_buf_append(b, esc, 4);
        } else {
            cli_buf_append(b, s + i, 1);
        }
    }
    cli_buf_append(b, "'", 1);
}

const char *doctor_tesc(const char *s, size_t n, char *out, size_t cap)
{
    return logesc(s, n, out, cap);
}

void doctor_line_safe(char *line)
{
    for (unsigned char *p = (unsigned char *)line; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = '?';
}

const char *doctor_environ_get(const char *buf, size_t len, const char *name, size_t *ret_len)
{
    size_t nl = strlen(name);
    const char *val = NULL;

    *ret_len = 0;
    if (nl == 0)
        return NULL;
    for (size_t off = 0; off < len;) {
        const char *e = buf + off;
        const char *nul = memchr(e, '\0', len - off);
        size_t elen = nul ? (size_t)(nul - e) : len - off;
        if (elen > nl && memcmp(e, name, nl) == 0 && e[nl] == '=') {
            val = e + nl + 1;
            *ret_len = elen - nl - 1;
            break;
        }
        off += elen + 1;
    }
    return val;
}
