/* cli_buf: a growable text buffer with a hard cap fixed at init, for config text, request
 * bodies and the per-host output lines. Overflow sets err (first error wins); callers check
 * once at the end instead of after every append. */
#ifndef MSMON_CLI_BUF_H
#define MSMON_CLI_BUF_H

#include <stddef.h>
#include <stdio.h>

struct cli_buf {
    char *p;      /* NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
    size_t max;   /* hard cap on len */
    int err;      /* 0, -ENOMEM or -ENOSPC */
};

/* Storage is caller-provided (the struct); free the heap part with cli_buf_fini(). */
void cli_buf_init(struct cli_buf *b, size_t max);
void cli_buf_fini(struct cli_buf *b);
void cli_buf_append(struct cli_buf *b, const char *s, size_t n);
void cli_buf_puts(struct cli_buf *b, const char *s);
void cli_buf_printf(struct cli_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append s as the body of a JSON string (docs/design/cli.md#request-bodies) with the one JSON
 * escaper (jw_escape): '"', '\\' and controls escaped, invalid UTF-8 bytes become U+FFFD. */
void cli_buf_json_str(struct cli_buf *b, const char *s, size_t n);
/* Terminal-safe text (docs/security.md, "dyno and hostile replies"): a string from a reply
 * is appended with every C0 control (newline included), DEL, C1 control (U+0080..U+009F) and
 * invalid UTF-8 byte written as a visible escape (\n, \r, \t, \xHH, \u00HH), so it can
 * neither drive the terminal (ESC, BEL, CSI) nor forge a line of its own. */
void cli_buf_term(struct cli_buf *b, const char *s, size_t n);
/* JSON text as received (dyno's verbatim output): newlines and tabs between tokens stay as
 * laid out, everything inside strings and every other control is escaped as above. */
void cli_buf_term_json(struct cli_buf *b, const char *s, size_t n);
/* The same as cli_buf_term into out[cap] (cap >= 4; cut at a whole escape, ending "..."); returns out. */
const char *cli_term_str(const char *s, char *out, size_t cap);
/* Write s[0..n) to f keeping '\n' and '\t' (dyno's own layout) and escaping every other control
 * as above: the last net before the terminal for text rendered from replies. */
void cli_term_write(FILE *f, const char *s, size_t n);
/* Text or "" when the buffer never received a byte. */
const char *cli_buf_str(const struct cli_buf *b);

#endif
