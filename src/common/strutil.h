/* strutil: strict whole-string number parsing and small string helpers used by every
 * validator (flags, config text, env vars). No locale, no partial accepts, no atoi. */
#ifndef MSMON_COMMON_STRUTIL_H
#define MSMON_COMMON_STRUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Optional sign then decimal digits, whole string, in range; -EINVAL / -ERANGE. */
int str_to_i64(const char *s, int64_t *ret);
int str_to_u64(const char *s, uint64_t *ret);   /* digits only, no sign */
int str_to_i32(const char *s, int32_t *ret);
int str_to_u32(const char *s, uint32_t *ret);
/* Decimal number: optional '-', digits, optional '.' digits, at least one digit; finite. */
int str_to_decimal(const char *s, double *ret);
/* Any strtod-acceptable finite float, whole string (CLI floats). */
int str_to_double(const char *s, double *ret);

/* Trim leading/trailing chars of `set` in place by returning a view. */
void str_trim_view(const char **s, size_t *n, const char *set);
/* Copy at most cap-1 bytes and NUL-terminate; returns -ENOSPC if truncated. */
int str_copy(char *dst, size_t cap, const char *src, size_t n);
/* Append src to the NUL-terminated string in dst (cap), cut to fit (a cut, not an error:
 * messages built from parts). 0, or -ENOSPC when src was cut. */
int str_append(char *dst, size_t cap, const char *src);
bool str_starts_with(const char *s, const char *prefix);
/* s is NUL-terminated within cap bytes and holds no C0 control byte or DEL (a string another
 * process sent that we show or log as it is). */
bool str_printable(const char *s, size_t cap);

/* Symbolic errno name ("ECONNREFUSED"); "E<number>" for unknown values (static storage). */
const char *errno_name(int err);

#endif
