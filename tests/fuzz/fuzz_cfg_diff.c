/* fuzz_cfg_diff: one config text, every reader (docs/security.md, "Config text: one reading").
 * The daemon's strict reading (cfgcanon, then kvtext on the canonical text) against each
 * consumer's: our plugin's kvtext, a port of Kineto's config-line parser and the Python
 * readers (the Python rule of docs/design/contract.md#config-text, kineto_client.py), each on the text as sent and on
 * the canonical text. Invariant: whenever the daemon accepts a text, every reader gets exactly
 * the daemon's dict from both, and the canonical text is its own canonical form. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "contract/cfgcanon.h"
#include "contract/kvtext.h"
#include "common/utf8.h"

const char *const fuzz_seeds[] = {
    "NPU_MONITOR_START=true\nNPU_MONITOR_STOP=false\nREPORT_INTERVAL_S=60\nNPU_MONITOR_LOG_FILE=/ok/x\n",
    "ACTIVITIES_LOG_FILE=/ok/t.json\nACTIVITIES_LOG_FILE=/etc/x.json#=",
    "ACTIVITIES_LOG_FILE=/ok/a\nACTIVITIES_LOG_FILE\r=/etc/x",
    "ACTIVITIES_LOG_FILE=/ok/a\nACTIVITIES_LOG_FILE\xe3\x80\x80=/etc/x",
    "ACTIVITIES_LOG_FILE=/ok/a\nACTIVITIES_LOG_FILE\xc2\xa0=/etc/x",
    "ACTIVITIES_LOG_FILE=/ok/a\xe2\x80\xa8" "ACTIVITIES_LOG_FILE=/etc/x",
    "ACTIVITIES_LOG_FILE=/ok/a\xc2\x85" "ACTIVITIES_LOG_FILE=/etc/x",
    "  PROFILE_START_STEP = 3 \n\n ACTIVITIES_ITERATIONS=2\nA=\n",
    "A=/tmp/\xc3\xa9t\xc3\xa9 x\nB= \xe2\x80\x83v\n",
    "activities_log_file=/etc\n",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

#define MAXKV 512

/* A reader's result: borrowed views into its own copy of the text. */
struct dict {
    char *store;
    const char *k[MAXKV], *v[MAXKV];
    size_t kn[MAXKV], vn[MAXKV];
    size_t n;
    int rejected; /* the reader refused the whole text (Kineto) */
};

static void dict_put(struct dict *d, const char *k, size_t kn, const char *v, size_t vn)
{
    for (size_t i = 0; i < d->n; i++) {
        if (d->kn[i] == kn && memcmp(d->k[i], k, kn) == 0) {
            d->v[i] = v; /* last wins: std::map assignment, Python dict, kvtext */
            d->vn[i] = vn;
            return;
        }
    }
    if (d->n == MAXKV)
        abort(); /* the daemon caps keys far below this */
    d->k[d->n] = k;
    d->kn[d->n] = kn;
    d->v[d->n] = v;
    d->vn[d->n] = vn;
    d->n++;
}

static int cxx_isspace(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Kineto's config-line rule as its documentation and our kineto_client.py describe it (a port
 * of the behaviour, not of its code): lines split on '\n'; everything from '#' on is a
 * comment; a line blank after that is skipped; otherwise it must split on '=' into exactly two
 * parts or the whole config is refused; both parts are trimmed of C++ isspace. */
static void read_kineto(const char *t, size_t len, struct dict *d)
{
    for (size_t s = 0; s <= len;) {
        const char *nl = memchr(t + s, '\n', len - s);
        size_t e = nl ? (size_t)(nl - t) : len;
        const char *hash = memchr(t + s, '#', e - s);
        size_t end = hash ? (size_t)(hash - t) : e, neq = 0, eq = 0;
        int blank = 1;
        for (size_t i = s; i < end; i++) {
            if (!cxx_isspace((unsigned char)t[i]))
                blank = 0;
            if (t[i] == '=' && neq++ == 0)
                eq = i;
        }
        if (!blank) {
            if (neq != 1) {
                d->rejected = 1;
                return;
            }
            size_t a = s, b = eq, c = eq + 1, f = end;
            while (a < b && cxx_isspace((unsigned char)t[a]))
                a++;
            while (b > a && cxx_isspace((unsigned char)t[b - 1]))
                b--;
            while (c < f && cxx_isspace((unsigned char)t[c]))
                c++;
            while (f > c && cxx_isspace((unsigned char)t[f - 1]))
                f--;
            dict_put(d, t + a, b - a, t + c, f - c);
        }
        if (!nl)
            break;
        s = e + 1;
    }
}

