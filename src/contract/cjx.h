/* cjx: the one JSON reader — Debian's cJSON, with what our inputs need on top of it: exact
 * 64-bit integers (ns timestamps, job ids), RFC 8259 numbers, strict strings (valid UTF-8, no
 * raw control bytes, no \u0000 since values become C strings), a nesting bound, last-wins
 * member lookup, nlohmann's type names and its compact sorted dump. Used by the daemon (RPC
 * bodies, data datagrams). */
#ifndef MSMON_CONTRACT_CJX_H
#define MSMON_CONTRACT_CJX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "common/jw.h"

/* Parse exactly text[0..len) (whitespace around the value allowed). Nesting deeper than
 * max_depth (arrays and objects count, {"a":[1]} is 2) fails. Every number item carries its
 * source text in valuestring. Caller owns *ret; free with cJSON_Delete(). 0, -EINVAL (syntax,
 * depth, number, UTF-8, control byte, \u0000, a number longer than 63 characters, a leading
 * byte-order mark) or -ENOMEM. */
int cjx_parse(const char *text, size_t len, int max_depth, cJSON **ret);

/* Member of an object by exact key; with duplicate keys the last one wins (nlohmann).
 * NULL when obj is not an object or has no such member. Borrowed from obj. */
const cJSON *cjx_get(const cJSON *obj, const char *key);
/* nlohmann's type name: null, boolean, number, string, array, object. */
const char *cjx_type_name(const cJSON *v);

enum cjx_num { CJX_NAN = 0, CJX_INT, CJX_UINT, CJX_DOUBLE };
/* How a number item of cjx_parse() reads exactly: CJX_INT (fits int64, *ret_i), CJX_UINT (in
 * (INT64_MAX, UINT64_MAX], *ret_u), CJX_DOUBLE (fraction, exponent or out of range, *ret_d);
 * CJX_NAN for anything that is not a number. Any ret_* may be NULL. */
enum cjx_num cjx_number(const cJSON *v, int64_t *ret_i, uint64_t *ret_u, double *ret_d);
/* nlohmann's get<int64_t>(): booleans 0/1, integers exact, doubles truncated. -EINVAL for
 * other types, -ERANGE outside [lo, hi]. */
int cjx_to_i64(const cJSON *v, int64_t lo, int64_t hi, int64_t *ret);

/* Compact nlohmann dump(): keys sorted byte-wise, duplicates collapsed to the last, integers
 * exact, doubles shortest round-trip. Errors land in w->err. */
void cjx_write(struct jw *w, const cJSON *v);

#endif
