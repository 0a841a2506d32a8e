/* cli_buf: a growable text buffer with a hard cap fixed at init, for config text, request
 * bodies and the per-host output lines. Overflow sets err (first error wins); callers check
 * once at the end instead of after every append. */
#ifndef MSMON_CLI_BUF_H
#define MSMON_CLI_BUF_H

#include <stddef.h>

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
/* Append s as the body of a JSON string (02-cli.md §3): newline -> \n, '"' -> \", '\' -> \\,
 * other bytes < 0x20 -> \u00xx; everything else is copied. */
void cli_buf_json_str(struct cli_buf *b, const char *s, size_t n);
/* Text or "" when the buffer never received a byte. */
const char *cli_buf_str(const struct cli_buf *b);

#endif
