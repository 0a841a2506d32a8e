/* jsonl_fmt: pure formatter of the JSONL export's lines (docs/design/outputs.md#line-shapes), one record or
 * one completed marker part per line, keys sorted, no '\n'. No I/O, no allocation: the
 * caller provides room for jsonl_fmt_bound() bytes. Tested alone (test_jsonl_fmt). */
#ifndef MSMON_PLUGIN_JSONL_FMT_H
#define MSMON_PLUGIN_JSONL_FMT_H

#include <stdbool.h>
#include <stddef.h>

#include "plugin/pipeline/pipeline.h"
#include "plugin/pipeline/record.h"

#define JSONL_FMT_FIXED 640 /* bound of a line's keys, numbers and punctuation */

/* Strings of a non-marker record, in the order jsonl_fmt_record writes them. A string whose
 * escaped[i] is set is already JSON-escaped text (without quotes) and is copied as is. */
struct jsonl_strs {
    const char *s[4];
    size_t n[4];
    bool escaped[4];
    size_t total;
};

/* strlen, 0 for NULL. */
size_t jsonl_fmt_slen(const char *s);
/* Bound of one line whose strings have str_bytes bytes (worst-case escaping). */
size_t jsonl_fmt_bound(size_t str_bytes);
/* r's strings, pointers only, in the order jsonl_fmt_strings lists them; returns how many (<= 4). */
size_t jsonl_fmt_string_ptrs(const struct mon_record *r, const char **s);
/* Fill *ret with r's strings (none escaped); returns how many. */
size_t jsonl_fmt_strings(const struct mon_record *r, struct jsonl_strs *ret);
/* Write r's line at o (room: jsonl_fmt_bound(st->total)); returns its end, NULL for a kind
 * without a line (markers: see jsonl_fmt_marker). */
char *jsonl_fmt_record(char *o, const struct mon_record *r, const struct jsonl_strs *st);
/* JSON escaping of s[0..n) into dst (room: 6 * n); returns the escaped length. */
size_t jsonl_fmt_escape(char *dst, const char *s, size_t n);
/* The host or device line of the part l completes (nlen/dlen: name and domain lengths). */
char *jsonl_fmt_marker(char *o, const struct pl_range *l, size_t nlen, size_t dlen);

#endif
