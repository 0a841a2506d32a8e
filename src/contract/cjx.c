/* cjx: a lexical pre-pass does what cJSON does not — RFC 8259 number syntax, string bytes and
 * escapes — and records every number's text in document order; cJSON builds the tree; a walk
 * in the same order hands each number item its text and checks the depth. */
#include "contract/cjx.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"
#include "common/utf8.h"

#define CJX_NUM_MAX 63 /* cJSON cannot read longer numbers either */

struct cjx_nums {
    const char **start;
    size_t *len;
    size_t n, cap, next;
};

static int cjx_nums_add(struct cjx_nums *ns, const char *s, size_t n)
{
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 16;
        const char **st = realloc(ns->start, cap * sizeof(*st));
        if (!st)
            return -ENOMEM;
        ns->start = st;
        size_t *ln = realloc(ns->len, cap * sizeof(*ln));
        if (!ln)
            return -ENOMEM;
        ns->len = ln;
        ns->cap = cap;
    }
    ns->start[ns->n] = s;
    ns->len[ns->n] = n;
    ns->n++;
    return 0;
}

static bool cjx_digit(const char *p, const char *end)
{
    return p < end && *p >= '0' && *p <= '9';
}

/* RFC 8259 number at p; returns its length, 0 if malformed. */
static size_t cjx_number_len(const char *p, const char *end)
{
    const char *q = p;

    if (q < end && *q == '-')
        q++;
    if (!cjx_digit(q, end))
        return 0;
    if (*q == '0')
        q++;
    else
        while (cjx_digit(q, end))
            q++;
    if (q < end && *q == '.') {
        q++;
        if (!cjx_digit(q, end))
            return 0;
        while (cjx_digit(q, end))
            q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < end && (*q == '+' || *q == '-'))
            q++;
        if (!cjx_digit(q, end))
            return 0;
        while (cjx_digit(q, end))
            q++;
    }
    /* cJSON reads the whole run of number characters: a valid number must be all of it. */
    if (q < end && strchr("0123456789+-.eE", *q) && *q)
        return 0;
    return (size_t)(q - p);
}

static bool cjx_hex4(const char *p, const char *end, uint32_t *ret)
{
    uint32_t v = 0;

    if (end - p < 4)
        return false;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return false;
    }
    *ret = v;
    return true;
}

/* String starting after the opening quote; returns the position after the closing quote or
 * NULL. Surrogate pairing is left to cJSON (it refuses lone and reversed halves). */
static const char *cjx_string(const char *p, const char *end)
{
    while (p < end && *p != '"') {
        unsigned char c = (unsigned char)*p;
        uint32_t cp;
        if (c < 0x20)
            return NULL;
        if (c == '\\') {
            if (end - p < 2)
                return NULL;
            if (p[1] == 'u') {
                if (!cjx_hex4(p + 2, end, &cp) || cp == 0)
                    return NULL;
                p += 6;
            } else if (strchr("\"\\/bfnrt", p[1]) && p[1]) {
                p += 2;
            } else {
                return NULL;
            }
            continue;
        }
        size_t l = utf8_seq_len((const unsigned char *)p, (size_t)(end - p));
        if (l == 0)
            return NULL;
        p += l;
    }
    return p < end ? p + 1 : NULL;
}

static int cjx_lex(const char *text, size_t len, struct cjx_nums *ns)
{
    const char *p = text, *end = text + len;
    int rc = 0;

    while (p < end) {
        if (*p == '"') {
            p = cjx_string(p + 1, end);
            if (!p)
                return -EINVAL;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            size_t n = cjx_number_len(p, end);
            if (n == 0 || n > CJX_NUM_MAX)
                return -EINVAL;
            rc = cjx_nums_add(ns, p, n);
            if (rc < 0)
                return rc;
            p += n;
        } else if ((unsigned char)*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') {
            return -EINVAL; /* cJSON would take any control byte for whitespace */
        } else {
            p++;
        }
    }
    return 0;
}

/* Document-order walk: attach number texts, check depth. */
static int cjx_attach(cJSON *v, int depth, int max_depth, struct cjx_nums *ns)
{
    int rc = 0;

    if (cJSON_IsNumber(v)) {
        if (ns->next >= ns->n)
            return -EINVAL;
        v->valuestring = strndup(ns->start[ns->next], ns->len[ns->next]);
        ns->next++;
        return v->valuestring ? 0 : -ENOMEM;
    }
    if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        if (depth + 1 > max_depth)
            return -EINVAL;
        for (cJSON *c = v->child; c && rc == 0; c = c->next)
            rc = cjx_attach(c, depth + 1, max_depth, ns);
    }
    return rc;
}

