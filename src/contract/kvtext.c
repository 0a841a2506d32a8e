/* kvtext: parses into one private copy of the text and points the key/value views into it,
 * so a config costs one allocation whatever its size. */
#include "contract/kvtext.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/strutil.h"

void kvtext_init(struct kvtext *kv)
{
    kv->store = NULL;
    kv->n = 0;
}

void kvtext_fini(struct kvtext *kv)
{
    free(kv->store);
    kvtext_init(kv);
}

int kvtext_put(struct kvtext *kv, const char *key, const char *value)
{
    for (size_t i = 0; i < kv->n; i++) {
        if (strcmp(kv->keys[i], key) == 0) {
            kv->values[i] = value;
            return 0;
        }
    }
    if (kv->n == KVTEXT_MAX_KEYS)
        return -E2BIG;
    kv->keys[kv->n] = key;
    kv->values[kv->n] = value;
    kv->n++;
    return 0;
}

const char *kvtext_get(const struct kvtext *kv, const char *key)
{
    /* Lookups are rare (a config per poll) and n is small: a scan beats a hash here. */
    for (size_t i = 0; i < kv->n; i++)
        if (strcmp(kv->keys[i], key) == 0)
            return kv->values[i];
    return NULL;
}

/* Strip KVTEXT_WS from both ends of s[0..n) in place; returns the new start. */
static char *kvtext_strip(char *s, size_t n)
{
    while (n > 0 && s[n - 1] && strchr(KVTEXT_WS, s[n - 1]))
        n--;
    s[n] = '\0';
    while (*s && strchr(KVTEXT_WS, *s))
        s++;
    return s;
}

int kvtext_parse(const char *text, size_t len, struct kvtext *ret)
{
    char *p, *end;
    int rc = 0;

    kvtext_init(ret);
    ret->store = malloc(len + 1);
    if (!ret->store)
        return -ENOMEM;
    if (len)
        memcpy(ret->store, text, len);
    ret->store[len] = '\0';
    end = ret->store + len;
    for (p = ret->store; p <= end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *line_end = nl ? nl : end;
        char *eq = memchr(p, '=', (size_t)(line_end - p));

        /* exactly two parts on '=' */
        if (eq && !memchr(eq + 1, '=', (size_t)(line_end - eq - 1))) {
            char *key = kvtext_strip(p, (size_t)(eq - p));
            char *value = kvtext_strip(eq + 1, (size_t)(line_end - eq - 1));
            rc = kvtext_put(ret, key, value);
            if (rc < 0)
                break;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    return rc;
}

int kvtext_int(const char *s, int32_t *ret)
{
    char tmp[32];
    size_t n = strlen(s);

    str_trim_view(&s, &n, KVTEXT_WS);
    if (str_copy(tmp, sizeof(tmp), s, n) != 0)
        return -ERANGE;
    return str_to_i32(tmp, ret);
}
