/* fuzz_doctor_text: `dyno doctor`'s local inputs (docs/cli.md): file names another user chose
 * and a job's /proc/<pid>/environ block. The first byte picks the mode. Names: the shell word
 * doctor_shq makes never carries a control byte and, unquoted by the rules bash applies to
 * its three forms, gives back exactly the name. Environ: doctor_environ_get stays inside the
 * block and its value escaped by doctor_tesc has no control byte; doctor_line_safe leaves
 * none either. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_buf.h"
#include "cli/doctor_text.h"
#include "common/logesc.h"

const char *const fuzz_seeds[] = {
    "nDynamicProfileNpuShm$(touch x)",
    "nDynamicProfileNpuShm*",
    "n/dev/shm/a'b\"c\\d e",
    "n/x/DynamicProfileNpuShm\n\xe2\x9c\x94 ok\x1b[2J\x07",
    "n\xff\xfe\x80-rf",
    "eMSMONITOR_USE_DAEMON=1\x1b[31m\r",
    "eA=1 MSMONITOR_USE_DAEMON=0 MSMONITOR_USE_DAEMON=1",
    "eMSMONITOR_USE_DAEMON",
    "lline\nwith\rcontrol\x7f",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* bash's reading of one word in the three forms doctor_shq writes; -1 on anything else. */
static long unquote(const char *w, size_t n, char *out)
{
    size_t o = 0, i = 0;

    if (n >= 3 && w[0] == '$' && w[1] == '\'' && w[n - 1] == '\'') {
        for (i = 2; i < n - 1; i++) {
            if (w[i] != '\\') {
                out[o++] = w[i];
                continue;
            }
            if (i + 1 >= n - 1)
                return -1;
            if (w[i + 1] == '\\' || w[i + 1] == '\'') {
                out[o++] = w[++i];
            } else if (w[i + 1] == 'x' && i + 3 < n - 1 && hexval(w[i + 2]) >= 0 && hexval(w[i + 3]) >= 0) {
                out[o++] = (char)(hexval(w[i + 2]) * 16 + hexval(w[i + 3]));
                i += 3;
            } else {
                return -1;
            }
        }
        return (long)o;
    }
    if (n >= 2 && w[0] == '\'') {
        /* '...' pieces joined by \' : 'a'\''b' */
        while (i < n) {
            if (w[i] == '\'') {
                const char *end = memchr(w + i + 1, '\'', n - i - 1);
                if (!end)
                    return -1;
                memcpy(out + o, w + i + 1, (size_t)(end - w - i - 1));
                o += (size_t)(end - w - i - 1);
                i = (size_t)(end - w) + 1;
            } else if (w[i] == '\\' && i + 1 < n && w[i + 1] == '\'') {
                out[o++] = '\'';
                i += 2;
            } else {
                return -1;
            }
        }
        return (long)o;
    }
    for (i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-", w[i]) || !w[i])
            return -1;
    memcpy(out, w, n);
    return (long)n;
}

static void no_control(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *in = (const char *)data + 1;
    size_t n;

    if (size == 0 || size > 4096)
        return 0;
    n = size - 1;
    if (data[0] == 'e') {
        size_t vlen;
        char esc[LOGESC_CAP(4096)];
        const char *v = doctor_environ_get(in, n, "MSMONITOR_USE_DAEMON", &vlen);
        if (v && (v < in || v + vlen > in + n))
            abort();
        if (v) {
            doctor_tesc(v, vlen, esc, sizeof(esc));
            no_control(esc, strlen(esc));
        }
    } else if (data[0] == 'l') {
        char *line = malloc(n + 1);
        if (!line)
            return 0;
        memcpy(line, in, n);
        line[n] = '\0';
        doctor_line_safe(line);
        no_control(line, strlen(line));
        free(line);
    } else {
        struct cli_buf b;
        char *back = malloc(n * 4 + 8);
        cli_buf_init(&b, 1u << 20);
        doctor_shq(&b, in, n);
        if (b.err || !back)
            abort();
        no_control(cli_buf_str(&b), b.len);
        long got = unquote(cli_buf_str(&b), b.len, back);
        if (n > 0 && (got != (long)n || memcmp(back, in, n) != 0))
            abort();
        free(back);
        cli_buf_fini(&b);
    }
    return 0;
}
