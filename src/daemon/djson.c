/* djson: recursive-descent JSON parser with exact integers and a depth bound, plus an
 * nlohmann-compatible compact writer. Inputs are at most a few KiB (8191-byte RPC bodies,
 * 4096-byte datagrams), so a node per value is fine. */
#include "daemon/djson.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    const char *p;
    const char *end;
    int max_depth;
};

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

void dj_free(struct dj *v)
{
    while (v) {
        struct dj *next = v->next;
        dj_free(v->child);
        free(v->str);
        free(v->key);
        free(v);
        v = next;
    }
}

static int hex4(const char *s, unsigned *ret)
{
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        x <<= 4;
        if (c >= '0' && c <= '9')
            x |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            x |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            x |= (unsigned)(c - 'A' + 10);
        else
            return -EINVAL;
    }
    *ret = x;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of a valid UTF-8 sequence at s (RFC 3629), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t need;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) { need = 2; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { need = 3; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 4; min = 0x10000; }
    else return 0;
    if (n < need)
        return 0;
    unsigned cp = c & (0xFF >> (need + 1));
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return need;
}

/* Parses a string at ps->p (on the opening quote) into a fresh buffer. */
static int parse_string(struct parser *ps, char **ret, size_t *ret_len)
{
    const char *s = ps->p + 1;
    /* decoded text is never longer than the source */
    size_t cap = 1;
    for (const char *q = s; q < ps->end && *q != '"'; q++) {
        cap++;
        if (*q == '\\' && q + 1 < ps->end)
            q++, cap++;
    }
    char *out = malloc(cap + 1);
    if (!out)
        return -ENOMEM;
    size_t o = 0;
    int rc = -EINVAL;
    while (s < ps->end) {
        unsigned char c = (unsigned char)*s;
        if (c == '"') {
            ps->p = s + 1;
            out[o] = '\0';
            *ret = out;
            *ret_len = o;
            return 0;
        }
        if (c < 0x20)
            goto fail;
        if (c == '\\') {
            if (s + 1 >= ps->end)
                goto fail;
            char e = s[1];
            s += 2;
            switch (e) {
            case '"': out[o++] = '"'; break;
            case '\\': out[o++] = '\\'; break;
            case '/': out[o++] = '/'; break;
            case 'b': out[o++] = '\b'; break;
            case 'f': out[o++] = '\f'; break;
            case 'n': out[o++] = '\n'; break;
            case 'r': out[o++] = '\r'; break;
            case 't': out[o++] = '\t'; break;
            case 'u': {
                unsigned cp, lo;
                if (ps->end - s < 4 || hex4(s, &cp) != 0)
                    goto fail;
                s += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (ps->end - s < 6 || s[0] != '\\' || s[1] != 'u' || hex4(s + 2, &lo) != 0 ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        goto fail;
                    s += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    goto fail;
                }
                o += put_utf8(out + o, cp);
                break;
            }
            default:
                goto fail;
            }
            continue;
        }
        size_t n = utf8_len((const unsigned char *)s, (size_t)(ps->end - s));
        if (n == 0)
            goto fail;
        memcpy(out + o, s, n);
        o += n;
        s += n;
    }
fail:
    free(out);
    return rc;
}

static int parse_number(struct parser *ps, struct dj *v)
{
    const char *s = ps->p;
    const char *q = s;
    bool neg = false, frac = false;
    if (q < ps->end && *q == '-')
        neg = true, q++;
    if (q >= ps->end || *q < '0' || *q > '9')
        return -EINVAL;
    if (*q == '0')
        q++;
    else
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    if (q < ps->end && *q == '.') {
        frac = true;
        q++;
        if (q >= ps->end || *q < '0' || *q > '9')
            return -EINVAL;
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        frac = true;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= ps->end || *q < '0' || *q > '9')
            return -EINVAL;
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    char tmp[64];
    size_t n = (size_t)(q - s);
    ps->p = q;
    if (!frac) {
        /* exact integer path: accumulate in uint64 */
        uint64_t acc = 0;
        bool over = false;
        for (const char *d = s + (neg ? 1 : 0); d < q; d++) {
            unsigned dig = (unsigned)(*d - '0');
            if (acc > (UINT64_MAX - dig) / 10)
                over = true;
            acc = acc * 10 + dig;
        }
        if (!over) {
            if (!neg && acc <= (uint64_t)INT64_MAX) {
                v->type = DJ_INT;
                v->v.i = (int64_t)acc;
                return 0;
            }
            if (!neg) {
                v->type = DJ_UINT;
                v->v.u = acc;
                return 0;
            }
            if (acc <= (uint64_t)INT64_MAX + 1) {
                v->type = DJ_INT;
                v->v.i = acc == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)acc;
                return 0;
            }
        }
    }
    if (n >= sizeof(tmp)) {
        /* very long literal: keep its magnitude only */
        v->type = DJ_DOUBLE;
        v->v.d = neg ? -HUGE_VAL : HUGE_VAL;
        return 0;
    }
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    v->type = DJ_DOUBLE;
    v->v.d = strtod(tmp, NULL);
    return 0;
}

static int parse_value(struct parser *ps, int depth, struct dj **ret);

static int parse_container(struct parser *ps, int depth, struct dj *v, bool obj)
{
    struct dj **tail = &v->child;
    char close = obj ? '}' : ']';
    if (depth > ps->max_depth)
        return -EINVAL;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len = 0;
        int rc;
        skip_ws(ps);
        if (obj) {
            if (ps->p >= ps->end || *ps->p != '"')
                return -EINVAL;
            rc = parse_string(ps, &key, &key_len);
            if (rc)
                return rc;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                return -EINVAL;
            }
            ps->p++;
        }
        struct dj *c = NULL;
        rc = parse_value(ps, depth, &c);
        if (rc) {
            free(key);
            return rc;
        }
        c->key = key;
        c->key_len = key_len;
        *tail = c;
        tail = &c->next;
        v->len++;
        skip_ws(ps);
        if (ps->p >= ps->end)
            return -EINVAL;
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            return 0;
        }
        return -EINVAL;
    }
}

