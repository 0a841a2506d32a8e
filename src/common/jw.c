/* jw: compact JSON writer. Escaping mirrors nlohmann dump(): \" \\ \b \f \n \r \t, other
 * control bytes as \u00xx (lowercase), everything else verbatim; invalid UTF-8 becomes U+FFFD. */
#include "common/jw.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"

void jw_init(struct jw *w, char *buf, size_t cap)
{
    memset(w, 0, sizeof(*w));
    w->buf = buf;
    w->cap = cap;
    w->first[0] = true;
    if (cap)
        buf[0] = '\0';
}

void jw_init_dyn(struct jw *w, size_t max_cap)
{
    memset(w, 0, sizeof(*w));
    w->max_cap = max_cap;
    w->first[0] = true;
}

void jw_fini(struct jw *w)
{
    if (w->max_cap)
        free(w->buf);
    w->buf = NULL;
    w->cap = w->len = 0;
}

void jw_reset(struct jw *w)
{
    w->len = 0;
    w->err = 0;
    w->depth = 0;
    w->first[0] = true;
    w->after_key = false;
    if (w->cap)
        w->buf[0] = '\0';
}

static int reserve(struct jw *w, size_t n)
{
    if (w->err)
        return w->err;
    if (w->len + n + 1 <= w->cap)
        return 0;
    if (!w->max_cap) {
        w->err = -ENOSPC;
        return w->err;
    }
    size_t need = w->len + n + 1;
    if (need > w->max_cap) {
        w->err = -ENOSPC;
        return w->err;
    }
    size_t ncap = w->cap ? w->cap : 256;
    while (ncap < need)
        ncap *= 2;
    if (ncap > w->max_cap)
        ncap = w->max_cap;
    char *nb = realloc(w->buf, ncap);
    if (!nb) {
        w->err = -ENOMEM;
        return w->err;
    }
    w->buf = nb;
    w->cap = ncap;
    return 0;
}

static void put(struct jw *w, const char *s, size_t n)
{
    if (reserve(w, n))
        return;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void putc_(struct jw *w, char c) { put(w, &c, 1); }

/* Separator before a value (arrays) or a key (objects). */
static void sep(struct jw *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (!w->first[w->depth])
        putc_(w, ',');
    w->first[w->depth] = false;
}

static void open_(struct jw *w, char c)
{
    sep(w);
    putc_(w, c);
    if (w->depth + 1 >= JW_MAX_DEPTH) {
        if (!w->err)
            w->err = -EINVAL;
        return;
    }
    w->depth++;
    w->first[w->depth] = true;
}

static void close_(struct jw *w, char c)
{
    putc_(w, c);
    if (w->depth > 0)
        w->depth--;
}

void jw_obj_begin(struct jw *w) { open_(w, '{'); }
void jw_obj_end(struct jw *w) { close_(w, '}'); }
void jw_arr_begin(struct jw *w) { open_(w, '['); }
void jw_arr_end(struct jw *w) { close_(w, ']'); }

long jw_escape(char *dst, size_t cap, const char *src, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)src;
    size_t o = 0;
#define EMIT(str, k) do { if (o + (k) > cap) return -ENOSPC; memcpy(dst + o, (str), (k)); o += (k); } while (0)
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            /* fast path: run of plain ASCII */
            size_t j = i + 1;
            while (j < n && s[j] >= 0x20 && s[j] < 0x80 && s[j] != '"' && s[j] != '\\')
                j++;
            EMIT(s + i, j - i);
            i = j;
            continue;
        }
        switch (c) {
        case '"': EMIT("\\\"", 2); i++; continue;
        case '\\': EMIT("\\\\", 2); i++; continue;
        case '\b': EMIT("\\b", 2); i++; continue;
        case '\f': EMIT("\\f", 2); i++; continue;
        case '\n': EMIT("\\n", 2); i++; continue;
        case '\r': EMIT("\\r", 2); i++; continue;
        case '\t': EMIT("\\t", 2); i++; continue;
        default: break;
        }
        if (c < 0x20) {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            EMIT(u, 6);
            i++;
            continue;
        }
        size_t l = utf8_seq_len(s + i, n - i); /* the contract's one validator */
        if (l == 0) {
            EMIT("\xEF\xBF\xBD", 3); /* U+FFFD */
            i++;
        } else {
            EMIT(s + i, l);
            i += l;
        }
    }
#undef EMIT
    return (long)o;
}

