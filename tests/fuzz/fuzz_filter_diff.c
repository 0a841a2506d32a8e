/* fuzz_filter_diff: differential target for the filter grammar (issue 10 item 6): for every
 * input, if the CLI's strict mode accepts it, the plugin's lenient mode must report exactly
 * the same items. Each input is tried raw and, to reach deep into the grammar, re-spelled
 * byte by byte from a token alphabet (kind names, names, separators, spaces and tabs). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "contract/fgram.h"

const char *const fuzz_seeds[] = { "Kernel:MatMul", "Kernel:MatMul,Conv2D;Communication:AllReduce", "Kernel:Mat",
                                   "Kernel:\tMatMul", " ; :: ;Marker: step ,, ;Hccl:a",
                                   "API:x;AclAPI:y;NodeAPI:z;RuntimeAPI:w", "\tMemory : a\t,\tb ;" };
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

struct trace {
    char buf[8192];
    size_t n;
    int overflow;
};

static int record(void *arg, int kind, const char *name, size_t len)
{
    struct trace *t = arg;
    int w = snprintf(t->buf + t->n, sizeof(t->buf) - t->n, "%d:%zu:", kind, name ? len : (size_t)-1);
    if (w < 0 || (size_t)w >= sizeof(t->buf) - t->n || (name && len >= sizeof(t->buf) - t->n - (size_t)w)) {
        t->overflow = 1;
        return 0;
    }
    t->n += (size_t)w;
    if (name) {
        memcpy(t->buf + t->n, name, len);
        t->n += len;
    }
    return 0;
}

static void check(const char *text, size_t len)
{
    struct trace *s = calloc(1, sizeof(*s)), *l = calloc(1, sizeof(*l));
    size_t ns = 0, nl = 0;
    char err[2048];
    int rs, rl;

    if (!s || !l)
        goto out;
    rs = fgram_parse(text, len, FGRAM_STRICT, record, s, &ns, err, sizeof(err));
    rl = fgram_parse(text, len, FGRAM_LENIENT, record, l, &nl, NULL, 0);
    if (rs == 0) {
        if (rl != 0 || ns != nl || s->overflow != l->overflow || s->n != l->n || memcmp(s->buf, l->buf, s->n) != 0)
            abort(); /* strict accepted, lenient disagreed */
    } else {
        if (s->n != 0)
            abort(); /* strict reports nothing for a text it refuses */
        if ((rs == -E2BIG) != (rl == -E2BIG))
            abort(); /* one length limit for both */
        if (err[0] == '\0')
            abort(); /* every refusal says why */
    }
out:
    free(s);
    free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const alphabet[] = {
        "Kernel", "Marker", "API", "Hccl", "Memory", "MemSet", "MemCpy", "Communication", "AclAPI", "NodeAPI",
        "RuntimeAPI", "kernel", "Bogus", ":", ":", ";", ";", ",", ",", " ", " ", "\t", "\t", "Mat", "Mul",
        "x", "\xff", "\r", "\v", "",
    };
    const size_t na = sizeof(alphabet) / sizeof(alphabet[0]);
    char *text = malloc(size ? size : 1), *spelled = malloc(size * 16 + 1);
    size_t n = 0;

    log_set_level(LOG_LVL_FATAL);
    if (!text || !spelled)
        goto out;
    memcpy(text, data, size);
    check(text, size);
    for (size_t i = 0; i < size; i++) {
        const char *tok = alphabet[data[i] % na];
        size_t tl = strlen(tok);
        memcpy(spelled + n, tok, tl);
        n += tl;
    }
    check(spelled, n);
out:
    free(text);
    free(spelled);
    return 0;
}
