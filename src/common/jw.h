/* jw: streaming compact JSON writer with nlohmann::json::dump() byte compatibility.
 * Callers emit object keys in byte-wise sorted order themselves (keys are known at compile
 * time everywhere we write JSON), which keeps the hot paths allocation-free. */
#ifndef MSMON_COMMON_JW_H
#define MSMON_COMMON_JW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JW_MAX_DEPTH 16

struct jw {
    char *buf;
    size_t len;
    size_t cap;       /* bytes available in buf (a NUL is kept after len when room allows) */
    size_t max_cap;   /* growable mode: upper bound; 0 = fixed buffer */
    int err;          /* first error: -ENOSPC (cap reached), -ENOMEM, -EINVAL (nesting) */
    int depth;
    bool first[JW_MAX_DEPTH];
    bool after_key;
};

/* Fixed-buffer writer over caller storage; overflow sets err = -ENOSPC. */
void jw_init(struct jw *w, char *buf, size_t cap);
/* Heap writer that grows up to max_cap bytes. Caller owns w->buf; free with jw_fini(). */
void jw_init_dyn(struct jw *w, size_t max_cap);
void jw_fini(struct jw *w);
/* Rewind to empty, keeping the storage. */
void jw_reset(struct jw *w);

void jw_obj_begin(struct jw *w);
void jw_obj_end(struct jw *w);
void jw_arr_begin(struct jw *w);
void jw_arr_end(struct jw *w);
void jw_key(struct jw *w, const char *key);
void jw_str(struct jw *w, const char *s);           /* NULL writes "" */
void jw_strn(struct jw *w, const char *s, size_t n);
void jw_int(struct jw *w, int64_t v);
void jw_uint(struct jw *w, uint64_t v);
void jw_bool(struct jw *w, bool v);
void jw_null(struct jw *w);
void jw_double(struct jw *w, double v);             /* shortest round-trip, like nlohmann */
void jw_raw(struct jw *w, const char *json, size_t n); /* pre-serialised value */
/* An object member, key and value in one call. */
void jw_kv_str(struct jw *w, const char *key, const char *s); /* NULL writes "" */
void jw_kv_int(struct jw *w, const char *key, int64_t v);
void jw_kv_uint(struct jw *w, const char *key, uint64_t v);
void jw_kv_bool(struct jw *w, const char *key, bool v);

/* Append the escaped body of a JSON string (no quotes) to a plain buffer; returns bytes
 * written or -ENOSPC. Escaping rules of docs/design/rpc.md#reply-serialisation (invalid UTF-8 -> U+FFFD). */
long jw_escape(char *dst, size_t cap, const char *s, size_t n);

/* Shortest decimal that parses back to the same double ("%.17g" fallback). */
int jw_fmt_double(char *dst, size_t cap, double v);

#endif
