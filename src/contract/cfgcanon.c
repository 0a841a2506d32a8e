/* cfgcanon: a two-pass strict reader. Pass one walks the bytes once (UTF-8, forbidden code
 * points, line shape); pass two emits the trimmed lines. Rules and reasons: docs/security.md. */
#include "contract/cfgcanon.h"

#include "contract/kvtext.h"
#include "common/utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cfgcanon_py_isspace(unsigned cp)
{
    switch (cp) {
    case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d:
    case 0x1c: case 0x1d: case 0x1e: case 0x1f: case 0x20:
    case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202f: case 0x205f: case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200a;
    }
}

static unsigned decode(const unsigned char *s, size_t n)
{
    if (n == 1)
        return s[0];
    if (n == 2)
        return ((unsigned)(s[0] & 0x1f) << 6) | (s[1] & 0x3f);
    if (n == 3)
        return ((unsigned)(s[0] & 0x0f) << 12) | ((unsigned)(s[1] & 0x3f) << 6) | (s[2] & 0x3f);
    return ((unsigned)(s[0] & 0x07) << 18) | ((unsigned)(s[1] & 0x3f) << 12) |
           ((unsigned)(s[2] & 0x3f) << 6) | (s[3] & 0x3f);
}

/* One refusal line: "config line N: <what> in '<line, escaped and cut>'". */
static int refuse(char *why, size_t whycap, size_t lineno, const char *line, size_t n,
                  const char *fmt, ...)
{
    char what[96], shown[96];
    size_t o = 0, i = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    for (; i < n && o + 5 < sizeof(shown); i++) {
        unsigned char c = (unsigned char)line[i];
        if (c < 0x20 || c >= 0x7f || c == '\\' || c == '\'')
            o += (size_t)snprintf(shown + o, sizeof(shown) - o, "\\x%02x", c);
        else
            shown[o++] = (char)c;
    }
    shown[o] = '\0';
    if (why && whycap)
        snprintf(why, whycap, "config line %zu: %s in '%s%s'", lineno, what, shown,
                 i < n ? "..." : "");
    return -EINVAL;
}

static int key_char(unsigned char c)
{
    /* upper case only: a consumer that folds case (or a later one that does) cannot find an
     * ACTIVITIES_LOG_FILE the daemon did not check */
    return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int key_eq_nocase(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn)
        return 0;
    for (size_t i = 0; i < an; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
        if (x >= 'a' && x <= 'z')
            x = (unsigned char)(x - 32);
        if (y >= 'a' && y <= 'z')
            y = (unsigned char)(y - 32);
        if (x != y)
            return 0;
    }
    return 1;
}

static int blank_char(char c)
{
    return c == ' ' || c == '\t';
}

struct span {
    size_t k, kn, v, vn; /* key and value as offsets into the text, trimmed */
};

/* Check one line text[s..e) (no '\n' inside); fills *sp, sets *blank for an empty line. */
static int check_line(const char *text, size_t s, size_t e, size_t lineno, struct span *sp,
                      int *blank, char *why, size_t whycap)
{
    const char *line = text + s;
    size_t n = e - s, eq = n;
    *blank = 0;
    for (size_t i = 0; i < n;) {
        const unsigned char *u = (const unsigned char *)line + i;
        size_t l = utf8_seq_len(u, n - i);
        if (l == 0)
            return refuse(why, whycap, lineno, line, n, "invalid UTF-8 at byte %zu", i);
        unsigned cp = decode(u, l);
        /* TAB is the one control every reader treats alike (blank, never a line break: dyno's
         * filter grammar trims it); the rest are line breaks or invisible to someone */
        if ((cp < 0x20 && cp != '\t') || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f))
            return refuse(why, whycap, lineno, line, n, "control character U+%04X", cp);
        if (cp != ' ' && cp != '\t' && cfgcanon_py_isspace(cp))
            return refuse(why, whycap, lineno, line, n, "non-ASCII whitespace U+%04X", cp);
        if (cp == '#')
            return refuse(why, whycap, lineno, line, n, "'#' (a comment to Kineto)");
        if (cp == '=') {
            if (eq != n)
                return refuse(why, whycap, lineno, line, n, "a second '='");
            eq = i;
        }
        i += l;
    }
    size_t a = 0, b = n;
    while (a < b && blank_char(line[a]))
        a++;
    while (b > a && blank_char(line[b - 1]))
        b--;
    if (a == b) {
        *blank = 1;
        return 0;
    }
    if (eq == n)
        return refuse(why, whycap, lineno, line, n, "no '=' (KEY=value expected)");
    size_t ke = eq;
    while (ke > a && blank_char(line[ke - 1]))
        ke--;
    if (ke == a)
        return refuse(why, whycap, lineno, line, n, "an empty key");
    for (size_t i = a; i < ke; i++)
        if (!key_char((unsigned char)line[i]))
            return refuse(why, whycap, lineno, line, n,
                          "key byte 0x%02x outside [A-Z0-9_]", (unsigned char)line[i]);
    size_t vs = eq + 1;
    while (vs < b && blank_char(line[vs]))
        vs++;
    sp->k = s + a;
    sp->kn = ke - a;
    sp->v = s + vs;
    sp->vn = b - vs;
    return 0;
}

int cfgcanon_text(const char *text, size_t len, char **ret_text, size_t *ret_len, char *why,
                  size_t whycap)
{
    struct span *sp = NULL;
    size_t nsp = 0, lineno = 0, out = 0;
    char *buf = NULL;
    int rc = 0;

    *ret_text = NULL;
    *ret_len = 0;
    if (why && whycap)
        why[0] = '\0';
    if (text == NULL && len)
        return -EINVAL;
    sp = malloc(KVTEXT_MAX_KEYS * sizeof(*sp));
    if (!sp)
        return -ENOMEM;
    for (size_t s = 0; s <= len;) {
        const char *nl = len ? memchr(text + s, '\n', len - s) : NULL;
        size_t e = nl ? (size_t)(nl - text) : len;
        struct span cur;
        int blank;
        lineno++;
        rc = check_line(text, s, e, lineno, &cur, &blank, why, whycap);
        if (rc)
            goto out;
        if (!blank) {
            for (size_t j = 0; j < nsp; j++) {
                if (key_eq_nocase(text + sp[j].k, sp[j].kn, text + cur.k, cur.kn)) {
                    rc = refuse(why, whycap, lineno, text + s, e - s, "key repeated (first on an earlier line)");
                    goto out;
                }
            }
            if (nsp == KVTEXT_MAX_KEYS) {
                rc = refuse(why, whycap, lineno, text + s, e - s, "more than %d keys",
                            KVTEXT_MAX_KEYS);
                goto out;
            }
            sp[nsp++] = cur;
            out += cur.kn + 1 + cur.vn + 1;
        }
        if (!nl)
            break;
        s = e + 1;
    }
    buf = malloc(out + 2);
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    out = 0;
    for (size_t j = 0; j < nsp; j++) {
        if (j)
            buf[out++] = '\n';
        memcpy(buf + out, text + sp[j].k, sp[j].kn);
        out += sp[j].kn;
        buf[out++] = '=';
        memcpy(buf + out, text + sp[j].v, sp[j].vn);
        out += sp[j].vn;
    }
    if (nsp && len && text[len - 1] == '\n')
        buf[out++] = '\n';
    buf[out] = '\0';
    *ret_text = buf;
    *ret_len = out;
    buf = NULL;
out:
    free(buf);
    free(sp);
    return rc;
}
