/* utf8: the one UTF-8 validator (RFC 3629: no overlongs, no surrogates, nothing above
 * U+10FFFF), used by the JSON writer and reader, the metric names, the xlsx writer and the
 * shm handoff, so every component agrees on what "valid text" is. */
#ifndef MSMON_COMMON_UTF8_H
#define MSMON_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the valid sequence at s (n bytes available), 0 if invalid or n == 0. */
size_t utf8_seq_len(const unsigned char *s, size_t n);
/* s[0..n) is entirely valid UTF-8 (NUL bytes count as valid U+0000). */
bool utf8_valid(const char *s, size_t n);
/* The largest length <= min(n, max) that does not split a valid sequence of s[0..n);
 * invalid bytes count as one-byte units. For capping names without cutting a character. */
size_t utf8_cut(const char *s, size_t n, size_t max);
/* Encode code point cp (<= U+10FFFF, not a surrogate) into out; returns 1..4, 0 if invalid. */
size_t utf8_encode(uint32_t cp, char out[4]);

#endif
