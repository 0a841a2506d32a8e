/* cli_buf: capped growable text buffer (see cli_buf.h). */
#include "cli/cli_buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jw.h"
#include "common/utf8.h"

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
    size_t room;
    long r;

    if (b->err)
        return;
    /* the one JSON escaper (common/jw.c): room for its worst case (6 bytes per input byte),
     * or up to the cap, where it reports -ENOSPC if the text does not fit */
    room = b->max - b->len;
    if (n <= room / 6)
        room = n * 6;
    if (reserve(b, room) < 0)
        return;
    r = jw_escape(b->p + b->len, room, s, n);
    if (r < 0) {
        b->err = (int)r;
        return;
    }
    b->len += (size_t)r;
    b->p[b->len] = '\0';
}

const char *cli_buf_str(const struct cli_buf *b)
{
    return b->p ? b->p : "";
}

/* The next unit of s[0..n): copied as is (*ret_esc = 0) or replaced by its escape in esc[]
 * (*ret_esc bytes). keep_nl leaves '\n' and '\t' alone (layout, not content). Returns the
 * input bytes consumed. */
static size_t term_unit(const unsigned char *s, size_t n, bool keep_nl, char esc[8],
                        size_t *ret_esc)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c = s[0];
    size_t l = utf8_seq_len(s, n);
    *ret_esc = 0;
    if ((c == '\n' || c == '\t') && keep_nl)
        return 1;
    if (c < 0x20 || c == 0x7f || l == 0) {
        const char *named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        if (named && l) {
            memcpy(esc, named, 2);
            *ret_esc = 2;
        } else if (c == 0x7f) {
            memcpy(esc, "\\u007f", 6); /* also a valid JSON escape, for --json output */
            *ret_esc = 6;
        } else {
            char x[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };
            memcpy(esc, x, 4);
            *ret_esc = 4;
        }
        return 1;
    }
    if (l == 2 && c == 0xc2 && s[1] < 0xa0) { /* C1: U+0080..U+009F (CSI is U+009B) */
        char u[6] = { '\\', 'u', '0', '0', hex[s[1] >> 4], hex[s[1] & 15] };
        memcpy(esc, u, 6);
        *ret_esc = 6;
    }
    return l;
}

typedef void (*term_sink)(void *ctx, const char *s, size_t n);

/* Copy s[0..n) to out, escaping as term_unit says. json: layout between tokens (newline, tab)
 * stays, inside strings everything is escaped; else keep_nl decides for the whole text. */
static void term_copy(const char *s, size_t n, bool keep_nl, bool json, term_sink out, void *ctx)
{
    const unsigned char *u = (const unsigned char *)s;
    bool in_str = false, esc_next = false;
    size_t run = 0, i = 0;
    while (i < n) {
        char esc[8];
        size_t ne, k = term_unit(u + i, n - i, json ? !in_str : keep_nl, esc, &ne);
        if (json && in_str) {
            if (esc_next)
                esc_next = false;
            else if (u[i] == '\\')
                esc_next = true;
            else if (u[i] == '"')
                in_str = false;
        } else if (json && u[i] == '"') {
            in_str = true;
        }
        if (ne == 0) {
            i += k;
            run += k;
            continue;
        }
        out(ctx, (const char *)u + i - run, run);
        out(ctx, esc, ne);
        run = 0;
        i += k;
    }
    out(ctx, (const char *)u + i - run, run);
}

static void sink_buf(void *ctx, const char *s, size_t n)
{
    cli_buf_append(ctx, s, n);
}

static void sink_file(void *ctx, const char *s, size_t n)
{
    fwrite(s, 1, n, ctx);
}

void cli_buf_term(struct cli_buf *b, const char *s, size_t n)
{
    term_copy(s, n, false, false, sink_buf, b);
}

const char *cli_term_str(const char *s, char *out, size_t cap)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), i = 0, o = 0;
    while (i < n) {
        char esc[8];
        size_t ne, k = term_unit(u + i, n - i, false, esc, &ne);
        const char *src = ne ? esc : (const char *)u + i;
        size_t len = ne ? ne : k;
        if (o + len + 4 > cap) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(out + o, src, len);
        o += len;
        i += k;
    }
    out[o] = '\0';
    return out;
}

void cli_term_write(FILE *f, const char *s, size_t n)
{
    term_copy(s, n, true, false, sink_file, f);
}

void cli_buf_term_json(struct cli_buf *b, const char *s, size_t n)
{
    term_copy(s, n, false, true, sink_buf, b);
}
