/* cli: dyno's top level — global flags, the command table, the start-up lines, and the
 * multi-host fan-out with ordered, prefixed output (docs/design/cli.md#invocation, #targets). main.c only calls
 * cli_main(); tests call it too with their own output streams. */
#ifndef MSMON_CLI_CLI_H
#define MSMON_CLI_CLI_H

#include <stdio.h>

#include "cli/cli_exit.h"
#include "cli/cmd.h"

/* Find a subcommand by name (NULL if unknown). */
const struct cli_cmd *cli_find_cmd(const char *name);

/* Run dyno with argv; normal output to out, errors (single target) to errf. Returns an
 * enum cli_exit value. */
int cli_main(int argc, char **argv, FILE *out, FILE *errf);

#endif
