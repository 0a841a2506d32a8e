/* main: the `dyno` binary — a thin wrapper over msmon_cli_core (see cli.h). */
#include <stdio.h>

#include "cli/cli.h"

int main(int argc, char **argv)
{
    return cli_main(argc, argv, stdout, stderr);
}
