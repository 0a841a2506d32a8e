/* logesc: outside text made safe for one log line: control characters, DEL,
 * backslash and invalid UTF-8 become visible escapes, so an RPC body or datagram field can
 * never start a forged line or garble the log's encoding. */
#ifndef MSMON_COMMON_LOGESC_H
#define MSMON_COMMON_LOGESC_H

#include <stddef.h>

/* Worst-case output size for n input bytes, terminator included. */
#define LOGESC_CAP(n) ((n) * 4 + 1)

/* Escape s[0..n) into out (cap >= 1): \n \r \t \\ as written, other bytes < 0x20, 0x7F and
 * bytes of invalid UTF-8 as \xHH; valid multi-byte UTF-8 is copied. Stops at a whole escape
 * when out is full (cut text ends in "..."). Returns out, always NUL-terminated. */
char *logesc(const char *s, size_t n, char *out, size_t cap);

#endif
