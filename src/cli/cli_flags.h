/* cli_flags: one typed flag table per command level drives argv parsing and --help (which lists
 * the flags by name).
 * Values stay as text here; each command validates them with its own error reasons (docs/design/cli.md#validation),
 * so parsing only enforces the syntax rules of docs/design/cli.md#invocation (unknown, duplicate, missing value). */
#ifndef MSMON_CLI_FLAGS_H
#define MSMON_CLI_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define CLI_FLAGS_MAX 48

enum cli_flag_kind {
    CLI_FLAG_BOOL = 0,   /* present or not; takes no value */
    CLI_FLAG_VALUE,      /* --name value | --name=value; the value may start with '-' */
};

struct cli_flag {
    const char *name;     /* without the leading "--" */
    enum cli_flag_kind kind;
    bool required;
    const char *defval;   /* default text (NULL = absent unless given) */
    const char *help;
};

/* Parsed values of one level. Pointers borrow argv (or the table's defaults). */
struct cli_args {
    const struct cli_flag *table;
    size_t n;
    const char *val[CLI_FLAGS_MAX];
    bool given[CLI_FLAGS_MAX];
};

#define CLI_FLAGS_HELP 1   /* positive return: -h/--help was seen */

/* Parse argv[start..argc). With `stop_at_positional` the first non-flag argument ends the
 * level and its index is stored in *ret_next (argc if none); otherwise a positional is an
 * error. Returns 0, CLI_FLAGS_HELP, or -EINVAL with a one-line message in err. */
int cli_flags_parse(const struct cli_flag *table, size_t n, int argc, char **argv, int start,
                    bool stop_at_positional, struct cli_args *ret, int *ret_next, char *err,
                    size_t errcap);

/* Value of flag `name` (given or default; NULL if neither). Aborts on a name not in the
 * table: that is a programming error, caught by every test. */
const char *cli_flags_get(const struct cli_args *a, const char *name);
bool cli_flags_given(const struct cli_args *a, const char *name);
/* BOOL flags: true when given. */
bool cli_flags_bool(const struct cli_args *a, const char *name);
/* The same as config text: "true" or "false". */
const char *cli_flags_bool_text(const struct cli_args *a, const char *name);

/* Write the flag list sorted by name (one flag per line: name, value hint, default, help). */
void cli_flags_help(FILE *out, const struct cli_flag *table, size_t n);

#endif
