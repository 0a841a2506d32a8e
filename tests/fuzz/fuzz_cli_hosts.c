/* fuzz_cli_hosts: the dyno host-list expander (hosts_add_list), the same bytes as a
 * --hostfile (hosts_add_file), and the f32 parser/formatter on arbitrary bytes. Invariants: no crash, at most HOSTS_MAX hosts, no duplicates in the
 * first entries, and every formatted f32 parses back to the same value. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_val.h"
#include "cli/hosts.h"

const char *const fuzz_seeds[] = {
    "n[01-03],m[8-10]", "r[1-2]n[1-2]", "node[1,3,5-6]", "x[08-11]", "unix:,unix:/tmp/d.sock",
    "[::1],a,,b", "a[0-300]b[0-300]", "n[[1]]", "n[3-1]", "0.5", "1e-7", "3.4028235e38",
    "-0", "123456.79",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

static char path[64];

static void cleanup(void)
{
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hosts h;
    char err[512];
    hosts_init(&h);
    if (hosts_add_list(&h, (const char *)data, size, err, sizeof(err)) == 0) {
        if (h.n == 0 || h.n > HOSTS_MAX)
            abort();
        for (size_t i = 1; i < h.n && i < 64; i++) {
            if (strcmp(h.v[i], h.v[i - 1]) == 0)
                abort();
        }
    } else if (!memchr(err, '\0', sizeof(err))) {
        abort();
    }
    hosts_fini(&h);

    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    float v;
    char out[CLI_VAL_F32_LEN];
    if (cli_val_parse_f32(s, &v) == 0) {
        if (cli_val_fmt_f32(v, out, sizeof(out)) != 0)
            abort();
        float back;
        if (cli_val_parse_f32(out, &back) != 0 || back != v)
            abort();
    }
    /* Raw bit patterns too: every finite f32 formats and round-trips. */
    if (size >= 4) {
        memcpy(&v, data, 4);
        if (isfinite(v)) {
            if (cli_val_fmt_f32(v, out, sizeof(out)) != 0 || strchr(out, 'e'))
                abort();
            float back = strtof(out, NULL);
            if (back != v && !(v == 0.0f && back == 0.0f))
                abort();
        }
    }
    free(s);

    /* The same bytes as a --hostfile (comments, blank lines, one value per line). */
    if (!path[0]) {
        snprintf(path, sizeof(path), "/tmp/fuzz_hostfile.%d", (int)getpid());
        atexit(cleanup);
    }
    FILE *fp = fopen(path, "wb");
    if (!fp)
        abort();
    fwrite(data, 1, size, fp);
    fclose(fp);
    hosts_init(&h);
    err[0] = '\0';
    if (hosts_add_file(&h, path, err, sizeof(err)) == 0) {
        if (h.n > HOSTS_MAX)
            abort();
    } else if (!err[0] || !memchr(err, '\0', sizeof(err))) {
        abort();
    }
    hosts_fini(&h);
    return 0;
}
