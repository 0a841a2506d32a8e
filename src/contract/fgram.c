/* fgram: one tokenizer, two policies. Strict runs it twice (validate, then report) so the CLI
 * never sees half a filter; lenient reports as it goes and logs what it skipped. */
#include "contract/fgram.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/strutil.h"
#include "contract/kinds.h"

struct fgram_ctx {
    enum fgram_mode mode;
    fgram_fn fn; /* NULL: validate only */
    void *arg;
    char *err;
    size_t errcap;
};

static void fgram_err(struct fgram_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fgram_err(struct fgram_ctx *c, const char *fmt, ...)
{
    va_list ap;

    if (!c->err || !c->errcap)
        return;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errcap, fmt, ap);
    va_end(ap);
}

/* One trimmed, non-empty item. 1 valid, 0 skipped (lenient), <0 error. */
static int fgram_item(struct fgram_ctx *c, const char *item, size_t n)
{
    bool strict = c->mode == FGRAM_STRICT;
    const char *colon = memchr(item, ':', n);
    const char *kind_p = item, *names, *end = item + n;
    size_t kind_n;
    int kind, rc;

    if (!colon || memchr(colon + 1, ':', (size_t)(end - colon - 1))) {
        if (strict) {
            fgram_err(c, "item '%.*s' must have the form Kind:Name[,Name...]", (int)n, item);
            return -EINVAL;
        }
        LOG_WARN("filter: invalid item '%.*s' (expected Kind:Name[,Name...]); skipped", (int)n, item);
        return 0;
    }
    kind_n = (size_t)(colon - item);
    str_trim_view(&kind_p, &kind_n, FGRAM_TRIM);
    names = colon + 1;
    if (!strict) {
        const char *np = names;
        size_t nn = (size_t)(end - names);
        str_trim_view(&np, &nn, FGRAM_TRIM);
        if (kind_n == 0 || nn == 0) {
            LOG_WARN("filter: invalid item '%.*s' (empty kind or name list); skipped", (int)n, item);
            return 0;
        }
    }
    kind = kinds_from_name(kind_p, kind_n);
    if (kind < 0) {
        if (strict) {
            fgram_err(c, "unknown activity kind '%.*s' (possible values: %s)", (int)kind_n, kind_p,
                      kinds_list_text);
            return -EINVAL;
        }
        LOG_WARN("filter: unknown activity kind '%.*s' in item '%.*s'; skipped", (int)kind_n, kind_p,
                 (int)n, item);
        return 0;
    }
    /* Strict checks every name before the item is reported. */
    for (int pass = strict ? 0 : 1; pass < 2; pass++) {
        const char *p = names;
        if (pass == 1 && c->fn && (rc = c->fn(c->arg, kind, NULL, 0)) < 0)
            return rc;
        for (;;) {
            const char *comma = memchr(p, ',', (size_t)(end - p));
            const char *nm = p;
            size_t nn = (size_t)((comma ? comma : end) - p);
            str_trim_view(&nm, &nn, FGRAM_TRIM);
            if (nn == 0 && strict) {
                fgram_err(c, "empty operator name in item '%.*s'", (int)n, item);
                return -EINVAL;
            }
            if (pass == 1 && nn > 0 && c->fn && (rc = c->fn(c->arg, kind, nm, nn)) < 0)
                return rc;
            if (!comma)
                break;
            p = comma + 1;
        }
    }
    return 1;
}

static int fgram_scan(struct fgram_ctx *c, const char *text, size_t len, size_t *ret_items)
{
    const char *p = text, *end = text + len;
    size_t items = 0;
    int rc = 0;

    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *item = p;
        size_t n = (size_t)((semi ? semi : end) - p);
        str_trim_view(&item, &n, FGRAM_TRIM);
        if (n > 0) {
            rc = fgram_item(c, item, n);
            if (rc < 0)
                goto out;
            items += (size_t)rc;
            rc = 0;
        }
        if (!semi)
            break;
        p = semi + 1;
    }
    *ret_items = items;
out:
    return rc;
}

int fgram_parse(const char *text, size_t len, enum fgram_mode mode, fgram_fn fn, void *arg,
                size_t *ret_items, char *err, size_t errcap)
{
    struct fgram_ctx c = { mode, NULL, arg, err, errcap };
    size_t items = 0;
    int rc = 0;

    if (!text)
        len = 0;
    if (len > FGRAM_MAX_TEXT) {
        fgram_err(&c, "longer than %d bytes", FGRAM_MAX_TEXT);
        rc = -E2BIG;
        goto out;
    }
    if (mode == FGRAM_STRICT) {
        rc = fgram_scan(&c, text, len, &items);
        if (rc < 0)
            goto out;
    }
    c.fn = fn;
    rc = fgram_scan(&c, text, len, &items);
    if (rc < 0)
        goto out;
    if (mode == FGRAM_LENIENT && len > 0 && items == 0)
        LOG_ERROR("filter '%.*s' has no valid item; no filtering applied", (int)len, text);
    if (ret_items)
        *ret_items = items;
out:
    return rc;
}