static void put_str(struct jw *w, const char *s, size_t n)
{
    putc_(w, '"');
    if (!s)
        n = 0;
    if (w->err)
        return;
    long r = -ENOSPC;
    if (w->cap > w->len + 1)
        r = jw_escape(w->buf + w->len, w->cap - w->len - 1, s ? s : "", n);
    if (r == -ENOSPC && w->max_cap) {
        /* grow to the worst case (6 output bytes per input byte), bounded by max_cap */
        size_t want = n * 6 + 2;
        if (w->len + want + 1 > w->max_cap)
            want = w->max_cap - w->len - 1;
        if (reserve(w, want))
            return;
        r = jw_escape(w->buf + w->len, w->cap - w->len - 1, s ? s : "", n);
    }
    if (r < 0) {
        w->err = (int)r;
        return;
    }
    w->len += (size_t)r;
    putc_(w, '"');
}

void jw_key(struct jw *w, const char *key)
{
    sep(w);
    put_str(w, key, strlen(key));
    putc_(w, ':');
    w->after_key = true;
}

void jw_strn(struct jw *w, const char *s, size_t n)
{
    sep(w);
    put_str(w, s, n);
}

void jw_str(struct jw *w, const char *s) { jw_strn(w, s, s ? strlen(s) : 0); }

void jw_int(struct jw *w, int64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%lld", (long long)v);
    sep(w);
    put(w, tmp, (size_t)n);
}

void jw_uint(struct jw *w, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v);
    sep(w);
    put(w, tmp, (size_t)n);
}

void jw_bool(struct jw *w, bool v)
{
    sep(w);
    put(w, v ? "true" : "false", v ? 4 : 5);
}

void jw_null(struct jw *w)
{
    sep(w);
    put(w, "null", 4);
}

/* nlohmann's dtoa output: shortest round-trip digits, then fixed notation when the decimal
 * exponent n (value = 0.d1d2..dk x 10^n) satisfies -4 < n <= 15, else d.ddde+XX. */
int jw_fmt_double(char *dst, size_t cap, double v)
{
    if (!isfinite(v))
        return snprintf(dst, cap, "null");
    char sci[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(sci, sizeof(sci), "%.*e", prec - 1, v);
        if (strtod(sci, NULL) == v)
            break;
    }
    /* split "-d.ddde[+-]XX" into sign, digits and exponent */
    const char *p = sci;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    char digits[24];
    int k = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9' && k < 20)
            digits[k++] = *p;
    int e10 = *p == 'e' ? (int)strtol(p + 1, NULL, 10) : 0;
    while (k > 1 && digits[k - 1] == '0')
        k--;
    digits[k] = '\0';
    int n = e10 + 1; /* position of the decimal point relative to the digits */
    char out[64];
    int o = 0;
    if (neg)
        out[o++] = '-';
    if (v == 0) {
        o += snprintf(out + o, sizeof(out) - (size_t)o, "0.0");
    } else if (k <= n && n <= 15) {
        o += snprintf(out + o, sizeof(out) - (size_t)o, "%s%.*s.0", digits, n - k, "000000000000000");
    } else if (0 < n && n <= 15) {
        o += snprintf(out + o, sizeof(out) - (size_t)o, "%.*s.%s", n, digits, digits + n);
    } else if (-4 < n && n <= 0) {
        o += snprintf(out + o, sizeof(out) - (size_t)o, "0.%.*s%s", -n, "0000", digits);
    } else {
        int ex = n - 1;
        if (k == 1)
            o += snprintf(out + o, sizeof(out) - (size_t)o, "%ce%c%02d", digits[0], ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
        else
            o += snprintf(out + o, sizeof(out) - (size_t)o, "%c.%se%c%02d", digits[0], digits + 1, ex < 0 ? '-' : '+',
                          ex < 0 ? -ex : ex);
    }
    if ((size_t)o >= cap)
        return -ENOSPC;
    memcpy(dst, out, (size_t)o + 1);
    return o;
}

void jw_double(struct jw *w, double v)
{
    char tmp[40];
    int n = jw_fmt_double(tmp, sizeof(tmp), v);
    sep(w);
    if (n > 0)
        put(w, tmp, (size_t)n);
}

void jw_raw(struct jw *w, const char *json, size_t n)
{
    sep(w);
    put(w, json, n);
}

void jw_kv_str(struct jw *w, const char *key, const char *s)
{
    jw_key(w, key);
    jw_str(w, s);
}

void jw_kv_int(struct jw *w, const char *key, int64_t v)
{
    jw_key(w, key);
    jw_int(w, v);
}

void jw_kv_uint(struct jw *w, const char *key, uint64_t v)
{
    jw_key(w, key);
    jw_uint(w, v);
}

void jw_kv_bool(struct jw *w, const char *key, bool v)
{
    jw_key(w, key);
    jw_bool(w, v);
}
