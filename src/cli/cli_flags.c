/* cli_flags: argv parsing over a typed flag table (docs/design/cli.md#invocation). The table is the single
 * source for parsing and for --help, so the two never drift apart. */
#include "cli/cli_flags.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int find_flag(const struct cli_flag *table, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (strlen(table[i].name) == len && memcmp(table[i].name, name, len) == 0)
            return (int)i;
    }
    return -1;
}

int cli_flags_parse(const struct cli_flag *table, size_t n, int argc, char **argv, int start,
                    bool stop_at_positional, struct cli_args *ret, int *ret_next, char *err,
                    size_t errcap)
{
    if (n > CLI_FLAGS_MAX)
        abort();
    memset(ret, 0, sizeof(*ret));
    ret->table = table;
    ret->n = n;
    for (size_t i = 0; i < n; i++)
        ret->val[i] = table[i].defval;
    int i = start;
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
            return CLI_FLAGS_HELP;
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (arg[0] == '-' && arg[1] != '\0') {
                snprintf(err, errcap, "error: unknown flag '%s'", arg);
                return -EINVAL;
            }
            if (stop_at_positional)
                break;
            snprintf(err, errcap, "error: unexpected argument '%s'", arg);
            return -EINVAL;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        int idx = find_flag(table, n, name, nlen);
        if (idx < 0) {
            snprintf(err, errcap, "error: unknown flag '--%.*s'", (int)nlen, name);
            return -EINVAL;
        }
        if (ret->given[idx]) {
            snprintf(err, errcap, "error: flag '--%s' given more than once", table[idx].name);
            return -EINVAL;
        }
        if (table[idx].kind == CLI_FLAG_BOOL) {
            if (eq) {
                snprintf(err, errcap, "error: flag '--%s' takes no value (got '%s')",
                         table[idx].name, eq + 1);
                return -EINVAL;
            }
            ret->val[idx] = "true";
        } else if (eq) {
            ret->val[idx] = eq + 1;
        } else {
            if (i + 1 >= argc) {
                snprintf(err, errcap, "error: a value is required for '--%s' but none was supplied",
                         table[idx].name);
                return -EINVAL;
            }
            ret->val[idx] = argv[++i];
        }
        ret->given[idx] = true;
    }
    for (size_t k = 0; k < n; k++) {
        if (table[k].required && !ret->given[k]) {
            snprintf(err, errcap, "error: the required flag '--%s' was not provided",
                     table[k].name);
            return -EINVAL;
        }
    }
    if (ret_next)
        *ret_next = i;
    return 0;
}

static int index_of(const struct cli_args *a, const char *name)
{
    int idx = find_flag(a->table, a->n, name, strlen(name));
    if (idx < 0)
        abort();
    return idx;
}

const char *cli_flags_get(const struct cli_args *a, const char *name)
{
    return a->val[index_of(a, name)];
}

bool cli_flags_given(const struct cli_args *a, const char *name)
{
    return a->given[index_of(a, name)];
}

bool cli_flags_bool(const struct cli_args *a, const char *name)
{
    return a->given[index_of(a, name)];
}

const char *cli_flags_bool_text(const struct cli_args *a, const char *name)
{
    return cli_flags_bool(a, name) ? "true" : "false";
}

void cli_flags_help(FILE *out, const struct cli_flag *table, size_t n)
{
    const struct cli_flag *by_name[CLI_FLAGS_MAX];

    /* by name, whatever the table's order (npu-monitor's rows follow the contract's table) */
    n = n < CLI_FLAGS_MAX ? n : CLI_FLAGS_MAX;
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        for (; j > 0 && strcmp(by_name[j - 1]->name, table[i].name) > 0; j--)
            by_name[j] = by_name[j - 1];
        by_name[j] = &table[i];
    }
    for (size_t i = 0; i < n; i++) {
        const struct cli_flag *f = by_name[i];
        char left[64];
        snprintf(left, sizeof(left), "--%s%s", f->name, f->kind == CLI_FLAG_VALUE ? " <V>" : "");
        fprintf(out, "  %-34s %s", left, f->help);
        if (f->required)
            fprintf(out, " (required)");
        else if (f->defval)
            fprintf(out, " [default: %s]", f->defval);
        fputc('\n', out);
    }
}
