/* cli: dyno's top level — global flags, the command table, the start-up lines, and the
 * multi-host fan-out with ordered, prefixed output (docs/design/cli.md#invocation, #targets). main.c only calls
 * cli_main(); tests call it too with their own output streams. */
#ifndef MSMON_CLI_CLI_H
#define MSMON_CLI_CLI_H

#include <stdio.h>

#include "cli/cmd.h"

/* The one exit-code enum of dyno (docs/design/cli.md#exit-codes). */
enum cli_exit {
    CLI_EXIT_OK = 0,        /* every target replied */
    CLI_EXIT_RUNTIME = 1,   /* some target failed (connect, timeout, no/bad reply, TLS, ...) */
    CLI_EXIT_USAGE = 2,     /* usage or validation error; nothing was sent */
};
const char *cli_exit_str(enum cli_exit e);

/* Find a subcommand by name (NULL if unknown). */
const struct cli_cmd *cli_find_cmd(const char *name);

/* Run dyno with argv; normal output to out, errors (single target) to errf. Returns an
 * enum cli_exit value. */
int cli_main(int argc, char **argv, FILE *out, FILE *errf);

#endif