static bool lit(struct parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return false;
    ps->p += n;
    return true;
}

static int parse_value(struct parser *ps, int depth, struct dj **ret)
{
    struct dj *v = calloc(1, sizeof(*v));
    int rc = -EINVAL;
    if (!v)
        return -ENOMEM;
    skip_ws(ps);
    if (ps->p >= ps->end)
        goto fail;
    switch (*ps->p) {
    case '{':
        v->type = DJ_OBJECT;
        rc = parse_container(ps, depth + 1, v, true);
        break;
    case '[':
        v->type = DJ_ARRAY;
        rc = parse_container(ps, depth + 1, v, false);
        break;
    case '"':
        v->type = DJ_STRING;
        rc = parse_string(ps, &v->str, &v->len);
        break;
    case 't':
        v->type = DJ_BOOL;
        v->v.b = true;
        rc = lit(ps, "true") ? 0 : -EINVAL;
        break;
    case 'f':
        v->type = DJ_BOOL;
        rc = lit(ps, "false") ? 0 : -EINVAL;
        break;
    case 'n':
        v->type = DJ_NULL;
        rc = lit(ps, "null") ? 0 : -EINVAL;
        break;
    default:
        rc = parse_number(ps, v);
        break;
    }
    if (rc)
        goto fail;
    *ret = v;
    return 0;
fail:
    dj_free(v);
    return rc;
}

int dj_parse(const char *text, size_t len, int max_depth, struct dj **ret)
{
    struct parser ps = { text, text + len, max_depth };
    struct dj *v = NULL;
    int rc = parse_value(&ps, 0, &v);
    if (rc)
        return rc;
    skip_ws(&ps);
    if (ps.p != ps.end) {
        dj_free(v);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

const struct dj *dj_get(const struct dj *obj, const char *key)
{
    const struct dj *found = NULL;
    if (!obj || obj->type != DJ_OBJECT)
        return NULL;
    size_t kl = strlen(key);
    for (const struct dj *c = obj->child; c; c = c->next)
        if (c->key_len == kl && memcmp(c->key, key, kl) == 0)
            found = c;
    return found;
}

const char *dj_type_name(const struct dj *v)
{
    switch (v->type) {
    case DJ_NULL: return "null";
    case DJ_BOOL: return "boolean";
    case DJ_INT:
    case DJ_UINT:
    case DJ_DOUBLE: return "number";
    case DJ_STRING: return "string";
    case DJ_ARRAY: return "array";
    case DJ_OBJECT: return "object";
    }
    return "null";
}

int dj_to_i64(const struct dj *v, int64_t lo, int64_t hi, int64_t *ret)
{
    int64_t x;
    switch (v->type) {
    case DJ_BOOL: x = v->v.b ? 1 : 0; break;
    case DJ_INT: x = v->v.i; break;
    case DJ_UINT: return -ERANGE;
    case DJ_DOUBLE: {
        double t = trunc(v->v.d);
        if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0))
            return -ERANGE;
        x = (int64_t)t;
        break;
    }
    default:
        return -EINVAL;
    }
    if (x < lo || x > hi)
        return -ERANGE;
    *ret = x;
    return 0;
}

static int key_cmp(const struct dj *a, const struct dj *b)
{
    size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = memcmp(a->key, b->key, n);
    if (c)
        return c;
    return a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
}

static void write_object(struct jw *w, const struct dj *v)
{
    /* stable insertion sort of member pointers; for equal keys the later one survives */
    const struct dj *small[32];
    const struct dj **m = v->len <= 32 ? small : malloc(v->len * sizeof(*m));
    size_t n = 0;
    if (!m) {
        w->err = w->err ? w->err : -ENOMEM;
        return;
    }
    for (const struct dj *c = v->child; c; c = c->next) {
        size_t i = n;
        while (i > 0 && key_cmp(m[i - 1], c) > 0)
            i--;
        if (i > 0 && key_cmp(m[i - 1], c) == 0) {
            m[i - 1] = c;
            continue;
        }
        memmove(m + i + 1, m + i, (n - i) * sizeof(*m));
        m[i] = c;
        n++;
    }
    jw_obj_begin(w);
    for (size_t i = 0; i < n; i++) {
        /* keys may contain NUL bytes, so write them as counted strings */
        jw_strn(w, m[i]->key, m[i]->key_len);
        w->after_key = true;
        jw_raw(w, ":", 1);
        w->after_key = true;
        dj_write(w, m[i]);
    }
    jw_obj_end(w);
    if (m != small)
        free(m);
}

void dj_write(struct jw *w, const struct dj *v)
{
    switch (v->type) {
    case DJ_NULL: jw_null(w); break;
    case DJ_BOOL: jw_bool(w, v->v.b); break;
    case DJ_INT: jw_int(w, v->v.i); break;
    case DJ_UINT: jw_uint(w, v->v.u); break;
    case DJ_DOUBLE: jw_double(w, v->v.d); break;
    case DJ_STRING: jw_strn(w, v->str, v->len); break;
    case DJ_ARRAY:
        jw_arr_begin(w);
        for (const struct dj *c = v->child; c; c = c->next)
            dj_write(w, c);
        jw_arr_end(w);
        break;
    case DJ_OBJECT: write_object(w, v); break;
    }
}
