/* cli_buf: capped growable text buffer (see cli_buf.h). */
#include "cli/cli_buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_buf_init(struct cli_buf *b, size_t max)
{
    memset(b, 0, sizeof(*b));
    b->max = max;
}

void cli_buf_fini(struct cli_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

static int reserve(struct cli_buf *b, size_t extra)
{
    if (b->err)
        return b->err;
    if (extra > b->max - b->len) {
        b->err = -ENOSPC;
        return b->err;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < need)
        ncap *= 2;
    char *np = realloc(b->p, ncap);
    if (!np) {
        b->err = -ENOMEM;
        return b->err;
    }
    b->p = np;
    b->cap = ncap;
    return 0;
}

void cli_buf_append(struct cli_buf *b, const char *s, size_t n)
{
    if (reserve(b, n) < 0)
        return;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void cli_buf_puts(struct cli_buf *b, const char *s)
{
    cli_buf_append(b, s, strlen(s));
}

void cli_buf_printf(struct cli_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n) < 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void cli_buf_json_str(struct cli_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') {
            cli_buf_append(b, "\\n", 2);
        } else if (c == '"') {
            cli_buf_append(b, "\\\"", 2);
        } else if (c == '\\') {
            cli_buf_append(b, "\\\\", 2);
        } else if (c < 0x20) {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            cli_buf_append(b, u, sizeof(u));
        } else {
            cli_buf_append(b, (const char *)&s[i], 1);
        }
    }
}

const char *cli_buf_str(const struct cli_buf *b)
{
    return b->p ? b->p : "";
}
