/* doctor_text: how `dyno doctor` shows what it did not write itself (docs/cli.md, "dyno
 * doctor"): file names another user chose and a job's /proc/<pid>/environ. A name in a
 * suggested command is one shell word that names exactly that file; everything else from
 * outside is escaped so it cannot move the cursor, recolour or forge a line. */
#ifndef MSMON_CLI_DOCTOR_TEXT_H
#define MSMON_CLI_DOCTOR_TEXT_H

#include <stddef.h>

#include "cli/cli_buf.h"

/* Append s as one shell word: bare when every byte is in [A-Za-z0-9_@%+=:,./-] (and s is not
 * empty), '...' (with '\'' for a quote) when every byte is printable ASCII, else bash's
 * $'...' with \xHH for every other byte, \\ and \' - so the word never carries a byte a
 * terminal acts on, and pasted into bash, zsh or ksh it is exactly s. */
void doctor_shq(struct cli_buf *b, const char *s, size_t n);

/* s[0..n) escaped for display (common/logesc.h): control bytes, DEL, backslash and invalid
 * UTF-8 as visible escapes. Returns out (always NUL-terminated, cut with "..."). */
const char *doctor_tesc(const char *s, size_t n, char *out, size_t cap);

/* Last resort on a whole output line: every byte < 0x20 and DEL becomes '?', in place, so
 * no path through the checks can put a raw control byte on the terminal. */
void doctor_line_safe(char *line);

/* The value of `name` in an environ block (NUL-separated "K=V" entries, buf[len] == '\0'
 * not required), the last entry winning like getenv of the job; NULL when absent. *ret_len
 * gets its length (the value may run to the end of the block without a NUL). */
const char *doctor_environ_get(const char *buf, size_t len, const char *name, size_t *ret_len);

#endif
