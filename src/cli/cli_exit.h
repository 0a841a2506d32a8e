/* cli_exit: dyno's exit codes, one table (docs/cli.md#exit-codes): the enum, the text of each
 * code and which of two codes decides when several apply (several hosts, several processes). */
#ifndef MSMON_CLI_EXIT_H
#define MSMON_CLI_EXIT_H

/* The one exit-code table of dyno (docs/cli.md#exit-codes, docs/design/cli.md#exit-codes):
 * X(name, code, rank, text). `rank` orders the codes when several apply (several hosts or
 * processes): the highest rank is the exit code. A failed target wins over every outcome; a
 * refusal with a reason (rejected, not applied) over a silence (no answer). */
#define CLI_EXITS(X)                                                                                 \
    X(OK, 0, 0, "ok")                                                                                \
    X(RUNTIME, 1, 9, "runtime failure")                                                              \
    X(USAGE, 2, 10, "usage error")                                                                   \
    X(REJECTED, 3, 8, "a process rejected the command, or a newer one superseded it")                \
    X(NO_ANSWER, 4, 6, "a process did not answer within --wait-s")                                   \
    X(NOT_APPLIED, 5, 7, "the command reached no process (commandStatus ineffective, refused or unknown)")

enum cli_exit {
#define CLI_EXIT_ENUM(name, code, rank, text) CLI_EXIT_##name = code,
    CLI_EXITS(CLI_EXIT_ENUM)
#undef CLI_EXIT_ENUM
};
/* The table's text for e ("unknown" for a value not in it). */
const char *cli_exit_str(enum cli_exit e);
/* Of two exit codes, the one that decides (the higher rank of CLI_EXITS). */
enum cli_exit cli_exit_worse(enum cli_exit a, enum cli_exit b);

#endif
