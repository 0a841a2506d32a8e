/* cli_exit: the exit-code table's lookups (cli_exit.h). */
#include "cli/cli_exit.h"

#include <stddef.h>

static const struct {
    enum cli_exit code;
    int rank;
    const char *text;
} exits[] = {
#define CLI_EXIT_ROW(name, code, rank, text) {CLI_EXIT_##name, rank, text},
    CLI_EXITS(CLI_EXIT_ROW)
#undef CLI_EXIT_ROW
};
#define NEXITS (sizeof(exits) / sizeof(exits[0]))

const char *cli_exit_str(enum cli_exit e)
{
    for (size_t i = 0; i < NEXITS; i++)
        if (exits[i].code == e)
            return exits[i].text;
    return "unknown";
}

static int exit_rank(enum cli_exit e)
{
    for (size_t i = 0; i < NEXITS; i++)
        if (exits[i].code == e)
            return exits[i].rank;
    return 0;
}

enum cli_exit cli_exit_worse(enum cli_exit a, enum cli_exit b)
{
    return exit_rank(b) > exit_rank(a) ? b : a;
}
