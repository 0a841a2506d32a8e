/* djson: a small strict JSON reader for the daemon's inputs (RPC bodies, data datagrams).
 * Unlike cJSON it keeps integers exact (int64/uint64, e.g. ns timestamps), bounds nesting
 * while parsing, rejects invalid UTF-8 like nlohmann, and re-serialises nlohmann-style. */
#ifndef MSMON_DAEMON_DJSON_H
#define MSMON_DAEMON_DJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/jw.h"

enum dj_type { DJ_NULL, DJ_BOOL, DJ_INT, DJ_UINT, DJ_DOUBLE, DJ_STRING, DJ_ARRAY, DJ_OBJECT };

struct dj {
    enum dj_type type;
    union {
        bool b;
        int64_t i;      /* DJ_INT: integers that fit int64 */
        uint64_t u;     /* DJ_UINT: integers in (INT64_MAX, UINT64_MAX] */
        double d;       /* DJ_DOUBLE: anything with a fraction or exponent, or too large */
    } v;
    char *str;          /* DJ_STRING: NUL-terminated copy (may contain NULs; see len) */
    size_t len;         /* string length, or number of children */
    char *key;          /* key of this member when the parent is an object */
    size_t key_len;
    struct dj *child;   /* first child (arrays, objects), in input order */
    struct dj *next;
};

/* Parse exactly text[0..len) (whitespace around the value allowed). Nesting deeper than
 * max_depth (arrays and objects count, {"a":[1]} is 2) fails. Caller owns *ret; free with
 * dj_free(). Returns 0, -EINVAL (syntax, depth, UTF-8) or -ENOMEM. */
int dj_parse(const char *text, size_t len, int max_depth, struct dj **ret);
void dj_free(struct dj *v);

/* Member of an object by key; with duplicate keys the last one wins (nlohmann). */
const struct dj *dj_get(const struct dj *obj, const char *key);
/* nlohmann's type name: null, boolean, number, string, array, object. */
const char *dj_type_name(const struct dj *v);
/* Integral value with nlohmann's get<int64>() rules (booleans 0/1, floats truncated).
 * -EINVAL for non-numbers, -ERANGE outside [lo, hi]. */
int dj_to_i64(const struct dj *v, int64_t lo, int64_t hi, int64_t *ret);
/* Compact nlohmann dump(): keys sorted byte-wise, duplicates collapsed to the last. */
void dj_write(struct jw *w, const struct dj *v);

#endif
