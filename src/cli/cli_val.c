/* cli_val: validators and formatters for the dyno flag values (docs/design/cli.md#validation). Every error
 * names the flag and the offending value in one line; nothing here prints or exits. */
#include "cli/cli_val.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/strutil.h"
#include "contract/fgram.h"
#include "contract/kinds.h"

#define TRIM_SET " \t"

static const char *const host_sys_items[] = {"cpu", "mem", "disk", "network", "osrt", NULL};

void cli_val_err(char *err, size_t cap, const char *flag, const char *value, const char *reason)
{
    snprintf(err, cap, "error: invalid value '%s' for '--%s': %s", value, flag, reason);
}

static bool in_set(const char *s, size_t n, const char *const *set)
{
    for (size_t i = 0; set[i]; i++) {
        if (strlen(set[i]) == n && memcmp(set[i], s, n) == 0)
            return true;
    }
    return false;
}

int cli_val_parse_f32(const char *s, float *ret)
{
    if (!s || !*s)
        return -EINVAL;
    /* Rust's f32 grammar is a subset of strtof's: refuse spaces, hex, inf and nan first. */
    for (const char *p = s; *p; p++) {
        if (!strchr("0123456789+-.eE", *p))
            return -EINVAL;
    }
    char *end = NULL;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end || !isfinite(v))
        return -EINVAL;
    *ret = v;
    return 0;
}

int cli_val_fmt_f32(float v, char *out, size_t cap)
{
    if (!isfinite(v))
        return -EINVAL;
    if (v == 0.0f)
        return snprintf(out, cap, "0") < (int)cap ? 0 : -ENOSPC;
    char sci[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(sci, sizeof(sci), "%.*e", digits - 1, (double)v);
        if (strtof(sci, NULL) == v)
            break;
    }
    /* sci = [-]d[.ddd]e[+-]xx: collect the digits and the decimal exponent. */
    char dig[16];
    size_t nd = 0;
    const char *p = sci;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++) {
        if (*p >= '0' && *p <= '9' && nd < sizeof(dig) - 1)
            dig[nd++] = *p;
    }
    long exp10 = strtol(p + 1, NULL, 10);
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    struct cli_buf b;
    cli_buf_init(&b, cap > 0 ? cap - 1 : 0);
    if (neg)
        cli_buf_append(&b, "-", 1);
    long point = exp10 + 1; /* digits before the decimal point */
    if (point <= 0) {
        cli_buf_append(&b, "0.", 2);
        for (long i = 0; i < -point; i++)
            cli_buf_append(&b, "0", 1);
        cli_buf_append(&b, dig, nd);
    } else if ((size_t)point >= nd) {
        cli_buf_append(&b, dig, nd);
        for (long i = 0; i < point - (long)nd; i++)
            cli_buf_append(&b, "0", 1);
    } else {
        cli_buf_append(&b, dig, (size_t)point);
        cli_buf_append(&b, ".", 1);
        cli_buf_append(&b, dig + point, nd - (size_t)point);
    }
    int r = b.err;
    if (!r)
        memcpy(out, cli_buf_str(&b), b.len + 1);
    cli_buf_fini(&b);
    return r;
}

int cli_val_nonneg_f32(const char *flag, const char *s, char *out, size_t outcap, char *err,
                       size_t cap)
{
    float v;
    if (cli_val_parse_f32(s, &v) < 0 || v < 0.0f || cli_val_fmt_f32(v, out, outcap) < 0) {
        cli_val_err(err, cap, flag, s, "Must be a positive number");
        return -EINVAL;
    }
    return 0;
}