/* Python's str.strip() on UTF-8 text (valid: the daemon accepted it). */
static void py_strip(const char *t, size_t *a, size_t *b)
{
    for (;;) {
        size_t l = utf8_seq_len((const unsigned char *)t + *a, *b - *a);
        unsigned cp = 0;
        if (l == 0)
            break;
        for (size_t i = 0; i < l; i++)
            cp = (cp << 6) | ((unsigned char)t[*a + i] & (i ? 0x3f : (l == 1 ? 0x7f : 0xff >> (l + 1))));
        if (!cfgcanon_py_isspace(cp))
            break;
        *a += l;
    }
    while (*b > *a) {
        size_t start = *b - 1;
        while (start > *a && ((unsigned char)t[start] & 0xc0) == 0x80)
            start--;
        size_t l = *b - start;
        unsigned cp = 0;
        for (size_t i = 0; i < l; i++)
            cp = (cp << 6) | ((unsigned char)t[start + i] & (i ? 0x3f : (l == 1 ? 0x7f : 0xff >> (l + 1))));
        if (!cfgcanon_py_isspace(cp))
            break;
        *b = start;
    }
}

/* The Python rule (docs/design/contract.md#config-text): text.split("\n"); keep a line that splits on
 * '=' into exactly two parts; str.strip() both (Unicode whitespace). kineto_client.py does
 * the same after cutting '#' comments. */
static void read_python(const char *t, size_t len, int comments, struct dict *d)
{
    for (size_t s = 0; s <= len;) {
        const char *nl = memchr(t + s, '\n', len - s);
        size_t e = nl ? (size_t)(nl - t) : len;
        const char *hash = comments ? memchr(t + s, '#', e - s) : NULL;
        size_t end = hash ? (size_t)(hash - t) : e, neq = 0, eq = 0;
        for (size_t i = s; i < end; i++)
            if (t[i] == '=' && neq++ == 0)
                eq = i;
        if (neq == 1) {
            size_t a = s, b = eq, c = eq + 1, f = end;
            py_strip(t, &a, &b);
            py_strip(t, &c, &f);
            dict_put(d, t + a, b - a, t + c, f - c);
        }
        if (!nl)
            break;
        s = e + 1;
    }
}

static void read_kvtext(const char *t, size_t len, struct dict *d)
{
    struct kvtext kv;
    if (kvtext_parse(t, len, &kv) != 0)
        abort(); /* accepted texts have few keys */
    for (size_t i = 0; i < kv.n; i++) {
        /* copy the views: kv owns its store */
        size_t kn = strlen(kv.keys[i]), vn = strlen(kv.values[i]);
        char *k = malloc(kn + vn + 2);
        if (!k)
            abort();
        memcpy(k, kv.keys[i], kn + 1);
        memcpy(k + kn + 1, kv.values[i], vn + 1);
        dict_put(d, k, kn, k + kn + 1, vn);
    }
    kvtext_fini(&kv);
}

static void dict_free_kv(struct dict *d)
{
    for (size_t i = 0; i < d->n; i++)
        free((char *)d->k[i]);
}

static void same(const struct dict *want, const struct dict *got, const char *who)
{
    int bad = got->rejected || got->n != want->n;
    for (size_t i = 0; !bad && i < want->n; i++) {
        size_t j = 0;
        while (j < got->n && !(got->kn[j] == want->kn[i] && memcmp(got->k[j], want->k[i], want->kn[i]) == 0))
            j++;
        bad = j == got->n || got->vn[j] != want->vn[i] || memcmp(got->v[j], want->v[i], want->vn[i]) != 0;
    }
    if (bad) {
        fprintf(stderr, "fuzz_cfg_diff: %s reads a different dict than the daemon checked\n", who);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char *canon = NULL, why[CFGCANON_WHY_MAX];
    size_t clen = 0;
    log_set_level(LOG_LVL_FATAL);
    int rc = cfgcanon_text(text, size, &canon, &clen, why, sizeof(why));
    if (rc != 0) {
        if (canon || !why[0] || strchr(why, '\n'))
            abort(); /* a refusal is one line with a reason */
        return 0;
    }
    char *again = NULL;
    size_t alen = 0;
    if (cfgcanon_text(canon, clen, &again, &alen, why, sizeof(why)) != 0 || alen != clen ||
        memcmp(again, canon, clen) != 0)
        abort(); /* canonical text is a fixed point */
    free(again);

    static struct dict daemon, d;
    memset(&daemon, 0, sizeof(daemon));
    read_kvtext(canon, clen, &daemon);
    const char *inputs[2] = { text, canon };
    size_t lens[2] = { size, clen };
    for (int i = 0; i < 2; i++) {
        memset(&d, 0, sizeof(d));
        read_kvtext(inputs[i], lens[i], &d);
        same(&daemon, &d, i ? "kvtext (canonical)" : "kvtext (as sent)");
        dict_free_kv(&d);
        memset(&d, 0, sizeof(d));
        read_kineto(inputs[i], lens[i], &d);
        same(&daemon, &d, i ? "Kineto (canonical)" : "Kineto (as sent)");
        memset(&d, 0, sizeof(d));
        read_python(inputs[i], lens[i], 0, &d);
        same(&daemon, &d, i ? "Python (canonical)" : "Python (as sent)");
        memset(&d, 0, sizeof(d));
        read_python(inputs[i], lens[i], 1, &d);
        same(&daemon, &d, i ? "kineto_client.py (canonical)" : "kineto_client.py (as sent)");
    }
    dict_free_kv(&daemon);
    free(canon);
    return 0;
}