int cjx_parse(const char *text, size_t len, int max_depth, cJSON **ret)
{
    struct cjx_nums ns = { 0 };
    const char *end = NULL;
    cJSON *v = NULL;
    int rc;

    *ret = NULL;
    /* cJSON skips a UTF-8 byte-order mark; the daemon never accepted one. */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        rc = -EINVAL;
        goto out;
    }
    rc = cjx_lex(text, len, &ns);
    if (rc < 0)
        goto out;
    rc = -EINVAL;
    v = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!v)
        goto out;
    while (end < text + len && strchr(" \t\n\r", *end) && *end)
        end++;
    if (end != text + len)
        goto out;
    rc = cjx_attach(v, 0, max_depth, &ns);
    if (rc == 0 && ns.next != ns.n)
        rc = -EINVAL;
out:
    if (rc == 0)
        *ret = v;
    else
        cJSON_Delete(v);
    free(ns.start);
    free(ns.len);
    return rc;
}

const cJSON *cjx_get(const cJSON *obj, const char *key)
{
    const cJSON *found = NULL;

    if (!cJSON_IsObject(obj))
        return NULL;
    for (const cJSON *c = obj->child; c; c = c->next)
        if (c->string && strcmp(c->string, key) == 0)
            found = c;
    return found;
}

const char *cjx_type_name(const cJSON *v)
{
    if (cJSON_IsBool(v))
        return "boolean";
    if (cJSON_IsNumber(v))
        return "number";
    if (cJSON_IsString(v))
        return "string";
    if (cJSON_IsArray(v))
        return "array";
    if (cJSON_IsObject(v))
        return "object";
    return "null";
}

enum cjx_num cjx_number(const cJSON *v, int64_t *ret_i, uint64_t *ret_u, double *ret_d)
{
    const char *t;
    int64_t i;
    uint64_t u;

    if (!cJSON_IsNumber(v))
        return CJX_NAN;
    t = v->valuestring;
    if (t && !strpbrk(t, ".eE")) {
        if (str_to_i64(t, &i) == 0) {
            if (ret_i)
                *ret_i = i;
            return CJX_INT;
        }
        if (t[0] != '-' && str_to_u64(t, &u) == 0) {
            if (ret_u)
                *ret_u = u;
            return CJX_UINT;
        }
    }
    if (ret_d)
        *ret_d = v->valuedouble;
    return CJX_DOUBLE;
}

int cjx_to_i64(const cJSON *v, int64_t lo, int64_t hi, int64_t *ret)
{
    int64_t x = 0;
    double d;

    if (cJSON_IsBool(v)) {
        x = cJSON_IsTrue(v) ? 1 : 0;
    } else {
        switch (cjx_number(v, &x, NULL, &d)) {
        case CJX_INT:
            break;
        case CJX_UINT:
            return -ERANGE;
        case CJX_DOUBLE:
            d = trunc(d);
            if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
                return -ERANGE;
            x = (int64_t)d;
            break;
        default:
            return -EINVAL;
        }
    }
    if (x < lo || x > hi)
        return -ERANGE;
    *ret = x;
    return 0;
}

static void cjx_write_object(struct jw *w, const cJSON *v)
{
    /* Stable insertion sort of member pointers; for equal keys the later one survives. */
    const cJSON *small[32], **m = small;
    size_t count = 0, n = 0;

    for (const cJSON *c = v->child; c; c = c->next)
        count++;
    if (count > 32) {
        m = malloc(count * sizeof(*m));
        if (!m) {
            if (!w->err)
                w->err = -ENOMEM;
            return;
        }
    }
    for (const cJSON *c = v->child; c; c = c->next) {
        size_t i = n;
        while (i > 0 && strcmp(m[i - 1]->string, c->string) > 0)
            i--;
        if (i > 0 && strcmp(m[i - 1]->string, c->string) == 0) {
            m[i - 1] = c;
            continue;
        }
        memmove(m + i + 1, m + i, (n - i) * sizeof(*m));
        m[i] = c;
        n++;
    }
    jw_obj_begin(w);
    for (size_t i = 0; i < n; i++) {
        jw_key(w, m[i]->string);
        cjx_write(w, m[i]);
    }
    jw_obj_end(w);
    if (m != small)
        free(m);
}

void cjx_write(struct jw *w, const cJSON *v)
{
    int64_t i;
    uint64_t u;
    double d;

    if (cJSON_IsBool(v)) {
        jw_bool(w, cJSON_IsTrue(v));
    } else if (cJSON_IsNumber(v)) {
        switch (cjx_number(v, &i, &u, &d)) {
        case CJX_INT: jw_int(w, i); break;
        case CJX_UINT: jw_uint(w, u); break;
        default: jw_double(w, d); break;
        }
    } else if (cJSON_IsString(v)) {
        jw_str(w, v->valuestring);
    } else if (cJSON_IsArray(v)) {
        jw_arr_begin(w);
        for (const cJSON *c = v->child; c; c = c->next)
            cjx_write(w, c);
        jw_arr_end(w);
    } else if (cJSON_IsObject(v)) {
        cjx_write_object(w, v);
    } else {
        jw_null(w);
    }
}