int cli_val_i64(const char *flag, const char *s, int64_t lo, int64_t hi, const char *reason,
                int64_t *ret, char *err, size_t cap)
{
    int64_t v;
    if (str_to_i64(s, &v) < 0 || v < lo || v > hi) {
        cli_val_err(err, cap, flag, s, reason);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

int cli_val_u64(const char *flag, const char *s, const char *reason, uint64_t *ret, char *err,
                size_t cap)
{
    if (str_to_u64(s, ret) < 0) {
        cli_val_err(err, cap, flag, s, reason);
        return -EINVAL;
    }
    return 0;
}

static int too_long(const char *flag, const char *s, size_t maxlen, char *err, size_t cap)
{
    if (maxlen && strlen(s) > maxlen) {
        char reason[64];
        snprintf(reason, sizeof(reason), "The input string is too long, max allowed: %zu", maxlen);
        cli_val_err(err, cap, flag, s, reason);
        return -EINVAL;
    }
    return 0;
}

/* Comma-list iteration shared by the list validators: yields each item trimmed of spaces and
 * tabs (empty items included, so callers can refuse them); returns false after the last one. */
struct list_iter {
    const char *p;
    bool done;
};

static bool list_next(struct list_iter *it, const char **ret_item, size_t *ret_n)
{
    if (it->done)
        return false;
    const char *comma = strchr(it->p, ',');
    const char *item = it->p;
    size_t n = comma ? (size_t)(comma - it->p) : strlen(it->p);
    str_trim_view(&item, &n, TRIM_SET);
    *ret_item = item;
    *ret_n = n;
    if (comma)
        it->p = comma + 1;
    else
        it->done = true;
    return true;
}

int cli_val_int_list(const char *flag, const char *s, int64_t lo, int64_t hi,
                     struct cli_buf *joined, char *err, size_t cap)
{
    if (too_long(flag, s, CLI_VAL_STR_MAX, err, cap) < 0)
        return -EINVAL;
    struct list_iter it = { s, false };
    const char *item;
    size_t n;
    while (list_next(&it, &item, &n)) {
        char num[32];
        int64_t v;
        if (n == 0 || n >= sizeof(num) || str_copy(num, sizeof(num), item, n) < 0 ||
            str_to_i64(num, &v) < 0 || v < lo || v > hi) {
            cli_val_err(err, cap, flag, s, "Must be a comma-separated list of integers");
            return -EINVAL;
        }
        if (joined->len)
            cli_buf_append(joined, ",", 1);
        cli_buf_printf(joined, "%lld", (long long)v);
    }
    return joined->err;
}

int cli_val_config_str(const char *flag, const char *s, size_t maxlen, char *err, size_t cap)
{
    if (too_long(flag, s, maxlen, err, cap) < 0)
        return -EINVAL;
    /* The node-side parser drops lines that do not split into exactly two parts on '='. */
    if (strpbrk(s, "=\n\r")) {
        cli_val_err(err, cap, flag, s, "must not contain '=' or line breaks");
        return -EINVAL;
    }
    return 0;
}

int cli_val_enum(const char *flag, const char *s, const char *const *choices, char *err,
                 size_t cap)
{
    if (in_set(s, strlen(s), choices))
        return 0;
    char reason[512];
    size_t off = (size_t)snprintf(reason, sizeof(reason), "possible values: ");
    for (size_t i = 0; choices[i] && off < sizeof(reason); i++)
        off += (size_t)snprintf(reason + off, sizeof(reason) - off, "%s%s", i ? ", " : "",
                                choices[i]);
    cli_val_err(err, cap, flag, s, reason);
    return -EINVAL;
}

int cli_val_kinds(const char *flag, const char *s, char *err, size_t cap)
{
    const char *bad = s;
    size_t bad_len = 0;
    uint32_t mask;

    if (cli_val_config_str(flag, s, CLI_VAL_STR_MAX, err, cap) < 0)
        return -EINVAL;
    if (kinds_parse_list(s, strlen(s), true, &mask, &bad, &bad_len) < 0) {
        char reason[CLI_VAL_STR_MAX + 256];
        snprintf(reason, sizeof(reason), "Invalid MSPTI activity kind: %.*s, possible values: %s",
                 (int)bad_len, bad, kinds_list_text);
        cli_val_err(err, cap, flag, s, reason);
        return -EINVAL;
    }
    return 0;
}

int cli_val_filter(const char *flag, const char *s, char *err, size_t cap)
{
    char reason[CLI_VAL_STR_MAX + 256];
    int rc;

    /* Length first, then the config-text rule, then the grammar (docs/design/cli.md#validation). */
    if (strlen(s) > FGRAM_MAX_TEXT) {
        cli_val_err(err, cap, flag, s, "longer than 1024 bytes");
        return -EINVAL;
    }
    if (cli_val_config_str(flag, s, 0, err, cap) < 0)
        return -EINVAL;
    rc = fgram_parse(s, strlen(s), FGRAM_STRICT, NULL, NULL, NULL, reason, sizeof(reason));
    if (rc < 0) {
        cli_val_err(err, cap, flag, s, reason);
        return -EINVAL;
    }
    return 0;
}

int cli_val_host_sys(const char *flag, const char *s, struct cli_buf *joined, char *err,
                     size_t cap)
{
    if (strcmp(s, "None") == 0) {
        cli_buf_puts(joined, "None");
        return joined->err;
    }
    if (cli_val_config_str(flag, s, CLI_VAL_STR_MAX, err, cap) < 0)
        return -EINVAL;
    struct list_iter it = { s, false };
    const char *item;
    size_t n;
    while (list_next(&it, &item, &n)) {
        if (!in_set(item, n, host_sys_items)) {
            char reason[CLI_VAL_STR_MAX + 128];
            snprintf(reason, sizeof(reason),
                     "Invalid host-sys item: %.*s, possible values: None, cpu, mem, disk, network, osrt",
                     (int)n, item);
            cli_val_err(err, cap, flag, s, reason);
            return -EINVAL;
        }
        if (joined->len)
            cli_buf_append(joined, ",", 1);
        cli_buf_append(joined, item, n);
    }
    return joined->err;
}

int cli_val_log_dir(const char *flag, const char *s, bool required, char *err, size_t cap)
{
    struct stat st;
    if (strlen(s) > CLI_VAL_PATH_MAX || (required && s[0] == '\0'))
        goto bad;
    if (cli_val_config_str(flag, s, 0, err, cap) < 0)
        return -EINVAL;
    if (s[0] && stat(s, &st) == 0 && !S_ISDIR(st.st_mode))
        goto bad;
    return 0;
bad:
    cli_val_err(err, cap, flag, s, "--log-file must be a valid directory!");
    return -EINVAL;
}

void cli_val_path_warnings(const char *path, struct cli_buf *out)
{
    static const char bad_chars[] = "\f\b\t\v\x7f\"'\\%><|&$";
    bool seen[256] = {false};
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (strchr(bad_chars, *p) && !seen[*p]) {
            seen[*p] = true;
            cli_buf_printf(out, "WARNING: The path contains invalid character: %c\n", *p);
        }
    }
    struct stat st;
    if (path[0] && lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode))
            cli_buf_printf(out, "WARNING: The path is a soft link: %s\n", path);
        if (geteuid() != 0 && access(path, W_OK) != 0)
            cli_buf_printf(out, "WARNING: The path is not writable: %s\n", path);
    }
}
